"""`make lab` serves JupyterLab: start the same command on a free port, fetch /lab, stop it."""
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from tests.lab_browser import ROOT, free_port


def test_make_lab_serves_jupyterlab(tmp_path):
    port = free_port()
    env = {**os.environ, "JUPYTER_TOKEN": "w1d1-test", "JUPYTER_RUNTIME_DIR": str(tmp_path),
           "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    proc = subprocess.Popen(["make", "-s", "lab", f"PORT={port}"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        deadline, status, body = time.time() + 90, None, ""
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/lab?token=w1d1-test", timeout=5) as resp:
                    status, body = resp.status, resp.read().decode(errors="replace")
                break
            except OSError:
                time.sleep(1)
        assert status == 200, "JupyterLab did not answer on /lab"
        assert "jupyter-config-data" in body and "JupyterLab" in body
    finally:
        os.killpg(proc.pid, 15)
        out = proc.communicate(timeout=30)[0]
    assert f"http://127.0.0.1:{port}/lab" in out
