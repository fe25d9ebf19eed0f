"""Grading cost, side by side (printed, never asserted): a class of 3 full submissions graded three ways —
nbgrader without this module (its own config: every cell executed in a plain kernel, `VANILLA`), the grading
command (`grade(..., jobs=1)`) and the hub's path, `nbgrader autograde` + `generate_feedback` with the repo's
config (tests/entry_points.py) — each path's time over the first's, and where one student's time goes
(autograder/timing.py's log). As root it measures the ratios again as a normal user (`setpriv`), so it prints
all four: both paths, as root and not."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unicodedata
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from autograder import timing  # noqa: E402
from autograder.command.grade import grade  # noqa: E402
from autograder.course import ASSIGNMENT, SOURCE_DIR  # noqa: E402
from autograder.kernels.bwrap import bwrap_command  # noqa: E402
from bench import make_class  # noqa: E402  (bench/bench.py)
from tests.entry_points import by_nbgrader, run_nbgrader  # noqa: E402

STUDENTS = 3
ROUNDS = 2
SEED = 7
NOBODY = 65534  # the normal user of the second measurement
# nbgrader as it comes, pointed at the course's notebooks: no sandbox, no intake, no verdicts, every cell executed
VANILLA = """c.CourseDirectory.root = {root!r}
c.CourseDirectory.source_directory = {source!r}
c.CourseDirectory.course_id = "w1d1-vanilla"
c.Execute.timeout = 300
"""
IMPORT_PROBE = ("import time; t = time.perf_counter(); __import__('w1d1_student.registry'); "
                "print(time.perf_counter() - t)")
# (label, steps of the log) in the order printed
PARTS = [("进程启动（含 Python 自身）", ["worker start"]), ("评分进程的导入（nbgrader 等）", ["imports"]),
         ("nbgrader 自身的启动", ["nbgrader start", "process start to first notebook"]),
         ("内核启动（含导入整个栈）", ["kernel start", "kernel ready"]),
         ("内核关闭", ["kernel stop"]), ("生成用例", ["cases"]), ("运行单元格", ["cells"]), ("判分", ["judging"]),
         ("反馈页面", ["feedback"])]


def read_log(path):
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines()] if Path(path).exists() else []


def sums(entries):
    total, count = defaultdict(float), defaultdict(int)
    for e in entries:
        total[e["what"]] += e["s"]
        count[e["what"]] += 1
    return total, count


def padded(label, width=40):
    """`label` padded to `width` terminal columns (a Chinese character takes two)."""
    return label + " " * max(0, width - sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in label))


def print_parts(total, count, whole, scale=1.0):
    known = 0.0
    for label, steps in PARTS:
        s = sum(total[k] for k in steps) / scale
        n = max(count[k] for k in steps) / scale
        if n:
            known += s
            print(f"   {padded(label)} {s:6.1f} s  （{n:.2g} 次）")
    print(f"   {padded('其余（nbgrader 自己的步骤：读写、成绩库）')} {whole - known:6.1f} s")
    if count["restart"]:
        print(f"   其中重启内核 {count['restart'] / scale:g} 次")


def kernel_import_seconds():
    """The stack's import in one sandboxed python (what every graded kernel pays before its first cell)."""
    try:
        out = subprocess.run(bwrap_command([sys.executable, "-c", IMPORT_PROBE]),
                             capture_output=True, text=True, timeout=120)
        return float(out.stdout.strip())
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return None


def cpu_seconds():
    """The whole machine's busy CPU seconds so far (/proc/stat; on a quiet machine, the grading's own: a
    killed kernel's time is counted too, which no parent's rusage would see)."""
    with open("/proc/stat", encoding="ascii") as fh:
        fields = [int(v) for v in fh.readline().split()[1:]]
    busy = sum(fields) - fields[3] - fields[4]  # all but idle and iowait
    return busy / os.sysconf("SC_CLK_TCK")


def by_vanilla(submissions, course):
    """The class graded by nbgrader without this module: generate_assignment, autograde, generate_feedback."""
    course.mkdir(parents=True)
    (course / "nbgrader_config.py").write_text(VANILLA.format(root=str(course), source=str(SOURCE_DIR)))
    for student in sorted(Path(submissions).iterdir()):
        shutil.copytree(student, course / "submitted" / student.name / ASSIGNMENT)
    steps = [("generate_assignment", ASSIGNMENT, "--force"), ("autograde", ASSIGNMENT, "--force"),
             ("generate_feedback", ASSIGNMENT, "--force")]
    failed = [run.stdout + run.stderr for run in (run_nbgrader(course, *step) for step in steps) if run.returncode]
    if failed:
        print("!!! 不带本模块的 nbgrader 没有评完：\n" + failed[0][-2000:])


def measure(tmp):
    """{path: [seconds per round]}, the busy CPU seconds of the command and the hub path, and their timing logs."""
    times, cpu = {"vanilla": [], "command": [], "plain": []}, {"command": [], "plain": []}
    make_class(tmp / "class", STUDENTS)
    for round_ in range(ROUNDS):  # alternated, so a burst of load elsewhere hits every side
        t = time.perf_counter()
        by_vanilla(tmp / "class", tmp / f"vanilla{round_}")
        times["vanilla"].append(time.perf_counter() - t)
        os.environ[timing.ENV] = str(tmp / f"command{round_}.log")
        t, c = time.perf_counter(), cpu_seconds()
        grade(tmp / "class", tmp / f"out{round_}", jobs=1, seed=SEED, log=lambda *_: None)
        times["command"].append(time.perf_counter() - t)
        cpu["command"].append(cpu_seconds() - c)
        os.environ[timing.ENV] = str(tmp / f"nbgrader{round_}.log")
        t, c = time.perf_counter(), cpu_seconds()
        graded = by_nbgrader(tmp / "class", tmp / f"course{round_}")
        times["plain"].append(time.perf_counter() - t)
        cpu["plain"].append(cpu_seconds() - c)
        del os.environ[timing.ENV]
        if graded.returncode:
            print("!!! nbgrader 没有评完：\n" + graded.log[-2000:])
    best = times["command"].index(min(times["command"])), times["plain"].index(min(times["plain"]))
    return times, cpu, read_log(tmp / f"command{best[0]}.log"), read_log(tmp / f"nbgrader{best[1]}.log")


def ratios(times):
    """(grading command, hub path) over nbgrader without the module, each path's fastest round."""
    return min(times["command"]) / min(times["vanilla"]), min(times["plain"]) / min(times["vanilla"])


def as_normal_user(python):
    """(ratios, None) measured again by this script as uid NOBODY, run by `python` (one NOBODY can start: a venv
    under /root is not), or (None, why they were not)."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        return None, "不是 root，或没有 setpriv"
    home = Path(tempfile.mkdtemp(prefix="w1d1bench-"))
    os.chown(home, NOBODY, NOBODY)
    try:
        run = subprocess.run([shutil.which("setpriv"), f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--",
                              "/bin/sh", "-c", 'exec "$0" "$1" --ratios', python, __file__], capture_output=True,
                             text=True, cwd=home, env={**os.environ, "HOME": str(home), "TMPDIR": str(home)}, timeout=3600)
        if run.returncode:
            return None, f"以 uid {NOBODY} 运行 {python} 失败：" + " ".join((run.stderr or run.stdout).strip().splitlines()[-1:])
        return json.loads(run.stdout.strip().splitlines()[-1]), None
    except (OSError, ValueError, IndexError, subprocess.TimeoutExpired) as exc:
        return None, f"以 uid {NOBODY} 运行失败：{type(exc).__name__}"
    finally:
        shutil.rmtree(home, ignore_errors=True)


def main():
    if "--ratios" in sys.argv:  # the normal user's run: one line of JSON
        with tempfile.TemporaryDirectory() as tmp:
            print(json.dumps(ratios(measure(Path(tmp))[0])))
        return
    with tempfile.TemporaryDirectory() as tmp:
        times, cpu, mine, theirs = measure(Path(tmp))
    vanilla, command, plain = min(times["vanilla"]), min(times["command"]), min(times["plain"])
    rounds = {k: "、".join(f"{t:.1f}" for t in v) for k, v in times.items()}
    print(f"1. {STUDENTS} 名学生的完整提交（--jobs 1），三条路交替各跑 {ROUNDS} 次，取最快的一次")
    print(f"   不带本模块的 nbgrader（每个单元格都运行）{vanilla:.1f} s（{rounds['vanilla']}）；"
          f"评分命令 {command:.1f} s（{rounds['command']}）；"
          f"hub 的路（nbgrader autograde + generate_feedback，仓库的配置）{plain:.1f} s（{rounds['plain']}）")
    user, why_not = as_normal_user(sys.argv[sys.argv.index("--user-python") + 1] if "--user-python" in sys.argv
                                   else sys.executable)
    mine_ratios = ratios(times)
    who = "root" if os.geteuid() == 0 else "普通用户"
    print(f"   对不带本模块的 nbgrader 之比（目标两条路都 ≤ 0.3）：评分命令 {mine_ratios[0]:.2f}（{who}），"
          f"hub 的路 {mine_ratios[1]:.2f}（{who}）" + (
              f"；普通用户（uid {NOBODY}）：评分命令 {user[0]:.2f}，hub 的路 {user[1]:.2f}" if user else
              f"；普通用户的一轮没有测（{why_not}）"))
    cores = os.cpu_count() or 1
    mine_cpu, their_cpu = min(cpu["command"]), min(cpu["plain"])
    print(f"   整台机器的 CPU 忙碌时间：评分命令 {mine_cpu:.1f} s，直接 nbgrader {their_cpu:.1f} s；"
          f"{cores} 核上评分命令的墙钟时间不会少于 {mine_cpu / cores:.1f} s（比值下限 {mine_cpu / cores / plain:.2f}）")
    first = sorted({e["student"] for e in mine if e["student"]})[0]
    own = [e for e in mine if e["student"] == first]
    total, count = sums(own)
    whole = total["student"] + total["worker start"]  # the worker's clock starts after its process did
    print(f"2. 评分命令里一名学生（{first}）的用时 {whole:.1f} s：")
    print_parts(total, count, whole)
    once = {e["what"]: e["s"] for e in mine if e["student"] is None}
    names = {"cases": "生成用例文件", "run: generate_assignment": "generate_assignment",
             "run: students": "全部学生（含启动评分进程）", "run: grades and pages": "成绩表与反馈页",
             "run: class report": "全班报告"}
    print("   全班一次：" + "，".join(f"{label} {once[k]:.1f} s" for k, label in names.items() if k in once))
    total, count = sums(theirs)
    kernels = count["kernel start"] / STUDENTS
    print(f"3. 直接 nbgrader 平均每名学生（{plain / STUDENTS:.1f} s，含 generate_assignment 与反馈）：")
    print_parts(total, count, plain / STUDENTS, scale=STUDENTS)
    imports = kernel_import_seconds()
    if imports is not None:
        print(f"4. 沙箱里导入一次 w1d1_student.registry（各题的 driver、torch 等）{imports:.2f} s；每名学生约 {kernels:g} 个内核")


if __name__ == "__main__":
    main()
