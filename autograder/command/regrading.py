"""Incremental regrading: which students a run regrades and why, what it keeps of the last run, and
the digest of what decides a grade (a change there regrades everyone)."""
from autograder.command.intake import fingerprint
from autograder.command.student_ids import student_id
from autograder.course import ASSIGNMENT, REPO, SOURCE_DIR
from autograder.errors import GradingError
from autograder.notes import printable
from autograder.outdir import copy_gradebook, link_tree, tree_hash
from autograder.report import grade_tables

# what only arranges, stores or shows results (paths under autograder/; a room: all of it): changing it
# regrades nobody
OUTPUT_SIDE = {"__main__.py", "cli.py", "release.py", "page_policy.py", "command/grade.py", "outdir.py",
               "chain/feedback_page.py", "report"}


def _decides_grades(path):
    rel = path.relative_to(REPO / "autograder")
    return rel.as_posix() not in OUTPUT_SIDE and rel.parts[0] not in OUTPUT_SIDE


def grader_version():
    """Digest of what decides a grade: the source notebooks and their files, the grader, the student
    package (drivers, verdict tables), the config."""
    files = [p for p in (SOURCE_DIR / ASSIGNMENT).iterdir() if p.is_file()]
    files += [p for p in (REPO / "autograder").rglob("*.py") if _decides_grades(p)]
    files += list((REPO / "student").rglob("*.py"))  # the drivers and verdict tables of the student package
    return tree_hash(REPO, files + [REPO / "nbgrader_config.py"])


def plan(folders, previous, students, force, version, log):
    """Which students to regrade, each with the reason; the others are skipped with theirs."""
    names = {student_id(f.name) for f in folders}
    if students:
        unknown = sorted(set(students) - names)
        if unknown:
            raise GradingError("--students 里的学号在提交文件夹里找不到：" + "、".join(unknown))
    regrade, prints = {}, {}
    for folder in folders:
        sid = student_id(folder.name)
        try:
            prints[sid] = fingerprint(folder)
        except Exception as exc:  # one unreadable folder must not stop the class: it is simply regraded
            prints[sid] = {"error": f"{type(exc).__name__}: {printable(str(exc))[:200]}"}
        old = previous.get("students", {}).get(sid)
        if force:
            why = "--force"
        elif students:
            why = "--students" if sid in students else None
        elif old is None:
            why = "新学生"
        elif previous.get("grader") != version:
            why = "源笔记本或评分代码变了"
        elif not old.get("ok"):
            why = "上次评分没有完成"
        elif old.get("files") != prints[sid]:
            why = "提交的文件变了"
        else:
            why = None
        if why:
            regrade[sid] = why
        else:
            log(f"  跳过 {sid}：" + ("不在 --students 里" if students else "提交没有变化（内容哈希相同）") + "，保留上次的结果")
    for sid in sorted(set(previous.get("students", {})) - names):
        log(f"  保留 {sid}：不在这次的提交文件夹里，保留上次的结果")
    return regrade, prints


def carry_over(prev, gen, previous_state, regrade):
    """The previous generation's gradebook and every kept student's files, into the new generation.
    Returns the kept students whose feedback must be remade (grades edited by hand since)."""
    work = gen / "nbgrader"
    work.mkdir()
    if prev is None:
        return set()
    copy_gradebook(prev / "nbgrader" / "gradebook.db", work / "gradebook.db")
    if (prev / "nbgrader" / "release").is_dir():
        link_tree(prev / "nbgrader" / "release", work / "release")
    refresh = _refresh_needed(work, previous_state, regrade)
    for sid in previous_state.get("students", {}):
        if sid in regrade:
            continue
        parts = ["submitted", "autograded"] + ([] if sid in refresh else ["feedback"])
        for part in parts:
            if (prev / "nbgrader" / part / sid).is_dir():
                link_tree(prev / "nbgrader" / part / sid, work / part / sid)
        if sid not in refresh and (prev / "feedback" / sid).is_dir():
            link_tree(prev / "feedback" / sid, gen / "feedback" / sid)
    return refresh


def _refresh_needed(work, previous_state, regrade):
    """Kept students whose grades were edited by hand since their feedback was made."""
    from nbgrader.api import Gradebook

    db = work / "gradebook.db"
    if not db.exists():
        return set()
    refresh = set()
    with Gradebook(f"sqlite:///{db}") as gb:
        for sid, old in previous_state.get("students", {}).items():
            if sid not in regrade and old.get("ok") and grade_tables.gradebook_fingerprint(gb, sid) != old.get("gradebook"):
                refresh.add(sid)
    return refresh
