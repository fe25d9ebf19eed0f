"""A memory cap that counts tmpfs and shared memory: one cgroup per kernel, where this machine allows.

cgroup v2 (`memory.max`) when the grader's own cgroup delegates the memory controller, else
cgroup v1 (`memory.limit_in_bytes`). Without either, `available()` is False and the sandbox's
fixed tmpfs sizes are the only bound on what tmpfs adds to the address-space limit.
"""
import os
import signal
import time
import uuid
from pathlib import Path

BASE = Path("/sys/fs/cgroup")


def _own(controller):
    """This process's cgroup path for `controller` ('' = the v2 hierarchy)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, ctrls, path = line.split(":", 2)
        if (controller == "" and ctrls == "") or controller in ctrls.split(","):
            return path.lstrip("/")
    return None


def _parents():
    """(folder new cgroups go in, limit file, swap limit file) candidates, v2 first."""
    found = []
    own = _own("")
    if own is not None and (BASE / "cgroup.controllers").exists():
        parent = BASE / own
        try:
            if "memory" in (parent / "cgroup.subtree_control").read_text().split():
                found.append((parent, "memory.max", "memory.swap.max"))
        except OSError:
            pass
    own = _own("memory")
    if own is not None and (BASE / "memory" / "memory.limit_in_bytes").exists():
        found.append((BASE / "memory" / own, "memory.limit_in_bytes", "memory.memsw.limit_in_bytes"))
    return found


class MemoryCgroup:
    def __init__(self, path, limit_file="memory.max"):
        self.path, self.limit_file = path, limit_file

    @classmethod
    def create(cls, limit_bytes):
        """A fresh cgroup capped at `limit_bytes` (RAM, tmpfs and shm together), or None."""
        for parent, limit_file, swap_file in _parents():
            path = parent / f"w1d1-{uuid.uuid4().hex[:12]}"
            try:
                path.mkdir()
                (path / limit_file).write_text(str(limit_bytes))
                if (path / swap_file).exists():  # no escape into swap
                    (path / swap_file).write_text("0" if swap_file == "memory.swap.max" else str(limit_bytes))
                return cls(path, limit_file)
            except OSError:
                try:
                    path.rmdir()
                except OSError:
                    pass
        return None

    def wrap(self, cmd):
        """`cmd`, started inside this cgroup (the shell joins it, then becomes `cmd`)."""
        return ["/bin/sh", "-c", f'echo $$ > "{self.path}/cgroup.procs" && exec "$@"', "sh", *cmd]

    def lower_by(self, nbytes):
        """Lower the cap by `nbytes` (memory a process will use that is charged elsewhere)."""
        limit = self.path / self.limit_file
        current = int(limit.read_text().strip())
        limit.write_text(str(max(current - nbytes, 0)))

    def add(self, pid):
        """Move the running process `pid` into this cgroup."""
        (self.path / "cgroup.procs").write_text(str(pid))

    def remove(self):
        """Remove the cgroup once its processes are gone (any left are killed), trying for about 5 s: first
        every few ms, as a killed kernel's processes are gone in a few (every notebook's stop waited 0.1 s)."""
        pause, ends = 0.002, time.monotonic() + 5
        while True:
            try:
                self.path.rmdir()
                return True
            except OSError:
                try:
                    for pid in (self.path / "cgroup.procs").read_text().split():
                        os.kill(int(pid), signal.SIGKILL)
                except (OSError, ValueError):
                    pass
            if time.monotonic() > ends:
                return False
            time.sleep(pause)
            pause = min(2 * pause, 0.1)


def available():
    trial = MemoryCgroup.create(2**30)
    return trial is not None and trial.remove()
