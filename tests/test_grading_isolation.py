"""What one submission can reach, through the real sandboxed grader: the grader's environment stays out
of the kernel, one wall-clock budget bounds a notebook (replays included), a notebook that breaks grading
costs only itself, and a folder name nbgrader would read as a glob is never graded (found by the third
red-team round of issue 11)."""
import csv
import os
import time

import nbformat
import pytest
from nbgrader.api import Gradebook

from autograder.chain import sandboxed_execute
from autograder.chain.nbgrader_chain import api
from autograder.command.grade import grade
from autograder.command.grading_worker import _autograde
from autograder.command.intake import read_submission
from autograder.command.student_ids import unsafe_id_reason
from autograder.course import ASSIGNMENT
from autograder.report.grade_tables import graded_cells
from autograder.static import forbidden_calls
from tests import grading_class as gc

pytestmark = pytest.mark.filterwarnings("ignore::nbformat.warnings.DuplicateCellId")
CANARY = "canary-s3cr3t-7f3a"
WRITTEN = "q1_two_problems"
FULL = sum(p for _, p in graded_cells(gc.NB)[0])
ENV_PROBE = '''
import os
print("ENV", sorted(os.environ.items()))
print("MOUNTS", [l.split()[4] for l in open("/proc/self/mountinfo")])
'''


def put(subs, name, nb, notebook=gc.NB):
    (subs / name).mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, subs / name / f"{notebook}.ipynb")


def rows(out):
    with open(out / "grades.csv", newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def auto_points(out, student):
    return sum(float(r["score"]) for r in rows(out) if r["student_id"] == student)


def gradebook_state(out, student):
    with Gradebook(f"sqlite:///{out / 'nbgrader' / 'gradebook.db'}") as gb:
        g = gb.find_grade(WRITTEN, gc.NB, ASSIGNMENT, student)
        return g.manual_score, g.needs_manual_grade, g.auto_score


@pytest.fixture(scope="module")
def graded_twice(tmp_path_factory):
    """Run 1: alice, bob and a student who prints the kernel's environment, with secrets in the
    grader's. bob is then graded by hand. Run 2: the same class plus a folder named `[ab]*`."""
    subs, out = tmp_path_factory.mktemp("class"), tmp_path_factory.mktemp("out")
    put(subs, "alice", gc.solved())
    put(subs, "bob", gc.solved())
    put(subs, "envleak", gc.solved(softmax=gc._answers()["softmax"] + ENV_PROBE))
    mp = pytest.MonkeyPatch()
    mp.setenv("GRADER_CANARY_TOKEN", CANARY)
    mp.setenv("W1D1_GRADER_SEED", CANARY)
    try:
        first = []
        grade(subs, out, jobs=1, timeout=60, seed=5, log=first.append)
    finally:
        mp.undo()
    with Gradebook(f"sqlite:///{out / 'nbgrader' / 'gradebook.db'}") as gb:
        g = gb.find_grade(WRITTEN, gc.NB, ASSIGNMENT, "bob")
        g.manual_score, g.needs_manual_grade = 1, False
        gb.db.commit()
    before = {s: (out / "nbgrader" / "autograded" / s / ASSIGNMENT / f"{gc.NB}.ipynb").read_bytes()
              for s in ("alice", "bob")}
    bob_before = gradebook_state(out, "bob")
    put(subs, "[ab]*", gc.release_nb())
    second = []
    grade(subs, out, jobs=1, timeout=60, seed=5, log=second.append)
    return {"out": out, "first": "\n".join(first), "second": "\n".join(second), "before": before,
            "bob_before": bob_before}


def test_grader_environment_never_reaches_the_kernel(graded_twice):
    """B3: nothing of the grader's environment (secrets, seed, its folders) is visible to student code."""
    out = graded_twice["out"]
    texts = [(out / "nbgrader" / "autograded" / "envleak" / ASSIGNMENT / f"{gc.NB}.ipynb").read_text(encoding="utf-8")]
    texts += [p.read_text(encoding="utf-8") for p in (out / "feedback" / "envleak").glob("*.html")]
    assert "ENV" in texts[0] and "MOUNTS" in texts[0]  # the probe ran
    for text in texts:
        assert CANARY not in text
        assert "GRADER_CANARY_TOKEN" not in text and "W1D1_GRADER_SEED" not in text
        assert str(out) not in text  # not the grader's runtime folder either
    assert auto_points(out, "envleak") == FULL


def test_student_ids_are_plain_names():
    for name in ("alice", "s_01", "li.ming", "a-b", "x@y.cn", "张三", "学生123"):
        assert unsafe_id_reason(name) is None, name
    for name in ("[ab]*", "a?", "{a,b}", "a b", ".hidden", "-rf", '=HYPERLINK("x","y")', "a\tb", ""):
        assert unsafe_id_reason(name), name


def test_student_ids_with_combining_marks_are_their_nfc_form(tmp_path):
    """A name typed on macOS arrives decomposed (`e` + U+0301) and Devanagari writes vowels as marks:
    both are letters; the id is the NFC form, and glob characters, spaces, slashes and a leading
    `.`/`-` are refused whichever way the name is spelled."""
    import unicodedata

    from autograder.command.student_ids import safe_folders, student_id

    nfd = "Jose\u0301"
    for name in (nfd, "José", "अनिल", "क्षत्रिय", "Nguyễn", unicodedata.normalize("NFD", "Nguyễn_01")):
        assert unsafe_id_reason(name) is None, name
    assert student_id(nfd) == "José" and len(student_id(nfd)) == 4
    for name in ("\u0301abc", "a_\u0301", "1\u0301", "Jose\u0301*", "Jose\u0301 b", "Jose\u0301/x", ".Jose\u0301",
                 "-\u0301", "\u0301", "a\u200db", "ab\u20dd[", "e\u0301?"):
        assert unsafe_id_reason(name), ascii(name)
    for name in (nfd, "अनिल", "bob"):
        (tmp_path / name).mkdir()
    kept, skipped = safe_folders(sorted(tmp_path.iterdir()), log=lambda _: None)
    assert sorted(student_id(f.name) for f in kept) == sorted(["José", "अनिल", "bob"]) and not skipped
    (tmp_path / "José").mkdir()  # the same id spelled composed: neither folder can be told apart
    kept, skipped = safe_folders(sorted(tmp_path.iterdir()), log=lambda _: None)
    assert sorted(f.name for f in kept) == sorted(["अनिल", "bob"]) and len(skipped) == 2



def test_a_decomposed_folder_name_is_graded_under_its_nfc_id(tmp_path):
    """Through the grading command: `José` typed on macOS (e + U+0301) is graded, as `José` (NFC)."""
    subs, out = tmp_path / "class", tmp_path / "out"
    put(subs, "Jose\u0301", gc.solved())
    log = []
    grade(subs, out, jobs=1, timeout=60, seed=5, log=log.append)
    assert {r["student_id"] for r in rows(out)} == {"Jos\u00e9"}
    assert auto_points(out, "Jos\u00e9") == FULL
    assert (out / "feedback" / "Jos\u00e9" / f"{gc.NB}.html").is_file()
    assert not (out / "feedback" / "Jose\u0301").exists()
    assert not any("[提交文件夹]" in line for line in log), log

def test_glob_folder_name_touches_nobody(graded_twice):
    """B9: a folder named `[ab]*` is skipped with a note; alice's and bob's results and bob's hand
    grade stay exactly as they were."""
    out = graded_twice["out"]
    for student, data in graded_twice["before"].items():
        assert (out / "nbgrader" / "autograded" / student / ASSIGNMENT / f"{gc.NB}.ipynb").read_bytes() == data
    assert gradebook_state(out, "bob") == graded_twice["bob_before"] == (1, False, graded_twice["bob_before"][2])
    assert {r["student_id"] for r in rows(out)} == {"alice", "bob", "envleak"}
    assert auto_points(out, "alice") == auto_points(out, "bob") == FULL
    assert not (out / "feedback" / "[ab]*").exists()
    assert "跳过 `[ab]*`" in graded_twice["second"]
    assert "没有评分的文件夹" in graded_twice["second"] and "[ab]*" in graded_twice["second"].splitlines()[-2]


def _nbgrader_for(work, monkeypatch, student, **execute):
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(work / "runtime" / student))
    (work / "runtime" / student).mkdir(parents=True, exist_ok=True)
    nbg = api(work)
    for key, value in execute.items():
        setattr(nbg.coursedir.config.SandboxedExecute, key, value)
    nbg.coursedir.config.SandboxKernelManager.grader_seed = 3
    nbg.coursedir.config.JudgeProbes.seed = 3
    return nbg


@pytest.fixture
def work(tmp_path):
    work = tmp_path / "nbgrader"
    work.mkdir()
    made = api(work).generate_assignment(ASSIGNMENT, force=True, create=True)
    assert made["success"], (made.get("error") or "")[-1500:]
    return work


SLOW_REPLAY = '''
import time
from IPython import get_ipython


def _slow(info):
    if "check(" in info.raw_cell and "score_diagnostics" in info.raw_cell and info.store_history:
        time.sleep(10**6)   # a check cell hangs: timeout, fresh kernel, replay
    time.sleep(6 if not info.store_history else 0.5)   # replayed cells crawl


get_ipython().events.register("pre_run_cell", _slow)
'''


def test_one_deadline_bounds_a_notebook_replays_included(tmp_path, work, monkeypatch):
    """B4: a hook that makes replayed cells crawl cannot stretch a notebook past its budget; the
    cells before the hang keep their points, another student is graded as usual."""
    cell_timeout, budget = 8, 25
    # the static check sees the hook and would zero the notebook: what is tested here is the deadline
    monkeypatch.setattr(forbidden_calls, "answer_problems", lambda nb, grade_id: [])
    subs = tmp_path / "subs"
    put(subs, "slowpoke", gc.solved(softmax=gc._answers()["softmax"] + SLOW_REPLAY))
    put(subs, "honest", gc.solved())
    walls = {}
    for student in ("slowpoke", "honest"):
        read_submission(subs / student, [gc.NB], work / "submitted" / student / ASSIGNMENT)
        nbg = _nbgrader_for(work, monkeypatch, student, timeout=cell_timeout, notebook_timeout=budget)
        t0 = time.monotonic()
        assert nbg.autograde(ASSIGNMENT, student, force=True, create=True)["success"]
        walls[student] = time.monotonic() - t0
    print("B4 wall times", walls)
    assert walls["slowpoke"] < budget + 15, walls
    with Gradebook(f"sqlite:///{work / 'gradebook.db'}") as gb:
        def score(student, grade_id):
            return gb.find_grade(grade_id, gc.NB, ASSIGNMENT, student).score

        assert score("slowpoke", "test_softmax") > 0
        assert score("slowpoke", "test_score_diagnostics") == 0
        assert gb.find_submission_notebook(gc.NB, ASSIGNMENT, "honest").score == FULL


def test_a_broken_notebook_costs_only_itself(tmp_path, work, monkeypatch):
    """B5: a notebook that makes nbgrader fail (here its execution raises: the chain now repairs the
    pasted cell that used to) is tried twice; the student's other notebook is executed once, and keeps its grade."""
    student = "retry"
    dest = work / "submitted" / student / ASSIGNMENT
    dest.mkdir(parents=True)
    nbformat.write(gc.solved(), dest / f"{gc.NB}.ipynb")
    other = nbformat.read(work / "release" / ASSIGNMENT / "06_api.ipynb", as_version=4)
    pasted = nbformat.from_dict(dict(gc.cell(gc.solved(), "softmax")))
    pasted.id = "pasted-softmax"
    other.cells.insert(1, pasted)
    nbformat.write(other, dest / "06_api.ipynb")
    runs = []
    original = sandboxed_execute.SandboxedExecute.preprocess

    def counted(self, nb, resources=None, km=None):
        runs.append(resources.get("unique_key"))
        if resources.get("unique_key") == "06_api":
            raise RuntimeError("grading this notebook fails")
        return original(self, nb, resources, km)

    monkeypatch.setattr(sandboxed_execute.SandboxedExecute, "preprocess", counted)
    nbg = _nbgrader_for(work, monkeypatch, student, timeout=60)
    t0 = time.monotonic()
    result, failed = _autograde(nbg, work, student)
    print("B5 seconds", time.monotonic() - t0, runs)
    assert result["success"] and failed == ["06_api"]
    assert runs.count(gc.NB) == 1, runs
    with Gradebook(f"sqlite:///{work / 'gradebook.db'}") as gb:
        assert gb.find_submission_notebook(gc.NB, ASSIGNMENT, student).score == FULL
    assert (work / "autograded" / student / ASSIGNMENT / f"{gc.NB}.ipynb").is_file()
    assert not (work / "autograded" / student / ASSIGNMENT / "06_api.ipynb").exists()
    assert os.path.isdir(work / "autograded" / student)
