"""The release hands over no answer: no demo cell of the student notebooks (nor `w1d1_viz.py`) defines a
function or class that passes an exercise's public check when it stands in for the student's answer.

Each release notebook's namespace is built as a student's kernel would hold it before answering: the
imports, functions and classes of its demo cells, and its answer cells as released (stubs). Every top-level
`def`/`class` of a demo cell and of `w1d1_viz.py` is then bound, in turn, under each name an exercise's
answer binds (the other names of a two-name answer get the solution's), and the exercise's public cases
run through the student package's driver and judge. `w1day1_checks.py` is the course text's companion
and is not read here.
"""
import ast
import contextlib
import importlib
import io
import sys

import nbformat
import pytest
from w1d1_student import registry, wire
from w1d1_student.runner import run_cases

from autograder.course import ASSIGNMENT, RELEASE_DIR
from autograder.judge import judge_payload, make_cases
from tests.variants import notebook_solution

RELEASE = RELEASE_DIR / ASSIGNMENT
KEEP = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _definitions(source):
    """The imports, functions and classes of a cell, and the names of its functions and classes."""
    tree = ast.parse(source)
    nodes = [n for n in tree.body if isinstance(n, KEEP)]
    names = [n.name for n in nodes if not isinstance(n, (ast.Import, ast.ImportFrom))]
    return "\n".join(ast.get_source_segment(source, n) for n in nodes), names


def _exec(src, ns, where):
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            exec(compile(src, where, "exec"), ns)
        except NotImplementedError:
            pass


def _release_candidates():
    """[(where, name, obj)] for every top-level def/class of a release demo cell and of w1d1_viz.py."""
    if str(RELEASE) not in sys.path:
        sys.path.insert(0, str(RELEASE))
    out = []
    viz = importlib.import_module("w1d1_viz")
    src = (RELEASE / "w1d1_viz.py").read_text()
    for name in _definitions(src)[1]:
        out.append(("w1d1_viz.py", name, getattr(viz, name)))
    for path in sorted(RELEASE.glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        ns = {"__name__": "__main__"}
        found = []
        for cell in nb.cells:
            if cell.cell_type != "code":
                continue
            meta = cell.metadata.get("nbgrader", {})
            if meta.get("grade"):                      # test cells: check() calls only
                continue
            if meta.get("solution"):                   # the released stub of an answer
                _exec(cell.source, ns, f"<{path.stem} {cell.id}>")
                continue
            code, names = _definitions(cell.source)
            _exec(code, ns, f"<{path.stem} {cell.id}>")
            found += [(f"{path.stem} {cell.id}", name) for name in names]
        out += [(where, name, ns[name]) for where, name in found if name in ns]
    return out


@pytest.fixture(scope="module")
def candidates():
    cands = _release_candidates()
    assert len(cands) > 20, "no demo definitions found: is the release there?"
    return cands


def _solution_namespace(grade_id):
    ns = {"__name__": "__main__"}
    _exec(notebook_solution(grade_id), ns, f"<solution {grade_id}>")
    return ns


def _passes(grade_id, ns, cases):
    payload = run_cases(grade_id, ns, cases, hidden=False)
    if not any(r["ok"] for r in payload["results"]):
        return False
    return judge_payload(wire.loads(wire.dumps(payload)), seed=0).passed


def handed_over(grade_id, cands):
    """The candidates that pass the public check of `grade_id` under one of its answer's names."""
    import matplotlib.pyplot as plt

    names = registry.driver(grade_id).names
    solution = _solution_namespace(grade_id) if len(names) > 1 else {}
    cases = make_cases(grade_id, 0, False)
    hits = []
    for name in names:
        for where, cand_name, obj in cands:
            ns = {"__name__": "__main__", **{n: solution[n] for n in names if n != name}, name: obj}
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                ok = _passes(grade_id, ns, cases)
            plt.close("all")
            if ok:
                hits.append(f"{where}: {cand_name} passes `{grade_id}` as {name}")
    return hits


@pytest.mark.parametrize("grade_id", sorted(registry.NOTEBOOK_OF))
def test_no_demo_definition_passes_a_public_check(grade_id, candidates):
    hits = handed_over(grade_id, candidates)
    assert not hits, "the release hands over an answer:\n" + "\n".join(hits)
