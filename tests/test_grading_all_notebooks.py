"""Every exercise of all six notebooks, graded in the sandbox: the full solution earns every point,
the untouched release earns none, and the feedback keeps hidden checks out."""
import csv
import shutil

import nbformat
import pytest
from w1d1_student import registry

from autograder.command.grade import grade
from autograder.course import ASSIGNMENT, RELEASE_DIR, REPO, SOURCE_DIR, available_notebooks


def importing_answers(name):
    """The release with every answer loaded from the reference implementation instead of written."""
    nb = nbformat.read(RELEASE_DIR / ASSIGNMENT / f"{name}.ipynb", as_version=4)
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution") and cell.cell_type == "code":
            names = ", ".join(registry.driver(meta["grade_id"]).names)
            cell.source = f"import sys\nsys.path.insert(0, {str(REPO / 'solutions')!r})\nfrom w1d1_attention import {names}"
    return nb


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    subs = tmp_path_factory.mktemp("all")
    for student, folder in (("full", SOURCE_DIR), ("release", RELEASE_DIR)):
        (subs / student).mkdir()
        for name in available_notebooks():
            shutil.copy(folder / ASSIGNMENT / f"{name}.ipynb", subs / student / f"{name}.ipynb")
    (subs / "importer").mkdir()
    for name in available_notebooks():
        nbformat.write(importing_answers(name), subs / "importer" / f"{name}.ipynb")
    out = tmp_path_factory.mktemp("out")
    grade(subs, out, jobs=2, seed=99, log=lambda *_: None)
    with open(out / "grades.csv", newline="") as fh:
        return list(csv.DictReader(fh)), out


def test_solution_earns_every_point(rows):
    table, _ = rows
    mine = [r for r in table if r["student_id"] == "full"]
    assert {r["notebook"] for r in mine} == set(available_notebooks())
    lost = [(r["notebook"], r["grade_id"]) for r in mine if float(r["score"]) != float(r["max_score"])]
    assert not lost, lost


@pytest.mark.parametrize("student", ["release", "importer"])
def test_stub_and_imported_answers_earn_nothing(rows, student):
    table, _ = rows
    mine = [r for r in table if r["student_id"] == student]
    assert {r["notebook"] for r in mine} == set(available_notebooks())
    assert all(float(r["score"]) == 0 for r in mine)


def test_feedback_for_every_notebook_without_hidden_source(rows):
    _, out = rows
    for student in ("full", "release"):
        for name in available_notebooks():
            text = (out / "feedback" / student / f"{name}.html").read_text()
            assert "BEGIN HIDDEN TESTS" not in text and "hidden=True" not in text
    assert "NotImplementedError" in (out / "feedback" / "release" / "01_self_attention.html").read_text()
