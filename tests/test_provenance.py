"""Static answer checks: what counts as answering in one's own cell."""
import sys

import nbformat
import pytest
from w1d1_student import registry

from autograder.course import ASSIGNMENT, SOURCE_DIR, available_notebooks
from autograder.static import provenance


@pytest.mark.parametrize("name", available_notebooks())
def test_every_solution_answers_in_its_own_cell(name):
    nb = nbformat.read(SOURCE_DIR / ASSIGNMENT / f"{name}.ipynb", as_version=4)
    answers = [c.metadata["nbgrader"]["grade_id"] for c in nb.cells
               if c.metadata.get("nbgrader", {}).get("solution") and c.cell_type == "code"]
    assert answers
    for grade_id in answers:
        assert provenance.answer_problems(nb, grade_id, registry.driver(grade_id).names) == [], grade_id


def _nb(answer):
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell(answer)
    cell.metadata["nbgrader"] = {"solution": True, "grade_id": "softmax", "locked": False}
    nb.cells = [cell]
    return nb


@pytest.mark.parametrize("src,answered", [
    ("from w1d1_attention import softmax", False),
    ("import w1day1_checks as w", False),
    ("import numpy as np\ndef softmax(x, axis=-1):\n    return np.exp(x) / np.exp(x).sum(axis, keepdims=True)", True),
    ("import functools, torch\n@functools.lru_cache\ndef _c(a):\n    return a\n@torch.no_grad()\n"
     "def softmax(x, axis=-1):\n    return x", True),
    ("%matplotlib inline\nsoftmax = lambda x, axis=-1: x", True),
    ("(softmax := lambda x, axis=-1: x)", True),
    ("if True:\n    def softmax(x, axis=-1):\n        return x", True),
    ("with open(__file__) as fh:\n    def softmax(x, axis=-1):\n        return x", True),
    ("try:\n    import scipy\nexcept ImportError:\n    pass\nelse:\n    def softmax(x, axis=-1):\n        return x", True),
    ("for softmax in [lambda x, axis=-1: x]:\n    pass", True),
    ("def _set():\n    global softmax\n    softmax = lambda x, axis=-1: x\n_set()", True),
    # imports and loads of a ready-made implementation are not an answer, however they are wrapped
    ("try:\n    from w1d1_attention import softmax\nexcept ImportError:\n    from scipy.special import softmax", False),
    ("if True:\n    import w1d1_attention.softmax as softmax", False),
    ("def _load():\n    global softmax\n    from w1d1_attention import softmax\n_load()", False),
    # dynamic bindings are not read (static only): home's check() says the same (test_home_check_*)
    ("globals()['softmax'] = lambda x, axis=-1: x", False),
    ("exec('def softmax(x, axis=-1):\\n    return x')", False),
    ("def _f():\n    softmax = lambda x, axis=-1: x", False),
    ("class Impl:\n    softmax = staticmethod(lambda x, axis=-1: x)", False),
])
def test_the_answer_cell_defines_its_names(src, answered):
    problems = provenance.answer_problems(_nb(src), "softmax", ["softmax"])
    assert (problems == []) is answered
    assert answered or "答案单元格里没有定义 `softmax`" in problems[0]


def test_every_correct_variant_counts_as_answered_in_its_cell():
    """The answers the mutation suite accepts (tests/variants, binding styles included) are answers
    of their own cell for the grader's check too."""
    from tests.test_mutations import VARIANTS

    for grade_id, table in VARIANTS.items():
        nb = _nb("")
        nb.cells[0].metadata["nbgrader"]["grade_id"] = grade_id
        for src in [table["solution"], *table["correct"]]:
            nb.cells[0].source = src
            assert provenance.answer_problems(nb, grade_id, registry.driver(grade_id).names) == [], (grade_id, src)


SOFTMAX_BODY = "    z = np.exp(x - x.max(axis=axis, keepdims=True))\n    return z / z.sum(axis=axis, keepdims=True)\n"


def _home(tmp_path, cells, saved=None):
    """Run `cells` in an IPython shell, then the check cell; (the error check() raised or None, stderr)."""
    import contextlib
    import io

    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    for name in ("softmax", "__session__"):
        shell.user_ns.pop(name, None)
    if saved is not None:
        path = tmp_path / "01_self_attention.ipynb"
        nbformat.write(_nb(saved), path)
        shell.user_ns["__session__"] = str(path)
    shell.run_cell("import numpy as np\nfrom w1d1_student import check", silent=True)
    for src in cells:
        assert shell.run_cell(src, silent=True).success, src
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        result = shell.run_cell("check('softmax')", silent=True)
    return result.error_in_exec, err.getvalue()


def test_home_check_agrees_with_grading_on_dynamic_bindings(tmp_path):
    """globals()[...] defines softmax as far as Python goes, but the grader's static check does not
    read it: check() at home fails with the grader's message, with or without the notebook file."""
    dynamic = "globals()['softmax'] = lambda x, axis=-1: np.exp(x) / np.exp(x).sum(axis, keepdims=True)"
    for saved in (None, dynamic):
        error, _ = _home(tmp_path, [dynamic], saved)
        assert error is not None and "答案单元格里没有定义 `softmax`" in str(error), saved
        assert provenance.answer_problems(_nb(dynamic), "softmax", ["softmax"])


def test_home_check_accepts_every_binding_style_grading_accepts(tmp_path):
    from tests.variants.nb01_self_attention import BINDING_STYLES

    for src in BINDING_STYLES:
        assert provenance.answer_problems(_nb(src), "softmax", ["softmax"]) == []
        error, err = _home(tmp_path, [src], saved=src)
        assert error is None and "⚠️" not in err, (src, error)


def test_home_check_on_an_unsaved_or_imported_answer(tmp_path):
    stub = "# YOUR CODE HERE\nraise NotImplementedError()"
    answer = "def softmax(x, axis=-1):\n" + SOFTMAX_BODY
    error, err = _home(tmp_path, [answer], saved=stub)  # written but not saved yet: a warning only
    assert error is None and "已保存的笔记本里" in err
    (tmp_path / "ready_made.py").write_text("import numpy as np\ndef softmax(x, axis=-1):\n" + SOFTMAX_BODY)
    imported = f"import sys\nsys.path.insert(0, {str(tmp_path)!r})\nfrom ready_made import softmax"
    try:
        error, _ = _home(tmp_path, [imported], saved=imported)  # runs at home, does not count while grading
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("ready_made", None)
    assert error is not None and "答案单元格里没有定义 `softmax`" in str(error)


def test_home_check_reads_a_split_answer_as_grading_does(tmp_path):
    """JupyterLab's split cell copies the metadata to both halves: both are the answer, at home too."""
    from w1d1_student import cell_scope

    nb = _nb("import numpy as np")
    nb.cells.append(nbformat.v4.new_code_cell("def softmax(x, axis=-1):\n" + SOFTMAX_BODY, metadata=nb.cells[0].metadata))
    assert provenance.answer_problems(nb, "softmax", ["softmax"]) == []
    path = tmp_path / "01_self_attention.ipynb"
    nbformat.write(nb, path)
    ns = {"__session__": str(path), "softmax": lambda x, axis=-1: x}
    assert cell_scope.undefined_at_home(ns, "softmax", ["softmax"]) is None
    nb.cells.pop()
    nbformat.write(nb, path)
    assert "答案单元格里没有定义 `softmax`" in cell_scope.undefined_at_home(ns, "softmax", ["softmax"])
