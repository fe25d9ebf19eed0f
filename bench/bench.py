"""Measured figures of the module on this machine (printed, never asserted).

1. Each solution notebook executed top to bottom with nbclient, kernel start included.
2. Grading one full submission vs plainly executing the same notebooks (ratio; target ≤ 1.5).
3. A class of 8 graded with --jobs 2 vs --jobs 1 (ratio; target ≤ 0.65).
4. The same OUT graded again after one late student joined (incremental: the 8 are skipped) vs the
   first run (ratio; a small fraction).
"""
import shutil
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from autograder.command.grade import grade  # noqa: E402
from autograder.course import ASSIGNMENT, SOURCE_DIR, available_notebooks  # noqa: E402


def run_notebook(path):
    nb = nbformat.read(path, as_version=4)
    t = time.perf_counter()
    NotebookClient(nb, timeout=300, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    return time.perf_counter() - t


def make_class(root, n, first=0):
    for i in range(first, first + n):
        folder = root / f"student{i:02d}"
        folder.mkdir(parents=True)
        for name in available_notebooks():
            shutil.copy(SOURCE_DIR / ASSIGNMENT / f"{name}.ipynb", folder / f"{name}.ipynb")


def timed_grade(subs, out, jobs):
    t = time.perf_counter()
    grade(subs, out, jobs=jobs, seed=7, log=lambda *_: None)
    return time.perf_counter() - t


def main():
    names = available_notebooks()
    print("1. 解答笔记本从头到尾执行（nbclient，含内核启动；课程的预算：每本 ≤ 15 s，05 ≤ 20 s）")
    plain = 0.0
    for name in names:
        seconds = run_notebook(SOURCE_DIR / ASSIGNMENT / f"{name}.ipynb")
        plain += seconds
        print(f"   {name:<24} {seconds:6.1f} s")
    print(f"   合计 {plain:.1f} s")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        make_class(tmp / "one", 1)
        one = timed_grade(tmp / "one", tmp / "out1", 1)
        print(f"2. 评一份完整提交（{len(names)} 本，沙箱）：{one:.1f} s；直接执行 {plain:.1f} s；比值 {one / plain:.2f}（目标 ≤ 1.5）")
        make_class(tmp / "eight", 8)
        serial = timed_grade(tmp / "eight", tmp / "out8a", 1)
        parallel = timed_grade(tmp / "eight", tmp / "out8b", 2)
        print(f"3. 8 名学生：--jobs 1 {serial:.1f} s，--jobs 2 {parallel:.1f} s；比值 {parallel / serial:.2f}（目标 ≤ 0.65）")
        make_class(tmp / "eight", 1, first=8)  # a late submission into the same class
        late = timed_grade(tmp / "eight", tmp / "out8b", 2)
        print(f"4. 再评一次（多了 1 名迟交的学生，其余 8 名跳过）：{late:.1f} s；与第一次（--jobs 2）之比 {late / parallel:.2f}")


if __name__ == "__main__":
    main()
