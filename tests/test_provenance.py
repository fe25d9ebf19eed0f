"""Static answer checks: what counts as answering in one's own cell."""
import nbformat
import pytest
from w1d1_student import registry

from autograder import provenance
from autograder.course import ASSIGNMENT, SOURCE_DIR, available_notebooks


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
])
def test_the_answer_cell_defines_its_names(src, answered):
    assert (provenance.answer_problems(_nb(src), "softmax", ["softmax"]) == []) is answered
