"""Reading a class's submissions before grading: what is there, what is wrong, what was changed.

Each problem becomes a Chinese note for the student's feedback and the instructor's summary;
nothing here stops the rest of the class from being graded. Only regular files are read, never
through a symlink: links, devices, FIFOs and oversized files are refused (a note, that notebook 0).
"""
import copy
import hashlib
import math
import os
import re
import shutil
import stat
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from .course import ASSIGNMENT, RELEASE_DIR, SOURCE_DIR
from .notes import Note, about_notebook, printable

MAX_FILE_BYTES = 20 * 2**20        # one submitted file
MAX_DEPTH = 16                     # folder levels read inside a student folder
MAX_CELLS = 2000                   # the released notebooks have about a hundred
QUIET = {"timestamp.txt", "submission_secret.txt"}  # nbgrader's own bookkeeping
# the nbgrader cell metadata this course writes, with the types nbgrader expects
META_TYPES = {"grade": bool, "solution": bool, "locked": bool, "task": bool, "grade_id": str,
              "points": (int, float), "schema_version": int, "cell_type": str, "checksum": str}
GRADE_ID = re.compile(r"^[A-Za-z0-9_\-]{1,100}$")
CELL_ID = re.compile(r"^[A-Za-z0-9\-_]{1,64}$")


@dataclass
class Submission:
    student: str
    notebooks: dict = field(default_factory=dict)   # notebook name -> path of a readable copy
    broken: dict = field(default_factory=dict)      # notebook name -> why it could not be read
    notes: list = field(default_factory=list)      # Note(notebook or None, text)


@dataclass
class Entry:
    rel: str            # path inside the student folder, as printable text (notes.printable)
    kind: str           # "file", "symlink", "special", "big", "deep"
    path: Path


def _kind(st):
    if stat.S_ISLNK(st.st_mode):
        return "symlink"
    if not stat.S_ISREG(st.st_mode):
        return "special"
    return "big" if st.st_size > MAX_FILE_BYTES else "file"


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
                found.append(Entry(rel, _kind(st), Path(e.path)))
            elif depth >= MAX_DEPTH:
                found.append(Entry(rel + "/", "deep", Path(e.path)))
            elif e.name != ".ipynb_checkpoints":
                folders.append((Path(e.path), rel + "/", depth + 1))
        todo += reversed(folders)
    return sorted(found, key=lambda e: e.rel)


def read_bytes(path):
    """A regular file's bytes, refusing links and special files even if swapped in after scan()."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise OSError("不是普通文件")
        data = fh.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise OSError(f"超过 {MAX_FILE_BYTES // 2**20} MB")
    return data


def fingerprint(folder):
    """Content hash of everything a student handed in ({relative path: digest}); changes when any file does."""
    prints = {}
    for e in scan(folder):
        if e.kind == "file":
            try:
                prints[e.rel] = hashlib.sha256(read_bytes(e.path)).hexdigest()
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
            notes.append(f"`{printable(e.name)}` 是符号链接，不是学生文件夹，已拒绝（不跟随链接）。")
        else:
            notes.append(f"`{printable(e.name)}` 不是文件夹，已忽略（每个学生一个子文件夹）。")
    return folders, notes


def _read(path):
    try:
        nb = nbformat.reads(read_bytes(path).decode("utf-8"), as_version=4)
        nbformat.validate(nb)
        if len(nb.cells) > MAX_CELLS:
            raise ValueError(f"有 {len(nb.cells)} 个单元格，超过上限 {MAX_CELLS}")
        return nb, None
    except Exception as exc:  # any unreadable file: bad JSON, bad UTF-8, too deep, wrong schema …
        return None, f"{type(exc).__name__}: {str(exc)[:200]}"


def _meta_problem(meta):
    """Why a cell's nbgrader metadata is unusable (None when it is fine)."""
    if not isinstance(meta, dict):
        return f"不是字典而是 {type(meta).__name__}"
    for key, value in meta.items():
        want = META_TYPES.get(key)
        if want is None:
            return f"多了未知字段 `{str(key)[:40]}`"
        if not isinstance(value, want) or (want is not bool and isinstance(value, bool)):
            return f"字段 `{key}` 的类型错了"
    if "grade_id" in meta and not GRADE_ID.match(meta["grade_id"]):
        return "grade_id 不合法"
    if "points" in meta and not (math.isfinite(meta["points"]) and 0 <= meta["points"] <= 1000):
        return "points 不合法"
    if any(meta.get(k) for k in ("grade", "solution", "locked", "task")) and "grade_id" not in meta:
        return "缺少 grade_id"
    return None


def _nbgrader_problem(cell):
    """What nbgrader's own cell-metadata validator says (missing keys, markdown grade cells …)."""
    from nbgrader.nbgraderformat import MetadataValidator

    try:
        MetadataValidator().validate_cell(cell)
    except Exception as exc:
        return f"nbgrader 拒绝：{type(exc).__name__}"
    return None


def normalise(name, nb, release):
    """Make `nb` safe for nbgrader: well-typed nbgrader metadata, unique cell ids, the course's kernel.
    A cell carrying a released grade_id gets the released metadata back (nbgrader restores its type and
    source); a grade_id this notebook does not have (a cell pasted from another notebook) makes a plain
    student cell; any other broken nbgrader metadata is dropped (nbgrader then restores protected cells).
    Returns notes."""
    notes = []
    released = {_grade_id(c): c.metadata["nbgrader"] for c in release.cells if _grade_id(c)}
    nb.metadata = nbformat.from_dict({k: release.metadata[k] for k in ("kernelspec", "language_info")
                                      if k in release.metadata})
    for i, cell in enumerate(nb.cells):
        if "nbgrader" in cell.metadata:
            why = _meta_problem(cell.metadata["nbgrader"])
            gid = None if why else cell.metadata["nbgrader"].get("grade_id")
            if gid in released:
                cell.metadata["nbgrader"] = copy.deepcopy(released[gid])
            elif gid is not None:  # pasted from another notebook, or made up: nbgrader would choke on it
                del cell.metadata["nbgrader"]
                notes.append(f"{name}：第 {i + 1} 个单元格标着本笔记本没有的题目 `{gid}`，"
                             "已当作你自己添加的普通单元格（内容保留，评分时不运行）。")
                continue
            elif not why:
                why = _nbgrader_problem(cell)
            if why:
                del cell.metadata["nbgrader"]
                notes.append(f"{name}：第 {i + 1} 个单元格的 nbgrader 元数据被改坏了（{why}），已忽略这份元数据。")
    seen_ids = set()
    for cell in nb.cells:
        cid = cell.get("id")
        if not isinstance(cid, str) or not CELL_ID.match(cid) or cid in seen_ids:
            cid = cell["id"] = uuid.uuid4().hex[:16]
        seen_ids.add(cid)
    return notes


def join_split_answers(name, nb):
    """Join every copy of an answer cell (JupyterLab's "split cell" copies the metadata onto both
    halves) into the first, in notebook order, so grading runs what ran at home. `nb` normalised."""
    notes, first, kept = [], {}, []
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        head = first.setdefault(meta.get("grade_id"), cell) if meta.get("solution") else cell
        if head is cell or head.cell_type != cell.cell_type:
            kept.append(cell)
            continue
        head.source = head.source.rstrip("\n") + "\n\n" + cell.source
        notes.append(f"{name}：答案单元格 `{meta['grade_id']}` 被拆成了几个单元格，评分时按顺序合并成一个。")
    nb.cells = kept
    return list(dict.fromkeys(notes))


def _grade_id(cell):
    return cell.metadata.get("nbgrader", {}).get("grade_id")


def _grade_ids(nb):
    return [_grade_id(c) for c in nb.cells if "nbgrader" in c.metadata]


def tamper_notes(name, nb, source):
    """What changed in the locked and test cells, compared with the source notebook (`nb` normalised)."""
    protected = {_grade_id(c): c for c in source.cells
                 if c.metadata.get("nbgrader", {}).get("locked") or
                 (c.metadata.get("nbgrader", {}).get("grade") and not c.metadata["nbgrader"].get("solution"))}
    seen = {}
    for cell in nb.cells:
        gid = _grade_id(cell)
        if gid:
            seen.setdefault(gid, []).append(cell)
    notes = []
    for gid, cells in seen.items():
        if len(cells) > 1:
            notes.append(f"{name}：单元格 `{gid}` 出现了 {len(cells)} 次，只按第一个评分。")
    for gid, src_cell in protected.items():
        if not gid.startswith("test_") and src_cell.cell_type == "markdown":
            continue
        cells = seen.get(gid)
        if not cells:
            notes.append(f"{name}：锁定单元格 `{gid}` 被删除了，评分时已按原样恢复。")
        elif cells[0].cell_type != src_cell.cell_type:
            notes.append(f"{name}：锁定单元格 `{gid}` 的类型被改成了 {cells[0].cell_type}，评分时已恢复。")
        elif cells[0].source.strip() != src_cell.source.strip() and not gid.startswith("test_"):
            notes.append(f"{name}：锁定单元格 `{gid}` 被修改了，评分时已恢复原样。")
        elif gid.startswith("test_") and _public_part(cells[0].source) != _public_part(src_cell.source):
            notes.append(f"{name}：测试单元格 `{gid}` 被修改了，评分时已恢复原样。")
    return notes


def _public_part(source):
    out, hidden = [], False
    for line in source.splitlines():
        if "BEGIN HIDDEN TESTS" in line:
            hidden = True
        elif "END HIDDEN TESTS" in line:
            hidden = False
        elif not hidden and not line.startswith("# 隐藏检查"):
            out.append(line.rstrip())
    return "\n".join(out).strip()


def _dedupe(nb):
    """Keep the first cell of each grade_id; later copies lose their nbgrader metadata."""
    seen = set()
    for cell in nb.cells:
        gid = _grade_id(cell)
        if gid in seen:
            del cell.metadata["nbgrader"]
            if cell.cell_type == "code":
                cell.source = "# （重复的单元格，已忽略）"
        elif gid:
            seen.add(gid)
    return nb


def _notebooks(folder, known):
    return {n: nbformat.read(folder / ASSIGNMENT / f"{n}.ipynb", as_version=4) for n in known}


REFUSED = {"symlink": "是符号链接", "special": "不是普通文件（设备、FIFO 或套接字）",
           "deep": f"所在的文件夹超过 {MAX_DEPTH} 层，没有读取",
           "big": f"超过 {MAX_FILE_BYTES // 2**20} MB"}


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
        sub.notes.append(Note(None, f"读取提交时出错（{type(exc).__name__}: {str(exc)[:200]}），无法读取的笔记本记 0 分，请联系助教。"))
    return sub


def _read_into(sub, folder, known, dest):
    dest.mkdir(parents=True, exist_ok=True)
    sources, releases = _notebooks(SOURCE_DIR, known), _notebooks(RELEASE_DIR, known)
    source_ids = {n: set(_grade_ids(nb)) for n, nb in sources.items()}
    entries = scan(folder)
    quiet = QUIET | {p.name for p in (RELEASE_DIR / ASSIGNMENT).iterdir()}
    chosen = graded_copies(entries, known)
    taken = set(chosen)
    # notebooks under their own names first: a renamed copy never takes the place of the real one
    for e in sorted(entries, key=lambda e: Path(e.rel).stem not in chosen):
        name = Path(e.rel).stem
        if name in chosen and e.rel.endswith(".ipynb") and chosen[name] is not e:
            sub.notes.append(Note(name, f"`{e.rel}` 和 `{chosen[name].rel}` 同名：评分的是离提交文件夹最近的 "
                                        f"`{chosen[name].rel}`，这一份没有评分。"))
            continue
        if e.kind != "file":
            ours = e.rel.endswith(".ipynb") and name in known
            sub.notes.append(Note(name if ours else None,
                                  f"`{e.rel}` {REFUSED[e.kind]}，已拒绝" + ("，这本笔记本记 0 分。" if e.rel.endswith(".ipynb") else "。")))
            if ours:
                sub.broken[name] = REFUSED[e.kind]
            continue
        if not e.rel.endswith(".ipynb"):
            if e.path.name not in quiet:  # nbgrader's bookkeeping and the files the release ships
                sub.notes.append(Note(None, f"忽略了不是笔记本的文件 `{e.rel}`（评分只看笔记本）。"))
            continue
        try:
            _take_notebook(sub, e, name, taken, known, (sources, releases), source_ids, dest)
        except Exception as exc:  # one notebook's surprise costs that notebook only
            target = name if name in known else None
            if target:
                sub.notebooks.pop(target, None)
                sub.broken[target] = f"{type(exc).__name__}"
            sub.notes.append(Note(target, f"`{e.rel}` 无法处理（{type(exc).__name__}: {str(exc)[:200]}），这本笔记本记 0 分。"))
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


def _take_notebook(sub, e, name, taken, known, courses, source_ids, dest):
    """Read one notebook file into `dest`; a file under another name is taken as a renamed notebook when its
    cells are one notebook's and no file carries that notebook's name (`taken`)."""
    sources, releases = courses
    nb, error = _read(e.path)
    if name not in known:
        ids = set(_grade_ids(nb)) if nb is not None else set()
        match = [n for n in known if nb is not None and source_ids[n] and source_ids[n] <= ids | {None}]
        renamed = nb is not None and len(match) == 1 and match[0] not in taken
        if len(match) == 1 and not renamed:
            sub.notes.append(Note(match[0], f"`{e.rel}` 的内容是 `{match[0]}.ipynb`，但提交里已有这个名字的文件，"
                                            "评分的是那一份；这一份没有评分。"))
            return
        if not renamed:
            sub.notes.append(Note(None, f"`{e.rel}` 不是本次作业的笔记本（文件名应为 "
                                  + "、".join(f"{n}.ipynb" for n in known) + "），已忽略。"))
            return
        sub.notes.append(Note(match[0], f"`{e.rel}` 被改了名，按内容认作 `{match[0]}.ipynb` 评分；以后请保留原文件名。"))
        name = match[0]
        taken.add(name)
    if nb is None:
        sub.broken[name] = error
        sub.notes.append(Note(name, f"`{e.rel}` 无法读取（文件损坏或不是合法的笔记本：{error}），这本笔记本记 0 分。"))
        return
    sub.notes += about_notebook(name, normalise(name, nb, releases[name]) + join_split_answers(name, nb)
                                + tamper_notes(name, nb, sources[name]))
    target = dest / f"{name}.ipynb"
    nbformat.write(_dedupe(nb), target)
    sub.notebooks[name] = target
    sub.broken.pop(name, None)


def reset(folder):
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
