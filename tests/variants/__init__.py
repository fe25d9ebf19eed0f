"""Answer-cell variants per exercise for the grader's mutation suite.

Each module, named after its notebook (`nb01_self_attention.py`), defines VARIANTS = with_solutions({grade_id:
{"correct": [src, ...], "buggy": [(src, diagnosis_substring), ...], "warned": [diagnosis_substring, ...]}}), which
adds each exercise's "solution": notebook_solution(grade_id).
Every src is a complete answer cell (imports included); the solution is the notebook's own.
"buggy" variants must lose points, their first failing check naming the diagnosis; "warned" lists the
diagnoses of the buggy variants that are bugs the exercise's prompt or the course text warns about: the
PUBLIC check must fail each of those variants with that diagnosis (tests/test_mutations.py). An optional
"scratch" list holds cells a student adds beside the answers, which grading never runs: with each of them in the
notebook, the solution and every correct variant must still pass the static check (tests/test_forbidden_calls.py).
"""
import ast
from pathlib import Path

import nbformat
from w1d1_student import registry

SOURCE_DIR = Path(__file__).resolve().parents[2] / "solutions" / "w1d1"


def _definitions(source):
    """The imports, functions and classes of a course cell (what an answer may use), without its demo code."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return ""
    keep = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef)
    return "\n".join(ast.get_source_segment(source, node) for node in tree.body if isinstance(node, keep))


def exercises_of(notebook):
    """The grade_ids of a notebook's exercises, from the registry (the order of its student module)."""
    if notebook not in registry.NOTEBOOK_OF.values():
        raise KeyError(f"{notebook}: no exercise in the registry")
    return [gid for gid, name in registry.NOTEBOOK_OF.items() if name == notebook]


def with_solutions(table):
    """A mutation table with each exercise's "solution" (its notebook's, notebook_solution) filled in: the table
    spells a grade_id once, as its key."""
    for grade_id, entry in table.items():
        entry.setdefault("solution", notebook_solution(grade_id))
    return table


def notebook_solution(grade_id):
    """The solution notebook's answer to `grade_id`, with what the notebook defines before it: the imports,
    functions and classes of the course cells and the answers of the earlier exercises."""
    nb = nbformat.read(SOURCE_DIR / f"{registry.NOTEBOOK_OF[grade_id]}.ipynb", as_version=4)
    parts = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution"):
            parts.append(cell.source)
            if meta.get("grade_id") == grade_id:
                return "\n\n".join(p for p in parts if p) + "\n"
        elif not meta.get("grade"):
            parts.append(_definitions(cell.source) or "")
    raise KeyError(f"{grade_id}: no answer cell in its notebook")


_TRACED = '''
import functools
import torch


def _traced(fn):
    @functools.wraps(fn)
    def inner(*args, **kwargs):
        return fn(*args, **kwargs)
    return inner
'''


def decorated(src, name, decorator="@_traced"):
    """The same answer with `def name` decorated: a correct style the grader must accept."""
    assert f"\ndef {name}(" in src, name
    return _TRACED + src.replace(f"\ndef {name}(", f"\n{decorator}\ndef {name}(", 1)
