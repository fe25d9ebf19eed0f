"""Reading a class's submissions before grading: what is there, what is wrong, what was changed.

Each problem becomes a Chinese note for the student's feedback and the instructor's summary;
nothing here stops the rest of the class from being graded.
"""
import json
import shutil
from dataclasses import dataclass, field

import nbformat

from .course import ASSIGNMENT, RELEASE_DIR, SOURCE_DIR


@dataclass
class Submission:
    student: str
    notebooks: dict = field(default_factory=dict)   # notebook name -> path of a readable copy
    broken: dict = field(default_factory=dict)      # notebook name -> why it could not be read
    notes: list = field(default_factory=list)


def _grade_ids(nb):
    return [c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells if "nbgrader" in c.metadata]


def _read(path):
    try:
        with open(path, encoding="utf-8") as fh:
            nb = nbformat.read(fh, as_version=4)
        nbformat.validate(nb)
        return nb, None
    except (json.JSONDecodeError, nbformat.ValidationError, UnicodeDecodeError, KeyError, AttributeError, OSError) as exc:
        return None, f"{type(exc).__name__}: {str(exc)[:200]}"
    except Exception as exc:  # any other unreadable file
        return None, f"{type(exc).__name__}: {str(exc)[:200]}"


def tamper_notes(name, nb):
    """What changed in the locked and test cells, compared with the source notebook."""
    source = nbformat.read(SOURCE_DIR / ASSIGNMENT / f"{name}.ipynb", as_version=4)
    protected = {c.metadata["nbgrader"]["grade_id"]: c for c in source.cells
                 if c.metadata.get("nbgrader", {}).get("locked") or
                 (c.metadata.get("nbgrader", {}).get("grade") and not c.metadata["nbgrader"].get("solution"))}
    seen = {}
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
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
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if gid in seen:
            del cell.metadata["nbgrader"]
            if cell.cell_type == "code":
                cell.source = "# （重复的单元格，已忽略）"
        elif gid:
            seen.add(gid)
    return nb


def read_submission(folder, known, dest):
    """Copy the readable notebooks of one student folder into `dest` (an nbgrader submitted/ folder)."""
    sub = Submission(folder.name)
    dest.mkdir(parents=True, exist_ok=True)
    source_ids = {n: set(_grade_ids(nbformat.read(SOURCE_DIR / ASSIGNMENT / f"{n}.ipynb", as_version=4))) for n in known}
    files = sorted(p for p in folder.rglob("*") if p.is_file() and ".ipynb_checkpoints" not in p.parts)
    quiet = {"timestamp.txt", "submission_secret.txt"} | {p.name for p in (RELEASE_DIR / ASSIGNMENT).iterdir()}
    for path in files:
        if path.suffix != ".ipynb" and path.name in quiet:
            continue  # nbgrader's bookkeeping and the files the release ships
        if path.suffix != ".ipynb":
            sub.notes.append(f"忽略了不是笔记本的文件 `{path.relative_to(folder)}`（评分只看笔记本）。")
            continue
        name = path.stem
        nb, error = _read(path)
        if name not in known:
            match = [n for n in known if nb is not None and source_ids[n] and source_ids[n] <= set(_grade_ids(nb)) | {None}]
            if nb is not None and len(match) == 1 and match[0] not in sub.notebooks and not (folder / f"{match[0]}.ipynb").exists():
                sub.notes.append(f"`{path.name}` 被改了名，按内容认作 `{match[0]}.ipynb` 评分；以后请保留原文件名。")
                name = match[0]
            else:
                sub.notes.append(f"`{path.relative_to(folder)}` 不是本次作业的笔记本（文件名应为 "
                                 + "、".join(f"{n}.ipynb" for n in known) + "），已忽略。")
                continue
        if nb is None:
            sub.broken[name] = error
            sub.notes.append(f"`{path.name}` 无法读取（文件损坏或不是合法的笔记本：{error}），这本笔记本记 0 分。")
            continue
        sub.notes += tamper_notes(name, nb)
        target = dest / f"{name}.ipynb"
        nbformat.write(_dedupe(nb), target)
        sub.notebooks[name] = target
    if not files:
        sub.notes.append("提交文件夹是空的。")
    return sub


def reset(folder):
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
