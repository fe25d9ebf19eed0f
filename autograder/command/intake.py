"""Reading a class's folder before grading (the grading command's part; notebooks are repaired in
nbgrader's chain, autograder/chain/intake_chain.py, on every path): which file is each student's notebook.

Each problem becomes a Chinese note for the student's feedback and the instructor's summary;
nothing here stops the rest of the class from being graded. Only regular files are read, never
through a symlink: links, devices, FIFOs and oversized files are refused (a note, that notebook 0).
"""
import hashlib
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from autograder.chain import repair
from autograder.chain.intake_chain import REFUSED, copy_regular, course_notebook, file_kind, open_regular, read_notebook
from autograder.course import ASSIGNMENT, RELEASE_DIR, SOURCE_DIR
from autograder.notes import Note, printable, quoted

MAX_DEPTH = 16                     # folder levels read inside a student folder
QUIET = {"timestamp.txt", "submission_secret.txt"}  # nbgrader's own bookkeeping


@dataclass
class Submission:
    student: str
    notebooks: dict = field(default_factory=dict)   # notebook name -> path of a readable copy
    broken: dict = field(default_factory=dict)      # notebook name -> why it could not be read
    notes: list = field(default_factory=list)      # Note(notebook or None, text)


@dataclass
class Entry:
    rel: str            # path inside the student folder, as printable text (notes.printable)
    kind: str           # "file", "symlink", "special", "big", "huge" (a notebook), "deep"
    path: Path


def scan(folder):
    """Every entry under `folder`, without following any link (checkpoint folders skipped); a folder
    more than MAX_DEPTH levels down is one "deep" entry, not read."""
    found, todo = [], [(Path(folder), "", 0)]
    while todo:
        d, prefix, depth = todo.pop()
        with os.scandir(d) as it:
            listed = sorted(it, key=lambda e: e.name)
        folders = []
        for e in listed:
            rel = prefix + printable(e.name)
            st = e.stat(follow_symlinks=False)
            if not stat.S_ISDIR(st.st_mode):
                found.append(Entry(rel, file_kind(st, notebook=e.name.endswith(".ipynb")), Path(e.path)))
            elif depth >= MAX_DEPTH:
                found.append(Entry(rel + "/", "deep", Path(e.path)))
            elif e.name != ".ipynb_checkpoints":
                folders.append((Path(e.path), rel + "/", depth + 1))
        todo += reversed(folders)
    return sorted(found, key=lambda e: e.rel)


def fingerprint(folder):
    """Content hash of everything a student handed in ({relative path: digest}); changes when any file does."""
    prints = {}
    for e in scan(folder):
        if e.kind == "file":
            try:
                with open_regular(e.path) as fh:
                    prints[e.rel] = hashlib.file_digest(fh, "sha256").hexdigest()
            except OSError:
                prints[e.rel] = "unreadable"
        else:
            prints[e.rel] = e.kind
    return prints


def list_students(submissions):
    """(student folders, notes for the instructor about entries that are not one)."""
    folders, notes = [], []
    for e in sorted(os.scandir(submissions), key=lambda e: e.name):
        if e.name.startswith("."):
            continue
        st = e.stat(follow_symlinks=False)
        if stat.S_ISDIR(st.st_mode):
            folders.append(Path(e.path))
        elif stat.S_ISLNK(st.st_mode):
            notes.append(f"{quoted(e.name)} 是符号链接，不是学生文件夹，已拒绝（不跟随链接）。")
        else:
            notes.append(f"{quoted(e.name)} 不是文件夹，已忽略（每个学生一个子文件夹）。")
    return folders, notes


def _grade_ids(nb):
    return [repair.grade_id(c) for c in nb.cells if "nbgrader" in c.metadata]


DEEP = f"所在的文件夹超过 {MAX_DEPTH} 层，没有读取"


def read_submission(folder, known, dest):
    """Copy the readable notebooks of one student folder into `dest` (an nbgrader submitted/ folder).
    Never raises: whatever goes wrong with a notebook is a note and that notebook scores 0."""
    sub = Submission(folder.name)
    try:
        _read_into(sub, folder, known, Path(dest))
    except Exception as exc:  # an intake bug must cost this student only, and say so
        for name in known:
            if name not in sub.notebooks and (folder / f"{name}.ipynb").exists():
                sub.broken[name] = f"{type(exc).__name__}"
        why = f"{type(exc).__name__}: {printable(str(exc))[:200]}"
        sub.notes.append(Note(None, f"读取提交时出错（{why}），无法读取的笔记本记 0 分，请联系助教。"))
    return sub


def _read_into(sub, folder, known, dest):
    dest.mkdir(parents=True, exist_ok=True)
    source_ids = {n: set(_grade_ids(course_notebook(SOURCE_DIR, n))) for n in known}
    entries = scan(folder)
    quiet = QUIET | {p.name for p in (RELEASE_DIR / ASSIGNMENT).iterdir()}
    chosen = graded_copies(entries, known)
    taken = set(chosen)
    # notebooks under their own names first: a renamed copy never takes the place of the real one
    for e in sorted(entries, key=lambda e: Path(e.rel).stem not in chosen):
        name = Path(e.rel).stem
        if name in chosen and e.rel.endswith(".ipynb") and chosen[name] is not e:
            sub.notes.append(Note(name, f"{quoted(e.rel)} 和 {quoted(chosen[name].rel)} 同名：评分的是离提交文件夹最近的 "
                                        f"{quoted(chosen[name].rel)}，这一份没有评分。"))
            continue
        if e.kind != "file":
            ours = e.rel.endswith(".ipynb") and name in known
            end = "，这本笔记本记 0 分。" if e.rel.endswith(".ipynb") else "。"
            sub.notes.append(Note(name if ours else None, f"{quoted(e.rel)} {REFUSED.get(e.kind, DEEP)}，已拒绝" + end))
            if ours:
                sub.broken[name] = REFUSED.get(e.kind, DEEP)
            continue
        if not e.rel.endswith(".ipynb"):
            if e.path.name not in quiet:  # nbgrader's bookkeeping and the files the release ships
                sub.notes.append(Note(None, f"忽略了不是笔记本的文件 {quoted(e.rel)}（评分只看笔记本）。"))
            continue
        try:
            _take_notebook(sub, e, name, taken, source_ids, dest)
        except Exception as exc:  # one notebook's surprise costs that notebook only
            target = name if name in known else None
            if target:
                sub.notebooks.pop(target, None)
                sub.broken[target] = f"{type(exc).__name__}"
            why = f"{type(exc).__name__}: {printable(str(exc))[:200]}"
            sub.notes.append(Note(target, f"{quoted(e.rel)} 无法处理（{why}），这本笔记本记 0 分。"))
    if not entries:
        sub.notes.append(Note(None, "提交文件夹是空的。"))


def graded_copies(entries, known):
    """{notebook name: the entry graded under it}: of the files named `<name>.ipynb` anywhere in the
    folder, the one nearest its top (then the first by path). Backups in subfolders are not graded."""
    chosen = {}
    for e in sorted(entries, key=lambda e: (e.rel.count("/"), e.rel)):
        name = Path(e.rel).stem
        if e.rel.endswith(".ipynb") and name in known:
            chosen.setdefault(name, e)
    return chosen


def _take_notebook(sub, e, name, taken, source_ids, dest):
    """Copy one notebook file, byte for byte, into `dest` under its notebook's name: nbgrader's chain
    reads and repairs it there (autograder/chain/intake_chain.py; one over 20 MB without its outputs), as on every
    path. A file under another
    name is taken as a renamed notebook when its cells are one notebook's and no file carries that
    notebook's name (`taken`). `source_ids`: {notebook: its grade_ids}, for every notebook of the course."""
    known = list(source_ids)
    if name not in known:
        nb, _ = read_notebook(e.path)
        ids = set(_grade_ids(nb)) if nb is not None else set()
        match = [n for n in known if nb is not None and source_ids[n] and source_ids[n] <= ids | {None}]
        renamed = nb is not None and len(match) == 1 and match[0] not in taken
        if len(match) == 1 and not renamed:
            sub.notes.append(Note(match[0], f"{quoted(e.rel)} 的内容是 `{match[0]}.ipynb`，但提交里已有这个名字的文件，"
                                            "评分的是那一份；这一份没有评分。"))
            return
        if not renamed:
            sub.notes.append(Note(None, f"{quoted(e.rel)} 不是本次作业的笔记本（文件名应为 "
                                  + "、".join(f"{n}.ipynb" for n in known) + "），已忽略。"))
            return
        sub.notes.append(Note(match[0], f"{quoted(e.rel)} 被改了名，按内容认作 `{match[0]}.ipynb` 评分；以后请保留原文件名。"))
        name = match[0]
        taken.add(name)
    target = dest / f"{name}.ipynb"
    copy_regular(e.path, target)
    sub.notebooks[name] = target
    sub.broken.pop(name, None)
