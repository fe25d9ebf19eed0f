"""What a student kernel sees: the Python environment read-only (with the student package, which holds no answers)
and a private working folder: a size-capped tmpfs filled with copies of the course's released files (notebooks/w1d1/,
never the student's folder: nothing a student submitted beside the notebook is there to import or read). Nothing the
kernel writes there survives it, so the grader never reads or writes a file a kernel left behind. The companion script
and the reference implementation are not visible at all: there and wherever the grader's Python would find them, the
sandbox shows a stub.
"""
import functools
import importlib.util
import os
import shutil
import stat
import sys
from pathlib import Path

from w1d1_student.runner import COMPANION_STUB, COMPANIONS

from autograder.course import ASSIGNMENT, RELEASE_DIR, REPO
from autograder.errors import SandboxUnavailable

HOME = "/home/student"
WORKDIR = f"{HOME}/w1d1"                  # the kernel's working folder (tmpfs)
INBOX = f"{HOME}/.submission"             # read-only copies the working folder is filled from
RELEASED_FILES = RELEASE_DIR / ASSIGNMENT  # what fills the kernel's working folder, whatever the path
# the release's modules, imported before the first cell; then the working folder leaves the import path
RELEASED_MODULES = tuple(sorted(p.stem for p in RELEASED_FILES.glob("*.py")))
MAX_COPIED_FILE = 20 * 2**20
# what every graded kernel imports before the first cell, after the registry, on both paths (a kernel must look
# the same to the answers whichever path grades it): pyplot (every notebook's first cell imports it) and what
# torch imports at a kernel's first backward given a gradient (sympy). The grading command's kernels started
# ahead pay it while the notebooks before run.
AHEAD_IMPORTS = ("matplotlib.pyplot", "torch.fx.experimental.symbolic_shapes")


def _under(path, folder):
    return path == folder or path.startswith(folder.rstrip("/") + "/")


@functools.lru_cache(maxsize=1)
def python_layout():
    """(folders bound read-only at their real paths, [(path, its real path)] made as symlinks): what the
    interpreter needs, wherever it is and however it is reached (a venv through a symlink, a conda prefix, a
    standard library through links): its prefixes, its executable, and the folders of its own sys.path that lie
    in them (never the grader's additions, such as the repo). Raises SandboxUnavailable where a folder it needs
    holds the course: the sandbox would show the answers."""
    given = {os.path.abspath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)}
    on_path = {os.path.abspath(p) for p in sys.path if p and os.path.isdir(p)}
    needed = given | {p for p in on_path if any(_under(p, g) for g in given)}
    executable = os.path.abspath(sys.executable)
    reals = {os.path.realpath(p) for p in needed} | {os.path.dirname(os.path.dirname(os.path.realpath(executable)))}
    reals |= {os.path.dirname(lib) for lib in _loaded_libpython()}
    roots = []
    for real in sorted(reals):
        if not _under(real, "/usr") and not any(_under(real, r) for r in roots):
            roots.append(real)
    for root in roots:
        if _under(str(REPO), root):
            raise SandboxUnavailable(f"评分用的 Python 环境 {root} 包含课程文件夹 {REPO}：沙箱会让学生代码读到答案",
                                     "把虚拟环境建在课程文件夹里（make venv）或另一个不包含它的地方")
    links = []
    for path in sorted(needed | {executable}):
        real = os.path.realpath(path)
        if real != path and not any(_under(path, f) for f in [*roots, "/usr", *(p for p, _ in links)]):
            links.append((path, real))
    return roots, links


def _loaded_libpython():
    """The real path of the libpython this interpreter runs on, where it is a shared build (its run path may
    point outside its prefix)."""
    with open("/proc/self/maps") as maps:
        paths = {line.split(None, 5)[-1].strip() for line in maps if "/libpython" in line}
    return {os.path.realpath(p) for p in paths if os.path.basename(p).startswith("libpython") and os.path.isfile(p)}


def _python_roots():
    """Folders the interpreter needs (python_layout), bound at their real paths."""
    return python_layout()[0]


def hidden_paths():
    """Files of the companion script / reference that the sandbox would otherwise show.

    Computed in the grader's process: where its own import system finds those modules (an
    installed copy in site-packages included) and their compiled caches next to them."""
    found = set()
    dirs = {p for p in sys.path if p and os.path.isdir(p)}
    for name in COMPANIONS:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is not None:
            for p in (spec.origin, spec.cached):
                if p and os.path.exists(p):
                    found.add(os.path.realpath(p))
            for loc in spec.submodule_search_locations or []:
                found.add(os.path.realpath(loc))
            if spec.origin and os.path.isfile(spec.origin):
                dirs.add(os.path.dirname(spec.origin))
    for d in dirs:
        for name in COMPANIONS:
            for p in [Path(d) / f"{name}.py", Path(d) / name]:
                if p.exists():
                    found.add(os.path.realpath(p))
            cache = Path(d) / "__pycache__"
            if cache.is_dir():
                found.update(os.path.realpath(p) for p in cache.glob(f"{name}.*.pyc"))
    roots = _python_roots() + ["/usr"]
    return sorted(p for p in found if any(p == r or p.startswith(r + "/") for r in roots))


def fill_inbox(source, inbox):
    """Copy the regular files (no links, no devices, no folders) of `source`, the course's release
    (RELEASED_FILES), into `inbox`; the companion script and the reference become stubs. Returns the
    names copied."""
    inbox = Path(inbox)
    names = []
    for entry in sorted(os.scandir(source), key=lambda e: e.name) if source and os.path.isdir(source) else []:
        info = entry.stat(follow_symlinks=False)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_COPIED_FILE:
            continue
        if Path(entry.name).stem in COMPANIONS:
            continue
        fd = os.open(entry.path, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as src, open(inbox / entry.name, "wb") as dst:
            shutil.copyfileobj(src, dst)
        names.append(entry.name)
    for name in COMPANIONS:
        (inbox / f"{name}.py").write_text(COMPANION_STUB, encoding="utf-8")
    for p in [inbox, *inbox.iterdir()]:
        p.chmod(0o755 if p.is_dir() else 0o644)
    return names
