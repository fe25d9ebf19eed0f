"""A warm process that forks sandboxed kernels: the grading command's kernels skip the stack's imports.

A fresh kernel spends ~3 CPU-s importing torch, pyplot and sympy before its first cell; a grading worker
(one student) starts one zygote in a sandbox like a kernel's, which imports them once and forks each of
the student's kernels (zygote_inside.py). A child makes itself what sandbox.bwrap_command makes a kernel:
own uid, own namespaces and fresh folders, no capabilities, the one-process filter, its memory cgroup (joined
here, by the child's host pid, before it reads a file of the student's), the command line of a fresh kernel. The zygote runs as
root inside the sandbox with the capabilities a child needs to do that, and never runs a cell.
Only where kernels get a uid of their own (the grader runs as root); elsewhere kernels start as before.
"""
import inspect
import json
import os
import select
import shutil
import signal
import subprocess
import time
from pathlib import Path

from autograder.kernels import no_processes, zygote_inside

INSIDE_SOURCE = inspect.getsource(zygote_inside)  # what the zygote runs (python -c)
REPLY_SECONDS = 120


class ZygoteFailed(RuntimeError):
    pass


class ForkedKernel:
    """What jupyter_client's provisioner needs of a Popen, for a kernel the zygote forked: a pidfd on its
    host pid (signals never reach a reused pid)."""

    stdin = stdout = stderr = None
    _killed = False

    def __init__(self, host_pid):
        self.pid = host_pid
        self._fd = os.pidfd_open(host_pid)
        self.returncode = None

    def poll(self):
        if self.returncode is None and select.select([self._fd], [], [], 0)[0]:
            self.returncode = -signal.SIGKILL if self._killed else 0
            os.close(self._fd)
        return self.returncode

    def wait(self, timeout=None):
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired("kernel", timeout)
            select.select([self._fd], [], [], 0.1)
        return self.returncode

    def send_signal(self, signum):
        if self.returncode is None:
            self._killed |= signum == signal.SIGKILL
            signal.pidfd_send_signal(self._fd, signum)

    def kill(self):
        self.send_signal(signal.SIGKILL)

    def terminate(self):
        self.send_signal(signal.SIGTERM)


def _anonymous_bytes(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) * 1024
    return 0


def _host_pid(ns_pid, pid_ns):
    """The host pid of the process that is `ns_pid` in the pid namespace `pid_ns` ('pid:[inode]')."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            if os.readlink(f"/proc/{entry.name}/ns/pid") != pid_ns:
                continue
            for line in Path(f"/proc/{entry.name}/status").read_text().splitlines():
                if line.startswith("NSpid:") and line.split()[-1] == str(ns_pid):
                    return int(entry.name)
        except OSError:
            continue
    raise ZygoteFailed(f"no host pid for {ns_pid} in {pid_ns}")


class Zygote:
    """One zygote: its sandbox (`cmd`, bwrap as sandbox.bwrap_command(zygote=True) makes it), its pipes, and the
    folders it owns, removed when it stops: `runtime_root` (where its kernels' socket folders go) first, then
    the inbox it starts in, then any others."""

    def __init__(self, cmd, folders, sizes, imports, keep=(), stderr=None):
        """cmd: the zygote's command line, less its last argument (the fd it replies on); sizes: {fresh folder of a
        kernel's: its size}; keep: what a kernel puts back in them (sandbox._kept_in_fresh_folders); stderr: where
        the zygote's own errors go (default: the grader's)."""
        self.runtime_root, self._folders, self._sizes = Path(folders[0]), [Path(f) for f in folders], sizes
        self._keep = list(keep)
        self._replies, write_end = os.pipe()
        try:  # the zygote's own errors reach the grader's stderr; its kernels write fds 1 and 2 to /dev/null
            self._proc = subprocess.Popen([*cmd, str(write_end)], stdin=subprocess.PIPE, cwd=str(self._folders[1]), stderr=stderr,
                                          pass_fds=(write_end,), start_new_session=True)
        finally:
            os.close(write_end)
        self._pending = b""
        self.pid_ns = None
        self._send({"filter": no_processes.program().hex(), "imports": list(imports)})

    def alive(self):
        return self._proc.poll() is None

    def _send(self, message):
        try:
            self._proc.stdin.write(json.dumps(message).encode() + b"\n")
            self._proc.stdin.flush()
        except OSError as exc:
            raise ZygoteFailed(f"the zygote is gone: {exc}") from exc

    def _receive(self):
        fd = self._replies
        deadline = time.monotonic() + REPLY_SECONDS
        while b"\n" not in self._pending:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise ZygoteFailed("the zygote did not answer")
            chunk = os.read(fd, 65536)
            if not chunk:
                raise ZygoteFailed(f"the zygote ended (exit {self._proc.poll()})")
            self._pending += chunk
        line, self._pending = self._pending.split(b"\n", 1)
        return json.loads(line)

    def fork_kernel(self, cmd, uid, env, runtime_dir, cgroup=None):
        """Fork a kernel that is `cmd` (python -m ipykernel_launcher ...) run as `uid` with environment `env`, its
        sockets in `runtime_dir` (under runtime_root), in `cgroup` (a cgroup_limits.MemoryCgroup) before it reads
        a file of the student's. Returns its ForkedKernel."""
        if self.pid_ns is None:
            self.pid_ns = self._receive()["ready"]
        self._send({"cmd": list(cmd), "uid": uid, "env": env, "sizes": self._sizes, "keep": self._keep,
                    "runtime_dir": runtime_dir})
        ns_pid = self._receive()["pid"]
        host_pid = _host_pid(ns_pid, self.pid_ns)
        kernel = ForkedKernel(host_pid)
        if cgroup is not None:
            # the memory it shares with the zygote is charged to the zygote's cgroup: counted against its cap all the
            # same (at most what it shares now; a fresh kernel, charged for its own imports, has ~80 MiB more room)
            cgroup.lower_by(_anonymous_bytes(host_pid))
            cgroup.add(host_pid)
        self._send({"go": ns_pid})  # it waits for this before it reads a file of the student's or runs a line
        return kernel

    def stop(self):
        try:
            self._proc.stdin.close()
            os.close(self._replies)
        except OSError:
            pass
        try:
            os.killpg(self._proc.pid, signal.SIGKILL)  # bwrap, its pid namespace's init and every kernel in it
        except OSError:
            pass
        self._proc.wait()
        for folder in self._folders:
            shutil.rmtree(folder, ignore_errors=True)


_RUNNING = {}


def running(key, start):
    """This process's zygote for `key`, started by `start()` on first use (or when the last one ended)."""
    zygote = _RUNNING.get(key)
    if zygote is None or not zygote.alive():
        zygote = _RUNNING[key] = start()
    return zygote


def stop_all():
    while _RUNNING:
        _RUNNING.popitem()[1].stop()
