"""Static answer checks: what counts as answering in one's own cell."""
import nbformat
import pytest

from autograder import provenance
from autograder.course import ASSIGNMENT, SOURCE_DIR, available_notebooks
from autograder.kernel import registry


@pytest.mark.parametrize("name", available_notebooks())
def test_every_solution_answers_in_its_own_cell(name):
    nb = nbformat.read(SOURCE_DIR / ASSIGNMENT / f"{name}.ipynb", as_version=4)
    answers = [c.metadata["nbgrader"]["grade_id"] for c in nb.cells
               if c.metadata.get("nbgrader", {}).get("solution") and c.cell_type == "code"]
    assert answers
    for grade_id in answers:
        assert provenance.answer_problems(nb, grade_id, registry.driver(grade_id).names) == [], grade_id


@pytest.mark.parametrize("src,flagged", [
    ("from w1d1_attention import softmax", True),
    ("import importlib\nm = importlib.import_module('w1day1_checks')", True),
    ("exec(open('x.py').read())", True),
    ("sm = __import__('w1d1_attention').softmax", True),
    ("%run helper.py", True),
    ("!cat helper.py", True),
    ("import numpy as np\ndef softmax(x, axis=-1):\n    return np.exp(x) / np.exp(x).sum(axis, keepdims=True)", False),
    ("import torch, math\nfrom torch import nn", False),
])
def test_violations(src, flagged):
    assert bool(provenance.violations(src)) is flagged


def test_origin_must_be_a_notebook_cell():
    ok = {"softmax": {"module": "__main__", "file": "/tmp/ipykernel_12/3456.py"}}
    assert provenance.origin_problems(ok, ["softmax"]) == []
    bad = {"softmax": {"module": "helper", "file": "/sub/helper.py"}}
    assert provenance.origin_problems(bad, ["softmax"])
