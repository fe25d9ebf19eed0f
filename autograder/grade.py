"""`python -m autograder grade SUBMISSIONS --out DIR [--jobs N]`: grade a class with nbgrader.

nbgrader does the work (gradebook, autograde, generate_feedback); this module feeds it the class,
runs students in parallel, and writes DIR/grades.csv and DIR/feedback/<student>/<notebook>.html.
"""
import csv
import html
import os
import random
import shutil
import sys
import time
import warnings
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from pathlib import Path

from .course import ASSIGNMENT, SOURCE_DIR, api, available_notebooks
from .intake import read_submission, reset
from .sandbox import SandboxUnavailable, describe_limits, probe

CSV_HEADER = ["student_id", "notebook", "grade_id", "score", "max_score"]


class GradingError(Exception):
    """An instructor-side problem: grading cannot start."""


def _test_cells(name):
    import nbformat

    nb = nbformat.read(SOURCE_DIR / ASSIGNMENT / f"{name}.ipynb", as_version=4)
    cells = []
    for c in nb.cells:
        meta = c.metadata.get("nbgrader", {})
        if c.cell_type == "code" and meta.get("grade") and not meta.get("solution"):
            cells.append((meta["grade_id"], float(meta.get("points", 0))))
    return cells


def _grade_student(work, student, seed, sandbox, timeout):
    """Worker: autograde one student and make their feedback (runs in its own process)."""
    started = time.monotonic()
    warnings.filterwarnings("ignore", module="nbgrader")  # SQLAlchemy notes from nbgrader's own gradebook code
    os.environ["JUPYTER_RUNTIME_DIR"] = str(Path(work) / "runtime" / student)
    os.environ["W1D1_GRADER_SEED"] = str(seed)
    os.environ["W1D1_NO_SANDBOX"] = "0" if sandbox else "1"
    Path(os.environ["JUPYTER_RUNTIME_DIR"]).mkdir(parents=True, exist_ok=True)
    nbg = api(work)
    nbg.coursedir.config.SandboxedExecute.timeout = timeout
    result = nbg.autograde(ASSIGNMENT, student, force=True, create=True)
    if not result["success"]:  # a grader-side hiccup (e.g. a slow kernel start): try once more
        result = nbg.autograde(ASSIGNMENT, student, force=True, create=True)
    feedback = nbg.generate_feedback(ASSIGNMENT, student, force=True) if result["success"] else {"success": False}
    return {"student": student, "success": result["success"], "error": (result.get("error") or "")[-2000:],
            "log": (result.get("log") or "")[-4000:], "feedback": feedback["success"],
            "seconds": time.monotonic() - started}


def _score(gb, grade_id, notebook, student):
    try:
        grade = gb.find_grade(grade_id, notebook, ASSIGNMENT, student)
    except Exception:
        return 0.0
    return float(grade.score or 0.0)


def _banner(notes):
    items = "".join(f"<li>{html.escape(n)}</li>" for n in notes)
    return (f'<div style="border:2px solid #c60;padding:8px;margin:8px;background:#fff4e5">'
            f"<b>评分说明</b><ul>{items}</ul></div>")


def _write_feedback(work, out, sub, notebooks):
    dest = out / "feedback" / sub.student
    dest.mkdir(parents=True, exist_ok=True)
    for name in notebooks:
        src = work / "feedback" / sub.student / ASSIGNMENT / f"{name}.html"
        target = dest / f"{name}.html"
        mine = [n for n in sub.notes if n.startswith(f"{name}：") or name in n] or []
        if src.exists():
            text = src.read_text(encoding="utf-8")
            if mine:
                text = text.replace("<body>", "<body>" + _banner(mine), 1) if "<body>" in text else _banner(mine) + text
            target.write_text(text, encoding="utf-8")
        elif name in sub.broken or name in sub.notebooks:
            why = sub.broken.get(name, "评分没有完成")
            target.write_text(f"<html><body><h1>{html.escape(name)}</h1>{_banner(mine or [why])}</body></html>",
                              encoding="utf-8")


def grade(submissions, out, jobs=1, sandbox=True, seed=None, timeout=120, log=print):
    submissions, out = Path(submissions), Path(out)
    if not submissions.exists():
        raise GradingError(f"找不到提交文件夹：{submissions}")
    if not submissions.is_dir():
        raise GradingError(f"{submissions} 不是文件夹：应当是每个学生一个子文件夹")
    students = sorted(p for p in submissions.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not students:
        raise GradingError(f"{submissions} 里没有学生子文件夹（每个学生一个文件夹，文件夹名是学号）")
    if sandbox:
        try:
            probe()
        except SandboxUnavailable as exc:
            raise GradingError("!!! 无法建立沙箱（bubblewrap），拒绝评分：学生代码将能读取答案和成绩库。\n"
                               f"    原因：{exc}\n    安装 bubblewrap（apt-get install bubblewrap），"
                               "或确认风险后加 --no-sandbox。") from exc
        log(describe_limits())
    else:
        log("!!! 警告：--no-sandbox —— 学生代码以评分者的权限运行，没有任何隔离。")
    seed = random.SystemRandom().randrange(2**31) if seed is None else seed
    notebooks = available_notebooks()
    out.mkdir(parents=True, exist_ok=True)
    work = (out / "nbgrader").resolve()
    reset(work)

    log(f"生成作业 {ASSIGNMENT}（{len(notebooks)} 本笔记本），写入成绩库 …")
    gen = api(work).generate_assignment(ASSIGNMENT, force=True, create=True)
    if not gen["success"]:
        raise GradingError("nbgrader generate_assignment 失败：\n" + (gen.get("error") or gen.get("log") or "")[-3000:])

    subs = {}
    for folder in students:
        sub = read_submission(folder, notebooks, work / "submitted" / folder.name / ASSIGNMENT)
        subs[sub.student] = sub
        for note in sub.notes:
            log(f"  [{sub.student}] {note}")
    gradable = [s for s in subs.values() if s.notebooks]

    log(f"评分 {len(gradable)} 名学生（{jobs} 个并行任务，沙箱{'开启' if sandbox else '关闭'}）…")
    results, t0 = {}, time.monotonic()
    ctx = get_context("spawn")
    # a fresh process per student: no state (event loops, sockets, sessions) carries over
    with ProcessPoolExecutor(max_workers=max(1, jobs), mp_context=ctx, max_tasks_per_child=1) as pool:
        futures = {pool.submit(_grade_student, str(work), s.student, seed, sandbox, timeout): s.student for s in gradable}
        for i, fut in enumerate(as_completed(futures), 1):
            student = futures[fut]
            try:
                res = fut.result()
            except Exception as exc:  # a worker that died: this student only
                res = {"student": student, "success": False, "error": repr(exc), "seconds": 0.0, "feedback": False}
            results[student] = res
            last = (res["error"].strip().splitlines() or [""])[-1][:120]
            status = "完成" if res["success"] else f"失败：{last}"
            log(f"  [{i}/{len(gradable)}] {student:<16} {res['seconds']:6.1f} s  {status}")
            if not res["success"]:
                subs[student].notes.append("自动评分没有完成（评分系统错误），请联系助教。")
    log(f"评分用时 {time.monotonic() - t0:.1f} s")

    from nbgrader.api import Gradebook

    rows = []
    with Gradebook(f"sqlite:///{work / 'gradebook.db'}") as gb:
        for sub in subs.values():
            for name in notebooks:
                if name not in sub.notebooks and name not in sub.broken:
                    continue
                graded = name in sub.notebooks and results.get(sub.student, {}).get("success")
                for grade_id, points in _test_cells(name):
                    score = _score(gb, grade_id, name, sub.student) if graded else 0.0
                    rows.append([sub.student, name, grade_id, f"{score:g}", f"{points:g}"])
    tmp = out / "grades.csv.tmp"
    with open(tmp, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(CSV_HEADER)
        writer.writerows(rows)
    os.replace(tmp, out / "grades.csv")
    fb = out / "feedback"
    if fb.exists():
        shutil.rmtree(fb)
    for sub in subs.values():
        _write_feedback(work, out, sub, notebooks)
    _summary(rows, subs, notebooks, log)
    log(f"写入 {out / 'grades.csv'} 和 {fb}/")
    return rows


def _summary(rows, subs, notebooks, log):
    table = {}
    for student, name, _, score, points in rows:
        got, total = table.setdefault(student, {}).get(name, (0.0, 0.0))
        table[student][name] = (got + float(score), total + float(points))
    short = [n[:2] for n in notebooks]
    log("\n" + f"{'学号':<16}" + "".join(f"{s:>9}" for s in short) + f"{'合计':>10}  说明")
    for student in sorted(subs):
        cells, got_all, tot_all = [], 0.0, 0.0
        for name in notebooks:
            if name in table.get(student, {}):
                got, tot = table[student][name]
                got_all, tot_all = got_all + got, tot_all + tot
                cells.append(f"{got:g}/{tot:g}")
            else:
                cells.append("—")
        notes = len(subs[student].notes)
        log(f"{student:<16}" + "".join(f"{c:>9}" for c in cells) + f"{f'{got_all:g}/{tot_all:g}':>10}  "
            + (f"{notes} 条" if notes else ""))


def main(args):
    try:
        grade(args.submissions, args.out, jobs=args.jobs, sandbox=not args.no_sandbox, seed=args.seed,
              timeout=args.timeout)
    except GradingError as exc:
        print(f"错误：{exc}", file=sys.stderr)
        return 2
    return 0
