"""The grading command ends only when everything it started has ended: after it exits, no process of
its session is left (running or waiting to be reaped), and nothing it made in the temporary folder
(kernels' sockets and cases, the workers' seccomp filters) is left there."""
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.proc_table import processes

ROOT = Path(__file__).resolve().parents[1]


def _session_members(sid):
    return [(pid, cmdline[:80]) for pid, (fields, cmdline) in processes().items() if int(fields[3]) == sid]  # the session id


def test_a_grading_run_leaves_no_process_behind(tmp_path):
    # a temporary folder of the run's own, short (kernels' socket paths live under it)
    with tempfile.TemporaryDirectory(prefix="w1d1t-", dir="/tmp") as scratch:
        run = subprocess.Popen([sys.executable, "-m", "autograder", "grade", str(ROOT / "data" / "demo_class"),
                                "--out", str(tmp_path / "out"), "--jobs", "2"], cwd=ROOT, start_new_session=True,
                               env={**os.environ, "TMPDIR": scratch},
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        log, _ = run.communicate(timeout=900)
        assert run.returncode == 0, log[-2000:]
        assert (tmp_path / "out" / "totals.csv").read_text(encoding="utf-8").count("\n") == 4  # three students
        assert _session_members(run.pid) == []
        assert os.listdir(scratch) == []
