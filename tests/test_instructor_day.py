"""tools/instructor_day.sh: release through nbgrader's exchange, two students submit, collect, grade, make export
(from a PATH without the venv, as on a fresh clone)."""
import csv
import subprocess
from pathlib import Path

from autograder.report.grade_tables import graded_cells

ROOT = Path(__file__).resolve().parents[1]


def test_instructors_day(tmp_path):
    stray = ROOT / "gradebook.db"
    had_stray = stray.exists()
    run = subprocess.run(["bash", str(ROOT / "tools" / "instructor_day.sh"), str(tmp_path)], cwd=ROOT,
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    with open(tmp_path / "grading" / "grades.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    def total(student, notebook):
        return sum(float(r["score"]) for r in rows if r["student_id"] == student and r["notebook"] == notebook)
    full_marks = sum(points for _, points in graded_cells("01_self_attention")[0])  # alice answered every exercise
    assert total("alice", "01_self_attention") == full_marks
    assert total("bob", "01_self_attention") == 0
    assert (tmp_path / "grading" / "feedback" / "alice" / "01_self_attention.html").exists()
    assert stray.exists() == had_stray  # make export reads the run's gradebook and leaves none in the repo
    with open(tmp_path / "grading" / "nbgrader_grades.csv", newline="") as fh:
        export = {r["student_id"]: float(r["raw_score"]) for r in csv.DictReader(fh)}
    assert export == {"alice": full_marks, "bob": 0.0}
