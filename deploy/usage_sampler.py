"""Memory and CPU of a class's processes while it runs, sampled every `interval` seconds.

Memory is the proportional set size (PSS, /proc/PID/smaps_rollup): pages shared by several processes
(torch's libraries in every kernel) count once in a sum, so the sums add up to what the machine holds.
CPU is each process's user + system time, the last value seen before it exited.
"""
import contextlib
import os
import threading
from pathlib import Path

CLOCK = os.sysconf("SC_CLK_TCK")


def pss_bytes(pid):
    with contextlib.suppress(OSError, ValueError):
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    return 0


def cpu_seconds(pid):
    with contextlib.suppress(OSError, ValueError, IndexError):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLOCK
    return None


def pids_of(uids):
    """{pid: uid} of the processes that run as one of `uids`."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                uid = entry.stat().st_uid
                if uid in uids:
                    found[int(entry.name)] = uid
    return found


def descendants(pid):
    """pid and its children, grandchildren, ... (from /proc's parent links)."""
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                parents[int(entry.name)] = int(Path(entry, "stat").read_text().rsplit(")", 1)[1].split()[1])
    tree, grew = {pid}, True
    while grew:
        more = {p for p, parent in parents.items() if parent in tree} - tree
        tree |= more
        grew = bool(more)
    return tree


class UsageSampler:
    """Peaks of named groups of processes. `groups()` returns {name: set of pids} at each sample."""

    def __init__(self, groups, interval=0.5):
        self.groups, self.interval = groups, interval
        self.peak = {}  # name -> peak PSS bytes of the group
        self.cpu = {}  # name -> {pid: cpu seconds}
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=30)

    def sample(self):
        total = 0
        for name, pids in self.groups().items():
            pss = 0
            for pid in pids:
                pss += pss_bytes(pid)
                cpu = cpu_seconds(pid)
                if cpu is not None:
                    self.cpu.setdefault(name, {})[pid] = cpu
            self.peak[name] = max(self.peak.get(name, 0), pss)
            total += pss
        self.peak["total"] = max(self.peak.get("total", 0), total)
        self.samples += 1

    def cpu_total(self, name):
        return sum(self.cpu.get(name, {}).values())

    def _run(self):
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval)
