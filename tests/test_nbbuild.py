"""tools/nbbuild.py adds an exercise to a notebook that exists: its cells get ids and grade_ids no cell has, and
every other cell is written back as it was."""
import shutil

import nbformat
import pytest

from autograder.course import ASSIGNMENT, SOURCE_DIR
from tools.nbbuild import Notebook

NB = "01_self_attention"


def _grade_id(cell):
    return cell.metadata.get("nbgrader", {}).get("grade_id")


@pytest.fixture
def folder(tmp_path):
    shutil.copy(SOURCE_DIR / ASSIGNMENT / f"{NB}.ipynb", tmp_path)
    return tmp_path


def test_an_exercise_added_to_a_notebook_gets_fresh_ids_and_leaves_the_rest_as_it_was(folder):
    before = nbformat.read(folder / f"{NB}.ipynb", as_version=4)
    old_ids, old_gids = {c.id for c in before.cells}, set(filter(None, map(_grade_id, before.cells)))
    assert {"c001", "c002"} <= old_ids and "demo_c002" in old_gids  # what a fresh counter would write again
    nb = Notebook.open(NB, folder).after("test_score_diagnostics__hidden")
    nb.md("## 新练习")
    nb.code("x = 1")
    nb.exercise("toy_exercise", "def toy():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION", points=(1, 2))
    nb.code("y = 2")
    nb.write(folder)

    after = nbformat.read(folder / f"{NB}.ipynb", as_version=4)
    nbformat.validate(after)
    at = next(i for i, c in enumerate(before.cells) if _grade_id(c) == "test_score_diagnostics__hidden") + 1
    added = after.cells[at:at + 6]
    assert after.cells[:at] + after.cells[at + 6:] == before.cells  # the other cells, in their order, unchanged
    assert after.metadata == before.metadata
    assert [_grade_id(c) for c in added] == [None, f"demo_{added[1].id}", "toy_exercise", "test_toy_exercise",
                                             "test_toy_exercise__hidden", f"demo_{added[5].id}"]
    assert not {c.id for c in added} & old_ids and not set(filter(None, map(_grade_id, added))) & old_gids
    ids = [c.id for c in after.cells]
    gids = [g for g in map(_grade_id, after.cells) if g]
    assert len(set(ids)) == len(ids) and len(set(gids)) == len(gids)
    public, hidden = added[3], added[4]
    assert 'check("toy_exercise")' in public.source and public.metadata["nbgrader"]["points"] == 1
    assert 'check("toy_exercise", hidden=True)' in hidden.source and hidden.metadata["nbgrader"]["points"] == 2
    assert "### BEGIN HIDDEN TESTS" in hidden.source


def test_a_grade_id_that_is_taken_is_refused(folder):
    nb = Notebook.open(NB, folder)
    with pytest.raises(ValueError, match="softmax"):
        nb.exercise("softmax", "def softmax(x):\n    pass")
    with pytest.raises(ValueError, match="q1_two_problems"):
        nb.manual("q1_two_problems", "问题", "答案")
    with pytest.raises(KeyError):
        nb.after("no_such_cell")


def test_a_new_notebook_is_built_as_before(tmp_path):
    nb = Notebook("99_toy")
    nb.md("# 标题")
    nb.code("import numpy as np")
    nb.exercise("toy", "def toy():\n    pass")
    path = nb.write(tmp_path)
    cells = nbformat.read(path, as_version=4).cells
    assert [c.id for c in cells] == ["c001", "c002", "toy", "test_toy", "test_toy__hidden"]
    assert cells[1].metadata["nbgrader"]["grade_id"] == "demo_c002"


def test_a_notebook_opened_and_written_back_is_the_same_bytes(folder):
    original = (folder / f"{NB}.ipynb").read_bytes()
    Notebook.open(NB, folder).write(folder)
    assert (folder / f"{NB}.ipynb").read_bytes() == original
