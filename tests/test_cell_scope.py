"""Which cells grading runs, and the home warning for answers that use names from other cells."""
import json

import nbformat
import pytest
from w1d1_student import cell_scope

from autograder.course import ASSIGNMENT, SOURCE_DIR, available_notebooks


def _cell(src, **meta):
    cell = nbformat.v4.new_code_cell(src)
    if meta:
        cell.metadata["nbgrader"] = meta
    return cell


def notebook():
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        _cell("import numpy as np", locked=True, grade_id="setup"),
        _cell("SCALE = 2.0\nprint(SCALE)", locked=True, grade_id="demo"),
        _cell("import math\n\ndef helper(x):\n    return x", locked=True, grade_id="defs"),
        _cell("def softmax(x, axis=-1):\n    return np.exp(x) * SCALE + helper(0) + mine", solution=True,
              grade_id="softmax"),
        _cell("check('softmax')", grade=True, grade_id="test_softmax", locked=True, points=1),
        _cell("mine = 3"),
    ]
    return nb


def test_grading_runs_setup_definitions_answers_and_tests_only():
    assert cell_scope.grading_cells(notebook()) == {0, 2, 3, 4}


@pytest.mark.parametrize("name", available_notebooks())
def test_every_course_notebook_has_a_setup_cell_that_runs(name):
    nb = nbformat.read(SOURCE_DIR / ASSIGNMENT / f"{name}.ipynb", as_version=4)
    first_code = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code")
    assert first_code in cell_scope.grading_cells(nb)


def test_names_from_other_cells_are_warned_about(tmp_path, capsys):
    nb = notebook()
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps(nb))
    ns = {"__session__": str(path), "np": __import__("numpy"), "SCALE": 2.0, "mine": 3}
    exec("def helper(x):\n    return x\n", ns)
    exec("import functools\n@functools.lru_cache\ndef softmax(x, axis=-1):\n    return np.exp(x) * SCALE + helper(0) + mine\n", ns)
    ns["softmax"].__wrapped__.__module__ = "__main__"
    assert cell_scope.warn_outside(ns, ["softmax"]) == ["SCALE", "mine"]
    assert "`SCALE`、`mine`" in capsys.readouterr().err
    # no notebook known: silent
    del ns["__session__"]
    assert cell_scope.warn_outside(ns, ["softmax"]) == []


@pytest.mark.parametrize("name", available_notebooks())
def test_solutions_use_only_names_of_grading_cells(name):
    """The reference answers would draw no home warning: every global they load is defined by a
    cell that grading runs (or is a builtin)."""
    import builtins

    from IPython.core.inputtransformer2 import TransformerManager

    nb = nbformat.read(SOURCE_DIR / ASSIGNMENT / f"{name}.ipynb", as_version=4)
    allowed = cell_scope.names_in_grading_cells(nb) | set(dir(builtins))
    for cell in nb.cells:
        if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("solution"):
            code = compile(TransformerManager().transform_cell(cell.source), "<answer>", "exec")
            assert cell_scope._globals_used(code) - allowed == set(), cell.metadata["nbgrader"]["grade_id"]
