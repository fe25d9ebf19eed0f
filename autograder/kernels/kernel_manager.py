"""Confined student kernels, talking over unix sockets (ipc): SandboxKernelManager starts each kernel under the
command line of bwrap.py (what it sees: kernel_view.py; its limits: limits.py), in a memory cgroup of its own where the
machine allows one (cgroup_limits.py). Every path starts its kernels so: the grading command, nbgrader's own commands
and formgrader, as root or not.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
import weakref
from pathlib import Path

import zmq
from jupyter_client.manager import AsyncKernelManager
from traitlets import Bool, Integer, List, Unicode, default
from w1d1_student.runner import CASES_ENV

from autograder import timing
from autograder.kernels import bwrap, cgroup_limits, kernel_view
from autograder.kernels.kernel_messages import MAX_FRAME_BYTES, BoundedSession
from autograder.kernels.limits import MB, Limits


def _remove_all(leftovers):
    """Folders and cgroups of one kernel manager (also when its kernel never started)."""
    while leftovers:
        item = leftovers.pop()
        if isinstance(item, Path):
            shutil.rmtree(item, ignore_errors=True)
        else:
            item.remove()


class SandboxKernelManager(AsyncKernelManager):
    """A kernel manager whose kernels run inside bwrap, over ipc sockets (no network needed)."""

    sandbox = Bool(True, config=True, help="Confine kernels with bubblewrap.")
    memory_mb = Integer(3072, config=True, help="Address-space limit of a kernel (MiB).")
    cpu_seconds = Integer(600, config=True, help="CPU-time limit of a kernel (s).")
    grader_seed = Integer(0, config=True, help="Seed of the check cases, where no case_file is given.")
    case_file = Unicode("", config=True, help="The grading run's case file (autograder.exercises.checks.write_case_file): "
                        "read by the grader, which hands each test cell its cases; never bound into the sandbox.")
    kernel_python = Unicode(sys.executable, config=True)
    more_imports = List(Unicode(), default_value=list(kernel_view.AHEAD_IMPORTS), config=True,
                        help="Modules a kernel imports after the registry, before the first cell.")

    def __init__(self, **kwargs):
        kwargs.setdefault("transport", "ipc")
        super().__init__(**kwargs)
        # never block on messages queued for a dead kernel (a killed kernel must not hang the grader)
        self.context.setsockopt(zmq.LINGER, 0)
        # absolute, short socket paths in a folder of this kernel's own: unix socket paths must stay
        # under ~100 characters, and the sandbox binds only this folder (no other kernel's connection file)
        parent = Path(tempfile.mkdtemp(prefix="w1d1r-"))
        runtime = self._socket_dir = Path(tempfile.mkdtemp(prefix="w1d1k-", dir=parent))
        self._inbox = self._cgroup = None
        self._case_dir = None
        self._leftovers = [parent, runtime]
        weakref.finalize(self, _remove_all, self._leftovers)  # a kernel that failed to start leaves nothing
        name = f"k{uuid.uuid4().hex[:8]}"
        self.connection_file = str(runtime / f"{name}.json")
        self.ip = str(runtime / f"{name}-ipc")

    @default("session")
    def _bounded_session(self):
        return BoundedSession(parent=self)

    def client(self, **kwargs):
        """A client (with a copy of this manager's BoundedSession) whose sockets refuse frames over MAX_FRAME_BYTES."""
        kc = super().client(**kwargs)
        kc.context.setsockopt(zmq.MAXMSGSIZE, MAX_FRAME_BYTES)
        return kc

    def _limits(self):
        return Limits(memory_mb=self.memory_mb, cpu_seconds=self.cpu_seconds)

    async def _async_pre_start_kernel(self, **kw):
        cmd, kw = await super()._async_pre_start_kernel(**kw)
        if "-f" in cmd:  # the grader's python, quiet banner
            # the registry (every driver) imported before the first cell: no student code can rebind their watches
            # first; the threads alive when the first cell starts are the kernel's own (torch_calls); the line binds
            # no name
            first = " and ".join([*(f"__import__({name!r})" for name in ["w1d1_student.registry", *self.more_imports]),
                                  "__import__('w1d1_student.torch_calls', fromlist=['_'])"
                                  ".kernel_threads_at_first_cell(get_ipython())",
                                  f"__import__('w1d1_student.working_folder', fromlist=['_']).close({kernel_view.RELEASED_MODULES!r})"])
            cmd = [self.kernel_python, "-m", "ipykernel_launcher", *cmd[cmd.index("-f"):], "--log-level=CRITICAL",
                   f"--IPKernelApp.exec_lines={first} and None"]
        env = dict(kw.get("env") or os.environ)
        if self._case_dir is None:
            self._case_dir = Path(tempfile.mkdtemp(prefix="w1d1c-"))
            self._leftovers.append(self._case_dir)
        if self.sandbox:
            # the working folder: the release's files, never the folder nbgrader grades in (kw["cwd"],
            # which holds whatever the student submitted beside the notebook)
            if self._inbox is None:
                self._inbox = Path(tempfile.mkdtemp(prefix="w1d1in-"))
                self._leftovers.append(self._inbox)
                kernel_view.fill_inbox(kernel_view.RELEASED_FILES, self._inbox)
            uid = bwrap.kernel_uid() if bwrap.own_uid_works() else None
            if uid is not None:  # the kernel reads its connection file and makes its sockets as `uid`
                for p in (self._socket_dir, Path(self.connection_file)):
                    os.chown(p, uid, uid)
            cmd = bwrap.bwrap_command(cmd, bwrap.Folders(self._inbox, self._socket_dir), self._limits(),
                                      uid=False if uid is None else uid, filter_dir=self._case_dir)
            self._cgroup = cgroup_limits.MemoryCgroup.create(self.memory_mb * MB)
            if self._cgroup is not None:  # RAM, tmpfs and shared memory counted together
                self._leftovers.append(self._cgroup)
                cmd = self._cgroup.wrap(cmd)
            kw["cwd"] = str(self._inbox)  # bwrap itself starts here; the kernel runs in WORKDIR
            # what a kernel writes to its fds 1 and 2 (ipykernel sends the cells' output over the protocol) reaches
            # no terminal or log of the grader's
            kw["stdout"] = kw["stderr"] = subprocess.DEVNULL
        else:
            env.update({"W1D1_GRADING": "1", "MPLBACKEND": "agg"})
            env.pop(CASES_ENV, None)
            env.pop(timing.ENV, None)
        kw["env"] = env
        return cmd, kw

    def lock_runtime_dir(self):
        """Once the kernel's sockets exist: its socket folder goes back to root, read-only for the
        kernel's uid, so nothing more can be written to the grader's disk from inside."""
        if self.sandbox and bwrap._run_as_root() and self._socket_dir.exists():
            for p in self._socket_dir.iterdir():
                if not p.is_symlink():  # root's alone, whatever umask the kernel had: no other user connects
                    os.chown(p, 0, 0)
                    p.chmod(0o600)
            os.chown(self._socket_dir, 0, 0)
            self._socket_dir.chmod(0o755)

    async def _async_shutdown_kernel(self, now=False, restart=False):
        await super()._async_shutdown_kernel(now=now, restart=restart)
        if self._cgroup is not None:
            self._leftovers.remove(self._cgroup)
            self._cgroup.remove()
            self._cgroup = None
        if not restart:
            _remove_all(self._leftovers)

    shutdown_kernel = _async_shutdown_kernel

    async def _async_wait(self, pollinterval=0.005):
        # jupyter_client's own looks every 0.1 s for the process it has just killed and has no setting for it
        await super()._async_wait(pollinterval)
