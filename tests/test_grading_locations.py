"""The grader works from any folder, and says why when it cannot (issue 36, item 5).

A copy of the course in a folder under /tmp whose name has a space and Chinese, run by a python under /tmp reached
through symlinks (a venv linked in from elsewhere, its site-packages and the base interpreter's standard library
behind links: the layout of a conda env or a pyenv or Nix base), grades a student through both entry points. A
layout the sandbox cannot serve (a python folder only its owner can enter) is refused before grading, on both
paths, with its real cause and what to do. Needs root (mounts; kernels of their own uid).
"""
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import nbformat
import pytest

from autograder.course import ASSIGNMENT, REPO
from autograder.report.grade_tables import graded_cells
from tests import grading_class as gc
from tests.entry_points import ENTRY_POINTS, gradebook_scores

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="mounts need root")
FULL = sum(p for _, p in graded_cells(gc.NB)[0])
COURSE_PARTS = ("nbgrader_config.py", "autograder", "deploy", "notebooks", "solutions", "student")
VENV = Path(sys.prefix)
BIND = 'mount --bind "$0" "$1" && shift && exec "$@"'


def in_namespace(venv_at, cmd):
    """`cmd` in a private mount namespace where the repo's venv is also at `venv_at` (a real folder, no link)."""
    return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", BIND, str(VENV), str(venv_at), *cmd]


def course_copy(root):
    """The course's files in `root` (a folder name with a space and Chinese)."""
    root.mkdir(parents=True)
    for part in COURSE_PARTS:
        if (REPO / part).is_dir():
            shutil.copytree(REPO / part, root / part, ignore=shutil.ignore_patterns("__pycache__", "node_modules"))
        else:
            shutil.copy(REPO / part, root / part)
    return root


def linked_python(root):
    """A python whose every folder is reached through a link: a base whose standard library is a link, a venv on it
    whose site-packages is a link to the repo's, and that venv itself linked in as `root`/venv."""
    base, real_venv = root / "base", root / "elsewhere" / "venv"
    (base / "bin").mkdir(parents=True)
    (base / "lib").mkdir()
    shutil.copy(os.path.realpath(sys._base_executable), base / "bin" / "python3")
    (base / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}").symlink_to(
        os.path.realpath(sysconfig.get_paths()["stdlib"]))
    site = real_venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    site.mkdir(parents=True)
    (site / "site-packages").symlink_to(os.path.realpath(sysconfig.get_paths()["purelib"]))
    (real_venv / "bin").mkdir()
    (real_venv / "bin" / "python").symlink_to(base / "bin" / "python3")
    (real_venv / "pyvenv.cfg").write_text(f"home = {base / 'bin'}\ninclude-system-site-packages = false\n")
    (root / "venv").symlink_to(real_venv)
    return root / "venv" / "bin" / "python", base


def a_class(root):
    (root / "honest").mkdir(parents=True)
    nbformat.write(gc.solved(), root / "honest" / f"{gc.NB}.ipynb")
    return root


def grade_both(python, course, subs, out, wrap=lambda cmd: cmd):
    """{entry point: (exit status, log, scores)} of `python` grading `subs` from `course`: the grading command, then
    plain nbgrader in a course folder whose configuration loads `course`'s (as deploy/ writes the instructor's)."""
    env = {**os.environ, "PATH": f"{VENV / 'bin'}:{os.environ['PATH']}"}
    env.pop("PYTHONPATH", None)

    def run(cmd, cwd):
        done = subprocess.run(wrap([str(python), *cmd]), cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
        return done.returncode, done.stdout + done.stderr

    results = {}
    rc, log = run(["-m", "autograder", "grade", str(subs), "--out", str(out / "command"), "--jobs", "1"], course)
    db = out / "command" / "nbgrader" / "gradebook.db"
    results["command"] = (rc, log, gradebook_scores(db) if db.exists() else {})
    folder = out / "nbgrader"
    folder.mkdir(parents=True)
    write = "import sys; from deploy.classroom import instructor_nbgrader_config as c; print(c(sys.argv[1], sys.argv[2]))"
    rc, text = run(["-c", write, str(folder), str(folder / "exchange")], course)
    (folder / "nbgrader_config.py").write_text(text)
    logs = [text]
    for student in sorted(subs.iterdir()):
        shutil.copytree(student, folder / "submitted" / student.name / ASSIGNMENT)
    for step in (["generate_assignment", ASSIGNMENT, "--force"], ["autograde", ASSIGNMENT, "--force"]):
        rc, log = run(["-m", "nbgrader", *step], folder)
        logs.append(log)
        if rc:
            break
    db = folder / "gradebook.db"
    results["nbgrader"] = (rc, "\n".join(logs), gradebook_scores(db) if db.exists() else {})
    return results


def points(scores, student):
    return sum(s for (sid, nb, _), s in scores.items() if sid == student and nb == gc.NB)


@pytest.fixture(scope="module")
def tmp_course(tmp_path_factory):
    root = tmp_path_factory.mktemp("where")
    assert str(root).startswith("/tmp/"), root
    course = course_copy(root / "课程 副本 w1d1")
    (course / ".venv").mkdir()  # where in_namespace shows the repo's venv
    return root, course, a_class(root / "class")


def test_a_course_under_tmp_run_by_a_python_reached_through_links_grades_on_both_paths(tmp_course):
    """The checkout under /tmp, in a folder named with a space and Chinese, run by a venv linked in from elsewhere
    under /tmp, its site-packages and the base's standard library behind links (one grading for both layouts):
    main graded every student 0 on the grading command ("评分系统错误", an empty reason), its forked kernels having
    mounted a fresh /tmp over the venv; with the links it showed the kernels neither ("安装 bubblewrap")."""
    root, course, subs = tmp_course
    python, _ = linked_python(root / "linked")
    runs = grade_both(python, course, subs, root / "linked-run")
    for path in ENTRY_POINTS:
        rc, log, scores = runs[path]
        assert rc == 0 and points(scores, "honest") == FULL, (path, log[-3000:])


def test_a_python_folder_closed_to_other_users_is_refused_with_its_cause(tmp_course):
    """The kernels run as a uid of their own: a base interpreter only its owner can enter is refused before grading,
    on both paths, naming the folder and the chmod that opens it (main said "安装 bubblewrap")."""
    root, course, subs = tmp_course
    python, base = linked_python(root / "closed")
    base.chmod(0o700)
    runs = grade_both(python, course, subs, root / "closed-run")
    for path in ENTRY_POINTS:
        rc, log, scores = runs[path]
        assert rc != 0 and not [key for key in scores if key[1] == gc.NB], (path, log[-3000:])
        assert f"{base} 只有属主能进入" in log and f"chmod -R a+rX {base}" in log, (path, log[-3000:])
        assert "安装 bubblewrap" not in log
