"""Static checks on the student's source, run in the grader's process.

An exercise is answered by the definitions written in its own answer cell. Loading them from
the reference implementation, the companion script, the autograder, or any file, or building them
with exec/eval/import machinery, earns nothing for that exercise.
"""
import ast

from IPython.core.inputtransformer2 import TransformerManager

FORBIDDEN_MODULES = {"w1d1_attention", "w1day1_checks", "autograder", "solutions", "importlib", "runpy",
                     "imp", "marshal", "pickle", "dill", "ctypes", "subprocess", "zipimport"}
FORBIDDEN_CALLS = {"__import__", "exec", "eval", "compile", "get_ipython", "execfile", "globals",
                   "vars", "breakpoint"}
_transformer = TransformerManager()


def _parse(source):
    try:
        return ast.parse(_transformer.transform_cell(source))
    except SyntaxError:
        return None


def violations(source):
    """Reasons (Chinese) why this cell's code loads or builds code from elsewhere."""
    tree = _parse(source)
    if tree is None:
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            mods = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            mods = [node.module or ""]
        else:
            mods = []
        for mod in mods:
            if mod.split(".")[0] in FORBIDDEN_MODULES:
                found.append(f"导入了 `{mod}`")
        if isinstance(node, ast.Call):
            fn = node.func
            name = fn.id if isinstance(fn, ast.Name) else fn.attr if isinstance(fn, ast.Attribute) else None
            if name in FORBIDDEN_CALLS:
                found.append(f"调用了 `{name}(...)`")
        if isinstance(node, ast.Attribute) and node.attr in {"__builtins__", "__import__", "modules", "__loader__"}:
            if node.attr != "modules" or (isinstance(node.value, ast.Name) and node.value.id == "sys"):
                found.append(f"用到了 `{node.attr}`")
        if isinstance(node, ast.Name) and node.id == "__builtins__":
            found.append("用到了 `__builtins__`")
    return sorted(set(found))


def defined_names(source):
    """Top-level names a cell defines (def, class, assignment)."""
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
    """Why exercise `grade_id` does not count as answered in its own cell ([] when it does)."""
    from nbgrader import utils

    problems = []
    answer = [c for c in nb.cells if utils.is_solution(c) and c.metadata.nbgrader.get("grade_id") == grade_id]
    if not answer:
        return ["找不到这道题的答案单元格"]
    src = answer[0].source
    missing = [n for n in names if n not in defined_names(src)]
    if missing:
        problems.append("答案单元格里没有定义 " + "、".join(f"`{n}`" for n in missing))
    problems += violations(src)
    # cells the student added: they may help, but may not load code or redefine the answer
    for cell in nb.cells:
        if cell.cell_type != "code" or "nbgrader" in cell.metadata:
            continue
        bad = violations(cell.source)
        if bad:
            problems.append("你添加的单元格 " + "，".join(bad))
        redefined = [n for n in names if n in defined_names(cell.source)]
        if redefined:
            problems.append("你添加的单元格重新定义了 " + "、".join(f"`{n}`" for n in redefined))
    return problems


def origin_problems(origins, names):
    """Runtime evidence from the kernel: each definition compiled from a notebook cell."""
    problems = []
    for name in names:
        info = origins.get(name) if isinstance(origins, dict) else None
        if not info:
            continue
        module, path = info.get("module", ""), info.get("file", "")
        from_cell = path.startswith("<") or "/ipykernel_" in path
        if module != "__main__" or not from_cell:
            problems.append(f"`{name}` 来自 {module or '?'}（{path or '?'}），不是在答案单元格里写的")
    return problems
