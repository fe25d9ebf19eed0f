"""Every path starts each notebook's kernel ahead, while the notebooks before run. The grading command
(the first kernel before nbgrader's own start) starts one per notebook, none thrown away; plain `nbgrader
autograde` (the hub) cannot know how many notebooks are left: it cold-starts only the first, every later
notebook, another student's too, takes a kernel started ahead, and the ones no notebook took end with the
process, leaving nothing behind. The place a student holds while their notebooks run is given back, and a
place never given back (a worker that died) slows the next worker down, never stops it."""
import json
import shutil
import tempfile
import threading
from pathlib import Path

from autograder import timing
from autograder.chain.sandboxed_execute import SandboxedExecute
from autograder.command import grading_worker
from autograder.command.grade import grade
from autograder.course import ASSIGNMENT, SOURCE_DIR, available_notebooks
from autograder.report.grade_tables import graded_cells
from tests.entry_points import by_nbgrader

NOTEBOOKS = 3


def solutions_class(folder):
    for student in ("ada", "bo"):
        (folder / student).mkdir(parents=True)
        for name in available_notebooks()[:NOTEBOOKS]:
            shutil.copy(SOURCE_DIR / ASSIGNMENT / f"{name}.ipynb", folder / student)


def test_every_kernel_started_ahead_is_used(tmp_path, monkeypatch):
    log = tmp_path / "timing.log"
    monkeypatch.setenv(timing.ENV, str(log))
    solutions_class(tmp_path / "class")
    rows = grade(tmp_path / "class", tmp_path / "out", jobs=1, seed=3, log=lambda *_: None)
    assert sum(float(r[3]) for r in rows) == sum(float(r[4]) for r in rows) > 0  # the solutions: full marks
    entries = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    for student in ("ada", "bo"):
        steps = [e["what"] for e in entries if e["student"] == student]
        assert steps.count("kernel start") == NOTEBOOKS, steps
        assert steps.count("kernel ready") == NOTEBOOKS and "restart" not in steps


def test_plain_nbgrader_starts_each_later_kernel_ahead(tmp_path, monkeypatch):
    log, scratch = tmp_path / "timing.log", Path(tempfile.mkdtemp(prefix="w1d1t-"))  # short: sockets live there
    monkeypatch.setenv(timing.ENV, str(log))
    monkeypatch.setenv("TMPDIR", str(scratch))  # the kernels' folders: all gone once nbgrader has ended
    solutions_class(tmp_path / "class")
    graded = by_nbgrader(tmp_path / "class", tmp_path / "course", feedback=False)
    assert graded.returncode == 0, graded.log[-3000:]
    full = sum(p for name in available_notebooks()[:NOTEBOOKS] for _, p in graded_cells(name)[0])
    assert [graded.points(s) for s in ("ada", "bo")] == [full, full]  # the solutions: full marks
    steps = [json.loads(line)["what"] for line in log.read_text(encoding="utf-8").splitlines()]
    notebooks = 2 * NOTEBOOKS
    assert steps.count("kernel ready") == notebooks and "restart" not in steps
    ahead = SandboxedExecute.kernels_ahead.default_value
    assert steps.count("kernel start") == notebooks + ahead, steps  # the first cold, the rest started ahead
    left = [p.name for p in scratch.iterdir()]
    shutil.rmtree(scratch)
    assert not left


def test_a_place_never_given_back_delays_the_next_worker_only(monkeypatch):
    gate = threading.Semaphore(1)
    monkeypatch.setitem(grading_worker._GATE, "students", gate)
    with grading_worker.kernels_turn(wait=5) as first_wait:
        with grading_worker.kernels_turn(wait=0.3) as second_wait:  # the place is taken: waits, then goes on
            assert second_wait >= 0.3
        assert not gate.acquire(blocking=False)  # still the first holder's
    assert first_wait < 0.3
    assert gate.acquire(blocking=False)  # given back on leaving


class Waiting:
    """A kernel manager as the pool sees one: started for a folder, up or not; records being ended."""

    def __init__(self, up=True):
        self.has_kernel, self.ended = True, False
        self.provisioner = type("P", (), {"process": type("Q", (), {"poll": lambda _: None if up else -9})()})()
        self.context = type("C", (), {"closed": True})()

    async def shutdown_kernel(self, now=False):
        self.ended = now


def test_a_kernel_no_notebook_can_take_is_ended_not_left_at_the_head():
    from autograder.chain.kernel_pool import Pool

    pool, dead, other, good, later = Pool(), Waiting(up=False), Waiting(), Waiting(), Waiting()
    pool._kernels = [("a", dead), ("b", other), ("a", good), ("a", later)]
    assert pool.take("a") is good  # past a kernel that died while it waited and one started for another folder
    assert dead.ended and other.ended and not good.ended
    assert pool.take("a") is later and pool.take("a") is None
