"""Confined student kernels: bubblewrap + resource limits, talking over unix sockets (ipc).

Each kernel sees the Python environment read-only, the kernel side of the autograder read-only,
its own submission folder (read-write) and nothing else: no solutions, no gradebook, no other
student, no network. prlimit caps memory, CPU time, processes and file sizes.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import zmq
from jupyter_client.manager import AsyncKernelManager
from traitlets import Bool, Integer, Unicode

PACKAGE_DIR = Path(__file__).resolve().parent
REPO_ROOT = PACKAGE_DIR.parent


class SandboxUnavailable(RuntimeError):
    pass


def _python_roots():
    """Folders the interpreter needs: the venv and the base installation."""
    roots = {Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve(), Path(sys.executable).resolve().parent.parent}
    return sorted(str(r) for r in roots if not str(r).startswith("/usr"))


def bwrap_command(cmd, workdir, runtime_dir, *, memory_mb=3072, cpu_seconds=600, seed=0):
    """Wrap a kernel command line in prlimit + bwrap."""
    bwrap = shutil.which("bwrap")
    prlimit = shutil.which("prlimit")
    if not bwrap or not prlimit:
        raise SandboxUnavailable("bubblewrap (bwrap) 或 prlimit 不可用")
    args = [prlimit, f"--as={memory_mb * 2**20}", f"--cpu={cpu_seconds}", "--nproc=256",
            f"--fsize={256 * 2**20}", "--core=0", "--",
            bwrap, "--unshare-all", "--die-with-parent", "--new-session",
            "--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
            "--symlink", "usr/bin", "/bin", "--symlink", "usr/sbin", "/sbin",
            "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    for etc in ("/etc/ld.so.cache", "/etc/localtime", "/etc/fonts", "/etc/ssl/certs"):
        if os.path.exists(etc):
            args += ["--ro-bind", etc, etc]
    for root in _python_roots():
        args += ["--ro-bind", root, root]
    # only the kernel side of the autograder: no judge, no references
    kernel_pkg = PACKAGE_DIR / "kernel"
    args += ["--ro-bind", str(PACKAGE_DIR / "__init__.py"), str(PACKAGE_DIR / "__init__.py"),
             "--ro-bind", str(kernel_pkg), str(kernel_pkg)]
    args += ["--bind", str(runtime_dir), str(runtime_dir), "--bind", str(workdir), str(workdir),
             "--chdir", str(workdir),
             "--setenv", "HOME", "/tmp", "--setenv", "MPLCONFIGDIR", "/tmp", "--setenv", "MPLBACKEND", "agg",
             "--setenv", "W1D1_GRADING", "1", "--setenv", "W1D1_SEED", str(seed),
             "--setenv", "PYTHONPATH", str(REPO_ROOT), "--setenv", "OMP_NUM_THREADS", "1",
             "--setenv", "JUPYTER_RUNTIME_DIR", str(runtime_dir),
             "--unsetenv", "JPY_SESSION_NAME", "--unsetenv", "JPY_PARENT_PID",
             "--remount-ro", "/", "--"]
    return args + list(cmd)


def probe():
    """Raise SandboxUnavailable unless a confined python can start here."""
    try:
        cmd = bwrap_command([sys.executable, "-c", "print('ok')"], Path.cwd(), Path("/tmp"), cpu_seconds=30)
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SandboxUnavailable(str(exc)) from exc
    if out.returncode != 0 or out.stdout.strip() != "ok":
        raise SandboxUnavailable(out.stderr.strip()[-500:] or f"exit {out.returncode}")


class SandboxKernelManager(AsyncKernelManager):
    """A kernel manager whose kernels run inside bwrap, over ipc sockets (no network needed)."""

    sandbox = Bool(True, config=True, help="Confine kernels with bubblewrap.")
    memory_mb = Integer(3072, config=True, help="Address-space limit of a kernel (MiB).")
    cpu_seconds = Integer(600, config=True, help="CPU-time limit of a kernel (s).")
    grader_seed = Integer(0, config=True, help="Seed of the check cases for this grading run.")
    kernel_python = Unicode(sys.executable, config=True)

    def __init__(self, **kwargs):
        kwargs.setdefault("transport", "ipc")
        super().__init__(**kwargs)
        # never block on messages queued for a dead kernel (a killed kernel must not hang the grader)
        self.context.setsockopt(zmq.LINGER, 0)
        seed = os.environ.get("W1D1_GRADER_SEED")
        if seed is not None:
            self.grader_seed = int(seed)
        if os.environ.get("W1D1_NO_SANDBOX") == "1":
            self.sandbox = False
        # absolute, short socket paths in a folder of this kernel's own: the kernel's cwd is the
        # submission folder, unix socket paths must stay under ~100 characters, and the sandbox
        # binds only this folder (no other kernel's connection file is visible)
        runtime = self._socket_dir = Path(tempfile.mkdtemp(prefix="w1d1k-"))
        name = f"k{uuid.uuid4().hex[:8]}"
        self.connection_file = str(runtime / f"{name}.json")
        self.ip = str(runtime / f"{name}-ipc")

    async def _async_pre_start_kernel(self, **kw):
        cmd, kw = await super()._async_pre_start_kernel(**kw)
        if "-f" in cmd:  # the grader's python, quiet banner
            cmd = [self.kernel_python, "-m", "ipykernel_launcher", *cmd[cmd.index("-f"):], "--log-level=CRITICAL"]
        workdir = Path(kw.get("cwd") or os.getcwd()).resolve()
        runtime_dir = Path(self.ip).parent
        env = dict(kw.get("env") or os.environ)
        if self.sandbox:
            cmd = bwrap_command(cmd, workdir, runtime_dir, memory_mb=self.memory_mb,
                                cpu_seconds=self.cpu_seconds, seed=self.grader_seed)
        else:
            env.update({"W1D1_GRADING": "1", "W1D1_SEED": str(self.grader_seed), "MPLBACKEND": "agg"})
        kw["env"] = env
        return cmd, kw

    async def _async_shutdown_kernel(self, now=False, restart=False):
        await super()._async_shutdown_kernel(now=now, restart=restart)
        if not restart:
            shutil.rmtree(self._socket_dir, ignore_errors=True)

    shutdown_kernel = _async_shutdown_kernel
