"""A class at nine in the morning: N students on the class's JupyterHub at once, measured.

Each simulated student (deploy/hub_traffic.py) is a real system user of a throw-away class
(deploy.classroom.Classroom): they log in on the login form, start their server through the hub's
REST API, fetch w1d1, open one release notebook, run its cells in a real kernel with one exercise
answered, see that exercise's public check pass, save and submit. Then the instructor collects and
autogrades the class (the repo's sandboxed configuration). Traffic goes to 127.0.0.1 only.

    python -m deploy.load_test --students 5 10 20 [--notebook 05_complexity]   (as root; `make hub-load`)

Prints one table row per class size: times from pressing "log in" to a running server and to the
first cell's result, failed steps, peak memory (PSS) of the hub, the proxy and all students' processes,
students' CPU time, and the instructor's collect + autograde time.
"""
import argparse
import math
import os
import pwd
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat

from deploy.classroom import COURSE, REPO, Classroom, free_port
from deploy.hub_traffic import ASSIGNMENT, HubStudent, StepFailed
from deploy.usage_sampler import UsageSampler, descendants, pids_of

RELEASE = REPO / "notebooks" / ASSIGNMENT
SOLUTIONS = REPO / "solutions" / ASSIGNMENT
PASS = "✅ 公开检查通过：{}"
GiB, MiB = 2**30, 2**20


def exercise(notebook):
    """(grade_id, answer cell index, check cell index, answer source): the notebook's first exercise,
    answered with the source notebook's solution cell."""
    release = nbformat.read(RELEASE / f"{notebook}.ipynb", as_version=4)
    ids = [c.metadata.get("nbgrader", {}).get("grade_id") for c in release.cells]
    gid = next(c.metadata["nbgrader"]["grade_id"] for c in release.cells
               if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("solution"))
    solved = nbformat.read(SOLUTIONS / f"{notebook}.ipynb", as_version=4)
    answer = next(c.source for c in solved.cells if c.metadata.get("nbgrader", {}).get("grade_id") == gid)
    return gid, ids.index(gid), ids.index(f"test_{gid}"), answer


def student_day(hub_url, name, password, notebook, start, *, spawn_timeout, cell_timeout):
    """One student's morning; returns their timings and the step that failed (None: all passed).
    Bounded: the server within spawn_timeout, then every cell within cell_timeout and all of them
    within 3 * cell_timeout."""
    gid, answer_at, check_at, answer = exercise(notebook)
    path = f"{ASSIGNMENT}/{notebook}.ipynb"
    result = {"name": name, "server_s": None, "first_cell_s": None, "done_s": None, "failed": None}
    start.wait(timeout=600)
    t0 = time.monotonic()
    student = HubStudent(hub_url, name, password)
    kernel = None
    try:
        student.log_in()
        student.request_token()
        student.start_server()
        student.wait_ready(spawn_timeout)
        result["server_s"] = time.monotonic() - t0
        student.assignment_action("fetch")
        nb = student.read_notebook(path)
        kernel = student.start_kernel(path)
        nb["cells"][answer_at]["source"] = answer
        cells_end = time.monotonic() + 3 * cell_timeout
        for i, cell in enumerate(nb["cells"]):
            if cell["cell_type"] != "code":
                continue
            status, text = kernel.execute(cell["source"], min(cell_timeout, cells_end - time.monotonic()))
            if result["first_cell_s"] is None:
                if status != "ok":
                    raise StepFailed("cells", f"the first cell: {text[-300:]}")
                result["first_cell_s"] = time.monotonic() - t0
            if i == check_at and PASS.format(gid) not in text:
                raise StepFailed("check", text[-500:])
        student.save_notebook(path, nb)
        student.assignment_action("submit")
        result["done_s"] = time.monotonic() - t0
    except StepFailed as exc:
        result["failed"], result["error"] = exc.step, str(exc)
    except Exception as exc:  # noqa: BLE001 - a crash of the simulator is a failed step too
        result["failed"], result["error"] = "error", repr(exc)
    finally:
        if kernel is not None:
            kernel.close()
    return result


def ensure_released(room):
    """The instructor generates and releases w1d1 unless the exchange already has it."""
    if not (room.exchange / COURSE / "outbound" / ASSIGNMENT).exists():
        room.run_as(room.instructor, f"nbgrader generate_assignment {ASSIGNMENT} --force "
                                     f"&& nbgrader release_assignment {ASSIGNMENT} --force", check=True)


def graded_points(room, students, notebook):
    """{student: points of the answered exercise's public check in the gradebook (None: not graded)}."""
    from nbgrader.api import Gradebook, MissingEntry

    gid = exercise(notebook)[0]
    points = {}
    with Gradebook(f"sqlite:///{room.course_dir() / 'gradebook.db'}") as gb:
        for s in students:
            try:
                points[s] = float(gb.find_grade(f"test_{gid}", notebook, ASSIGNMENT, s).score or 0)
            except MissingEntry:
                points[s] = None
    return points


def run_class(room, passwords, students, notebook, hub_pid, *, spawn_timeout=300, cell_timeout=600):
    """N students at once on a running hub, then the instructor collects and grades them.
    Returns the measured row (see `row`)."""
    ensure_released(room)
    uids = {name: pwd.getpwnam(name).pw_uid for name in room.users}
    student_uids = {uids[s] for s in students}

    def groups():
        procs = pids_of(set(uids.values()))
        hub_tree = descendants(hub_pid) - set(procs)
        return {"hub": {hub_pid}, "proxy": hub_tree - {hub_pid},
                "students": {p for p, u in procs.items() if u in student_uids},
                "instructor": {p for p, u in procs.items() if u == uids[room.instructor]}}

    hub_url = f"http://127.0.0.1:{room.port}"
    start = threading.Barrier(len(students) + 1, timeout=600)
    load = []
    with UsageSampler(groups) as usage, ThreadPoolExecutor(max_workers=len(students)) as pool:
        futures = [pool.submit(student_day, hub_url, s, passwords[s], notebook, start,
                               spawn_timeout=spawn_timeout, cell_timeout=cell_timeout) for s in students]
        t0 = time.monotonic()
        start.wait()
        while not all(f.done() for f in futures) and time.monotonic() - t0 < spawn_timeout + 4 * cell_timeout:
            load.append(os.getloadavg()[0])
            time.sleep(1)
        results = [f.result(timeout=60) for f in futures]
        class_s = time.monotonic() - t0
        students_peak = usage.peak.get("students", 0)
        t1 = time.monotonic()
        glob = os.path.commonprefix(students) + "*"
        grade = room.run_as(room.instructor, f"nbgrader collect {ASSIGNMENT} && nbgrader autograde {ASSIGNMENT} "
                            f"--CourseDirectory.notebook_id={notebook} '--CourseDirectory.student_id={glob}'")
        grading_s = time.monotonic() - t1
    points = graded_points(room, students, notebook)
    return {"n": len(students), "notebook": notebook, "results": results, "class_s": class_s,
            "grading_s": grading_s, "grading_rc": grade.returncode, "grading_log": grade.stdout[-2000:] + grade.stderr[-2000:],
            "points": points, "hub_peak": usage.peak.get("hub", 0), "proxy_peak": usage.peak.get("proxy", 0),
            "students_peak": students_peak, "total_peak": usage.peak.get("total", 0),
            "students_cpu_s": usage.cpu_total("students"), "load_max": max(load, default=os.getloadavg()[0]),
            "samples": usage.samples}


def spread(values):
    """'median / p95 / max' (p95 by nearest rank) of the values that exist."""
    values = sorted(v for v in values if v is not None)
    if not values:
        return "—"
    p95 = values[max(0, math.ceil(0.95 * len(values)) - 1)]
    return f"{statistics.median(values):.1f} / {p95:.1f} / {values[-1]:.1f}"


HEADER = ("| N | 笔记本 | 登录→服务器就绪 s（中位数 / p95 / 最大） | 登录→第一个单元格结果 s | 登录→提交完成 s "
          "| 失败的步骤 | 评分满分的公开检查 | 峰值内存 GiB：hub / 代理 / 全部学生进程 | 每名学生 MiB "
          "| 学生 CPU 秒（每人） | 收集 + 自动评分 s | 最高 1 分钟负载 |\n|" + "---|" * 12)


def row(m):
    failed = [r["failed"] for r in m["results"] if r["failed"]]
    failures = "、".join(f"{step} × {failed.count(step)}" for step in sorted(set(failed))) or "0"
    full = sum(1 for p in m["points"].values() if p)
    n = m["n"]
    return (f"| {n} | {m['notebook']} | {spread(r['server_s'] for r in m['results'])} "
            f"| {spread(r['first_cell_s'] for r in m['results'])} | {spread(r['done_s'] for r in m['results'])} "
            f"| {failures} | {full}/{n} | {m['hub_peak'] / GiB:.2f} / {m['proxy_peak'] / GiB:.2f} / "
            f"{m['students_peak'] / GiB:.2f} | {m['students_peak'] / MiB / n:.0f} | {m['students_cpu_s'] / n:.0f} "
            f"| {m['grading_s']:.0f} | {m['load_max']:.1f} |")


def one_class(n, notebook, prefix, instructor_env, logs):
    tag = f"{os.getpid() % 10000}"
    width = len(str(n))
    room = Classroom(prefix=prefix, instructor_env=instructor_env, instructor=f"w1l{tag}-teacher",
                     students=[f"w1l{tag}-s{i:0{width}d}" for i in range(1, n + 1)], port=free_port(),
                     name=f"load-{tag}-{n}")
    logs.mkdir(parents=True, exist_ok=True)
    proc = None
    with open(logs / f"hub-{n}.log", "w") as log:
        try:
            passwords = room.setup()
            proc = room.start(log)
            room.wait_up(proc)
            return run_class(room, passwords, room.students, notebook, proc.pid)
        finally:
            room.teardown(proc)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m deploy.load_test")
    parser.add_argument("--students", type=int, nargs="+", default=[5])
    parser.add_argument("--notebook", default="01_self_attention")
    parser.add_argument("--prefix", default="/opt/w1d1-hub")
    parser.add_argument("--instructor-env", default=None)
    parser.add_argument("--logs", default=str(REPO / "test-output" / "hub-load"))
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        raise SystemExit("the load test runs as root: it creates the class's system users")
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / GiB
    print(f"本机：{os.cpu_count()} 个 CPU，{mem:.0f} GiB 内存；每名学生运行 {args.notebook}（第一道练习作答）", flush=True)
    rows = []
    for n in args.students:
        m = one_class(n, args.notebook, Path(args.prefix), args.instructor_env, Path(args.logs))
        rows.append(row(m))
        for r in m["results"]:
            if r["failed"]:
                print(f"  {r['name']}: {r['error'][:300]}")
        if m["grading_rc"]:
            print("  collect/autograde failed:", m["grading_log"])
        cores = m["students_cpu_s"] / m["class_s"]
        print(f"N={n}：全班 {m['class_s']:.0f} s（{m['samples']} 次采样）；学生进程平均占用 {cores:.2f} 核，"
              f"每名学生 {cores / n:.2f} 核；全部进程峰值 {m['total_peak'] / GiB:.2f} GiB", flush=True)
        print(HEADER + "\n" + rows[-1], flush=True)
    print("\n" + HEADER + "\n" + "\n".join(rows))


if __name__ == "__main__":
    main()
