"""Regrading never loses an instructor's work (issue 15), through the real sandboxed grader:
hand grading survives, unchanged students are skipped, --students/--force, a SIGKILL mid-run."""
import csv
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook

from autograder.command.grade import grade
from autograder.course import available_notebooks
from autograder.report.grade_tables import graded_cells
from tests import grading_class as gc

ROOT = Path(__file__).resolve().parents[1]
WRITTEN = "q1_two_problems"
FULL = sum(p for _, p in graded_cells(gc.NB)[0])


def put(subs, name, nb):
    (subs / name).mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, subs / name / f"{gc.NB}.ipynb")


def table(out, name):
    with open(out / name, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def auto_points(out, student):
    return sum(float(r["score"]) for r in table(out, "grades.csv") if r["student_id"] == student)


def hand_grade(out, score, comment, extra):
    with Gradebook(f"sqlite:///{out / 'nbgrader' / 'gradebook.db'}") as gb:
        g = gb.find_grade(WRITTEN, gc.NB, "w1d1", "alice")
        g.manual_score, g.extra_credit = score, extra
        g.needs_manual_grade = False  # what formgrader does when a score is entered
        gb.find_comment(WRITTEN, gc.NB, "w1d1", "alice").manual_comment = comment
        gb.db.commit()


def manual_in_gradebook(out):
    with Gradebook(f"sqlite:///{out / 'nbgrader' / 'gradebook.db'}") as gb:
        g = gb.find_grade(WRITTEN, gc.NB, "w1d1", "alice")
        return g.manual_score, g.extra_credit, gb.find_comment(WRITTEN, gc.NB, "w1d1", "alice").manual_comment


def snapshot(out):
    """Everything an instructor reads: the CSV files and every feedback page, byte for byte."""
    files = {name: (out / name).read_bytes() for name in ("grades.csv", "manual_grades.csv", "totals.csv")}
    files.update({str(p.relative_to(out)): p.read_bytes() for p in sorted((out / "feedback").rglob("*.html"))})
    return files


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("regrade")
    subs, out = tmp / "class", tmp / "out"
    put(subs, "alice", gc.solved())
    put(subs, "bob", gc.release_nb())
    logs = []

    def run(**kw):
        log = []
        grade(subs, out, jobs=2, timeout=30, seed=99, log=log.append, **kw)
        logs.append("\n".join(log))
        return logs[-1]

    run()
    hand_grade(out, 1.0, "写得好", 0.5)
    first = {s: auto_points(out, s) for s in ("alice", "bob")}
    put(subs, "carol", gc.solved(softmax=gc.WRONG_SOFTMAX))  # a late submission
    second = run()
    return {"subs": subs, "out": out, "run": run, "first": first, "second": second, "tmp": tmp}


def test_hand_grading_survives_a_regrade(history):
    out = history["out"]
    assert manual_in_gradebook(out) == (1.0, 0.5, "写得好")
    row = next(r for r in table(out, "manual_grades.csv") if r["student_id"] == "alice" and r["grade_id"] == WRITTEN)
    assert (row["manual_score"], row["needs_grading"], row["comment"]) == ("1", "no", "写得好")
    alice = next(r for r in table(out, "totals.csv") if r["student_id"] == "alice")
    assert float(alice["auto_score"]) == FULL and float(alice["manual_score"]) == 1
    assert float(alice["extra_credit"]) == 0.5 and float(alice["total"]) == FULL + 1.5
    everything = [p for name in available_notebooks() for cells in graded_cells(name) for _, p in cells]
    assert float(alice["max_score"]) == sum(everything)
    assert "写得好" in (out / "feedback" / "alice" / f"{gc.NB}.html").read_text(encoding="utf-8")


def test_late_student_is_graded_alone(history):
    log, out = history["second"], history["out"]
    assert "跳过 alice" in log and "跳过 bob" in log and "提交没有变化" in log
    assert "[carol] 重新评分：新学生" in log
    graded = [line for line in log.splitlines() if line.endswith(" 完成")]
    assert len(graded) == 1 and "carol" in graded[0]
    assert "alice" in next(line for line in log.splitlines() if "反馈已按成绩库更新" in line)  # hand-graded since
    assert {s: auto_points(out, s) for s in ("alice", "bob")} == history["first"] == {"alice": FULL, "bob": 0}
    assert 0 < auto_points(out, "carol") < FULL
    assert (out / "feedback" / "carol" / f"{gc.NB}.html").exists()


def test_students_option_regrades_only_those(history):
    out = history["out"]
    before = (out / "feedback" / "alice" / f"{gc.NB}.html").read_bytes()
    log = history["run"](students=["bob"])
    assert "[bob] 重新评分：--students" in log
    assert "跳过 alice：不在 --students 里" in log and "跳过 carol：不在 --students 里" in log
    assert log.count(" 完成") == 1
    assert (out / "feedback" / "alice" / f"{gc.NB}.html").read_bytes() == before
    assert manual_in_gradebook(out) == (1.0, 0.5, "写得好")


def test_force_regrades_everyone_and_keeps_hand_grading(history):
    out = history["out"]
    log = history["run"](force=True)
    for student in ("alice", "bob", "carol"):
        assert f"[{student}] 重新评分：--force" in log
    assert log.count(" 完成") == 3
    assert manual_in_gradebook(out) == (1.0, 0.5, "写得好")
    assert auto_points(out, "alice") == FULL


def test_sigkill_mid_run_changes_nothing_and_a_rerun_completes(history):
    out, subs = history["out"], history["subs"]
    before, current = snapshot(out), os.readlink(out / ".current")
    put(subs, "bob", gc.solved())  # bob resubmits: the run has work to do
    cmd = [sys.executable, "-m", "autograder", "grade", str(subs), "--out", str(out), "--jobs", "1",
           "--force", "--seed", "99", "--timeout", "30"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if "[1/3]" in line:  # one student graded, two to go
            os.killpg(proc.pid, signal.SIGKILL)
            break
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, "".join(seen)
    assert os.readlink(out / ".current") == current
    assert snapshot(out) == before
    assert manual_in_gradebook(out) == (1.0, 0.5, "写得好")
    assert auto_points(out, "bob") == 0
    log = history["run"]()
    assert "[bob] 重新评分：提交的文件变了" in log and "跳过 alice" in log
    assert auto_points(out, "bob") == FULL and manual_in_gradebook(out) == (1.0, 0.5, "写得好")
    assert len(list((out / ".gen").iterdir())) == 1  # the killed run's half generation is gone


def test_an_old_style_output_folder_is_taken_over(history, tmp_path):
    """An OUT written before generations (real folders) keeps its gradebook on the first run."""
    old = tmp_path / "old"
    old.mkdir()
    src = history["out"]
    shutil.copytree(src / "nbgrader", old / "nbgrader")
    shutil.copytree(src / "feedback", old / "feedback")
    shutil.copy(src / "grades.csv", old / "grades.csv")
    subs = tmp_path / "class"
    put(subs, "alice", gc.solved())
    grade(subs, old, jobs=1, timeout=30, seed=99, log=lambda *_: None)
    assert (old / "nbgrader").is_symlink() and (old / "grades.csv").is_symlink()
    assert manual_in_gradebook(old) == (1.0, 0.5, "写得好")
    assert {r["student_id"] for r in table(old, "grades.csv")} >= {"alice"}


def test_one_run_at_a_time_per_output_folder(tmp_path):
    from autograder.command.grade import GradingError
    from autograder.outdir import OutFolder

    put(tmp_path / "class", "alice", gc.solved())
    holder = OutFolder(tmp_path / "out")
    holder.lock()
    try:
        with pytest.raises(GradingError, match="另一个评分进程"):
            grade(tmp_path / "class", tmp_path / "out", log=lambda *_: None)
    finally:
        holder.unlock()
    assert not (tmp_path / "out" / "grades.csv").exists()
