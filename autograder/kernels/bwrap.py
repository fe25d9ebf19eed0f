"""The command line a student kernel runs under: prlimit caps address space, CPU time, processes and file sizes
(limits.py), bwrap shows the kernel what kernel_view.py says and nothing else, and as root setpriv makes the kernel an
unprivileged uid of its own so the process cap holds. A seccomp filter (no_processes.py) keeps the kernel to one
process: threads work, fork, vfork and clone of a new process fail, so nothing computes out of sight of the checks in
the kernel. Also here: the tools it needs, whether this machine lets a kernel have a uid of its own, and the line that
states the limits in force.
"""
import functools
import multiprocessing.util
import os
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple

from w1d1_student.runner import COMPANIONS

from autograder.errors import SandboxUnavailable
from autograder.kernels import cgroup_limits, kernel_view, no_processes
from autograder.kernels.limits import MB, NPROC, Limits


def _run_as_root():
    return os.geteuid() == 0


@functools.lru_cache(maxsize=1)
def own_uid_works():
    """As root: can bwrap start a sandbox that switches to an unprivileged uid? (needs mount namespaces)"""
    if not _run_as_root():
        return False
    try:
        cmd = bwrap_command(["/usr/bin/true"], limits=Limits(cpu_seconds=10), uid=kernel_uid())
        return subprocess.run(cmd, capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired, SandboxUnavailable):
        return False


TOOL_PACKAGES = {"bwrap": "bubblewrap", "prlimit": "util-linux", "setpriv": "util-linux"}


def _tool(name):
    path = shutil.which(name)
    if not path:
        package = TOOL_PACKAGES[name]
        raise SandboxUnavailable(f"找不到 {name}（{package} 里的程序）", f"安装 {package}（apt-get install {package}）")
    return path


@functools.lru_cache(maxsize=1)
def _filter_folder():
    """A private folder of this process's for the compiled seccomp filter, removed when the process ends:
    multiprocessing's exit hook runs at a plain exit and in a pool worker too (which skips atexit)."""
    folder = tempfile.mkdtemp(prefix="w1d1s-")
    multiprocessing.util.Finalize(None, shutil.rmtree, args=(folder, True), exitpriority=0)
    return folder


SECCOMP_FD = 3
# inside the sandbox: copy the inbox into the working folder, then become the kernel, all in one
# process (the seccomp filter allows no child, so no `sh -c 'cp ...'`)
LAUNCHER = """import os, sys
src = sys.argv[1]
for name in sorted(os.listdir(src)):
    path = os.path.join(src, name)
    if os.path.isfile(path) and not os.path.islink(path):
        with open(path, "rb") as f, open(name, "wb") as g:
            g.write(f.read())
os.execvp(sys.argv[2], sys.argv[2:])
"""


class Folders(NamedTuple):
    """The two host folders a sandbox mounts: the inbox (read-only: the files the kernel starts with) and
    the kernel's runtime folder (its sockets); None: not mounted."""
    inbox: Path | str | None = None
    runtime: Path | str | None = None


def bwrap_command(cmd, folders=None, limits=None, *, uid=None, filter_dir=None):
    """Wrap a kernel command line in prlimit + bwrap (+ setpriv to an unprivileged uid as root), with
    the seccomp filter of no_processes.py on the command (a file in `filter_dir`, default: one of
    this process's), which a host shell opens as fd 3 for bwrap, so the command line stands alone.
    Raises SandboxUnavailable where no filter is known for this machine.
    uid: the host uid the command becomes under a privileged bwrap (as root); False: none, bwrap makes a user
    namespace; None: a fresh kernel uid where privileged bwrap works (own_uid_works), else False."""
    limits, (inbox, runtime_dir) = limits or Limits(), folders or Folders()
    if uid is None:
        uid = kernel_uid() if own_uid_works() else False
    own_uid = uid is not False
    try:
        program = no_processes.write_program(filter_dir or _filter_folder())
    except no_processes.UnsupportedArch as exc:
        raise SandboxUnavailable(str(exc), "在 x86_64 或 aarch64 的机器上评分") from exc
    args = ["/bin/sh", "-c", f'exec {SECCOMP_FD}<"$0" && exec "$@"', program]
    args += [_tool("prlimit"), f"--as={limits.memory_mb * MB}", f"--cpu={limits.cpu_seconds}", f"--nproc={NPROC}",
             f"--fsize={limits.file_mb * MB}", "--core=0", "--", _tool("bwrap")]
    if own_uid:  # privileged bwrap, no user namespace: the uid switch below is a real host uid
        caps = ("CAP_SETUID", "CAP_SETGID")
        args += ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
                 *[a for cap in caps for a in ("--cap-add", cap)]]
    else:
        args += ["--unshare-all"]
    args += ["--clearenv", "--die-with-parent", "--new-session", "--seccomp", str(SECCOMP_FD),
             "--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
             "--symlink", "usr/bin", "/bin", "--symlink", "usr/sbin", "/sbin",
             "--proc", "/proc", "--dev", "/dev",
             "--perms", "1777", "--size", str(limits.tmp_mb * MB), "--tmpfs", "/tmp",
             "--perms", "1777", "--size", str(limits.shm_mb * MB), "--tmpfs", "/dev/shm",
             "--perms", "0777", "--size", str(limits.work_mb * MB), "--tmpfs", kernel_view.WORKDIR]
    for etc in ("/etc/ld.so.cache", "/etc/localtime", "/etc/fonts", "/etc/ssl/certs"):
        if os.path.exists(etc):
            args += ["--ro-bind", etc, etc]
    for root in kernel_view._python_roots():
        args += ["--ro-bind", root, root]
    for path, real in kernel_view.python_layout()[1]:
        args += ["--symlink", real, path]
    stub = Path(inbox or tempfile.gettempdir()) / f"{COMPANIONS[0]}.py"
    for path in kernel_view.hidden_paths():
        if os.path.isdir(path):
            args += ["--tmpfs", path]
        else:
            args += ["--ro-bind", str(stub) if stub.exists() else "/dev/null", path]
    if inbox is not None:
        args += ["--ro-bind", str(inbox), kernel_view.INBOX]
    if runtime_dir is not None:
        args += ["--bind", str(runtime_dir), str(runtime_dir)]
    args += ["--chdir", kernel_view.WORKDIR]
    for name, value in kernel_env(runtime_dir).items():
        args += ["--setenv", name, value]
    args += ["--remount-ro", "/", "--"]
    args = _with_parent_dirs(args)
    if own_uid:
        args += [_tool("setpriv"), f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                 "--inh-caps=-all", "--bounding-set=-all", "--"]
    if inbox is not None:  # fill the private working folder, then become the kernel
        args += [str(Path(sys.executable)), "-I", "-S", "-c", LAUNCHER, kernel_view.INBOX]
    return args + list(cmd)


def kernel_env(runtime_dir=None):
    """The kernel's whole environment (bwrap starts from an empty one): nothing of the grader's."""
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp",
           "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "MPLCONFIGDIR": "/tmp", "MPLBACKEND": "agg",
           "OMP_NUM_THREADS": "1", "W1D1_GRADING": "1"}
    if runtime_dir is not None:  # the kernel's own socket folder (a fresh name under /tmp)
        env["JUPYTER_RUNTIME_DIR"] = str(runtime_dir)
    return env


def _with_parent_dirs(args):
    """Create the folders above each mount point as 0755 first (bwrap would make them 0700, which a
    kernel under its own uid could not cross); folders inside an earlier mount already exist."""
    out, mounted, made = [], [], set()
    i = 0
    while i < len(args):
        op = args[i]
        width = 3 if op in ("--ro-bind", "--bind", "--symlink") else 2 if op in ("--tmpfs", "--proc", "--dev") else 0
        if width:
            dest = args[i + width - 1]
            for parent in reversed(Path(dest).parents):
                p = str(parent)
                inside = any(p == m or p.startswith(m.rstrip("/") + "/") for m in mounted)
                if not inside and p not in made and p != "/":
                    made.add(p)
                    at = len(out)
                    while at >= 2 and out[at - 2] in ("--perms", "--size"):  # options of this mount
                        at -= 2
                    out[at:at] = ["--perms", "0755", "--dir", p]
            if op in ("--ro-bind", "--bind"):  # a bind brings its folders along; a fresh tmpfs is empty
                mounted.append(dest)
        out.append(op)
        i += 1
    return out


def kernel_uid():
    """A uid of this kernel's own: the process cap counts per uid, so kernels never share it."""
    return random.SystemRandom().randrange(200_000, 2**31 - 2)


def describe_limits(limits=None):
    """One line (Chinese) saying which limits are in force on this machine."""
    limits = limits or Limits()
    if not _run_as_root():
        procs = f"进程数 ≤ {NPROC}（按本用户计）"
    elif own_uid_works():
        procs = f"进程数 ≤ {NPROC}（内核以独立的非 root uid 运行）"
    else:
        procs = "进程数上限不生效（root 且无法切换到非 root uid）"
    memory = (f"内存 ≤ {limits.memory_mb} MiB（cgroup，含 tmpfs 与共享内存）" if cgroup_limits.available()
              else "内存的 cgroup 上限不生效（本机不允许），tmpfs 不计入地址空间，但三者大小固定")
    return (f"沙箱限制：地址空间 {limits.memory_mb} MiB，{memory}，CPU {limits.cpu_seconds} s，{procs}，"
            f"/tmp {limits.tmp_mb} MiB，工作目录 {limits.work_mb} MiB，/dev/shm {limits.shm_mb} MiB，"
            f"单个文件 {limits.file_mb} MiB；无网络。")
