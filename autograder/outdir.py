"""The output folder OUT as generations: a run writes a complete new generation aside, then swaps.

    OUT/.gen/<id>/   nbgrader/ (gradebook.db, submitted/, autograded/, feedback/), feedback/,
                     grades.csv, manual_grades.csv, totals.csv, state.json
    OUT/.current     symlink -> .gen/<id>: the one thing a run replaces, with os.replace (atomic)
    OUT/nbgrader, OUT/feedback, OUT/*.csv   fixed symlinks into .current/

Crash safety is write-aside-and-swap, not the gradebook's transactions: the gradebook, the CSV files
and the feedback pages change together in that single rename. A run killed (SIGKILL included)
before it leaves the previous generation current and untouched (files carried over are hard links,
and every file this run writes is a new file); a run killed after it has published a complete one.
Leftover generations are removed by the next run. The one exception is the first run over an OUT
written by an older version with real folders: those are moved aside one rename each.
"""
import fcntl
import hashlib
import json
import os
import shutil
import sqlite3
import time
from pathlib import Path

PUBLISHED = ("nbgrader", "feedback", "grades.csv", "manual_grades.csv", "totals.csv",
             "report.html", "diagnoses.csv", "exercise_stats.csv", "similarity.csv")
CURRENT = ".current"
GENERATIONS = ".gen"


class OutFolderBusy(RuntimeError):
    pass


def write_text(path, text):
    """Write a new file and rename it into place: never truncates a file shared by hard link."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    with open(tmp, "w", encoding="utf-8", newline="") as fh:
        fh.write(text)
    os.replace(tmp, path)


def link_tree(src, dest):
    """Carry a folder into the new generation as hard links (a copy where links are impossible)."""
    def link(s, d):
        try:
            os.link(s, d)
        except OSError:
            shutil.copy2(s, d)
    shutil.copytree(src, dest, copy_function=link, symlinks=True, dirs_exist_ok=True)


def _fsync(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class OutFolder:
    def __init__(self, out):
        self.out = Path(out).resolve()
        self.out.mkdir(parents=True, exist_ok=True)
        self._lock = None

    def lock(self):
        """One run at a time per OUT (released by unlock() or when the process ends)."""
        self._lock = open(self.out / ".lock", "w")
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            self.unlock()
            raise OutFolderBusy(f"另一个评分进程正在写 {self.out}") from exc

    def unlock(self):
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def previous(self):
        """The folder holding the current results (a generation, or an old-style OUT), or None."""
        current = self.out / CURRENT
        if current.is_symlink() and current.resolve().is_dir():
            return current.resolve()
        legacy = self.out / "nbgrader"
        if legacy.is_dir() and not legacy.is_symlink() and (legacy / "gradebook.db").exists():
            return self.out
        return None

    def new_generation(self):
        gens = self.out / GENERATIONS
        gens.mkdir(exist_ok=True)
        keep = self.previous()
        for old in gens.iterdir():  # what a killed run left behind
            if old != keep:
                shutil.rmtree(old, ignore_errors=True)
        gen = gens / f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
        gen.mkdir()
        return gen

    def publish(self, gen):
        """Make `gen` the current results with one atomic rename; then drop the previous generation."""
        for name in ("grades.csv", "manual_grades.csv", "totals.csv", "state.json", "nbgrader/gradebook.db"):
            if (gen / name).exists():
                _fsync(gen / name)
        previous = self.previous()
        tmp = self.out / f"{CURRENT}.new"
        if tmp.is_symlink():
            tmp.unlink()
        os.symlink(os.path.relpath(gen, self.out), tmp)
        os.replace(tmp, self.out / CURRENT)  # the swap
        self.link_published()
        if previous is not None and previous != self.out and previous != gen:
            shutil.rmtree(previous, ignore_errors=True)
        shutil.rmtree(self.out / GENERATIONS / "legacy", ignore_errors=True)

    def link_published(self):
        """OUT/<name> -> .current/<name> for every published name that is not a link yet."""
        for name in PUBLISHED:
            entry = self.out / name
            if entry.is_symlink():
                continue
            if entry.exists():  # an old-style OUT: its real files move aside once
                aside = self.out / GENERATIONS / "legacy"
                aside.mkdir(exist_ok=True)
                os.replace(entry, aside / name)
            os.symlink(f"{CURRENT}/{name}", entry)


def copy_gradebook(src, dest):
    """A consistent copy of an sqlite gradebook (sqlite's backup API, safe while others read it)."""
    with sqlite3.connect(src) as s, sqlite3.connect(dest) as d:
        s.backup(d)
    s.close()
    d.close()


def file_stamp(path):
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return [st.st_size, st.st_mtime_ns]


def read_state(folder):
    try:
        return json.loads((Path(folder) / "state.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def write_state(folder, state):
    write_text(Path(folder) / "state.json", json.dumps(state, ensure_ascii=False, indent=1, sort_keys=True))


def tree_hash(root, paths):
    """One digest over the names (relative to `root`) and bytes of the given files."""
    h = hashlib.sha256()
    for p in sorted(Path(p) for p in paths):
        h.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()
