"""End to end: a class of notebook-01 submissions (honest, stub, attacks) through the real grader."""
import contextlib
import csv
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from autograder.command.grade import CSV_HEADER, GradingError, grade
from autograder.report.grade_tables import graded_cells
from tests import grading_class as gc
from tests.proc_table import processes

# one attacker duplicates a test cell on purpose; nbformat's note about the repeated id is expected
pytestmark = pytest.mark.filterwarnings("ignore::nbformat.warnings.DuplicateCellId")

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    subs = tmp_path_factory.mktemp("class")
    out = tmp_path_factory.mktemp("out")
    students = gc.build(subs)
    log = []
    grade(subs, out, jobs=2, timeout=30, seed=1234, log=log.append)
    with open(out / "grades.csv", newline="") as fh:
        rows = list(csv.reader(fh))
    scores = {}
    for student, _nb, gid, score, max_score in rows[1:]:
        scores.setdefault(student, {})[gid] = (float(score), float(max_score))
    return {"out": out, "rows": rows, "scores": scores, "log": "\n".join(log), "students": set(students)}


def exercise_score(scores, exercise):
    got = [v for k, v in scores.items() if k == f"test_{exercise}" or k.startswith(f"test_{exercise}__")]
    assert got, exercise
    return sum(g for g, _ in got), sum(m for _, m in got)


def full(scores, exercise):
    got, total = exercise_score(scores, exercise)
    return got == total


def zero(scores, exercise):
    return exercise_score(scores, exercise)[0] == 0


def autograded(graded, student):
    path = graded["out"] / "nbgrader" / "autograded" / student / "w1d1" / f"{gc.NB}.ipynb"
    return nbformat.read(path, as_version=4)


def all_output_text(nb):
    text = []
    for c in nb.cells:
        for o in c.get("outputs", []):
            text.append(o.get("text", "") + o.get("evalue", ""))
    return "\n".join(text)


def test_csv_contract(graded):
    rows = graded["rows"]
    assert rows[0] == CSV_HEADER
    ids = gc.test_cell_ids(gc.NB)
    per_student = {}
    for r in rows[1:]:
        per_student.setdefault(r[0], []).append(r[2])
    assert set(per_student) == graded["students"]  # every student has rows
    for student, gids in per_student.items():
        assert sorted(gids) == sorted(ids), student


def test_honest_full_marks_and_stub_zero(graded):
    s = graded["scores"]
    for ex in gc.EXERCISES:
        assert full(s["honest"], ex), ex
        assert zero(s["stub"], ex), ex


def test_patching_the_kernel_changes_nothing(graded):
    s = graded["scores"]["patcher"]
    assert zero(s, "softmax")
    assert zero(s, "self_attention")  # its patched checks return nothing: no verdict, no points


def test_lying_objects_earn_nothing(graded):
    assert zero(graded["scores"]["liar"], "softmax")


def test_importing_the_answer_earns_nothing(graded):
    # modules the grading environment lacks: code the static check cannot read costs the whole notebook
    s = graded["scores"]["importer"]
    assert all(zero(s, ex) for ex in gc.EXERCISES)
    assert zero(graded["scores"]["wrapper"], "softmax")
    feedback = (graded["out"] / "feedback" / "importer" / f"{gc.NB}.html").read_text()
    assert "import w1d1_attention（评分环境里没有这个模块" in feedback and "import mydiag" in feedback


def test_sandbox_hides_files_and_network(graded):
    text = all_output_text(autograded(graded, "snoop"))
    found = re.search(r"FOUND (\[.*?\])", text)
    assert found and found.group(1) == "[]", text[:500]
    # writes may land in the sandbox's private, throw-away layers, never on the grader's disk
    assert "WRITE_BLOCKED" in text
    for leaked in (Path(sys.prefix) / "pwned", graded["out"] / "nbgrader" / "pwned", Path("/work/pwned")):
        assert not leaked.exists(), leaked
    assert "NET_BLOCKED" in text and "NET_OPEN" not in text
    assert not gc.MARKER.exists()
    s = graded["scores"]["snoop"]
    assert all(full(s, ex) for ex in gc.EXERCISES)


def test_loop_costs_only_its_own_exercise(graded):
    s = graded["scores"]["looper"]
    assert zero(s, "self_attention")
    assert all(full(s, ex) for ex in gc.EXERCISES if ex != "self_attention")


def test_os_exit_costs_only_its_own_exercise(graded):
    s = graded["scores"]["exiter"]
    assert zero(s, "score_diagnostics")
    assert all(full(s, ex) for ex in gc.EXERCISES if ex != "score_diagnostics")


def test_flood_and_memory_keep_other_points(graded):
    s = graded["scores"]["flooder"]
    assert all(full(s, ex) for ex in gc.EXERCISES)
    nb = autograded(graded, "flooder")
    assert len(nbformat.writes(nb)) < 2_000_000
    assert "输出超过" in all_output_text(nb)


def test_tampered_cells_restored_and_reported(graded):
    s = graded["scores"]["tamperer"]
    assert zero(s, "softmax")  # the wrong answer is judged by the restored test cells
    assert all(full(s, ex) for ex in gc.EXERCISES if ex != "softmax")
    feedback = (graded["out"] / "feedback" / "tamperer" / f"{gc.NB}.html").read_text()
    for words in ("被删除", "被修改", "出现了 2 次", "类型被改"):
        assert words in feedback, words


def test_warnings_from_correct_code_cost_nothing(graded):
    assert full(graded["scores"]["warner"], "softmax")


def test_feedback_names_the_mistake_without_hidden_source(graded):
    out = graded["out"]
    for student in graded["scores"]:
        for path in (out / "feedback" / student).glob("*.html"):
            text = path.read_text()
            assert "BEGIN HIDDEN TESTS" not in text and 'hidden=True' not in text, path
            assert "BEGIN SOLUTION" not in text
    fb = (out / "feedback" / "patcher" / f"{gc.NB}.html").read_text()
    assert "softmax" in fb and "检查未通过" in fb


def test_parallel_grades_equal_serial(graded, tmp_path):
    subs = tmp_path / "class"
    subs.mkdir()
    for name in ("honest", "stub", "tamperer"):
        (subs / name).mkdir()
        submitted = graded["out"] / "nbgrader" / "submitted" / name / "w1d1" / f"{gc.NB}.ipynb"
        nbformat.write(nbformat.read(submitted, as_version=4), subs / name / f"{gc.NB}.ipynb")
    rows = grade(subs, tmp_path / "out", jobs=1, timeout=30, seed=1234, log=lambda *_: None)
    serial = {(r[0], r[2]): r[3] for r in rows}
    parallel = {(r[0], r[2]): r[3] for r in graded["rows"][1:] if r[0] in ("honest", "stub")}
    for key, value in parallel.items():
        assert serial[key] == value, key


def test_bad_inputs_give_clear_messages(tmp_path):
    with pytest.raises(GradingError, match="找不到提交文件夹"):
        grade(tmp_path / "missing", tmp_path / "o1")
    (tmp_path / "empty").mkdir()
    with pytest.raises(GradingError, match="没有学生子文件夹"):
        grade(tmp_path / "empty", tmp_path / "o2")
    cli = subprocess.run([sys.executable, "-m", "autograder", "grade", str(tmp_path / "missing"), "--out",
                          str(tmp_path / "o3")], cwd=ROOT, capture_output=True, text=True)
    assert cli.returncode == 2 and "找不到提交文件夹" in cli.stderr
    assert not (tmp_path / "o3" / "grades.csv").exists()


def test_malformed_renamed_and_unknown_files(tmp_path):
    subs = tmp_path / "class"
    (subs / "broken").mkdir(parents=True)
    (subs / "broken" / f"{gc.NB}.ipynb").write_text("{ not json")
    (subs / "renamed").mkdir()
    renamed = gc.solved()
    gc.cell(renamed, "test_softmax").source += "\nprint(1)"  # restored by the chain, with a note
    nbformat.write(renamed, subs / "renamed" / f"{gc.NB} (1).ipynb")
    (subs / "renamed" / "notes.txt").write_text("hi")
    (subs / "unknown").mkdir()
    (subs / "unknown" / "99_extra.ipynb").write_text("{}")
    out = tmp_path / "out"
    log = []
    rows = grade(subs, out, jobs=2, timeout=30, seed=1, log=log.append)
    by = {}
    for r in rows:
        by.setdefault(r[0], []).append(float(r[3]))
    assert by["broken"] and sum(by["broken"]) == 0
    assert sum(by["renamed"]) == sum(float(r[4]) for r in rows if r[0] == "renamed") > 0  # graded in full
    assert "unknown" not in by
    text = "\n".join(log)
    assert "无法读取" in text and "改了名" in text and "不是本次作业的笔记本" in text
    assert "无法读取" in (out / "feedback" / "broken" / f"{gc.NB}.html").read_text(encoding="utf-8")
    page = (out / "feedback" / "renamed" / f"{gc.NB}.html").read_text(encoding="utf-8")
    assert "改了名" in page and "notes.txt" in page  # its own note and the one about the whole submission
    # one banner, the exporter's: the chain's note and the command's together, the page nbgrader wrote
    assert "被修改" in page and page.count("评分说明") == 1 and page.count("Content-Security-Policy") == 1
    assert page == (out / "nbgrader" / "feedback" / "renamed" / "w1d1" / f"{gc.NB}.html").read_text(encoding="utf-8")


@contextlib.contextmanager
def nested_folders(top, depth):
    """`depth` folders `a/a/…` under `top`, made and removed by changing directory one level at a time
    (no path may be that long, and pytest's own clean-up would recurse too deep)."""
    here = os.getcwd()

    def descend(make):
        os.chdir(top)
        for _ in range(depth):
            if make:
                os.mkdir("a")
            os.chdir("a")

    try:
        descend(make=True)
        os.chdir(here)
        yield
    finally:
        descend(make=False)
        for _ in range(depth):
            os.chdir("..")
            os.rmdir("a")
        os.chdir(here)


def test_hostile_file_names_and_deep_folders_cost_nobody_anything(tmp_path):
    """A file name that is not UTF-8 or holds terminal escapes, and 1100 nested folders, in one student's
    folder: the class is graded, the names show escaped, the CSV files and state are written."""
    subs = tmp_path / "class"
    for student in ("odd", "plain"):
        (subs / student).mkdir(parents=True)
        nbformat.write(gc.solved(), subs / student / f"{gc.NB}.ipynb")
    odd = bytes(subs / "odd")
    for name in (b"notes\xff.txt", b"\x1b[2J\x1b[31mFAKE\nline.txt"):
        with open(odd + b"/" + name, "wb") as fh:
            fh.write(b"x")
    log = []
    with nested_folders(subs / "odd", 1100):  # deeper than Python's recursion limit and PATH_MAX
        rows = grade(subs, tmp_path / "out", jobs=2, timeout=30, seed=5, log=log.append)
    by = {}
    for student, _nb, _gid, score, points in rows:
        got, total = by.get(student, (0.0, 0.0))
        by[student] = (got + float(score), total + float(points))
    assert by["odd"] == by["plain"] and by["odd"][0] == by["odd"][1] > 0, by
    text = "\n".join(log)
    assert "\x1b" not in text and "notes\\xff.txt" in text and "\\x1b[2J" in text and "层" in text
    totals = (tmp_path / "out" / "totals.csv").read_text(encoding="utf-8")
    assert "notes\\xff.txt" in totals and "\x1b" not in totals
    (state,) = (tmp_path / "out").glob(".gen/*/state.json")
    assert "notes\\\\xff.txt" in state.read_text(encoding="utf-8")  # JSON doubles the backslash


def _kernels_and_parents():
    """{pid: parent pid} of every process on the machine, and the pids of kernels (command line as ipykernel's)."""
    table = processes()
    return ({pid: int(fields[1]) for pid, (fields, _) in table.items()},
            {pid for pid, (_, cmdline) in table.items() if b"ipykernel_launcher" in cmdline})


def _kill_the_worker_of_a_slow_kernel(killed, stop, slow_after=4.0):
    """Kill (SIGKILL) the grading worker whose kernel has run longer than `slow_after` seconds: a worker that dies."""
    import signal
    import time
    from multiprocessing import forkserver

    seen = {}
    while not stop.is_set() and not killed:
        server = forkserver._forkserver._forkserver_pid
        parents, kernels = _kernels_and_parents()
        now = time.monotonic()
        for pid in kernels:
            first = seen.setdefault(pid, now)
            worker = pid
            while server and parents.get(worker) not in (server, None, 0, 1):
                worker = parents[worker]
            if server and parents.get(worker) == server and now - first > slow_after:
                os.kill(worker, signal.SIGKILL)
                killed.append(worker)
                break
        time.sleep(0.2)


def test_a_worker_that_dies_costs_nobody_else(tmp_path):
    """A worker killed while it grades one student breaks the process pool; the students it left undone
    (here all three: one place for kernels) are graded again, and everyone gets what the work earns."""
    import threading

    subs = tmp_path / "class"
    slow = gc.solved(softmax=gc._answers()["softmax"] + "\nimport time\ntime.sleep(6)\n")
    for name, nb in (("a_slow", slow), ("b_honest", gc.solved()), ("c_honest", gc.solved())):
        (subs / name).mkdir(parents=True)
        nbformat.write(nb, subs / name / f"{gc.NB}.ipynb")
    killed, stop, log = [], threading.Event(), []
    killer = threading.Thread(target=_kill_the_worker_of_a_slow_kernel, args=(killed, stop), daemon=True)
    killer.start()
    try:
        rows = grade(subs, tmp_path / "out", jobs=1, timeout=60, seed=1, log=log.append)
    finally:
        stop.set()
        killer.join()
    assert killed, "no worker was killed: the test did not test anything"
    assert any("一个评分进程意外退出" in line for line in log), log[-20:]
    totals = {}
    for sid, _, _, score, _ in (r for r in rows if r != CSV_HEADER):
        totals[sid] = totals.get(sid, 0.0) + float(score or 0)
    full = sum(p for _, p in graded_cells(gc.NB)[0])
    assert totals == dict.fromkeys(("a_slow", "b_honest", "c_honest"), full), (totals, log[-20:])
