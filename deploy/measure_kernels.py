"""Peak memory and run time of one student's kernel running each notebook: the sizing table of docs/hub.md.

Run it as a student with the student environment's python, on a copy of the released notebooks:
    runuser -u STUDENT -- /opt/w1d1-hub/student/bin/python measure_kernels.py NOTEBOOK_DIR [REPEATS]
Peak memory is the largest resident set (RSS) of the kernel and its children, sampled every 50 ms.
Run time depends on what else the machine runs: each row prints the 1-minute load average before its runs.
"""
import os
import statistics
import sys
import threading
import time
from pathlib import Path

import nbformat
import psutil
from nbclient import NotebookClient


def tree_rss(pid):
    try:
        proc = psutil.Process(pid)
        return sum(p.memory_info().rss for p in [proc, *proc.children(recursive=True)])
    except psutil.Error:
        return 0


def run_one(path):
    """(peak RSS in MiB, seconds) of a fresh kernel running the notebook top to bottom."""
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}})
    peak, done = [0], threading.Event()

    def sample():
        while not done.is_set():
            km = getattr(client, "km", None)
            proc = km and km.has_kernel and getattr(km.provisioner, "process", None)
            if proc:
                peak[0] = max(peak[0], tree_rss(proc.pid))
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    started = time.monotonic()
    sampler.start()
    try:
        client.execute()
    finally:
        done.set()
        sampler.join()
    return peak[0] / 2**20, time.monotonic() - started


def main(folder, repeats=3):
    print(f"{os.cpu_count()} 个 CPU，每本 {repeats} 次")
    print("| 笔记本 | 内核峰值内存 MiB（中位数，范围） | 运行时间 s（中位数，范围） | 运行前的 1 分钟平均负载 |")
    print("|---|---|---|---|", flush=True)
    for path in sorted(Path(folder).glob("*.ipynb")):
        load = os.getloadavg()[0]
        runs = [run_one(path) for _ in range(repeats)]
        mem, sec = [r[0] for r in runs], [r[1] for r in runs]
        print(f"| {path.stem} | {statistics.median(mem):.0f}（{min(mem):.0f}–{max(mem):.0f}） "
              f"| {statistics.median(sec):.1f}（{min(sec):.1f}–{max(sec):.1f}） | {load:.1f} |", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 3)
