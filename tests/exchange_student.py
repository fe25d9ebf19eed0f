"""A student's side of nbgrader's exchange, run as that student with the student environment's python.

It calls what a student's server calls: nbgrader's AssignmentList (the Assignments panel's fetch and
submit) and jupyter_server's FileContentsManager (JupyterLab's save). Steps, in order:
    fetch | answer:TEXT (save 01 with TEXT in the softmax answer cell) | fill (write until the disk is
    full) | unfill | ready:DIR (say so, then wait for DIR/go) | submit | bigfile:MIB (a file in w1d1/)
One JSON line per step: {"step", "ok", "error"}; stops at the first failed step (exit status 1).
Copied next to the class (students cannot read the repo); needs JUPYTER_CONFIG_PATH of the class.
"""
import errno
import json
import os
import sys
import time
from pathlib import Path

HOME = Path.home()
COURSE, ASSIGNMENT, NOTEBOOK, GRADE_ID = "w1d1-attention", "w1d1", "01_self_attention", "softmax"


def panel():
    from nbgrader.server_extensions.assignment_list.handlers import AssignmentList

    lister = AssignmentList()
    lister.root_dir = str(HOME)
    return lister


def exchange(action):
    result = getattr(panel(), f"{action}_assignment")(COURSE, ASSIGNMENT)
    if not result["success"]:
        raise RuntimeError(result["value"].strip().splitlines()[-1])


def answer(text):
    from jupyter_server.services.contents.filemanager import FileContentsManager

    contents = FileContentsManager(root_dir=str(HOME))
    path = f"{ASSIGNMENT}/{NOTEBOOK}.ipynb"
    model = contents.get(path)
    for cell in model["content"]["cells"]:
        if cell["metadata"].get("nbgrader", {}).get("grade_id") == GRADE_ID:
            cell["source"] = text
    contents.save({"type": "notebook", "format": "json", "content": model["content"]}, path)


def fill():
    """Write until the home's disk is full (bounded: 100 GB); a disk that never fills is an error."""
    block = b"\0" * 2**20
    try:
        with open(HOME / "filler.bin", "wb") as fh:
            for _ in range(100_000):
                fh.write(block)
                fh.flush()
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            return
        raise
    raise RuntimeError("the disk did not fill")


def wait_go(folder):
    folder = Path(folder)
    (folder / os.environ["USER"]).touch()
    deadline = time.monotonic() + 300
    while not (folder / "go").exists():
        if time.monotonic() > deadline:
            raise TimeoutError("no go")
        time.sleep(0.01)


def step(name, arg):
    if name in ("fetch", "submit"):
        exchange(name)
    elif name == "answer":
        answer(arg)
    elif name == "fill":
        fill()
    elif name == "unfill":
        (HOME / "filler.bin").unlink()
    elif name == "ready":
        panel()  # nbgrader imported before the go
        wait_go(arg)
    elif name == "bigfile":
        (HOME / ASSIGNMENT / "big.bin").write_bytes(b"\0" * (int(arg) * 2**20))
    else:
        raise ValueError(name)


def main(steps):
    for item in steps:
        name, _, arg = item.partition(":")
        try:
            step(name, arg)
        except Exception as exc:  # noqa: BLE001 - the error a student would see, reported
            print(json.dumps({"step": name, "ok": False, "error": f"{type(exc).__name__}: {exc}"}), flush=True)
            return 1
        print(json.dumps({"step": name, "ok": True, "error": None}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
