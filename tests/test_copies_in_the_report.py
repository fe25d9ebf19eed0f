"""Issue 36 §4, graded through the real sandbox on both entry points: a copied `mha` with `import math; ` in front
of every statement scored 15/15 and never reached similarity.csv or the class report (the comparison dropped
every physical line that began with `import`), and the report said what it compared without the answers it
skipped. The copy is now found, and every answer not compared is listed with its reason, on the page and in
similarity.csv. Red team, round 4: a copy with `;` after every statement (0.47 with its original), or with other
cosmetic edits (parentheses, trailing commas, annotations), was listed nowhere; answers are now compared in their
canonical form."""
import csv
import re

import nbformat
import pytest

from autograder.course import ASSIGNMENT, SOURCE_DIR
from autograder.report.grade_tables import graded_cells
from tests import cosmetic
from tests.entry_points import ENTRY_POINTS
from tests.shared_class import attack_class
from tests.test_similarity import import_prefixed
from tests.variants.nb04_multihead import MHA_LOOP

NB = "04_multihead"
SHORT = '''class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, bias=True):
        super().__init__()
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x, mask=None, need_weights=False):
        return self.proj(x) * 2.0 + x.mean(dim=-1, keepdim=True)
'''
NAMES = {"heads": "outs", "weights": "maps", "sl": "part", "d_k": "width"}
COPY = import_prefixed(re.sub(r"\b(heads|weights|sl|d_k)\b", lambda m: NAMES[m.group()], MHA_LOOP))  # it runs
COSMETIC = {"copy_semicolons": cosmetic.semicolons(MHA_LOOP), "copy_cosmetic": cosmetic.every_edit(MHA_LOOP)}  # they run
ANSWERS = {"copy_author": MHA_LOOP, "copy_hidden": COPY, "copy_short": SHORT, **COSMETIC}


def build(root):
    for student, mha in ANSWERS.items():
        nb = nbformat.read(SOURCE_DIR / ASSIGNMENT / f"{NB}.ipynb", as_version=4)
        next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "mha").source = mha
        (root / student).mkdir()
        nbformat.write(nb, root / student / f"{NB}.ipynb")


@pytest.fixture(scope="module")
def classes(tmp_path_factory):
    return attack_class(tmp_path_factory)  # build()'s students, graded with the other attack files'


@pytest.fixture(scope="module", params=ENTRY_POINTS)
def report(classes, request, tmp_path_factory):
    """(the run, its report folder): the grading command's own, or `report --course` over nbgrader's course."""
    from autograder.report import class_report

    run = classes[request.param]
    if request.param == "command":
        return run, run.root
    out = tmp_path_factory.mktemp("course-report")
    class_report.for_course(run.root, out)
    return run, out


def _exercise(grade_id):
    return grade_id.removeprefix("test_").split("__")[0]


def _rows(folder):
    with open(folder / "similarity.csv", newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def test_the_hidden_copy_earns_its_points_and_is_listed_beside_its_source(report):
    run, folder = report
    worth = sum(pts for gid, pts in graded_cells(NB)[0] if _exercise(gid) == "mha")
    got = sum(s for (sid, nb, gid), s in run.scores.items() if sid == "copy_hidden" and _exercise(gid) == "mha")
    assert worth > 0 and got == worth
    pairs = {frozenset((r["a"], r["b"])) for r in _rows(folder) if r["grade_id"] == "mha" and r["kind"] != "not_compared"}
    assert frozenset(("copy_author", "copy_hidden")) in pairs


@pytest.mark.parametrize("student", COSMETIC)
def test_a_cosmetic_copy_earns_its_points_and_is_listed_beside_its_source(report, student):
    run, folder = report
    worth = sum(pts for gid, pts in graded_cells(NB)[0] if _exercise(gid) == "mha")
    got = sum(s for (sid, nb, gid), s in run.scores.items() if sid == student and _exercise(gid) == "mha")
    assert worth > 0 and got == worth
    pairs = {frozenset((r["a"], r["b"])): float(r["score"]) for r in _rows(folder)
             if r["grade_id"] == "mha" and r["kind"] == "students"}
    assert pairs[frozenset(("copy_author", student))] > 0.95


def test_an_answer_not_compared_is_listed_with_its_reason(report):
    _, folder = report
    left = {r["a"]: r["reason"] for r in _rows(folder) if r["grade_id"] == "mha" and r["kind"] == "not_compared"}
    assert "太短" in left["copy_short"] and "copy_hidden" not in left
    page = (folder / "report.html").read_text(encoding="utf-8")
    assert "没有比较的答案" in page and "copy_short" in page.split("没有比较的答案", 1)[1]
