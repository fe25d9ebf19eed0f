"""Work done once per test run and shared by every file (and pytest-xdist worker) that needs it.

The first caller makes the result under a file lock and pickles it; the others wait, then read it
(the pattern the pytest-xdist docs give for a session fixture shared across workers)."""
import fcntl
import hashlib
import os
import pickle

from autograder.course import ASSIGNMENT, RELEASE_DIR
from tools.build_site import execute_release  # bound now: test_site patches build_site's own name


def run_dir(tmp_path_factory):
    """A folder every worker of this test run sees: the parent of the workers' own base folders."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def once(tmp_path_factory, name, make):
    """make(folder)'s result, made at most once per test run; `folder` is its own and stays for the run."""
    return once_in(run_dir(tmp_path_factory), name, make)


def once_in(run, name, make):
    """once(), given the run's folder (a process started ahead of the tests has no tmp_path_factory)."""
    folder = run / name
    folder.mkdir(exist_ok=True)
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        done = folder / ".result.pickle"
        if not done.exists():
            done.write_bytes(pickle.dumps(make(folder)))
        return pickle.loads(done.read_bytes())


def executed_release(tmp_path_factory, name):
    """tools.build_site.execute_release(name), run once per test run and content of the release folder."""
    digest = hashlib.sha256()
    for path in sorted((RELEASE_DIR / ASSIGNMENT).iterdir()):
        if path.is_file():
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return once(tmp_path_factory, f"release-{name}-{digest.hexdigest()[:16]}", lambda _: execute_release(name))
