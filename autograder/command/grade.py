"""`python -m autograder grade SUBMISSIONS --out DIR [--jobs N] [--force] [--students a,b]`.

nbgrader does the work (gradebook, autograde, generate_feedback); this module feeds it the class,
runs students in parallel, and writes DIR/grades.csv (+ manual_grades.csv, totals.csv) and
DIR/feedback/<student>/<notebook>.html, all read back from the gradebook.

Grading into an existing DIR updates it: the previous gradebook (hand grading included) is carried
into a new generation, only new or changed submissions are regraded, and the new generation replaces
the old one in a single rename (autograder/outdir.py), so a killed run loses nothing.
"""
import os
import random
import shutil
import signal
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path

from autograder import timing
from autograder.chain import feedback_page
from autograder.chain.nbgrader_chain import api
from autograder.command.grading_worker import Job, grade_student, share_gate
from autograder.command.intake import list_students, read_submission
from autograder.command.regrading import carry_over, grader_version, plan
from autograder.command.student_ids import safe_folders, student_id
from autograder.course import ASSIGNMENT, available_notebooks
from autograder.errors import GradingError, SandboxUnavailable
from autograder.kernels.bwrap import describe_limits
from autograder.kernels.sandbox_check import try_kernel
from autograder.notes import Note, for_page, from_data, printable, quoted
from autograder.outdir import OutFolder, OutFolderBusy, file_stamp, read_state, write_state, write_text
from autograder.report import class_report, grade_tables

__all__ = ["CSV_HEADER", "GradingError", "grade", "main"]

CSV_HEADER = grade_tables.CSV_HEADER
# what every worker imports (nbgrader's converters, the chain of nbgrader_config.py, the answer key,
# nbconvert's HTML export): the fork server imports it once
WORKER_IMPORTS = ["autograder.command.grading_worker", "autograder.chain.sandboxed_execute", "autograder.chain.verdicts",
                  "autograder.chain.intake_chain", "autograder.chain.feedback_page", "autograder.exercises.checks",
                  "nbgrader.apps", "nbgrader.converters", "nbconvert.exporters.html", "w1d1_student.registry"]


@dataclass(frozen=True)
class Settings:
    """What the instructor asked of a grading run: the command line's options."""
    jobs: int = 1
    sandbox: bool = True
    seed: int | None = None  # None: a new one each run
    timeout: int = 120  # seconds per cell
    force: bool = False  # grade every student again
    students: tuple = ()  # grade these again
    log: object = print


@dataclass
class Run:
    """One grading run: its settings, its nbgrader folder, the notebooks and every student's record."""
    settings: Settings
    work: Path
    notebooks: list
    records: dict
    workers: object = None  # the pool's multiprocessing context
    case_file: str = ""


def _page_notes(rec, notebooks):
    """{notebook: the notes its page shows}: its own, then the submission's (the exporter adds the chain's)."""
    return {name: for_page(rec["notes"], name) for name in notebooks}


def _write_feedback(work, gen, student, rec, notebooks):
    """DIR/feedback/<student>/*.html: nbgrader's pages as the exporter finished them (notes banner, CSP), or
    a page of notes where there is none."""
    dest = gen / "feedback" / student
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for name in notebooks:
        src = work / "feedback" / student / ASSIGNMENT / f"{name}.html"
        target = dest / f"{name}.html"
        if rec["ok"] and name in rec["notebooks"] and src.exists():
            shutil.copyfile(src, target)
        elif name in rec["broken"] or name in rec["notebooks"]:
            why = rec["broken"].get(name, "评分没有完成")
            write_text(target, feedback_page.plain_page(name, for_page(rec["notes"], name) or [why]))


def _worker_context():
    """A fresh process per student, forked from a server that has only imported the grading stack (once
    per run, not once per student): no state (event loops, sockets, sessions) carries over. The server
    starts now and imports while the caller goes on (generate_assignment)."""
    from multiprocessing import forkserver

    ctx = get_context("forkserver")
    ctx.set_forkserver_preload(WORKER_IMPORTS)
    forkserver.ensure_running()
    return ctx


def _run_pool(run, tasks):
    """tasks: {student: feedback_only}. An exception costs its own student only. A worker that dies breaks
    the pool: every student it left undone is graded again in a new pool, and, if that one breaks too,
    each of them alone, so only a student whose own grading kills its worker fails."""
    results, undone, attempts = {}, dict(tasks), ("together", "together", "alone")
    for n, attempt in enumerate(attempts):
        passes = [undone] if attempt == "together" else [{sid: only} for sid, only in undone.items()]
        for batch in passes:
            results.update(_pool_pass(run, batch))
        undone = {sid: tasks[sid] for sid in undone if results[sid].get("broken")}
        if not undone or n == len(attempts) - 1:
            break
        run.settings.log(f"  !!! 一个评分进程意外退出：{len(undone)} 名学生{'各自单独' if attempts[n + 1] == 'alone' else ''}重新评分")
    for sid in undone:
        results[sid].pop("broken", None)
    return results


def _pool_pass(run, tasks):
    results, jobs, log = {}, run.settings.jobs, run.settings.log
    if not tasks:
        return results
    job = Job(str(run.work), run.case_file, run.settings.sandbox, run.settings.timeout)
    # one worker more than --jobs: it starts, and writes pages, while the others hold the kernel places
    with ProcessPoolExecutor(max_workers=max(1, jobs) + 1, mp_context=run.workers, max_tasks_per_child=1,
                             initializer=share_gate, initargs=(run.workers.Semaphore(max(1, jobs)),)) as pool:
        futures = {pool.submit(grade_student, job, sid, only, _page_notes(run.records[sid], run.notebooks)): sid
                   for sid, only in tasks.items()}
        for i, fut in enumerate(as_completed(futures), 1):
            sid = futures[fut]
            try:
                res = fut.result()
            except Exception as exc:
                res = {"student": sid, "success": False, "error": repr(exc), "seconds": 0.0, "feedback": False,
                       "broken": isinstance(exc, BrokenProcessPool)}
            results[sid] = res
            last = (res["error"].strip().splitlines() or [""])[-1][:120]
            status = ("反馈已按成绩库更新" if tasks[sid] else "完成") if res["success"] else f"失败：{last}"
            log(f"  [{i}/{len(tasks)}] {sid:<16} {res['seconds']:6.1f} s  {status}")
    return results


def _stop_helper_processes():
    """The run started multiprocessing's fork server and resource tracker: end them now, so the command
    returns only when every process it started has ended (they would linger, then stay as zombies).
    multiprocessing has no public way to stop either (Python 3.11): these private names are the only hook,
    and tests/test_grading_leaves_no_process.py fails if they change."""
    from multiprocessing import forkserver, resource_tracker

    server = forkserver._forkserver
    if server._forkserver_pid is not None:  # it holds only imports: killed, it skips a second of finalising them
        os.kill(server._forkserver_pid, signal.SIGKILL)
    server._stop()
    tracker = resource_tracker._resource_tracker
    if getattr(tracker, "_pid", None) is not None:
        tracker._stop()


def _check_sandbox(sandbox, log):
    if sandbox:
        try:
            try_kernel()
        except SandboxUnavailable as exc:
            raise GradingError("!!! 学生代码的沙箱无法运行，拒绝评分（没有沙箱，学生代码能读到答案和成绩库）。\n"
                               f"    原因：{exc.cause}\n    怎么办：{exc.advice}。确认风险后也可以加 --no-sandbox。") from exc
        log(describe_limits())
    else:
        log("!!! 警告：--no-sandbox —— 学生代码以评分者的权限运行，没有任何隔离。")


def grade(submissions, out, **options):
    """Grade the class in `submissions` (a folder per student) into `out`; options: the fields of Settings."""
    settings = Settings(**{**options, "students": tuple(options.get("students") or ())})
    log = settings.log
    submissions = Path(submissions)
    if not submissions.exists():
        raise GradingError(f"找不到提交文件夹：{submissions}")
    if not submissions.is_dir():
        raise GradingError(f"{submissions} 不是文件夹：应当是每个学生一个子文件夹")
    folders, refused = list_students(submissions)
    for note in refused:
        log(f"  [提交文件夹] {note}")
    folders, skipped = safe_folders(folders, log)
    if not folders:
        raise GradingError(f"{submissions} 里没有学生子文件夹（每个学生一个文件夹，文件夹名是学号）")
    _check_sandbox(settings.sandbox, log)
    output = OutFolder(out)
    try:
        output.lock()
    except OutFolderBusy as exc:
        raise GradingError(str(exc)) from exc
    try:
        return _grade_into(output, folders, skipped, settings)
    finally:
        _stop_helper_processes()
        output.unlock()


def _grade_into(output, folders, skipped, settings):
    log, notebooks = settings.log, available_notebooks()
    seed = random.SystemRandom().randrange(2**31) if settings.seed is None else settings.seed
    prev = output.previous()
    previous_state = read_state(prev) if prev is not None and prev != output.out else {}
    version = grader_version()
    students = {student_id(s) for s in settings.students}
    regrade, prints = plan(folders, previous_state, students, settings.force, version, log)

    gen = output.new_generation()
    work = gen / "nbgrader"
    stamp = file_stamp(prev / "nbgrader" / "gradebook.db") if prev is not None else None
    refresh = carry_over(prev, gen, previous_state, regrade)
    workers = _worker_context() if regrade or refresh else None

    if previous_state.get("grader") != version or not (work / "release").is_dir():
        log(f"生成作业 {ASSIGNMENT}（{len(notebooks)} 本笔记本），写入成绩库 …")
        with timing.timed("run: generate_assignment"):
            gen_result = api(work).generate_assignment(ASSIGNMENT, force=True, create=True)
        if not gen_result["success"]:
            raise GradingError("nbgrader generate_assignment 失败：\n"
                               + (gen_result.get("error") or gen_result.get("log") or "")[-3000:])

    records = {sid: {**rec, "notes": from_data(rec.get("notes"))}
               for sid, rec in previous_state.get("students", {}).items() if sid not in regrade}
    for folder in folders:
        sid = student_id(folder.name)  # nbgrader's folders are named by the id, read from the student's own
        if sid not in regrade:
            continue
        sub = read_submission(folder, notebooks, work / "submitted" / sid / ASSIGNMENT)
        records[sid] = {"notebooks": sorted(sub.notebooks), "broken": dict(sub.broken),
                        "notes": list(sub.notes), "files": prints[sid], "ok": True}
        log(f"  [{sid}] 重新评分：{regrade[sid]}")
        for note in sub.notes:
            log(f"  [{sid}] {note.text}")

    tasks = {sid: False for sid in regrade if records[sid]["notebooks"]}
    tasks.update({sid: True for sid in refresh})
    log(f"评分 {sum(not v for v in tasks.values())} 名学生，跳过 {len(folders) - len(regrade)} 名"
        f"（{settings.jobs} 个并行任务，沙箱{'开启' if settings.sandbox else '关闭'}）…")
    t0 = time.monotonic()
    run = Run(settings, work, notebooks, records, workers)
    with tempfile.TemporaryDirectory(prefix="w1d1cases-") as private:  # 0700, the grader's alone
        from autograder.exercises.checks import write_case_file

        with timing.timed("cases"):  # the run's one seed: every kernel's cases and every verdict
            run.case_file = write_case_file(seed, private)
        with timing.timed("run: students"):
            results = _run_pool(run, tasks)
    for sid, res in results.items():
        if tasks[sid]:
            continue
        records[sid]["in_page"] = res.get("notes", {})
        for name, texts in records[sid]["in_page"].items():
            records[sid]["notes"] += [Note(name, t) for t in texts]
            for text in texts:
                log(f"  [{sid}] {text}")
        if not res["success"]:
            records[sid]["ok"] = False
            records[sid]["notes"].append(Note(None, "自动评分没有完成（评分系统错误），请联系助教。"))
        for name in res.get("failed", []):
            records[sid]["notebooks"].remove(name)
            records[sid]["broken"][name] = "评分这本笔记本时出错"
            records[sid]["notes"].append(Note(name, f"{name}：评分这本笔记本时出错（评分系统错误），这本笔记本记 0 分，请联系助教。"))
    log(f"评分用时 {time.monotonic() - t0:.1f} s")

    with timing.timed("run: grades and pages"):
        rows = _write_results(gen, work, records, notebooks, set(tasks), results)
    with timing.timed("run: class report"):
        _write_report(gen, work, records, notebooks, skipped, log)
    write_state(gen, {"version": 1, "grader": version, "students": records, "skipped": skipped})
    if file_stamp(prev / "nbgrader" / "gradebook.db" if prev is not None else gen / "none") != stamp:
        raise GradingError("评分期间上一次的成绩库被改动了（例如有人在 formgrader 里打分）；为了不丢掉这些改动，"
                           "本次结果没有生效。请在没有人打分时重新运行。")
    output.publish(gen)
    _summary(rows, records, notebooks, log)
    if skipped:
        log("没有评分的文件夹（名字不能作学号）：" + "、".join(quoted(name) for name in sorted(skipped)))
    log(f"写入 {output.out / 'grades.csv'}（自动评分）、manual_grades.csv（人工评分）、totals.csv（总分）、"
        f"{output.out / 'feedback'}/ 和全班报告 {output.out / 'report.html'}")
    return rows


def _write_results(gen, work, records, notebooks, rendered, results):
    """CSV files from the gradebook; feedback pages for the students handled in this run. Returns the
    rows of grades.csv (what the summary prints)."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{work / 'gradebook.db'}") as gb:
        tables = grade_tables.build(gb, records, notebooks)
        for sid, rec in records.items():
            rec["gradebook"] = grade_tables.gradebook_fingerprint(gb, sid) if rec["ok"] else None
    for name, (header, rows) in tables.items():
        write_text(gen / name, grade_tables.render(header, rows))
    (gen / "feedback").mkdir(exist_ok=True)
    for sid, rec in records.items():
        if sid in rendered or not (gen / "feedback" / sid).is_dir():
            try:
                _write_feedback(work, gen, sid, rec, notebooks)
            except Exception as exc:  # one student's page must not stop the others'
                rec["notes"].append(Note(None, f"反馈页面生成失败（{type(exc).__name__}），请联系助教。"))
                rec["gradebook"] = None  # remade next run
                _write_feedback(work, gen, sid, {**rec, "ok": False, "notebooks": []}, notebooks)
    return tables["grades.csv"][1]


def _write_report(gen, work, records, notebooks, skipped, log):
    """The class report, in the same generation as the grades; a report that fails costs only itself."""
    from nbgrader.api import Gradebook

    try:
        with Gradebook(f"sqlite:///{work / 'gradebook.db'}") as gb:
            class_report.for_run(gen, gb, records, notebooks, skipped)
    except Exception as exc:  # the grades are safe: they are published without a report
        log(f"!!! 全班报告没有生成（{type(exc).__name__}: {printable(str(exc))[:300]}）；成绩照常写出，"
            "修好后运行 python -m autograder report OUT 重新生成。")


def _summary(rows, records, notebooks, log):
    table = {}
    for student, name, _, score, points in rows:
        got, total = table.setdefault(student, {}).get(name, (0.0, 0.0))
        table[student][name] = (got + float(score), total + float(points))
    short = [n[:2] for n in notebooks]
    log("\n" + f"{'学号':<16}" + "".join(f"{s:>9}" for s in short) + f"{'合计':>10}  说明")
    for student in sorted(records):
        cells, got_all, tot_all = [], 0.0, 0.0
        row = table.get(grade_tables.csv_safe(student), {})
        for name in notebooks:
            if name in row:
                got, tot = row[name]
                got_all, tot_all = got_all + got, tot_all + tot
                cells.append(f"{got:g}/{tot:g}")
            else:
                cells.append("—")
        notes = len(records[student]["notes"])
        log(f"{student:<16}" + "".join(f"{c:>9}" for c in cells) + f"{f'{got_all:g}/{tot_all:g}':>10}  "
            + (f"{notes} 条" if notes else ""))


def main(args):
    students = [s for s in (args.students or "").split(",") if s]
    try:
        grade(args.submissions, args.out, jobs=args.jobs, sandbox=not args.no_sandbox, seed=args.seed,
              timeout=args.timeout, force=args.force, students=students)
    except GradingError as exc:
        print(f"错误：{exc}", file=sys.stderr)
        return 2
    return 0
