"""A graded kernel is one process, in a folder that holds only the course's released files.

Through the real sandbox and both entry points (the grading command and plain `nbgrader autograde`):
- an mha that forks a child to call torch's SDPA (out of sight of the kernel's torch modes) and reads
  the result back over a pipe earns nothing; the hand-written answer keeps every point;
- a fork bomb, multiprocessing, subprocess and os.system in an answer cost that exercise only;
  Python threads and torch's intra-op threads still work (mha's own thread rule is unchanged);
- a helper.py submitted beside the notebook cannot be imported, and a student's own w1d1_viz.py is
  not the one the kernel loads: the kernel's folder is filled from the release, on every path.
"""
import asyncio
import html
import subprocess
import sys
import textwrap

import nbformat
import pytest
from w1d1_student.runner import COMPANIONS

from autograder.course import ASSIGNMENT, RELEASE_DIR, SOURCE_DIR
from autograder.errors import SandboxUnavailable
from autograder.kernels import bwrap, kernel_manager, kernel_view
from tests import grading_class as gc
from tests.entry_points import ENTRY_POINTS
from tests.shared_class import attack_class
from tests.variants import exercises_of
from tests.variants.nb04_multihead import MHA, MHA_IN_THREAD, MHA_THREAD_SDPA_MATH, SPLIT_MERGE

NB01, NB04 = "01_self_attention", "04_multihead"

# mha's attention computed in a forked child (forward and backward, autograd in the child), results over a pipe:
# nothing in it names the checking machinery or a forbidden API, so only the sandbox's refused fork costs it mha
_FORK_HELPERS = '''
import io, math, os
import numpy as np
import torch
from torch import nn


def _in_child(fn, *args):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            buf = io.BytesIO()
            np.savez(buf, *[t.detach().numpy() for t in fn(*args)])
            with os.fdopen(w, "wb") as fh:
                fh.write(buf.getvalue())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as fh:
        data = np.load(io.BytesIO(fh.read()))
    os.waitpid(pid, 0)
    return [torch.from_numpy(data[f"arr_{i}"]) for i in range(len(data.files))]


def _forward(q, k, v, am):
    att = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if am is not None:
        att = att + am
    att = att.softmax(dim=-1)
    return att @ v, att


def _backward(q, k, v, am, gy, gatt):
    with torch.enable_grad():
        q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
        y, att = _forward(q, k, v, am)
        torch.autograd.backward([y, att], [gy, gatt])
    return q.grad, k.grad, v.grad


class _Attend(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, am):
        ctx.save_for_backward(q, k, v)
        ctx.am = am
        return tuple(_in_child(_forward, q, k, v, am))

    @staticmethod
    def backward(ctx, gy, gatt):
        q, k, v = ctx.saved_tensors
        return (*_in_child(_backward, q, k, v, ctx.am, gy, gatt), None)
'''


def _forked(src):
    """The thread variant of SDPA in mha, with the work moved to forked children instead."""
    for old, new in [("from concurrent.futures import ThreadPoolExecutor\n", ""),
                     ('        attend = getattr(torch, "_scaled_dot_product_" + "attention_math")\n', ""),
                     ("        with ThreadPoolExecutor(1) as pool:\n"
                      "            y, att = pool.submit(attend, q, k, v, attn_mask=am).result()\n",
                      "        y, att = _Attend.apply(q, k, v, am)\n")]:
        assert old in src, old
        src = src.replace(old, new)
    return _FORK_HELPERS + src


MHA_FORKED = _forked(MHA_THREAD_SDPA_MATH)

VIZ_MARK = "W1D1_VIZ_FROM"
# a student's own w1d1_viz.py: the release's, plus a mark
STUDENT_VIZ = (RELEASE_DIR / ASSIGNMENT / "w1d1_viz.py").read_text(encoding="utf-8") + '\nORIGIN = "student"\n'
# mha written by hand, except that the attention itself comes from a helper.py handed in beside the notebook
HELPER = """import math


def attend(q, k, v, mask=None):
    att = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        att = att.masked_fill(mask, float("-inf"))
    att = att.softmax(dim=-1)
    return att @ v, att
"""
HAND_WRITTEN = """        att = q @ k.transpose(-2, -1) / math.sqrt(d_k)
        if mask is not None:
            att = att.masked_fill(mask, float("-inf"))
        att = att.softmax(dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, d)
"""
assert HAND_WRITTEN in MHA
MHA_FROM_HELPER = "import helper\n" + MHA.replace(
    HAND_WRITTEN, "        out, att = helper.attend(q, k, v, mask)\n        y = out.transpose(1, 2).contiguous().view(B, T, d)\n")
SHOW_VIZ = f'import os, w1d1_viz\nprint("{VIZ_MARK}", getattr(w1d1_viz, "ORIGIN", "release"), sorted(os.listdir(".")))\n'

FORK_BOMB = "import os\nfor _ in range(64):\n    os.fork()\n"
POOL = 'import multiprocessing\nwith multiprocessing.get_context("fork").Pool(1) as _pool:\n    assert _pool.map(abs, [-1]) == [1]\n'
SUBPROCESS = 'import subprocess, sys\nassert subprocess.run([sys.executable, "-c", "pass"]).returncode == 0\n'
SYSTEM = 'import os\nassert os.system("true") == 0\n'
THREADS = '''
import threading, torch
_seen = []
_t = threading.Thread(target=_seen.append, args=(1,))
_t.start(); _t.join()
assert _seen == [1]
torch.set_num_threads(2)
_m = torch.ones(400, 400)
assert float((_m @ _m)[0, 0]) == 400.0
torch.set_num_threads(1)
'''


def _nb04(**answers):
    nb = nbformat.read(RELEASE_DIR / ASSIGNMENT / f"{NB04}.ipynb", as_version=4)
    answers = {"split_merge_heads": SPLIT_MERGE, "mha": MHA, **answers}
    for gid, src in answers.items():
        gc.cell(nb, gid).source = src
    return nb


def _nb01(**answers):
    return gc.solved(**{gid: src + gc._answers()[gid] for gid, src in answers.items()})


STUDENTS = {
    "proc_honest": ({NB04: _nb04()}, {}),
    "proc_forker": ({NB04: _nb04(mha=MHA_FORKED)}, {}),
    "proc_threader": ({NB04: _nb04(mha=MHA_IN_THREAD)}, {}),
    # honest (red team round 6): torch's own pool, started by the student's set_num_threads at a check's first matmul
    "proc_torch_pool": ({NB04: _nb04(mha="import torch\ntorch.set_num_threads(2)\n" + MHA)}, {}),
    "proc_extras": ({NB04: _nb04(split_merge_heads=SHOW_VIZ + SPLIT_MERGE, mha=MHA_FROM_HELPER)},
               {"helper.py": HELPER, "w1d1_viz.py": STUDENT_VIZ}),
    "proc_bomb": ({NB01: _nb01(softmax=FORK_BOMB, self_attention=THREADS)}, {}),
    "proc_procs": ({NB01: _nb01(softmax=POOL, self_attention=SUBPROCESS)}, {}),
    "proc_system": ({NB01: _nb01(score_diagnostics=SYSTEM)}, {}),
}


def max_points(notebook, exercise):
    nb = nbformat.read(SOURCE_DIR / ASSIGNMENT / f"{notebook}.ipynb", as_version=4)
    total = 0.0
    for c in nb.cells:
        meta = c.metadata.get("nbgrader", {})
        gid = meta.get("grade_id", "")
        if meta.get("grade") and c.cell_type == "code" and (gid == f"test_{exercise}" or gid.startswith(f"test_{exercise}__")):
            total += float(meta.get("points", 0))
    assert total > 0, (notebook, exercise)
    return total


def points(graded, student, notebook, exercise):
    got = [s for (sid, nb, gid), s in graded.scores.items() if sid == student and nb == notebook
           and (gid == f"test_{exercise}" or gid.startswith(f"test_{exercise}__"))]
    assert got, (graded.path, student, notebook, exercise, graded.log[-3000:])
    return sum(got)


def full(graded, student, notebook, exercise):
    return points(graded, student, notebook, exercise) == max_points(notebook, exercise)


def build(root):
    """This file's students (proc_*), graded in the shared attack class (tests/shared_class.py)."""
    for student, (notebooks, files) in STUDENTS.items():
        folder = root / student
        folder.mkdir()
        for name, nb in notebooks.items():
            nbformat.write(nb, folder / f"{name}.ipynb")
        for name, text in files.items():
            (folder / name).write_text(text, encoding="utf-8")


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    graded = attack_class(tmp_path_factory)
    for g in graded.values():
        assert g.returncode == 0, g.log[-3000:]
    return graded


# ---------------------------------------------------------------- the filter itself (fast)

CONFINED = textwrap.dedent('''
    import os, subprocess, sys, threading
    found = {}
    try:
        os.fork(); found["fork"] = "forked"
    except OSError as exc:
        found["fork"] = type(exc).__name__
    try:
        subprocess.run(["true"]); found["subprocess"] = "ran"
    except OSError as exc:
        found["subprocess"] = type(exc).__name__
    found["system"] = os.system("true")
    seen = []
    t = threading.Thread(target=seen.append, args=(1,)); t.start(); t.join()
    found["thread"] = seen
    import torch
    torch.set_num_threads(2)
    m = torch.ones(300, 300); (m @ m).sum()
    found["tasks"] = len(os.listdir("/proc/self/task"))
    found["cwd"] = sorted(os.listdir("."))
    print(repr(found))
''')


def test_confined_python_has_threads_but_no_processes(tmp_path):
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    kernel_view.fill_inbox(RELEASE_DIR / ASSIGNMENT, inbox)
    run = subprocess.run(bwrap.bwrap_command([sys.executable, "-c", CONFINED], bwrap.Folders(inbox)),
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    found = eval(run.stdout.strip().splitlines()[-1])
    assert found["fork"] == "PermissionError" and found["subprocess"] == "PermissionError", found
    assert found["system"] != 0, found
    assert found["thread"] == [1] and found["tasks"] >= 2, found  # Python threads and torch's own
    # the working folder: the release's files (the companion script and the reference as stubs)
    released = sorted(p.name for p in (RELEASE_DIR / ASSIGNMENT).iterdir() if p.is_file())
    assert found["cwd"] == sorted({*released, *(f"{m}.py" for m in COMPANIONS)}), found


def test_program_is_built_for_known_machines_only(monkeypatch):
    from autograder.kernels import no_processes

    for name in ("x86_64", "aarch64"):
        prog = no_processes.program(name)
        assert prog and len(prog) % 8 == 0  # struct sock_filter[]
    assert no_processes.program("x86_64") != no_processes.program("aarch64")
    monkeypatch.setattr(no_processes.platform, "machine", lambda: "riscv64")
    with pytest.raises(no_processes.UnsupportedArch, match="riscv64"):
        no_processes.program()
    with pytest.raises(SandboxUnavailable, match="seccomp"):
        bwrap.bwrap_command(["/usr/bin/true"], uid=False)


def test_kernel_folder_is_filled_from_the_release(tmp_path):
    """Whatever folder nbgrader starts the kernel in, the kernel sees the release's files only."""
    (tmp_path / "helper.py").write_text("X = 1\n")
    (tmp_path / "w1d1_viz.py").write_text("ORIGIN = 'student'\n")

    async def listing():
        km = kernel_manager.SandboxKernelManager()
        await km.start_kernel(cwd=str(tmp_path))
        kc = km.client()
        kc.start_channels()
        try:
            await kc.wait_for_ready(timeout=120)
            msg_id = kc.execute("import os, w1d1_viz; print(sorted(os.listdir('.')), getattr(w1d1_viz, 'ORIGIN', 'release'))")
            text = []
            while True:
                msg = await kc.get_iopub_msg(timeout=120)
                if msg["parent_header"].get("msg_id") != msg_id:
                    continue
                if msg["msg_type"] == "stream":
                    text.append(msg["content"]["text"])
                if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                    return "".join(text)
        finally:
            kc.stop_channels()
            await km.shutdown_kernel(now=True)

    text = asyncio.run(listing())
    assert "helper.py" not in text and "'student'" not in text and text.strip().endswith("release"), text
    assert f"{NB04}.ipynb" in text and "w1d1_viz.py" in text


# ---------------------------------------------------------------- graded, both entry points


@pytest.mark.parametrize("path", ENTRY_POINTS)
def test_attention_in_a_forked_child_earns_nothing(both, path):
    g = both[path]
    assert points(g, "proc_forker", NB04, "mha") == 0
    # past the static check: the sandbox refuses the fork itself, and only mha, whose cell forks, loses its points
    assert full(g, "proc_forker", NB04, "split_merge_heads")
    assert "评分检查机制" not in html.unescape(g.page("proc_forker", NB04))
    assert full(g, "proc_honest", NB04, "mha") and full(g, "proc_honest", NB04, "split_merge_heads")


@pytest.mark.parametrize("path", ENTRY_POINTS)
def test_files_beside_the_notebook_are_not_in_the_kernel(both, path):
    g = both[path]
    printed = g.graded_text("proc_extras", NB04)  # what the kernel printed (the page shows only the verdicts)
    assert points(g, "proc_extras", NB04, "mha") == 0
    assert "No module named" in printed and "helper" in printed
    assert f"{VIZ_MARK} release" in printed and f"{VIZ_MARK} student" not in printed
    # a module the grading environment lacks is code the static check cannot read (round 6): the notebook scores 0
    assert points(g, "proc_extras", NB04, "split_merge_heads") == 0 and "helper" in html.unescape(g.page("proc_extras", NB04))


@pytest.mark.parametrize("path", ENTRY_POINTS)
@pytest.mark.parametrize("student, lost", [("proc_bomb", {"softmax"}), ("proc_procs", {"softmax", "self_attention"}),
                                           ("proc_system", {"score_diagnostics"})])
def test_processes_cost_their_own_exercise(both, path, student, lost):
    """A fork bomb ends at its first fork, multiprocessing and subprocess raise PermissionError, os.system
    fails: each costs its own exercise. The bomb's next answer uses Python and torch threads: full marks."""
    g = both[path]
    for exercise in exercises_of(NB01):
        if exercise in lost:
            assert points(g, student, NB01, exercise) == 0, exercise
        else:
            assert full(g, student, NB01, exercise), exercise
    if student != "proc_system":
        assert "PermissionError" in g.graded_text(student, NB01)


@pytest.mark.parametrize("path", ENTRY_POINTS)
def test_mha_thread_rule_is_unchanged(both, path):
    """A thread in mha still costs mha (the torch modes see one thread); split_merge_heads keeps its points."""
    g = both[path]
    assert points(g, "proc_threader", NB04, "mha") == 0
    assert full(g, "proc_threader", NB04, "split_merge_heads")
    assert "别的线程" in (g.page("proc_threader", NB04) or "")


@pytest.mark.parametrize("path", ENTRY_POINTS)
def test_torch_threads_are_not_the_students(both, path):
    """torch.set_num_threads(2) in the answer cell: torch starts its pool during the check; its threads run no
    Python, so they are not threads the student started (mha keeps its points)."""
    g = both[path]
    assert full(g, "proc_torch_pool", NB04, "mha") and full(g, "proc_torch_pool", NB04, "split_merge_heads")
