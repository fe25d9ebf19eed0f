"""Make the repo root importable (autograder, tests.variants, tools); start grading the attack class as the run
starts (tests/shared_class.py), in the process that runs the session (not in each xdist worker)."""
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
# one compute thread per process, as in a grading kernel: the run keeps both cores busy with processes of its own,
# and a pool of spinning threads in each (torch, numpy) made one attack's checks 2-3x slower
os.environ.setdefault("OMP_NUM_THREADS", "1")


AHEAD = []


@pytest.fixture(autouse=True)
def _host_threads():
    """Threads that earlier tests left in this process (an event loop's executor) are the test runner's, not those of
    an answer a test checks here (the thread check)."""
    from w1d1_student.torch_calls import host_threads

    host_threads()


def pytest_configure(config):
    """A w1d1_student installed from other sources than student/'s stops the run here, with one line: the tests
    would import the old package and fail with diffs that do not say why."""
    from autograder import wheel_inputs

    stale = None if hasattr(config, "workerinput") else wheel_inputs.stale_install()
    if stale:
        raise pytest.UsageError(stale)


def pytest_sessionstart(session):
    from tests import shared_class

    if hasattr(session.config, "workerinput") or not shared_class.needed_by(session.config.args):
        return
    AHEAD.append(shared_class.start_ahead(session.config._tmp_path_factory.getbasetemp()))


def pytest_sessionfinish(session):
    import os
    import signal

    for proc in AHEAD:
        if proc.poll() is None:  # the run ended before any test needed the class
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
