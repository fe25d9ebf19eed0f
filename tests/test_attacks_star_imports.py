"""Issue 36 §3, graded through the real sandbox on both entry points: a star import of torch in a cell grading
never runs cost a correct `mha` 12 of its 15 points (the static check read every code cell, and one star import
anywhere made every name holding "MultiheadAttention" torch's, `super(MultiHeadAttention, self)` included).
Star imports in the answer cell itself keep every point; a star import that rebinds the student's own helper to
torch's SDPA before the class calls it costs mha, by Python's rules. Red team round 4: honest styles the static
check misread (a comprehension's loop variable, reproducibility switches) keep every point."""
import nbformat
import pytest

from autograder.course import ASSIGNMENT, SOURCE_DIR
from autograder.report.grade_tables import graded_cells
from tests.entry_points import ENTRY_POINTS
from tests.shared_class import attack_class
from tests.variants.nb04_multihead import MHA, MHA_CONFIGURED, MHA_STAR_IMPORTS, MHA_STAR_REBINDS_OWN

NB = "04_multihead"
NAMED_SUPER = MHA.replace("super().__init__()", "super(MultiHeadAttention, self).__init__()")


def _solution(mha, *scratch):
    """The solution notebook with `mha` as its answer and the student's own cells (never run while grading) last."""
    nb = nbformat.read(SOURCE_DIR / ASSIGNMENT / f"{NB}.ipynb", as_version=4)
    next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "mha").source = mha
    nb.cells += [nbformat.v4.new_code_cell(src) for src in scratch]
    return nb


STUDENTS = {
    "star_scratch": _solution(NAMED_SUPER, "from torch.nn import *"),   # the notebook
    "star_scratch_all": _solution(NAMED_SUPER, "from torch import *", "from torch.nn.functional import *",
                                  "from numpy import *", "from torch.nn import *\nref = MultiheadAttention(16, 4)"),
    "star_answer": _solution(MHA_STAR_IMPORTS),
    "star_rebinds": _solution(MHA_STAR_REBINDS_OWN),
    # red team round 4: a comprehension's loop variable named like torch's SDPA (mha 0/7 before), reproducibility
    # switches set to constants (the whole notebook 0 before), the student's own layers by computed names
    "red4_honest": _solution(MHA_CONFIGURED),
}


def build(root):
    for student, nb in STUDENTS.items():
        (root / student).mkdir()
        nbformat.write(nb, root / student / f"{NB}.ipynb")


@pytest.fixture(scope="module")
def classes(tmp_path_factory):
    return attack_class(tmp_path_factory)  # build()'s students, graded with the other attack files'


def _mha(run, student):
    """(points, worth) of mha: its public and hidden test cells."""
    worth = {gid: pts for gid, pts in graded_cells(NB)[0] if gid.removeprefix("test_").split("__")[0] == "mha"}
    return sum(run.score(student, NB, gid) or 0.0 for gid in worth), sum(worth.values())


@pytest.mark.parametrize("path", ENTRY_POINTS)
@pytest.mark.parametrize("student", ["star_scratch", "star_scratch_all", "star_answer"])
def test_star_imports_cost_a_correct_mha_nothing(classes, path, student):
    got, worth = _mha(classes[path], student)
    assert worth > 0 and got == worth, (student, got, worth, classes[path].page(student, NB))


@pytest.mark.parametrize("path", ENTRY_POINTS)
def test_a_star_import_that_rebinds_the_students_helper_to_torchs_sdpa_costs_mha(classes, path):
    got, worth = _mha(classes[path], "star_rebinds")
    assert worth > 0 and got == 0
    assert "直接用到了 `F.scaled_dot_product_attention`" in classes[path].page("star_rebinds", NB)


@pytest.mark.parametrize("path", ENTRY_POINTS)
def test_a_comprehension_variable_and_reproducibility_switches_cost_nothing(classes, path):
    """Red team round 4: a comprehension's loop variable named like torch's SDPA took mha (0/7); a constant into
    `torch.backends.cudnn` took the whole notebook (assignment into an imported object)."""
    got, worth = _mha(classes[path], "red4_honest")
    assert worth > 0 and got == worth, (got, worth, classes[path].page("red4_honest", NB))
    split = {gid: pts for gid, pts in graded_cells(NB)[0] if "split_merge_heads" in gid}
    assert split and all(classes[path].score("red4_honest", NB, gid) == pts for gid, pts in split.items())
