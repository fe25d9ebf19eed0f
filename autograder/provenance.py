"""Static check on the student's source, run in the grader's process: an exercise is answered by
the definitions written in its own answer cell.

This is not what keeps borrowed answers out: the grading kernel runs only the setup, answer and
test cells, and the companion script and the reference do not exist in its sandbox (see
autograder/sandbox.py), however a cell tries to reach them. This check only names the mistake of
an answer cell that defines nothing (for example one that imports the function from elsewhere).
"""
import ast

from IPython.core.inputtransformer2 import TransformerManager
from w1d1_student.cell_scope import answer_cells, python_in_namespace

_transformer = TransformerManager()


def _parse(source):
    try:
        return ast.parse(_transformer.transform_cell(python_in_namespace(source)))
    except SyntaxError:
        return None


def defined_names(source):
    """Top-level names a cell defines (def, class, assignment), in the body of %%time and the like."""
    tree = _parse(source)
    names = set()
    if tree is None:
        return names
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                names.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
    return names


def answer_problems(nb, grade_id, names):
    """Why exercise `grade_id` does not count as answered in its own cells ([] when it does): the answer
    cell and its copies (which run where they stand) together."""
    answer = answer_cells(nb, grade_id)
    if not answer:
        return ["找不到这道题的答案单元格"]
    defined = set().union(*(defined_names(c.source) for c in answer))
    missing = [n for n in names if n not in defined]
    if missing:
        return ["答案单元格里没有定义 " + "、".join(f"`{n}`" for n in missing)
                + "（导入或加载现成的实现不算作答）"]
    return []
