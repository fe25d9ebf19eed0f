"""Issue 11, graded through the real sandbox: a student who has read `autograder/`.

The kernel's folder is a private tmpfs (symlinks and files left there never reach the grader), the
companion script and the reference cannot be reached however a cell tries, correct answers in any
style keep their points, every output counts, and the limits hold as root.
"""
import csv
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from w1d1_student.wire import MIME

from autograder.command.grade import grade
from autograder.course import ASSIGNMENT, REPO
from autograder.kernels import bwrap, kernel_manager, kernel_view
from autograder.static import forbidden_calls
from tests import grading_class as gc

NB = gc.NB
ANSWERS = gc._answers()
SOFTMAX = ANSWERS["softmax"]
CHECKS = REPO / "solutions" / ASSIGNMENT / "w1day1_checks.py"
REFERENCE = REPO / "solutions" / "w1d1_attention.py"

# thin wrappers around the companion script's softmax, reached in the ways the issue lists
REACH = {
    "resolve_name": 'import pkgutil\n_W = pkgutil.resolve_name("w1day1_checks")',
    "getattr_import": 'import builtins\n_W = getattr(builtins, "__imp" + "ort__")("w1day1_checks")',
    "importlib": 'import importlib\n_W = importlib.import_module("w1day1_checks")',
    "runpy": f'import runpy, types\n_W = types.SimpleNamespace(**runpy.run_path({str(CHECKS)!r}))',
    "exec_file": ('import types, glob\n_W = types.SimpleNamespace()\n'
                  f'for _p in [{str(CHECKS)!r}, "w1day1_checks.py"] + glob.glob("/**/w1day1_checks.py", recursive=True):\n'
                  '    try:\n        exec(open(_p).read(), vars(_W)); break\n    except Exception:\n        pass'),
    "reference": f'import sys\nsys.path[:0] = [{str(REFERENCE.parent)!r}]\nimport w1d1_attention as _W',
}
WRAPPER = "\nimport numpy as np\ndef softmax(x, axis=-1):\n    return np.moveaxis(_W.softmax(np.moveaxis(x, axis, -1)), -1, axis)\n"
STASH = 'import builtins, sys\nimport w1day1_checks\nbuiltins._stash = sys.modules["w1day1_checks"]\n'


def correct_styles(nb):
    """Correct answers in styles the old checks rejected, plus the student's own scratch cells."""
    nb.cells[gc.index(nb, "softmax")].source = '''
import functools
import numpy as np
import torch


def _logged(fn):
    @functools.wraps(fn)
    def inner(*a, **k):
        return fn(*a, **k)
    return inner


@functools.lru_cache(maxsize=None)
def _shift_name(axis):
    return axis


@_logged
@torch.no_grad()
def softmax(x, axis=-1):
    z = x - np.max(x, axis=_shift_name(axis), keepdims=True)
    e = np.vectorize(np.exp, otypes=[float])(z)
    return e / np.sum(e, axis=axis, keepdims=True)
'''
    nb.cells[gc.index(nb, "self_attention")].source = ANSWERS["self_attention"].replace(
        "def self_attention", "import re, torch\n_PAT = re.compile('x')\n_net = torch.nn.Linear(2, 2).eval()\n"
        "_fast = torch.compile\n\ndef self_attention")
    gc.added(nb, "softmax", "%timeit softmax(np.ones((4, 4)))\n%matplotlib inline\nnp.einsum?\nprint(len(globals()))")
    gc.added(nb, "test_softmax", "%%time\nimport matplotlib.pyplot as plt\nplt.plot([1, 2]); plt.show()\nprint('scratch')")
    gc.added(nb, "test_self_attention", "raise ValueError('a broken scratch cell')")
    return nb


def hostile_fs(target, victim):
    """A symlink where nbgrader writes the executed notebook; links to another notebook, the
    reference and the gradebook; a big file. All in an answer cell (answer cells run while grading)."""
    return f'''
import os, pkgutil
print("CWD", os.getcwd(), "PYTHONPATH", os.environ.get("PYTHONPATH"))
print("MODULES", ",".join(sorted(m.name for m in pkgutil.iter_modules())))  # what the kernel can import
for name, dest in [("{NB}.ipynb", {str(target)!r}), ("02_scaled_dot_product.ipynb", {str(victim)!r}),
                   ("ref.py", {str(REFERENCE)!r}), ("gradebook.db", "../../../gradebook.db")]:
    try:
        os.remove(name)
    except OSError:
        pass
    os.symlink(dest, name)
with open("big.bin", "wb") as fh:
    fh.write(b"x" * (30 << 20))
print("LINKED", sorted(os.listdir(".")))
''' + SOFTMAX


def greedy():
    """Processes, threads, /tmp and the working folder, each pushed past its cap."""
    return '''
import os, subprocess, threading, time
procs = []
try:
    for _ in range(400):
        procs.append(subprocess.Popen(["sleep", "30"]))
except OSError:
    pass
print("PROCS", len(procs))
for p in procs:
    p.kill(); p.wait()
threads, stop = [], threading.Event()
try:
    for _ in range(300):
        t = threading.Thread(target=stop.wait, daemon=True); t.start(); threads.append(t)
except RuntimeError:
    pass
stop.set()
print("THREADS", len(threads))
try:
    open(os.environ["JUPYTER_RUNTIME_DIR"] + "/fill", "w").write("x")
    print("RUNTIME_WRITABLE")
except OSError:
    print("RUNTIME_BLOCKED")
for where in ("/tmp", ".", "/dev/shm"):
    written = 0
    try:
        for i in range(8):
            with open(f"{where}/fill{i}", "wb") as fh:
                for _ in range(100):
                    fh.write(b"\\0" * (1 << 20)); written += 1
    except OSError:
        pass
    print("FILLED", where, written)
    for i in range(8):
        try:
            os.remove(f"{where}/fill{i}")
        except OSError:
            pass
''' + ANSWERS["self_attention"]


def flood():
    """Displays that carry the probe's MIME type, and display updates that grow an earlier output."""
    return f'''
from IPython.display import display, update_display
for _ in range(6):
    display({{{MIME!r}: "{{}}", "text/html": "A" * 5_000_000}}, raw=True)
display({{"text/plain": "small"}}, raw=True, display_id="grow")
for _ in range(6):
    update_display({{"text/plain": "B" * 5_000_000}}, raw=True, display_id="grow")
''' + SOFTMAX


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    subs = tmp_path_factory.mktemp("class")
    out = tmp_path_factory.mktemp("out")
    target = tmp_path_factory.mktemp("host") / "target.txt"
    target.write_text("untouched")
    victim = subs / "honest" / "02_scaled_dot_product.ipynb"

    def put(student, nb):
        (subs / student).mkdir()
        nbformat.write(nb, subs / student / f"{NB}.ipynb")

    put("honest", gc.solved())
    nbformat.write(nbformat.read(REPO / "notebooks" / ASSIGNMENT / "02_scaled_dot_product.ipynb", as_version=4), victim)
    put("linker", gc.solved(softmax=hostile_fs(target, victim)))
    for way, code in REACH.items():
        put(f"reach_{way}", gc.solved(softmax=code + WRAPPER))
    put("reach_stash", gc.solved(softmax=SOFTMAX + STASH, self_attention="_W = _stash\n" + WRAPPER.replace(
        "def softmax", "def _sm") + ANSWERS["self_attention"].replace("softmax(", "_sm(").replace("def _sm(", "def _unused(")))
    put("stylist", correct_styles(gc.solved()))
    put("flooder", gc.solved(softmax=flood()))
    put("greedy", gc.solved(self_attention=greedy()))
    log = []
    grade(subs, out, jobs=2, timeout=60, seed=11, log=log.append)
    with open(out / "grades.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    scores = {}
    for r in rows:
        scores.setdefault(r["student_id"], {}).setdefault(r["notebook"], {})[r["grade_id"]] = (
            float(r["score"]), float(r["max_score"]))
    return {"out": out, "scores": scores, "log": "\n".join(log), "target": target, "victim": victim}


def points(graded, student, exercise, notebook=NB):
    cells = graded["scores"][student][notebook]
    got = [v for k, v in cells.items() if k == f"test_{exercise}" or k.startswith(f"test_{exercise}__")]
    return sum(g for g, _ in got), sum(m for _, m in got)


def full_marks(graded, student, exercise, notebook=NB):
    got, total = points(graded, student, exercise, notebook)
    return got == total > 0


def autograded(graded, student):
    return nbformat.read(graded["out"] / "nbgrader" / "autograded" / student / ASSIGNMENT / f"{NB}.ipynb",
                         as_version=4)


def text_of(nb):
    parts = []
    for c in nb.cells:
        for o in c.get("outputs", []):
            parts.append(str(o.get("text", "")) + str(o.get("evalue", "")) + str(o.get("data", {}).get("text/plain", "")))
    return "\n".join(parts)


def test_kernel_folder_is_private_and_forgotten(graded):
    """Finding 1: links and files a kernel leaves behind are never followed, copied or rendered."""
    out, student = graded["out"], "linker"
    assert graded["target"].read_text() == "untouched"
    assert nbformat.read(graded["victim"], as_version=4).cells  # the honest student's file is intact
    text = text_of(autograded(graded, student))
    assert "LINKED" in text  # the links were made, inside the sandbox
    for folder in (out / "nbgrader" / "autograded" / student, out / "nbgrader" / "feedback" / student,
                   out / "feedback" / student):
        for path in folder.rglob("*"):
            assert not path.is_symlink(), path
            assert path.stat().st_size < 2_000_000, path
            assert path.name not in ("big.bin", "ref.py", "gradebook.db", "02_scaled_dot_product.html"), path
    assert sorted(p.name for p in (out / "feedback" / student).iterdir()) == [f"{NB}.html"]
    fb = (out / "feedback" / student / f"{NB}.html").read_text()
    assert "BEGIN SOLUTION" not in fb
    assert full_marks(graded, student, "softmax")
    assert all(full_marks(graded, "honest", ex) for ex in gc.EXERCISES)
    # nothing in the kernel names the grader's disk
    cwd = re.search(r"CWD (\S+) PYTHONPATH (\S+)", text)
    assert cwd, text[:300]
    # the grader is not in the kernel at all, only the student package
    modules = re.search(r"MODULES (\S+)", text).group(1).split(",")
    assert "w1d1_student" in modules and "numpy" in modules and "autograder" not in modules, modules
    for seen in cwd.groups():
        assert str(REPO) not in seen and str(out) not in seen, seen


@pytest.mark.parametrize("way", sorted(REACH) + ["stash"])
def test_companion_script_and_reference_are_out_of_reach(graded, way):
    """Finding 3: a wrapper around the companion script's (or the reference's) function earns nothing."""
    exercise = "self_attention" if way == "stash" else "softmax"
    assert points(graded, f"reach_{way}", exercise)[0] == 0
    # a reference to the checking machinery (pkgutil.resolve_name, sys.modules) costs the whole notebook;
    # any other way costs only that exercise
    machinery = bool(forbidden_calls.machinery_uses(STASH if way == "stash" else REACH[way]))
    assert (points(graded, f"reach_{way}", "score_diagnostics")[0] == 0) is machinery


def test_correct_styles_and_scratch_cells_keep_every_point(graded):
    """Finding 4: decorators, eval/compile methods, magics, `?`, globals(), prints, plots, a broken
    scratch cell: full marks."""
    for ex in gc.EXERCISES:
        assert full_marks(graded, "stylist", ex), ex


def test_every_output_counts(graded):
    """Finding 5: the grader's own MIME type and display updates count; pages stay small."""
    nb_path = graded["out"] / "nbgrader" / "autograded" / "flooder" / ASSIGNMENT / f"{NB}.ipynb"
    assert nb_path.stat().st_size < 2_000_000
    assert (graded["out"] / "feedback" / "flooder" / f"{NB}.html").stat().st_size < 2_000_000
    assert "其余部分已丢弃" in text_of(autograded(graded, "flooder"))
    assert full_marks(graded, "flooder", "softmax")


def test_limits_hold_for_a_greedy_kernel(graded):
    """Finding 6: processes, threads, /tmp, the working folder and /dev/shm are capped, also as root."""
    text = text_of(autograded(graded, "greedy"))
    found = dict((k, int(v)) for k, v in re.findall(r"(PROCS|THREADS) (\d+)", text))
    assert found and found["PROCS"] < 300 and found["THREADS"] < 300, text[:500]
    filled = {w: int(n) for w, n in re.findall(r"FILLED (\S+) (\d+)", text)}
    assert filled["/tmp"] <= 256 and filled["."] <= 256 and filled["/dev/shm"] <= 64, filled
    assert "RUNTIME_BLOCKED" in text and "RUNTIME_WRITABLE" not in text
    assert points(graded, "honest", "self_attention")[0] > 0
    assert "沙箱限制" in graded["log"]


def test_hidden_modules_in_site_packages_show_a_stub(tmp_path, monkeypatch):
    """An installed companion script (site-packages) is replaced inside the sandbox, its cache too."""
    site = tmp_path / "site"
    (site / "__pycache__").mkdir(parents=True)
    (site / "w1day1_checks.py").write_text("SECRET = 42\ndef softmax(x):\n    return x\n")
    (site / "__pycache__" / "w1day1_checks.cpython-311.pyc").write_bytes(b"SECRET bytes")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(kernel_view, "_python_roots", lambda: [*_roots(), str(site)])
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    kernel_view.fill_inbox(None, inbox)
    probe = (f"import sys; sys.path.insert(0, {str(site)!r}); import w1day1_checks as w; "
             f"print(open(w.__file__).read()); print(open({str(site / '__pycache__' / 'w1day1_checks.cpython-311.pyc')!r}).read())")
    cmd = bwrap.bwrap_command([sys.executable, "-c", probe], bwrap.Folders(inbox))
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-800:]
    assert "SECRET" not in run.stdout and "评分时" in run.stdout


_ORIGINAL_ROOTS = kernel_view._python_roots


def _roots():
    return _ORIGINAL_ROOTS()


def test_inbox_takes_only_regular_files(tmp_path):
    src, inbox = tmp_path / "src", tmp_path / "inbox"
    src.mkdir()
    inbox.mkdir()
    (src / "a.ipynb").write_text("{}")
    (src / "w1day1_checks.py").write_text("SECRET = 1")
    os.symlink("/etc/passwd", src / "link.txt")
    os.mkfifo(src / "fifo")
    (src / "sub").mkdir()
    assert kernel_view.fill_inbox(src, inbox) == ["a.ipynb"]
    assert "SECRET" not in (inbox / "w1day1_checks.py").read_text()
    assert not (inbox / "link.txt").exists()


def test_limits_are_stated_at_start():
    line = bwrap.describe_limits()
    assert "沙箱限制" in line and "/tmp" in line and "进程数" in line
    if os.geteuid() == 0:
        assert bwrap.own_uid_works(), "as root the kernel must get a uid of its own"
        assert "非 root uid" in line



def test_memory_cap_counts_tmpfs_where_the_machine_allows(tmp_path):
    """150 MB in /tmp plus 100 MB of Python objects pass the address-space limit; a cgroup of 200 MB
    counts both and stops the kernel. Where no cgroup can be made, the start-up line says so."""
    from autograder.kernels import cgroup_limits

    if not cgroup_limits.available():
        assert "不生效" in bwrap.describe_limits()
        return
    group = cgroup_limits.MemoryCgroup.create(200 * 2**20)
    hog = ("open('/tmp/fill', 'wb').write(b'x' * (150 << 20)); b = bytearray(100 << 20); "
           "b[::4096] = b'y' * len(b[::4096]); print('SURVIVED')")
    try:
        cmd = group.wrap(bwrap.bwrap_command([sys.executable, "-c", hog]))
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    finally:
        group.remove()
    assert "SURVIVED" not in run.stdout and run.returncode != 0
    free = subprocess.run(bwrap.bwrap_command([sys.executable, "-c", hog]),
                          capture_output=True, text=True, timeout=120)
    assert "SURVIVED" in free.stdout  # the same program fits the other limits: the cgroup made the difference


def test_a_kernel_manager_leaves_no_folders(tmp_path, monkeypatch):
    """Socket folder and copies go away with the manager, also when its kernel never started."""
    import gc as garbage

    monkeypatch.setattr(kernel_manager.tempfile, "tempdir", str(tmp_path))
    km = kernel_manager.SandboxKernelManager()
    inbox = Path(kernel_manager.tempfile.mkdtemp(prefix="w1d1in-"))
    km._leftovers.append(inbox)
    assert sorted(p.name[:6] for p in tmp_path.iterdir()) == ["w1d1in", "w1d1r-"]  # the socket folder's parent
    assert km._socket_dir.parent.name.startswith("w1d1r-") and km._socket_dir.name.startswith("w1d1k-")
    del km
    garbage.collect()
    assert list(tmp_path.iterdir()) == []
