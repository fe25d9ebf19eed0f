"""A student's side of nbgrader's exchange, run as that student with the student environment's python.

It calls what a student's server calls: nbgrader's AssignmentList (the Assignments panel's fetch and
submit) and jupyter_server's FileContentsManager (JupyterLab's save). Steps, in order:
    fetch | answer:TEXT (save 01 with TEXT in the softmax answer cell) | fill (write until the disk is
    full) | unfill | ready:DIR (say so, then wait for DIR/go) | submit | bigfile:MIB (a file in w1d1/) |
    outputs:MIB (save 01 with MIB MiB of printed output under its softmax answer) | source:MIB (save 01 with a
    scratch cell of MIB MiB of code)
One JSON line per step: {"user", "step", "ok", "error"}; stops at the first failed step (exit status 1).
`--students a,b,...` (as root): nbgrader imported once, then each student in a forked child of their own uid.
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


def saved(change):
    """Save 01 as JupyterLab does, after `change(notebook, the softmax answer cell)`."""
    from jupyter_server.services.contents.filemanager import FileContentsManager

    contents = FileContentsManager(root_dir=str(HOME))
    path = f"{ASSIGNMENT}/{NOTEBOOK}.ipynb"
    model = contents.get(path)
    nb = model["content"]
    change(nb, next(c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == GRADE_ID))
    contents.save({"type": "notebook", "format": "json", "content": nb}, path)


def answer(text):
    saved(lambda nb, cell: cell.update(source=text))


def outputs(mib):
    lines = [f"step {i:08d}\n" for i in range(mib * 2**20 // 14)]
    saved(lambda nb, cell: cell.update(outputs=[{"output_type": "stream", "name": "stdout", "text": lines}]))


def scratch_source(mib):
    from nbformat.v4 import new_code_cell

    saved(lambda nb, cell: nb["cells"].append(new_code_cell("# x = 1\n" * (mib * 2**20 // 8))))


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
    elif name == "outputs":
        outputs(int(arg))
    elif name == "source":
        scratch_source(int(arg))
    else:
        raise ValueError(name)


def as_students(names, steps):
    """Run as root: import nbgrader once, then one forked child per student that becomes that student
    (uid, groups, HOME, working folder) and runs the steps; their lines are prefixed with the name."""
    import pwd

    from jupyter_server.services.contents.filemanager import FileContentsManager  # noqa: F401 - imported once

    panel()
    children = {}
    for name in names:
        pid = os.fork()
        if pid == 0:
            user = pwd.getpwnam(name)
            os.initgroups(name, user.pw_gid)
            os.setgid(user.pw_gid)
            os.setuid(user.pw_uid)
            os.environ.update(HOME=user.pw_dir, USER=name)
            os.chdir(user.pw_dir)
            global HOME
            HOME = Path(user.pw_dir)
            os._exit(main([s.replace("{user}", name) for s in steps], prefix=name))
        children[pid] = name
    failed = 0
    for _ in children:
        _, status = os.wait()
        failed += status != 0
    return 1 if failed else 0


def main(steps, prefix=None):
    for item in steps:
        name, _, arg = item.partition(":")
        try:
            step(name, arg)
        except Exception as exc:  # noqa: BLE001 - the error a student would see, reported
            print(json.dumps({"user": prefix, "step": name, "ok": False, "error": f"{type(exc).__name__}: {exc}"}),
                  flush=True)
            return 1
        print(json.dumps({"user": prefix, "step": name, "ok": True, "error": None}), flush=True)
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "--students":  # --students a,b,c STEP... ({user} in a step: each student's name)
        sys.exit(as_students(sys.argv[2].split(","), sys.argv[3:]))
    sys.exit(main(sys.argv[1:]))
