"""Intake never raises, whatever a notebook holds (hypothesis-generated malformed notebooks), and
refuses links, devices, FIFOs and oversized files. Each case costs only that student's notebook."""
import json
import os
import shutil
import string

import nbformat
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nbgrader.nbgraderformat import MetadataValidator

from autograder.chain import repair
from autograder.chain.intake_chain import MAX_NOTEBOOK_BYTES
from autograder.chain.repair import META_TYPES
from autograder.command.intake import list_students, read_submission
from autograder.course import ASSIGNMENT, RELEASE_DIR
from autograder.notes import for_page, stored_in, texts
from autograder.report.grade_tables import csv_safe
from tests import grading_class as gc
from tests.entry_points import through_chain

pytestmark = pytest.mark.filterwarnings("ignore::nbformat.warnings.DuplicateCellId", "ignore::UserWarning")
KNOWN = [gc.NB]
JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                    max_leaves=8)


@st.composite
def malformed(draw):
    """The released notebook with wrong types in nbgrader fields, missing keys, duplicate ids/grade_ids."""
    nb = json.loads(nbformat.writes(gc.release_nb()))
    cells = nb["cells"]
    graded = [i for i, c in enumerate(cells) if "nbgrader" in c["metadata"]]
    for _ in range(draw(st.integers(1, 6))):
        i = draw(st.sampled_from(graded))
        meta = cells[i]["metadata"]
        how = draw(st.sampled_from(["whole", "field", "drop", "dup_cell", "dup_id", "extra"]))
        if how == "whole":
            meta["nbgrader"] = draw(JSON)
        elif how == "field" and isinstance(meta.get("nbgrader"), dict):
            meta["nbgrader"][draw(st.sampled_from(sorted(META_TYPES)))] = draw(JSON)
        elif how == "drop" and isinstance(meta.get("nbgrader"), dict) and meta["nbgrader"]:
            meta["nbgrader"].pop(draw(st.sampled_from(sorted(meta["nbgrader"]))))
        elif how == "dup_cell":
            cells.insert(draw(st.integers(0, len(cells))), json.loads(json.dumps(cells[i])))
        elif how == "dup_id":
            cells[i]["id"] = cells[0]["id"] if draw(st.booleans()) else draw(JSON)
        elif how == "extra":
            meta["nbgrader"] = {"grade_id": draw(st.text(alphabet=string.printable, max_size=12)), "grade": True,
                                "points": draw(st.one_of(st.floats(), st.integers(), st.text(max_size=3)))}
    if draw(st.booleans()):
        nb["metadata"]["kernelspec"] = draw(JSON)
    return json.dumps(nb)


def _well_formed(copy):
    nb = through_chain(copy)
    ids = [c.get("id") for c in nb.cells]
    assert len(ids) == len(set(ids))
    for c in nb.cells:
        if "nbgrader" in c.metadata:
            assert repair.meta_problem(c.metadata.nbgrader) is None, c.metadata.nbgrader
    MetadataValidator().validate_nb(nb)  # what nbgrader checks before grading
    return nb


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(text=malformed())
def test_malformed_metadata_never_raises(tmp_path_factory, text):
    root = tmp_path_factory.mktemp("fuzz")
    (root / "s").mkdir()
    (root / "s" / f"{gc.NB}.ipynb").write_text(text, encoding="utf-8")
    sub = read_submission(root / "s", KNOWN, root / "dest")
    assert (gc.NB in sub.notebooks) != (gc.NB in sub.broken)
    if gc.NB in sub.notebooks:
        _well_formed(sub.notebooks[gc.NB])


def test_the_reported_payloads_become_notes(tmp_path):
    for k, meta in enumerate((["x"], "x", {"grade_id": ["a"], "grade": True}, {"points": "3", "grade_id": "q"})):
        nb = gc.solved()
        nb.cells[3].metadata["nbgrader"] = meta
        folder = tmp_path / f"s{k}"
        folder.mkdir()
        (folder / f"{gc.NB}.ipynb").write_text(json.dumps(nb))
        sub = read_submission(folder, KNOWN, tmp_path / f"d{k}")
        assert gc.NB in sub.notebooks, sub.notes
        notes = stored_in(_well_formed(sub.notebooks[gc.NB]))
        assert any("元数据被改坏" in n for n in notes), notes


@pytest.mark.parametrize("case", ["bad_utf8", "deep", "many_cells", "not_json"])
def test_unreadable_notebooks_score_zero(tmp_path, case):
    folder = tmp_path / "s"
    folder.mkdir()
    path = folder / f"{gc.NB}.ipynb"
    if case == "bad_utf8":
        path.write_bytes(nbformat.writes(gc.solved()).encode("utf-8").replace(b"softmax", b"soft\xff\xfemax", 1))
    elif case == "deep":
        nb = json.loads(nbformat.writes(gc.solved()))
        path.write_text(json.dumps(nb)[:-1] + ', "x": ' + "[" * 100_000 + "]" * 100_000 + "}")
    elif case == "many_cells":
        nb = gc.solved()
        nb.cells += [nbformat.v4.new_code_cell("pass") for _ in range(20_000)]
        nbformat.write(nb, path)
    else:
        path.write_text("{ not json")
    sub = read_submission(folder, KNOWN, tmp_path / "dest")
    graded = _well_formed(sub.notebooks[gc.NB])  # the chain grades the unanswered release in its place
    assert gc.cell(graded, "softmax").source == gc.cell(gc.release_nb(), "softmax").source
    assert any("不是合法的笔记本" in n and "0 分" in n for n in stored_in(graded)), stored_in(graded)


def test_links_special_and_big_files_are_refused(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("root:x:0:0:SECRET-FIRST-LINE\n")
    folder = tmp_path / "s"
    folder.mkdir()
    os.symlink(secret, folder / f"{gc.NB}.ipynb")
    os.mkfifo(folder / "02_scaled_dot_product.ipynb")
    with open(folder / "03_masks.ipynb", "wb") as fh:  # sparse: over the bound of a notebook read at all
        fh.truncate(MAX_NOTEBOOK_BYTES + 1)
    (folder / "sub").mkdir()
    os.symlink("/etc", folder / "sub" / "etc")
    known = [gc.NB, "02_scaled_dot_product", "03_masks"]
    sub = read_submission(folder, known, tmp_path / "dest")
    assert sub.notebooks == {} and set(sub.broken) == set(known)
    text = "\n".join(texts(sub.notes))
    assert "SECRET" not in text
    assert "符号链接" in text and "不是普通文件" in text and "MB" in text and "sub/etc" in text


def test_submissions_folder_entries_are_not_followed(tmp_path):
    subs = tmp_path / "class"
    (subs / "alice").mkdir(parents=True)
    os.symlink(tmp_path, subs / "linked")
    (subs / "stray.txt").write_text("x")
    folders, notes = list_students(subs)
    assert [f.name for f in folders] == ["alice"]
    assert any("linked" in n and "符号链接" in n for n in notes) and any("stray.txt" in n for n in notes)


def test_csv_cells_that_look_like_formulas_are_neutralised():
    for text in ('=HYPERLINK("http://x","y")', "+1", "-2+3", "@SUM(A1)", "\tx"):
        assert csv_safe(text) == "'" + text
    assert csv_safe("alice") == "alice" and csv_safe("1.5") == "1.5"


def test_notes_belong_to_the_notebook_they_are_about(tmp_path):
    """A note that names other notebooks in its text stays on its own notebook's page."""
    other = "02_scaled_dot_product"
    folder = tmp_path / "s"
    folder.mkdir()
    nbformat.write(gc.solved(), folder / f"{other} (1).ipynb")  # 01's work under a name that mentions 02
    shutil.copy(RELEASE_DIR / ASSIGNMENT / f"{other}.ipynb", folder / f"{other}.ipynb")
    (folder / "draft.txt").write_text("x")
    sub = read_submission(folder, [gc.NB, other], tmp_path / "dest")
    assert set(sub.notebooks) == {gc.NB, other}
    renamed = next(n for n in sub.notes if "改了名" in n.text)
    assert renamed.notebook == gc.NB and other in renamed.text
    assert renamed.text in for_page(sub.notes, gc.NB) and renamed.text not in for_page(sub.notes, other)
    stray = next(n for n in sub.notes if "draft.txt" in n.text)
    assert stray.notebook is None
    assert stray.text in for_page(sub.notes, gc.NB) and stray.text in for_page(sub.notes, other)


def test_a_backup_in_a_subfolder_is_not_graded_in_place_of_the_notebook(tmp_path):
    """Of two files with a notebook's name, the one nearest the top is graded, whatever the path order."""
    for k, (top, backup) in enumerate([(f"w1d1/{gc.NB}.ipynb", f"w1d1/old/{gc.NB}.ipynb"),
                                       (f"{gc.NB}.ipynb", f"zz_old/{gc.NB}.ipynb")]):
        folder = tmp_path / f"s{k}"
        for rel, nb in ((top, gc.solved()), (backup, gc.release_nb())):
            (folder / rel).parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(nb, folder / rel)
        sub = read_submission(folder, KNOWN, tmp_path / f"d{k}")
        graded = nbformat.read(sub.notebooks[gc.NB], as_version=4)
        assert gc.cell(graded, "softmax").source == gc.solved().cells[gc.index(gc.solved(), "softmax")].source
        skipped = [n for n in sub.notes if backup in n.text]
        assert skipped and skipped[0].notebook == gc.NB and "没有评分" in skipped[0].text, sub.notes


def test_a_copy_beside_the_notebook_is_not_taken_for_it(tmp_path):
    """JupyterLab's '-Copy1' next to the real notebook: the real one is graded and the notes are about it alone."""
    folder = tmp_path / "s" / "w1d1"
    folder.mkdir(parents=True)
    copy = gc.release_nb()
    gc.cell(copy, "demo_c002").source += "\n# edited"
    nbformat.write(copy, folder / f"{gc.NB}-Copy1.ipynb")
    nbformat.write(gc.solved(), folder / f"{gc.NB}.ipynb")
    sub = read_submission(tmp_path / "s", KNOWN, tmp_path / "dest")
    text = "\n".join(texts(sub.notes))
    assert gc.NB in sub.notebooks and "改了名" not in text and "锁定单元格" not in text, text
    assert any("Copy1" in n.text and "没有评分" in n.text and n.notebook == gc.NB for n in sub.notes), text


def _code_cell(d):
    return next(c for c in d["cells"] if c["cell_type"] == "code")


# notebooks Jupyter opens (it warns on schema errors) that a strict validator refused: a correct answer
# scored 0 (red team round 5, F11 and round 5b, M1)
OPENED_BY_JUPYTER = {
    "4.4 with ids": lambda d: d.__setitem__("nbformat_minor", 4),
    "markdown with outputs": lambda d: next(c for c in d["cells"] if c["cell_type"] == "markdown").__setitem__("outputs", []),
    "id with a space": lambda d: _code_cell(d).__setitem__("id", "a b"),
    "id too long": lambda d: _code_cell(d).__setitem__("id", "x" * 80),
    "no outputs": lambda d: _code_cell(d).pop("outputs"),
    "no execution_count": lambda d: _code_cell(d).pop("execution_count"),
    "execution_count a string": lambda d: _code_cell(d).__setitem__("execution_count", "3"),
    "no cell metadata": lambda d: _code_cell(d).pop("metadata"),
    "cell metadata a list": lambda d: _code_cell(d).__setitem__("metadata", []),
    "stream without name": lambda d: _code_cell(d).__setitem__("outputs", [{"output_type": "stream", "text": "x"}]),
    "error without traceback": lambda d: _code_cell(d).__setitem__("outputs", [{"output_type": "error", "ename": "E",
                                                                                 "evalue": "v"}]),
    "update_display_data": lambda d: _code_cell(d).__setitem__("outputs", [{"output_type": "update_display_data",
                                                                             "data": {}, "metadata": {}}]),
    "transient on an output": lambda d: _code_cell(d).__setitem__("outputs", [{"output_type": "stream", "name": "stdout",
                                                                                "text": "x", "transient": {}}]),
    "no notebook metadata": lambda d: d.pop("metadata"),
    "kernelspec null": lambda d: d["metadata"].__setitem__("kernelspec", None),
}


@pytest.mark.parametrize("how", sorted(OPENED_BY_JUPYTER))
def test_a_notebook_jupyter_opens_is_read_with_its_answers(tmp_path, how):
    data = json.loads(nbformat.writes(gc.solved()))
    OPENED_BY_JUPYTER[how](data)
    path = tmp_path / f"{gc.NB}.ipynb"
    path.write_text(json.dumps(data), encoding="utf-8")
    graded = _well_formed(path)
    assert gc.cell(graded, "softmax").source == gc.cell(gc.solved(), "softmax").source
    assert not any("无法读取" in n for n in stored_in(graded)), stored_in(graded)
