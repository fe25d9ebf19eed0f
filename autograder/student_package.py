"""`python -m autograder student-package`: build the wheel students install (dist/w1d1_student-*.whl).

The wheel holds student/w1d1_student (check(), drivers, the comparison and diagnosis engine), the
public cases of every exercise with the grader's answers precomputed as data, and the two helper
modules of the notebooks, built from their one source each in solutions/w1d1/. Nothing else from
solutions/ and nothing of the grader goes in.
"""
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from w1d1_student import registry
from w1d1_student.runner import PUBLIC_DATA

from .course import REPO
from .judge import answered, as_data, make_cases

STUDENT_SRC = REPO / "student"
TOP_LEVEL_MODULES = (REPO / "solutions" / "w1d1" / "w1d1_viz.py", REPO / "solutions" / "w1d1" / "w1day1_checks.py")
PUBLIC_SEED = 0


def public_cases():
    """{grade_id: [case with every answer that applies to it]} for the public checks."""
    return {gid: answered(gid, make_cases(gid, PUBLIC_SEED, hidden=False)) for gid in registry.NOTEBOOK_OF}


def stage(dest):
    """The package's source tree with its data and top-level modules, ready for pip."""
    dest = Path(dest)
    shutil.copytree(STUDENT_SRC, dest, ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
    for module in TOP_LEVEL_MODULES:
        shutil.copy2(module, dest / module.name)
    (dest / "w1d1_student" / "data").mkdir()
    text = json.dumps(as_data(public_cases()), separators=(",", ":"))
    (dest / "w1d1_student" / "data" / PUBLIC_DATA).write_text(text, encoding="utf-8")
    return dest


def build(out=REPO / "dist"):
    """Build the wheel into `out`; returns its path."""
    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        src = stage(Path(tmp) / "src")
        cmd = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
               "--disable-pip-version-check", "-w", str(Path(tmp) / "wheel"), str(src)]
        subprocess.run(cmd, check=True, cwd=tmp)
        (wheel,) = (Path(tmp) / "wheel").glob("*.whl")
        for old in out.glob("w1d1_student-*.whl"):
            old.unlink()
        target = out / wheel.name
        shutil.copy2(wheel, target)
    return target


def main(out):
    print(build(out))
    return 0
