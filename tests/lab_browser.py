"""JupyterLab as a student meets it: `make lab` on a loopback port, driven in headless Chromium.

`lab_server()` starts `make lab` on a copy of the notebooks with its own settings, workspace and
runtime folders; `Notebook` wraps a Playwright page with what a student does: open, run all,
type an answer, run a cell, press Validate.
"""
import contextlib
import fcntl
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
# Flags from the environment notes: no sandbox as root, no background connections to a closed network.
LAUNCH_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync"]
TOKEN = "w1d1-browser-test"
# Every cell stays in the page (no windowing), and no news prompt covers the notebook.
LAB_SETTINGS = {
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false",
                                                                        "checkForUpdates": False},
}
PANEL = ".jp-NotebookPanel:not(.lm-mod-hidden)"  # the notebook in front
CELLS = f"{PANEL} .jp-Notebook .jp-Cell"
IDLE = f'{PANEL} .jp-Notebook-ExecutionIndicator[data-status="idle"]'
WAIT_MS = 180_000  # generous: the suite runs other jobs beside this one on two cores


def ensure_chromium():
    """Install Debian's chromium if missing, with `make system-deps` (the one list of Debian packages),
    one installer at a time. Returns a reason or None."""
    if CHROMIUM.exists():
        return None
    with open("/tmp/w1d1-apt.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not CHROMIUM.exists():
            subprocess.run(["make", "-s", "system-deps"], cwd=ROOT, capture_output=True)
    return None if CHROMIUM.exists() else f"{CHROMIUM} is missing and `make system-deps` could not install it"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def copy_notebooks(src, dest, names):
    """The named notebooks plus the helper modules they import, into a folder of their own."""
    dest.mkdir(parents=True, exist_ok=True)
    for path in src.iterdir():
        if path.suffix == ".py" or path.stem in names:
            shutil.copy(path, dest / path.name)
    return dest


@contextlib.contextmanager
def lab_server(notebook_dir, work):
    """`make lab` serving notebook_dir; yields the base URL. Stops the server and its kernels after."""
    notebook_dir.mkdir(parents=True, exist_ok=True)
    settings = work / "settings"
    for rel, values in LAB_SETTINGS.items():
        (settings / rel).parent.mkdir(parents=True, exist_ok=True)
        (settings / rel).write_text(json.dumps(values))
    port = free_port()
    env = {**os.environ, "JUPYTER_TOKEN": TOKEN, "JUPYTER_RUNTIME_DIR": str(work / "runtime"),
           "JUPYTERLAB_SETTINGS_DIR": str(settings), "JUPYTERLAB_WORKSPACES_DIR": str(work / "workspaces"),
           "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    env.pop("MPLBACKEND", None)
    log = open(work / "lab.log", "w")
    proc = subprocess.Popen(["make", "-s", "lab", f"PORT={port}", f"NOTEBOOK_DIR={notebook_dir}"], cwd=ROOT,
                            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 120
        while True:
            try:
                urllib.request.urlopen(f"{base}/api/status?token={TOKEN}", timeout=5).close()
                break
            except OSError:
                if proc.poll() is not None or time.time() > deadline:
                    raise RuntimeError(f"JupyterLab did not start: {(work / 'lab.log').read_text()[-2000:]}") from None
                time.sleep(0.5)
        yield base
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 15)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
        log.close()


# Per code cell: its prompt text ('[ ]:', '[*]:', '[3]:'); markdown cells give null.
_PROMPTS = """cells => Array.from(document.querySelectorAll(cells)).map(c =>
    c.classList.contains('jp-CodeCell') ? c.querySelector('.jp-InputPrompt').textContent.trim() : null)"""
# Every figure in a cell's own outputs (not inside a widget): does it show, and at what size?
_FIGURES = """cells => Array.from(document.querySelectorAll(cells + ' .jp-OutputArea-output img'))
    .filter(img => !img.closest('.jupyter-widgets'))
    .map(img => ({cell: Array.from(document.querySelectorAll(cells)).indexOf(img.closest('.jp-Cell')),
                  loaded: img.complete && img.naturalWidth > 0, natural: img.naturalWidth,
                  shown: img.getBoundingClientRect().width,
                  room: img.closest('.jp-OutputArea').getBoundingClientRect().width}))"""


class Notebook:
    """One notebook open in JupyterLab, in one browser page."""

    def __init__(self, page, base, path, shots, token=TOKEN):
        self.page, self.base, self.path, self.shots, self.token = page, base, path, shots, token
        shots.mkdir(parents=True, exist_ok=True)

    def open(self):
        """token None: the page is already logged in (a JupyterHub cookie)."""
        query = f"&token={self.token}" if self.token else ""
        self.page.goto(f"{self.base}/lab/tree/{self.path}?reset{query}")  # reset: no tabs of earlier tests
        self.page.wait_for_selector(CELLS, timeout=WAIT_MS)
        self.wait_idle()

    def cells(self):
        return self.page.locator(CELLS)

    def prompts(self):
        return self.page.evaluate(_PROMPTS, CELLS)

    def wait_idle(self):
        """Until the kernel is idle and no cell is queued or running."""
        deadline = time.time() + WAIT_MS / 1000
        while time.time() < deadline:
            if self.page.locator(IDLE).count() and not any(p == "[*]:" for p in self.prompts() if p):
                time.sleep(0.3)  # outputs of the last reply settle
                if self.page.locator(IDLE).count():
                    return
            time.sleep(0.25)
        raise TimeoutError(f"{self.path}: the kernel stayed busy")

    def menu(self, top, command):
        self.page.get_by_role("menuitem", name=top, exact=True).click()
        self.page.locator(f'.lm-Menu [data-command="{command}"]').first.click()

    def select(self, index):
        self.cells().nth(index).locator(".jp-InputPrompt").click()

    def run_all(self):
        """Run ▸ Run All Cells; returns the indices of the code cells that did not run."""
        self.select(0)  # the notebook, not a dialog or the file browser, has the focus
        self.menu("Run", "runmenu:run-all")
        self.wait_idle()
        return [i for i, p in enumerate(self.prompts()) if p == "[ ]:"]

    def output_text(self, index):
        return self.cells().nth(index).locator(".jp-OutputArea").inner_text()

    def figures(self):
        return self.page.evaluate(_FIGURES, CELLS)

    def set_source(self, index, text):
        """Replace a cell's text the way a student would: open its editor, select all, type."""
        cell = self.cells().nth(index)
        rendered = cell.locator(".jp-MarkdownOutput")
        if rendered.count() and rendered.first.is_visible():
            rendered.first.dblclick()
        cell.locator(".cm-content").click()
        self.page.keyboard.press("Control+A")
        self.page.keyboard.insert_text(text)
        self.page.keyboard.press("Escape")

    def render_markdown(self):
        """Run ▸ Render All Markdown Cells (what leaving a text answer does)."""
        self.select(0)
        self.menu("Run", "notebook:render-all-markdown")

    def run_cell(self, index):
        self.select(index)
        self.menu("Run", "notebook:run-cell")
        self.wait_idle()

    def validate(self):
        """Press nbgrader's Validate button; returns the text of the results dialog."""
        self.page.locator(f"{PANEL} .jp-Toolbar-item", has_text="Validate").click()
        dialog = self.page.locator(".jp-Dialog", has_text="Validation Results")
        dialog.wait_for(timeout=WAIT_MS)
        text = dialog.inner_text()
        self.shot("validate")
        dialog.get_by_role("button", name="Ok").click()
        return text

    def save(self):
        """File ▸ Save Notebook, and wait until the notebook no longer shows unsaved changes."""
        self.select(0)
        self.menu("File", "docmanager:save")
        self.page.wait_for_selector(".jp-mod-dirty", state="detached", timeout=WAIT_MS)

    def shot(self, name):
        self.page.screenshot(path=str(self.shots / f"{Path(self.path).stem}-{name}.png"))

    def show(self, index):
        self.cells().nth(index).scroll_into_view_if_needed()
