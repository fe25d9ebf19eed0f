"""Red-team findings on the kernel-side checks, graded through the real sandbox.

B1: an answer that switches the kernel's detector of forbidden calls off and then uses torch's
multi-head attention earns nothing for mha: the grader's static check names a direct reference, the
kernel's detector (a closure a module patch cannot reach) catches the obfuscated one. B2: an AttentionFunction that overrides `apply` (no
forward or backward written) earns nothing. B8: SDPA reached through functools.partial or a default
argument keeps every point.
"""
import nbformat
import pytest

from autograder.course import ASSIGNMENT, SOURCE_DIR
from autograder.reports import graded_cells
from tests.entry_points import ENTRY_POINTS
from tests.shared_class import attack_class
from tests.variants.nb02_scaled_dot_product import VARIANTS as V02
from tests.variants.nb04_multihead import MHA_OBFUSCATED, MHA_PATCHES_DETECTOR
from tests.variants.nb06_api import VARIANTS as V06

APPLY_OVERRIDDEN = next(src for src, diag in V02["attention_function"]["buggy"] if diag == "重写了 apply")


def _solution(name, **answers):
    """The solution notebook with some answer cells replaced (grade_id -> source)."""
    nb = nbformat.read(SOURCE_DIR / ASSIGNMENT / f"{name}.ipynb", as_version=4)
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if gid in answers:
            cell.source = answers.pop(gid)
    assert not answers, answers
    return nb


def build(subs):
    notebooks = {
        "lazy": [("04_multihead", {"mha": MHA_PATCHES_DETECTOR}),
                 ("02_scaled_dot_product", {"attention_function": APPLY_OVERRIDDEN})],
        "obfuscated": [("04_multihead", {"mha": MHA_OBFUSCATED})],
        "styles": [("06_api", {"sdpa_attention": V06["sdpa_attention"]["correct"][-1],
                               "decode_step": V06["decode_step"]["correct"][-1]})],
    }
    for student, items in notebooks.items():
        (subs / student).mkdir()
        for name, answers in items:
            nbformat.write(_solution(name, **answers), subs / student / f"{name}.ipynb")


@pytest.fixture(scope="module")
def classes(tmp_path_factory):
    return attack_class(tmp_path_factory)  # build()'s students, graded with the other attack files'


@pytest.fixture(params=ENTRY_POINTS)
def scores(classes, request):
    """(points per (student, exercise), feedback pages) by the grading command, then by plain nbgrader."""
    run = classes[request.param]
    table = {}
    for (student, notebook, grade_id), score in run.scores.items():
        worth = dict(graded_cells(notebook)[0])
        gid = grade_id.removeprefix("test_").split("__")[0]
        got, total = table.get((student, gid), (0.0, 0.0))
        table[(student, gid)] = (got + score, total + worth[grade_id])
    feedback = {f"{s}/{n}": run.page(s, n) for (s, n, _) in run.scores if run.page(s, n)}
    return table, feedback


def test_patching_the_detector_does_not_hide_torch_mha(scores):
    table, feedback = scores
    assert table[("lazy", "mha")][1] > 0 and table[("lazy", "mha")][0] == 0
    assert "评分检查机制" in feedback["lazy/04_multihead"]


def test_obfuscated_patch_is_caught_at_run_time(scores):
    """Spelled past the static check: the kernel's detector, held in a closure, still sees torch's MHA."""
    table, feedback = scores
    assert table[("obfuscated", "mha")][1] > 0 and table[("obfuscated", "mha")][0] == 0
    assert "nn.MultiheadAttention" in feedback["obfuscated/04_multihead"]
    # the static check saw nothing (only mha, the run-time catch, loses points)
    assert "评分检查机制" not in feedback["obfuscated/04_multihead"]
    assert table[("obfuscated", "split_merge_heads")][0] == table[("obfuscated", "split_merge_heads")][1] > 0


def test_overriding_apply_earns_nothing(scores):
    table, feedback = scores
    assert table[("lazy", "attention_function")][1] > 0 and table[("lazy", "attention_function")][0] == 0
    assert "重写了 apply" in feedback["lazy/02_scaled_dot_product"]
    assert table[("lazy", "attention_forward")][0] == table[("lazy", "attention_forward")][1] > 0


@pytest.mark.parametrize("exercise", ["sdpa_attention", "decode_step"])
def test_sdpa_through_partial_or_default_argument_keeps_every_point(scores, exercise):
    got, total = scores[0][("styles", exercise)]
    assert got == total > 0
