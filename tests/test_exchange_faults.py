"""Faults at nbgrader's exchange of a class on one machine (deploy.classroom, no hub needed):
twenty students submitting within the same second, one student's home disk full, one student's
oversized file, a notebook over the size limit. Students act as themselves through tests/exchange_student.py (what their server calls).
The exchange is a 64 MiB tmpfs and the full home an 8 MiB one, mounted for the test and removed after.
Needs root (users, mounts).
"""
import json
import os
import pwd
import re
import shlex
import shutil
import subprocess
import time
from datetime import datetime
from pathlib import Path

import nbformat
import pytest
from w1d1_student import exchange

from autograder.course import ASSIGNMENT
from deploy.classroom import COURSE, REPO, Classroom, free_port, user_exists
from tests.test_hub import build_environments

SUBMITTERS = 20
NOTEBOOK, GRADE_ID = "01_self_attention", "softmax"
SCRIPT = Path(__file__).with_name("exchange_student.py")


def mount_tmpfs(path, size, **owner):
    opts = ",".join([f"size={size}", *(f"{k}={v}" for k, v in owner.items())])
    subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(path)], check=True)


@pytest.fixture(scope="module")
def room():
    if os.geteuid() != 0 or not shutil.which("useradd") or not shutil.which("mount"):
        pytest.skip("users and mounts need root")
    tag = f"{os.getpid() % 100000}"
    # the repo left open: test_hub's class, which may run beside this one, closes it to its own instructor
    room = Classroom(instructor=f"w1x{tag}-teacher", port=free_port(), name=f"xfault-{tag}", close_repo=False,
                     students=[f"w1x{tag}-s{i:02d}" for i in range(1, SUBMITTERS + 7)])
    build_environments(room)
    mounts = []
    try:
        room.exchange.mkdir(parents=True)
        mount_tmpfs(room.exchange, "64m", mode="0777")
        mounts.append(room.exchange)
        room.setup()
        room.mounts = mounts
        shutil.copy(SCRIPT, room.state / SCRIPT.name)
        os.chmod(room.state / SCRIPT.name, 0o644)
        # copied as root: the instructor of test_hub's class may hold the repo closed
        release = Path(pwd.getpwnam(room.instructor).pw_dir) / COURSE / "release"
        shutil.copytree(REPO / "notebooks" / ASSIGNMENT, release / ASSIGNMENT)
        subprocess.run(["chown", "-R", f"{room.instructor}:", str(release)], check=True)
        room.run_as(room.instructor, f"nbgrader release_assignment {ASSIGNMENT}", check=True)
        yield room
    finally:
        for path in reversed(mounts):
            subprocess.run(["umount", "--lazy", str(path)], capture_output=True)
        room.teardown()
        assert not any(user_exists(u) for u in room.users)
        assert not room.state.exists()


def student_command(room, name, *steps):
    script = f"JUPYTER_CONFIG_PATH={room.student_config} python {room.state / SCRIPT.name} "
    return room.user_command(name, script + " ".join(shlex.quote(s) for s in steps))


def steps_of(stdout):
    return {line["step"]: line for line in map(json.loads, stdout.splitlines()) if line}


def as_student(room, name, *steps):
    run = subprocess.run(student_command(room, name, *steps), capture_output=True, text=True, timeout=300)
    return run.returncode, steps_of(run.stdout), run.stderr


def answer_of(name):
    return f"ANSWER_OF = {name!r}"


def collected_answer(room, name):
    nb = nbformat.read(room.course_dir() / "submitted" / name / ASSIGNMENT / f"{NOTEBOOK}.ipynb", as_version=4)
    return next(c.source for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == GRADE_ID)


def inbound(room, name):
    return [d for d in (room.exchange / COURSE / "inbound").iterdir() if d.name.split("+")[0] == name]


def test_twenty_submissions_in_one_second(room):
    """Twenty students, each in a process of their own uid with nbgrader imported, submit at one signal: every
    submission arrives, within one second of each other, and each collected notebook holds its own answer."""
    students = room.students[:SUBMITTERS]
    go = room.state / "go"
    go.mkdir()
    os.chmod(go, 0o777)
    env = {"PATH": f"{room.student_env}/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": "/root",
           "JUPYTER_CONFIG_PATH": str(room.student_config)}
    proc = subprocess.Popen([str(room.student_env / "bin" / "python"), str(room.state / SCRIPT.name), "--students",
                             ",".join(students), "fetch", "answer:ANSWER_OF = '{user}'", f"ready:{go}", "submit"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while len(list(go.iterdir())) < SUBMITTERS and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    (go / "go").touch()
    out, err = proc.communicate(timeout=300)
    lines = [json.loads(line) for line in out.splitlines() if line]
    assert proc.returncode == 0, (lines, err[-3000:])
    assert sorted(line["user"] for line in lines if line["step"] == "submit" and line["ok"]) == students
    stamps = []
    for s in students:
        (submission,) = inbound(room, s)
        stamps.append(datetime.strptime((submission / "timestamp.txt").read_text(), "%Y-%m-%d %H:%M:%S.%f %Z"))
    spread = (max(stamps) - min(stamps)).total_seconds()
    print(f"{SUBMITTERS} submissions within {spread:.2f} s")
    assert spread < 1, spread
    room.run_as(room.instructor, f"nbgrader collect {ASSIGNMENT}", check=True)
    assert {s: collected_answer(room, s) for s in students} == {s: answer_of(s) for s in students}


def test_a_full_home_disk_stops_only_its_owner(room):
    """A student fills their home: saving fails with "disk is full" for them; submitting the notebook saved
    before reaches the exchange, though nbgrader then reports the full disk (its cache copy in the home);
    another student fetches and submits as usual; the instructor collects both."""
    full, other = room.students[SUBMITTERS:SUBMITTERS + 2]
    user = pwd.getpwnam(full)
    mount_tmpfs(user.pw_dir, "8m", uid=user.pw_uid, gid=user.pw_gid, mode="0700")
    room.mounts.append(Path(user.pw_dir))
    rc, steps, err = as_student(room, full, "fetch", f"answer:{answer_of(full)}", "fill")
    assert rc == 0, (steps, err)
    rc, steps, _ = as_student(room, full, "answer:lost")
    # JupyterLab's save: the notebook signature database in ~/.local is the first write to fail
    assert rc == 1 and re.search("disk is full|No space left on device", steps["answer"]["error"]), steps
    # nbgrader copies the submission to the exchange, then a copy into ~/.local/share/jupyter/nbgrader_cache:
    # the second copy fails; the student is told in one line that the teacher has it and their home is full
    rc, steps, _ = as_student(room, full, "submit")
    assert rc == 1 and steps["submit"]["error"].endswith(exchange.ARRIVED), steps
    assert len(inbound(room, full)) == 1
    rc, steps, err = as_student(room, other, "fetch", f"answer:{answer_of(other)}", "submit")
    assert rc == 0, (steps, err)
    room.run_as(room.instructor, f"nbgrader collect {ASSIGNMENT}", check=True)
    assert collected_answer(room, full) == answer_of(full) and collected_answer(room, other) == answer_of(other)


def test_an_oversized_file_stays_out_of_the_exchange(room):
    """A student submits an 80 MiB file with the notebook (the exchange holds 64 MiB): nbgrader leaves the
    file out (CourseDirectory.max_file_size), the notebook arrives, the exchange keeps room for the class."""
    big = room.students[SUBMITTERS + 2]
    rc, steps, err = as_student(room, big, "fetch", f"answer:{answer_of(big)}", "bigfile:80", "submit")
    assert rc == 0, (steps, err)
    (submission,) = inbound(room, big)
    assert (submission / f"{NOTEBOOK}.ipynb").exists() and not (submission / "big.bin").exists()
    assert shutil.disk_usage(room.exchange).free > 32 * 2**20
    room.run_as(room.instructor, f"nbgrader collect {ASSIGNMENT}", check=True)
    assert collected_answer(room, big) == answer_of(big)


def test_a_full_exchange_is_said_and_leaves_no_half_submission(room):
    """The exchange's disk fills up (one student's files, or the class's): the next student's submit fails
    with one clear line, and no half-copied submission is left for the teacher to collect; once there is room
    again the same student submits, and the instructor collects it."""
    late = room.students[SUBMITTERS + 3]
    rc, steps, err = as_student(room, late, "fetch", f"answer:{answer_of(late)}")
    assert rc == 0, (steps, err)
    filler = room.exchange / "filler.bin"
    try:
        with open(filler, "wb") as fh:
            while True:
                fh.write(b"\0" * 2**16)
                fh.flush()
    except OSError:
        pass
    try:
        rc, steps, _ = as_student(room, late, "submit")
        assert rc == 1 and steps["submit"]["error"].endswith(exchange.NOT_ARRIVED), steps
        assert inbound(room, late) == []
    finally:
        filler.unlink()
    rc, steps, err = as_student(room, late, "submit")
    assert rc == 0, (steps, err)
    room.run_as(room.instructor, f"nbgrader collect {ASSIGNMENT}", check=True)
    assert collected_answer(room, late) == answer_of(late)


def submitted_notebook(room, name):
    (submission,) = inbound(room, name)
    return submission / f"{NOTEBOOK}.ipynb"


def test_a_notebook_over_the_limit_arrives_without_its_outputs(room):
    """A notebook with 25 MiB of printed output (nbgrader's max_file_size is 20 MB): nbgrader alone left it out of
    the submission with a log line only. It arrives without its outputs, the student is told so in one line, their
    own notebook is unchanged, and the teacher collects the answer."""
    name = room.students[SUBMITTERS + 4]
    rc, steps, err = as_student(room, name, "fetch", f"answer:{answer_of(name)}", "outputs:25")
    assert rc == 0, (steps, err)
    own = Path(pwd.getpwnam(name).pw_dir) / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
    size = own.stat().st_size
    rc, steps, _ = as_student(room, name, "submit")
    said = steps["submit"]["error"]
    assert rc == 1 and f"`{NOTEBOOK}.ipynb`（{size / 2**20:.1f} MB）超过了 20.0 MB 的上限" in said, steps
    assert "提交已经送到老师那里" in said and "删掉了保存的输出" in said and "\n" not in said, said
    arrived = submitted_notebook(room, name)
    assert arrived.stat().st_size < 2**20 and own.stat().st_size == size
    assert all(c.get("outputs", []) == [] for c in nbformat.read(arrived, as_version=4).cells)
    room.run_as(room.instructor, f"nbgrader collect {ASSIGNMENT}", check=True)
    assert collected_answer(room, name) == answer_of(name)


def test_a_notebook_still_over_the_limit_without_outputs_is_not_submitted_and_says_why(room):
    """25 MiB of code in a scratch cell: without its outputs it is still over the limit, so nothing is submitted
    (a submission without the notebook would reach the teacher empty), and the student is told why in one line."""
    name = room.students[SUBMITTERS + 5]
    rc, steps, err = as_student(room, name, "fetch", f"answer:{answer_of(name)}", "source:25")
    assert rc == 0, (steps, err)
    rc, steps, _ = as_student(room, name, "submit")
    said = steps["submit"]["error"]
    assert rc == 1 and said.endswith("这一份没有送到老师那里；删掉不需要的大段内容后再提交（你的笔记本还在你自己的目录里）。"), steps
    assert f"提交没有完成：`{NOTEBOOK}.ipynb` 有 " in said and "去掉输出以后仍超过 20.0 MB" in said, said
    assert inbound(room, name) == []
