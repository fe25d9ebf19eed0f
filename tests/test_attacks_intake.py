"""Correct answers that intake and the answer check used to mark down (issue 11, round 2: B6, B7, B8),
graded by the real sandboxed grader. Full marks come from the source notebook, never hard-coded."""
import copy

import nbformat
import pytest
from IPython.core.interactiveshell import InteractiveShell
from w1d1_student.cell_scope import grading_cells, names_in_grading_cells

from autograder.course import ASSIGNMENT, SOURCE_DIR
from autograder.report.grade_tables import graded_cells
from autograder.static import provenance
from tests import grading_class as gc
from tests.entry_points import ENTRY_POINTS
from tests.shared_class import attack_class

pytestmark = pytest.mark.filterwarnings("ignore::nbformat.warnings.DuplicateCellId")
NB2 = "02_scaled_dot_product"
HELPER = '''import numpy as np


def _shifted(x, axis):
    """x minus its max along axis (numerically stable exp)."""
    return x - np.max(x, axis=axis, keepdims=True)
'''
USES_HELPER = '''def softmax(x, axis=-1):
    e = np.exp(_shifted(x, axis))
    return e / np.sum(e, axis=axis, keepdims=True)
'''
MAGICS = ["time", "capture out", "prun -q", "capture\n%%time", "timeit -n1 -r1", "bash"]


def _own_cell(src, **meta):
    cell = nbformat.v4.new_code_cell(src)
    cell.metadata["nbgrader"] = {"schema_version": 3, "grade": False, "solution": False, "locked": False, **meta}
    return cell


def build(root):
    def put(student, nb, name=gc.NB):
        (root / student).mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, root / student / f"{name}.ipynb")

    # B6: the softmax answer cell pasted from notebook 01 into 02, with its metadata
    put("pasted", gc.solved())
    nb2 = nbformat.read(SOURCE_DIR / ASSIGNMENT / f"{NB2}.ipynb", as_version=4)
    pasted = copy.deepcopy(gc.cell(gc.solved(), "softmax"))
    pasted.id = "pasted-softmax"
    nb2.cells.insert(len(nb2.cells) // 2, pasted)
    put("pasted", nb2, NB2)
    # B6: the student's own cells marked as an answer / a locked cell, with grade_ids of their own
    nb = gc.solved()
    nb.cells.insert(0, _own_cell("print('own setup')", locked=True, grade_id="my_setup"))
    nb.cells.append(_own_cell("print('own scratch')", solution=True, grade_id="my_scratch"))
    put("own_ids", nb)
    # B7: the softmax answer split in two (JupyterLab's "split cell" copies the metadata)
    nb = gc.solved(softmax=USES_HELPER)
    first = copy.deepcopy(gc.cell(nb, "softmax"))
    first.id, first.source = "split-a", HELPER
    nb.cells.insert(gc.index(nb, "softmax"), first)
    put("split", nb)
    # B8: cell magics that run the answer in the notebook's namespace, and one that does not
    answers = gc._answers()
    put("magic", gc.solved(softmax="%%time\n" + answers["softmax"],
                           self_attention="\n%%capture out\n" + answers["self_attention"]))
    put("timeit", gc.solved(softmax="%%timeit -n1 -r1\n" + answers["softmax"]))
    # red team 49: an expression of 50 000 terms, too deep for Python to read, in a scratch cell / in an answer
    deep = "\n_ = 0" + " + 1" * 50_000 + "\n"
    nb = gc.solved()
    nb.cells.append(nbformat.v4.new_code_cell(deep))
    put("deep_scratch", nb)
    put("deep_answer", gc.solved(softmax=answers["softmax"] + deep))
    return nb2


@pytest.fixture(scope="module")
def classes(tmp_path_factory):
    return attack_class(tmp_path_factory)  # build()'s students, graded with the other attack files'


@pytest.fixture(params=ENTRY_POINTS)
def graded(classes, request):
    """The class as graded by the grading command, then by plain nbgrader with the repo's config."""
    return classes[request.param]


def points(graded, student, name=gc.NB):
    """(points, the most the graded cells give) of one student's notebook."""
    worth = dict(graded_cells(name)[0])
    got = {gid: s for (sid, nb, gid), s in graded.scores.items() if sid == student and nb == name}
    return sum(got.values()), sum(worth[g] for g in got)


def full(name=gc.NB):
    return sum(p for _, p in graded_cells(name)[0])


def feedback(graded, student, name=gc.NB):
    return graded.page(student, name)


def test_a_cell_pasted_from_another_notebook_is_a_plain_cell(graded):
    assert points(graded, "pasted", NB2) == (full(NB2), full(NB2))
    assert points(graded, "pasted") == (full(), full())
    assert "本笔记本没有的题目 <code>softmax</code>" in feedback(graded, "pasted", NB2)  # a quoted name shows as code


def test_home_warning_skips_cells_that_grading_skips(tmp_path):
    """At home, names from a cell pasted from another notebook count as outside the graded cells."""
    nb2 = build(tmp_path)
    pasted = next(i for i, c in enumerate(nb2.cells) if c.get("id") == "pasted-softmax")
    assert pasted not in grading_cells(nb2)
    assert "softmax" not in names_in_grading_cells(nb2)
    assert "attention_forward" in names_in_grading_cells(nb2)
    nb2.cells[pasted].metadata.nbgrader.grade_id = "attention_forward"  # a split answer of this notebook
    assert pasted in grading_cells(nb2) and "softmax" in names_in_grading_cells(nb2)


def test_own_cells_with_made_up_grade_ids_cost_nothing(graded):
    assert points(graded, "own_ids") == (full(), full())
    page = feedback(graded, "own_ids")
    assert "<code>my_setup</code>" in page and "<code>my_scratch</code>" in page


def test_a_cell_too_deep_to_read_costs_only_itself(graded):
    """A scratch cell no parser reads costs nothing (it cost the whole notebook); such an answer costs its exercise."""
    assert points(graded, "deep_scratch") == (full(), full())
    softmax = sum(p for gid, p in graded_cells(gc.NB)[0] if gid.removeprefix("test_").split("__")[0] == "softmax")
    assert points(graded, "deep_answer") == (full() - softmax, full()) and softmax > 0
    assert "嵌套太深" in feedback(graded, "deep_scratch") and "嵌套太深" in feedback(graded, "deep_answer")


def test_a_split_answer_cell_is_graded_whole(graded):
    assert points(graded, "split") == (full(), full())
    assert "原来的位置运行" in feedback(graded, "split")


def test_answers_under_time_and_capture_magics_get_full_marks(graded):
    assert points(graded, "magic") == (full(), full())


def test_an_answer_under_timeit_is_not_defined_as_at_home(graded):
    """%%timeit runs the body in a function of its own: `softmax` does not exist after it, at home either."""
    got, total = points(graded, "timeit")
    softmax_points = sum(p for gid, p in graded_cells(gc.NB)[0] if gid.startswith("test_softmax"))
    assert total == full() and got == full() - softmax_points


@pytest.mark.parametrize("magic", MAGICS)
def test_magic_cells_define_what_ipython_defines(magic):
    """The answer check and the home warning see a name in a cell magic exactly when IPython defines it."""
    shell = InteractiveShell.instance()
    shell.user_ns.pop("probe", None)
    src = f"%%{magic}\ndef probe():\n    return 1\n"
    shell.run_cell(src, silent=True)
    at_home = "probe" in shell.user_ns
    assert at_home is (magic.split()[0] in ("time", "capture", "prun"))
    assert ("probe" in provenance.defined_names(src)) is at_home
    nb = gc.release_nb()
    gc.cell(nb, "softmax").source = src
    assert ("probe" in names_in_grading_cells(nb)) is at_home
