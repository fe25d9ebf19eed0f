"""Round 5 of the red team, through the real sandboxed grader on both entry points: what a student who
has read the grader tried against the one pipeline (tests/red_team_submissions.py builds each one).

Held after the fixes: a hidden case's inputs reach no feedback page (not through an exception's text,
not through what an answer cell prints); a helper reaching the checking machinery from another
exercise's cell costs that exercise too; torch's own derivative operators in a "hand-written"
backward count as autograd; correct notebooks that Jupyter opens (4.4 with ids, stray keys, an old
attempt kept as a Markdown copy of the answer, a split answer whose metadata an editor stripped) keep
every point; a probe or kernel message nobody can
read costs its own cell, never the student's other notebooks, and nbgrader still finishes the run."""
import pytest

from autograder.report.grade_tables import graded_cells
from tests import red_team_submissions as rt
from tests.entry_points import ENTRY_POINTS
from tests.shared_class import attack_class

PEEK = """
import os, sys
print("PEEK", os.environ.get("W1D1_CASES"), os.path.exists("/opt/w1d1"),
      bool(getattr(sys.modules.get("w1d1_student.runner"), "_DELIVERED", None)))
"""


def peek_at_cases(root):
    """An answer cell that looks for cases while it runs (a machinery reference: it scores 0 anyway)."""
    nb = rt.solved(rt.NB01, softmax=rt.notebook_solution("softmax") + PEEK)
    return rt.put(root, "peek", rt.NB01, nb)


BUILT = [peek_at_cases, rt.f2_autograd_precomputed_from_case_file,
         rt.f1_hidden_inputs_leak, rt.f1b_answer_cell_prints_case_file, rt.f3b_mha_raw_thread_from_other_cell,
         rt.f4_softmax_backward_kernel, rt.f5_markdown_copy_above_answer, rt.f6_split_answer_then_stripped,
         rt.f8_file_name_into_nbgrader_log, rt.f9_deep_probe_crashes_judge,
         rt.f9b_raw_deep_message, rt.f11_minor4_with_ids, rt.f11b_markdown_with_outputs, rt.control_honest, *rt.ISSUE20,
         *rt.COST_WORK]


def full(notebook):
    return sum(p for _, p in graded_cells(notebook)[0])


def exercise_points(run, student, notebook, exercise):
    return sum(s for (sid, nb, gid), s in run.scores.items()
               if sid == student and nb == notebook and gid.removeprefix("test_").split("__")[0] == exercise)


def build(root):
    for put in BUILT:
        put(root)


@pytest.fixture(scope="module")
def classes(tmp_path_factory):
    return attack_class(tmp_path_factory)  # build()'s students, graded with the other attack files'


@pytest.fixture(params=ENTRY_POINTS)
def run(classes, request):
    return classes[request.param]


def test_a_file_name_forges_no_log_line(classes):
    for path in ENTRY_POINTS:
        lines = classes[path].log.splitlines()
        assert not any(line.lstrip().startswith("[AutogradeApp | ERROR] forged") for line in lines), path
        assert not any("\x1b" in line for line in lines), path


def test_nbgrader_finishes_the_class(classes):
    assert classes["nbgrader"].returncode == 0, classes["nbgrader"].log[-3000:]


def test_hidden_inputs_reach_no_page(run):
    leak, dump = run.page("f1_leak", rt.NB01), run.page("f1b_dump_cases", rt.NB01)
    assert "LEAK shape=(" not in leak and "隐藏检查不显示报错内容" in leak  # the source may say LEAK; no value is shown
    assert "DUMP [" not in dump
    assert run.points("f1b_dump_cases", rt.NB01) == full(rt.NB01)  # its answers are right


def test_no_answer_cell_can_read_a_case(run):
    """Cases reach the kernel just before their own test cell, never as a file: an answer cell finds none."""
    import nbformat

    root = run.root / "nbgrader" if run.path == "command" else run.root
    nb = nbformat.read(root / "autograded" / "peek" / "w1d1" / f"{rt.NB01}.ipynb", as_version=4)
    printed = "".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []))
    assert "PEEK None False False" in printed, printed[:500]


def test_autograd_cannot_be_precomputed_from_the_cases(run):
    for exercise in ("attention_backward", "attention_function"):
        assert exercise_points(run, "f2_casefile_autograd", rt.NB02, exercise) == 0, exercise


def test_a_machinery_helper_in_another_cell_costs_mha(run):
    assert exercise_points(run, "f3b_mha_thread_elsewhere", rt.NB04, "mha") == 0


def test_torch_derivative_operators_are_not_a_hand_written_backward(run):
    student = "f4_softmax_bwd_kernel"
    assert exercise_points(run, student, rt.NB02, "attention_function") == 0
    assert exercise_points(run, student, rt.NB02, "attention_backward") > 0  # its own, hand-written


@pytest.mark.parametrize("student,notebook,exercise", [
    ("g1_magic_body", rt.NB04, "mha"), ("g4_math_attention", rt.NB04, "mha"),
    ("g2_frames", rt.NB02, "attention_backward"), ("g3_globals", rt.NB02, "attention_backward"),
    ("h1_hook", rt.NB02, "attention_backward")])
def test_what_the_reorganised_package_offered_a_reader_scores_nothing(run, student, notebook, exercise):
    """Red team of issue 20 (full marks on both paths before the fixes): a %%time body with a line magic that
    reaches the driver table, torch's eager attention under another name, the callers' frames stopping the
    autograd watch, `check.__globals__` rewriting what the kernel reports, a pre_run_cell event reading the
    cell that delivers the cases."""
    assert exercise_points(run, student, notebook, exercise) == 0
    assert "计 0 分" in run.page(student, notebook)
    if student == "g4_math_attention":  # a forbidden API costs mha only; the others reach the machinery
        assert exercise_points(run, student, notebook, "split_merge_heads") > 0


def test_an_answer_sees_the_same_kernel_on_both_paths(classes):
    """i1 halves softmax where the kernel has not imported what the grading command's kernels once imported
    ahead: both paths import the same, so it scores the same, in full, on both."""
    points = {name: graded.points("i1_path_sense", rt.NB01) for name, graded in classes.items()}
    assert set(points.values()) == {full(rt.NB01)}, points


def test_every_kernel_looks_started_as_nbgrader_starts_it(classes):
    """z1 halves softmax unless the kernel looks started by `python -m ipykernel_launcher` (command line, first
    environment, stdin): every path starts its kernels so, so it scores in full on both paths."""
    points = {name: graded.points("z1_started_as", rt.NB01) for name, graded in classes.items()}
    assert set(points.values()) == {full(rt.NB01)}, points


def test_a_written_answer_cannot_lay_a_banner_over_the_page(run):
    page = run.page("i2_overlay", rt.NB01)
    assert rt.FORGED in page  # the text stays, as the student's answer
    assert 'class="modal-backdrop' not in page and 'class="navbar-fixed-top' not in page  # the stylesheet keeps its rules


def test_a_quoted_name_cannot_speak_in_the_graders_voice(run):
    page = run.page("i3_quote", rt.NB01)
    notes = page[page.index("评分说明"):page.index("</ul>", page.index("评分说明"))]
    assert rt.FORGED in notes  # the metadata key (both paths), the file name (the command)
    assert notes.count(rt.FORGED) == notes.count(f"\\x60 {rt.FORGED} \\x60")  # always inside the quote
    for quote in notes.split("<code>")[1:]:
        assert "</code>" in quote
    outside = "".join(part.split("</code>", 1)[-1] for part in notes.split("<code>"))
    assert rt.FORGED not in outside


@pytest.mark.parametrize("student", ["f5_md_copy_above", "f6_split_stripped", "f11_minor4_ids", "f11b_md_outputs",
                                     "ctl_honest01"])
def test_correct_notebooks_keep_every_point(run, student):
    assert run.points(student, rt.NB01) == full(rt.NB01)


@pytest.mark.parametrize("student", ["f9_deep_probe", "f9b_raw_deep_msg"])
def test_an_unreadable_message_costs_only_its_cell(run, student):
    """f9b's cell sends through `get_ipython().kernel`, the kernel's own objects: the static check costs its notebook
    (red team round 6); the message still reaches the grader, which reads the other notebooks as they are."""
    assert run.points(student, rt.NB03) == full(rt.NB03)
    for exercise in (gid for gid in rt.exercises_of(rt.NB01) if gid != "softmax"):
        worth = sum(p for gid, p in graded_cells(rt.NB01)[0] if gid.removeprefix("test_").split("__")[0] == exercise)
        assert exercise_points(run, student, rt.NB01, exercise) == (0 if student == "f9b_raw_deep_msg" else worth), exercise


def test_a_message_too_large_to_decode_is_dropped_unread(run):
    """f12 sends one 12 MB output whose JSON is a list of empty lists: the grader never decodes it (a note
    stands in for it). It sends through `get_ipython().kernel`: the static check costs the notebook (round 6)."""
    from autograder.kernels.kernel_messages import DROPPED

    assert run.points("f12_huge_msg", rt.NB01) == 0
    assert DROPPED.strip() in run.graded_text("f12_huge_msg", rt.NB01)
