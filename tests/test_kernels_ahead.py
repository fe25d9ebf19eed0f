"""The grading command starts each notebook's kernel ahead (the first before nbgrader's own start, the
next ones while the notebooks before run), and every kernel it starts is one a notebook runs in: one
start per notebook, none thrown away. The place a student holds while their notebooks run is given
back, and a place never given back (a worker that died) slows the next worker down, never stops it."""
import json
import shutil
import threading

from autograder import timing
from autograder.command import grading_worker
from autograder.command.grade import grade
from autograder.course import ASSIGNMENT, SOURCE_DIR, available_notebooks

NOTEBOOKS = 3


def test_every_kernel_started_ahead_is_used(tmp_path, monkeypatch):
    log = tmp_path / "timing.log"
    monkeypatch.setenv(timing.ENV, str(log))
    for student in ("ada", "bo"):
        (tmp_path / "class" / student).mkdir(parents=True)
        for name in available_notebooks()[:NOTEBOOKS]:
            shutil.copy(SOURCE_DIR / ASSIGNMENT / f"{name}.ipynb", tmp_path / "class" / student)
    rows = grade(tmp_path / "class", tmp_path / "out", jobs=1, seed=3, log=lambda *_: None)
    assert sum(float(r[3]) for r in rows) == sum(float(r[4]) for r in rows) > 0  # the solutions: full marks
    entries = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    for student in ("ada", "bo"):
        steps = [e["what"] for e in entries if e["student"] == student]
        assert steps.count("kernel start") == NOTEBOOKS, steps
        assert steps.count("kernel ready") == NOTEBOOKS and "restart" not in steps


def test_a_place_never_given_back_delays_the_next_worker_only(monkeypatch):
    gate = threading.Semaphore(1)
    monkeypatch.setitem(grading_worker._GATE, "students", gate)
    with grading_worker.kernels_turn(wait=5) as first_wait:
        with grading_worker.kernels_turn(wait=0.3) as second_wait:  # the place is taken: waits, then goes on
            assert second_wait >= 0.3
        assert not gate.acquire(blocking=False)  # still the first holder's
    assert first_wait < 0.3
    assert gate.acquire(blocking=False)  # given back on leaving
