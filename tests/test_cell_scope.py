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


# (cell, binds `f` as Python runs it); each is run below and must agree with `bindings`
BINDING_CASES = [
    ("def f(): pass", True),
    ("class f: pass", True),
    ("f = 1", True),
    ("f, g = 1, 2", True),
    ("[a, *f] = [1, 2, 3]", True),
    ("f: int = 1", True),
    ("f: int", False),
    ("f = 0\nf += 1", True),
    ("(f := 1)", True),
    ("print(f := 1)", True),
    ("if (f := 3) > 2:\n    pass", True),
    ("if True:\n    def f(): pass", True),
    ("if False:\n    f = 1\nelse:\n    f = 2", True),
    ("while True:\n    f = 1\n    break", True),
    ("import contextlib\nwith contextlib.nullcontext(1) as f:\n    pass", True),
    ("import contextlib\nwith contextlib.nullcontext():\n    f = 1", True),
    ("try:\n    f = 1\nexcept Exception:\n    pass", True),
    ("try:\n    1 / 0\nexcept ZeroDivisionError:\n    f = 1", True),
    ("try:\n    pass\nfinally:\n    f = 1", True),
    ("for f in [1]:\n    pass", True),
    ("for _ in [1]:\n    f = 1", True),
    ("_ = [f := x for x in [1]]", True),
    ("_ = [[f := y for y in [x]] for x in [1]]", True),
    ("_ = [f for f in [1]]", False),
    ("_ = {f: 1 for f in [1]}", False),
    ("_ = (lambda: (f := 1))()", False),
    ("def g():\n    f = 1\ng()", False),
    ("def g():\n    global f\n    f = 1\ng()", True),
    ("def g():\n    global f\n    def f(): pass\ng()", True),
    ("def g():\n    global f\n    for f in [1]:\n        pass\ng()", True),
    ("def g():\n    global f\n    [f := 1 for _ in [0]]\ng()", True),
    ("def g():\n    global f\n    def h():\n        f = 1\n    h()\ng()", False),
    ("class C:\n    f = 1", False),
    ("class C:\n    global f\n    f = 1", True),
    ("def g(x=(f := 1)):\n    pass", True),
    ("import math as f", True),
    ("from math import pi as f", True),
    ("import os.path\nf = os", True),
    ("match 1:\n    case f:\n        pass", True),
    ("match [1, 2]:\n    case [1, *f]:\n        pass", True),
    ("match {'a': 1}:\n    case {**f}:\n        pass", True),
    ("f = 1\ndel f", False),  # del is not followed: a cell that defines and deletes is not worth a rule
    ("globals()['f'] = 1", True),  # dynamic: Python binds it, the static reading does not (documented)
    ("try:\n    1 / 0\nexcept ZeroDivisionError as f:\n    pass", False),  # Python clears it after the clause
]
STATIC_ONLY = {"f = 1\ndel f": True, "globals()['f'] = 1": False,
               "try:\n    1 / 0\nexcept ZeroDivisionError as f:\n    pass": True}


@pytest.mark.parametrize("src,python_binds", BINDING_CASES)
def test_bindings_are_what_python_binds(src, python_binds):
    ns = {"__name__": "__main__"}
    exec(compile(src, "<cell>", "exec"), ns)
    assert ("f" in ns) is python_binds
    assert ("f" in cell_scope.bound_names(src)) is STATIC_ONLY.get(src, python_binds)


def test_imports_bind_but_do_not_define():
    src = "import numpy as np\nfrom math import exp, pi as f\nimport os.path"
    assert cell_scope.bound_names(src) == {"np", "exp", "f", "os"}
    assert cell_scope.defined_names(src) == set()
    assert cell_scope.defined_names(src + "\nf = f") == {"f"}
    assert cell_scope.defined_names("try:\n    from w1d1_attention import softmax\nexcept ImportError:\n    pass") == set()


def test_cell_magics_and_ipython_syntax():
    assert cell_scope.bound_names("%%time\nf = 1") == {"f"}
    assert cell_scope.bound_names("%%timeit\nf = 1") == set()
    assert cell_scope.bound_names("%matplotlib inline\nf = 1\nf?") == {"f"}
    assert cell_scope.bound_names("def f(:") == set()


def test_grading_cells_count_every_binding():
    nb = notebook()
    nb.cells[3].source = "if True:\n    def softmax(x, axis=-1):\n        return x\nwith open(__file__) as fh:\n    pass"
    assert {"softmax", "fh", "helper", "np", "math"} <= cell_scope.names_in_grading_cells(nb)
