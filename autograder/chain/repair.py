"""Repairs of one submitted notebook before nbgrader sees it, each with a note for the student.

Pure functions of (notebook, release, source): no files. `intake_chain.RepairSubmission` runs them as
the first step of nbgrader's own chain, so the grading command and `nbgrader autograde` (formgrader's
button included) repair every submission the same way.

- every string of the notebook is encodable (a lone surrogate becomes U+FFFD), every note printable;
- nbgrader metadata: well-typed, a released grade_id gets the released metadata back, a grade_id the
  notebook does not have makes a plain cell; metadata an editor stripped is recognised by cell id, or
  by the released signature line;
- copies of an answer cell (split or pasted) stay where they are and run there, as at home; copies
  of a test or locked cell are ignored; cell ids are unique; the kernel is the course's.
"""
import copy
import math
import re
import uuid

import nbformat
from w1d1_format import COPY_KEY, OWN_KEY, copy_of
from w1d1_student.cell_source import check_calls, tree

from autograder.notes import quoted

# the nbgrader cell metadata this course writes, with the types nbgrader expects
META_TYPES = {"grade": bool, "solution": bool, "locked": bool, "task": bool, "grade_id": str,
              "points": (int, float), "schema_version": int, "cell_type": str, "checksum": str}
GRADE_ID = re.compile(r"^[A-Za-z0-9_\-]{1,100}$")
CELL_ID = re.compile(r"^[A-Za-z0-9\-_]{1,64}$")
IGNORED_COPY = "# （重复的单元格，已忽略）"
TOO_DEEP = "这个单元格的代码嵌套太深，Python 在默认的递归上限下既读不了也运行不了它"


def encodable(value):
    """`value` (JSON data) with every lone surrogate, in keys and values alike, as U+FFFD."""
    if isinstance(value, str):
        return "".join("\ufffd" if 0xD800 <= ord(ch) <= 0xDFFF else ch for ch in value) if _has_surrogate(value) else value
    if isinstance(value, list):
        return [encodable(v) for v in value]
    if isinstance(value, dict):
        return {encodable(k): encodable(v) for k, v in value.items()}
    return value


def _has_surrogate(text):
    try:
        text.encode("utf-8")
        return False
    except UnicodeEncodeError:
        return True


def grade_id(cell):
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return meta.get("grade_id") if isinstance(meta, dict) else None


def _meta(cell):
    return cell.metadata.get("nbgrader", {})


def meta_problem(meta):
    """Why a cell's nbgrader metadata is unusable (None when it is fine)."""
    if not isinstance(meta, dict):
        return f"不是字典而是 {type(meta).__name__}"
    for key, value in meta.items():
        want = META_TYPES.get(key)
        if want is None:
            return f"多了未知字段 {quoted(str(key), 40)}"
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


def _clear_own_keys(nb):
    """Keys only the grader writes: whatever a student put there is dropped."""
    nb.metadata.pop(OWN_KEY, None)
    for cell in nb.cells:
        cell.metadata.pop(OWN_KEY, None)


def too_deep(source):
    """Whether Python cannot read `source` at its default recursion limit (an expression of tens of thousands of
    terms): nor could a kernel run it, unless code before it raised the limit."""
    try:
        tree(source)
        return False
    except RecursionError:
        return True


def unreadable_cells(name, nb):
    """Code cells too deep to read: an answer becomes a cell that raises (its exercise fails, as at home), any other
    cell (a scratch cell: grading never runs it) a comment. Read as it is, one such cell cost the whole notebook;
    left unread, an answer could hide what it calls from the static checks (a kernel with a raised limit runs it)."""
    notes = []
    for cell in nb.cells:
        if cell.get("cell_type") == "code" and isinstance(cell.get("source"), str) and too_deep(cell.source):
            meta = cell.get("metadata")
            meta = meta.get("nbgrader") if isinstance(meta, dict) else None
            answer = isinstance(meta, dict) and meta.get("solution") is True
            cell.source = f"raise RecursionError({TOO_DEEP!r})" if answer else f"# （{TOO_DEEP}，已换成这一行）"
            notes.append(f"{name}：{'答案' if answer else '一个'}单元格的代码嵌套太深，读不了，评分时换成了"
                         f"{'一个报错的单元格，这道题不得分' if answer else '一行注释（它本来也不参与评分）'}。")
    return notes


def restore_metadata(name, nb, release):
    """Well-typed nbgrader metadata on every cell, the released kernel. Returns notes."""
    notes = []
    released = {grade_id(c): c.metadata["nbgrader"] for c in release.cells if grade_id(c)}
    nb.metadata = nbformat.from_dict({k: release.metadata[k] for k in ("kernelspec", "language_info")
                                      if k in release.metadata})
    for i, cell in enumerate(nb.cells):
        if "nbgrader" not in cell.metadata:
            continue
        why = meta_problem(cell.metadata["nbgrader"])
        gid = None if why else cell.metadata["nbgrader"].get("grade_id")
        if gid in released:
            cell.metadata["nbgrader"] = copy.deepcopy(released[gid])
            continue
        if gid is not None:  # pasted from another notebook, or made up: nbgrader would choke on it
            del cell.metadata["nbgrader"]
            notes.append(f"{name}：第 {i + 1} 个单元格标着本笔记本没有的题目 `{gid}`，"
                         "已当作你自己添加的普通单元格（内容保留，评分时不运行）。")
            continue
        why = why or _nbgrader_problem(cell)
        if why:
            del cell.metadata["nbgrader"]
            notes.append(f"{name}：第 {i + 1} 个单元格的 nbgrader 元数据被改坏了（{why}），已忽略这份元数据。")
    return notes


def _signatures(source):
    """The top-level `def`/`class` lines of a cell, in order."""
    return [line.rstrip() for line in source.splitlines() if line.startswith(("def ", "class "))]


def _check_target(source):
    """The grade_id a test cell's first check("…") names, or None."""
    calls = check_calls(source)
    return None if not calls else "test_" + calls[0][0] + ("__hidden" if calls[0][1] else "")


def _answer_by_signature(cell, answers, present):
    """The answer (release cell) whose released signature lines all stand in `cell`, the one whose
    signature comes last when several do (helpers are defined first)."""
    lines = _signatures(cell.source)
    best, at = None, -1
    for gid, stub in answers.items():
        wanted = _signatures(stub.source)
        if gid not in present and wanted and all(w in lines for w in wanted):
            last = max(lines.index(w) for w in wanted)
            if last > at:
                best, at = stub, last
    return best


def recover_stripped(name, nb, release):
    """Cells whose nbgrader metadata an editor removed (Colab does), recognised by their cell id, or
    else by content: a locked or test cell by its released source, an answer by its released signature
    lines, a test by the check it calls."""
    present = {grade_id(c) for c in nb.cells if grade_id(c)}
    marked = [c for c in release.cells if grade_id(c)]
    by_id = {c.get("id"): c for c in marked}
    by_source = {}
    for c in marked:
        if not _meta(c).get("solution"):
            by_source.setdefault((c.cell_type, c.source.strip()), []).append(c)
    answers = {grade_id(c): c for c in marked if _meta(c).get("solution") and c.cell_type == "code"}
    by_check = {grade_id(c): c for c in marked if _meta(c).get("grade") and not _meta(c).get("solution")}
    found = {"id": 0, "content": 0}
    recovered, previous = {}, None
    for cell in nb.cells:
        before, previous = previous, cell
        if "nbgrader" in cell.metadata:
            continue
        match, how = by_id.get(cell.get("id")), "id"
        if match is None or grade_id(match) in present:
            same = by_source.get((cell.cell_type, cell.source.strip()), [])
            match, how = next((c for c in same if grade_id(c) not in present), None), "content"
        if (match is None or grade_id(match) in present) and cell.cell_type == "code":
            match = _answer_by_signature(cell, answers, present) or by_check.get(_check_target(cell.source))
        if match is None or match.cell_type != cell.cell_type or grade_id(match) in present:
            # the other half of a split answer, right after it (or after its other halves): runs in place
            half = _answer_by_signature(cell, {g: answers[g] for g in recovered if g in answers}, set())
            if half is not None and cell.cell_type == "code" and before is not None and \
                    (before is recovered.get(grade_id(half)) or copy_of(before) == grade_id(half)):
                cell.metadata[OWN_KEY] = {COPY_KEY: grade_id(half)}
            continue
        cell.metadata["nbgrader"] = copy.deepcopy(match.metadata["nbgrader"])
        present.add(grade_id(match))
        recovered[grade_id(match)] = cell
        found[how] += _meta(match).get("solution", False) or _meta(match).get("grade", False)
    notes = []
    if found["id"] or found["content"]:
        ways = "、".join(w for w, n in ((" 单元格 id ", found["id"]), ("内容（函数签名、检查调用）", found["content"])) if n)
        notes.append(f"{name}：{found['id'] + found['content']} 个答案或检查单元格的 nbgrader 元数据被编辑器删掉了"
                     f"（例如 Colab），已按{ways}认出并恢复，照常评分。")
    return notes


def answer_copies(name, nb, release):
    """Copies of an answer cell (JupyterLab's split cell, a pasted copy). The answer is the first cell of
    its grade_id with the released cell type; a code copy keeps its place and is marked to run there, as
    it ran at home; a written-answer copy is joined into the first; a copy of the other type (an old
    attempt kept as text) is a plain cell."""
    kinds = {grade_id(c): c.cell_type for c in release.cells if grade_id(c)}
    notes, first, kept = [], {}, []
    for cell in nb.cells:
        meta = _meta(cell)
        gid = meta.get("grade_id")
        if meta.get("solution") and cell.cell_type == kinds.get(gid, cell.cell_type) and gid not in first:
            first[gid] = cell
        head = first.get(gid) if meta.get("solution") else None
        if head is None or head is cell:
            if meta.get("solution") and head is None:  # the other type, before the answer itself
                del cell.metadata["nbgrader"]
                notes.append(f"{name}：答案单元格 `{gid}` 有一份被改成了 {cell.cell_type} 单元格，当作你自己的普通单元格（不运行）。")
            kept.append(cell)
            continue
        del cell.metadata["nbgrader"]
        if cell.cell_type == "code" and head.cell_type == "code":
            cell.metadata[OWN_KEY] = {COPY_KEY: gid}
            notes.append(f"{name}：答案单元格 `{gid}` 有几份（拆分或复制的单元格）：评分时每一份都在它原来的位置运行，"
                         "和在家从上到下运行时一样。")
        elif cell.cell_type == head.cell_type:
            head.source = head.source.rstrip("\n") + "\n\n" + cell.source
            notes.append(f"{name}：文字答案 `{gid}` 被拆成了几个单元格，评分时按顺序合并成一个。")
            continue
        else:
            notes.append(f"{name}：答案单元格 `{gid}` 有一份被改成了 {cell.cell_type} 单元格，当作你自己的普通单元格（不运行）。")
        kept.append(cell)
    nb.cells = kept
    return list(dict.fromkeys(notes))


def tamper_notes(name, nb, source):
    """What changed in the locked and test cells, compared with the source notebook."""
    protected = {grade_id(c): c for c in source.cells
                 if _meta(c).get("locked") or (_meta(c).get("grade") and not _meta(c).get("solution"))}
    seen = {}
    for cell in nb.cells:
        gid = grade_id(cell)
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


def drop_duplicates(nb):
    """Keep the first cell of each grade_id (the rule for every cell; nbgrader's DeduplicateIds keeps
    the last, so it must find none left); later copies lose their nbgrader metadata and do not run."""
    seen = set()
    for cell in nb.cells:
        gid = grade_id(cell)
        if gid in seen:
            del cell.metadata["nbgrader"]
            if cell.cell_type == "code":
                cell.source = IGNORED_COPY
        elif gid:
            seen.add(gid)


def restore_missing(name, nb, release):
    """Put back every released answer, test and locked cell the notebook lacks, right after the
    released cell before it (nbgrader's own OverwriteCells assumes that one is an answer or test cell
    and stops on a prompt). A restored answer is the released stub: that exercise is unanswered."""
    present = {grade_id(c): c for c in nb.cells if grade_id(c)}
    anchor, notes = None, []
    for cell in release.cells:
        gid = grade_id(cell)
        if not gid:
            continue
        if gid in present:
            anchor = present[gid]
            continue
        at = next(i for i, c in enumerate(nb.cells) if c is anchor) + 1 if anchor is not None else 0
        anchor = copy.deepcopy(cell)
        nb.cells.insert(at, anchor)
        if _meta(cell).get("solution"):
            notes.append(f"{name}：找不到答案单元格 `{gid}`（删掉了或改坏了），按未作答评分。")
    return notes


def unique_ids(nb):
    seen = set()
    for cell in nb.cells:
        cid = cell.get("id")
        if not isinstance(cid, str) or not CELL_ID.match(cid) or cid in seen:
            cid = cell["id"] = uuid.uuid4().hex[:16]
        seen.add(cid)


def repair(name, nb, release, source):
    """Every repair of one notebook `nb` (changed in place), in order. Returns the notes, as raw text
    (the chain makes them printable once)."""
    _clear_own_keys(nb)
    notes = unreadable_cells(name, nb)
    notes += restore_metadata(name, nb, release)
    notes += recover_stripped(name, nb, release)
    notes += answer_copies(name, nb, release)
    notes += tamper_notes(name, nb, source)
    drop_duplicates(nb)
    notes += restore_missing(name, nb, release)
    unique_ids(nb)
    return notes
