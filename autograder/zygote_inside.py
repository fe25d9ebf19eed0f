"""The zygote's program, run inside the sandbox (`python -c`, never imported by the grader): import a kernel's
stack once, then fork one kernel per request read from stdin.

Each child makes itself what a freshly started sandboxed kernel is (sandbox.bwrap_command with setpriv and
the launcher): a mount namespace of its own with fresh working folder, /tmp and /dev/shm, the release's files
copied in as its own uid, no capabilities, the kernel's environment, the one-process seccomp filter; then it
runs `python -m ipykernel_launcher ...` in place, as runpy does for `-m`. The parent only forks and reaps: it
never runs a cell, and a child never reads its requests.
argv: WORKDIR INBOX; stdin: a JSON line {filter (hex), imports}, then one per kernel; stdout: one reply per line.
"""
import ctypes
import json
import os
import runpy
import signal
import sys

LIBC = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNS, CLONE_NEWCGROUP = 0x00020000, 0x02000000
MS_NOSUID, MS_NODEV, MS_REC, MS_PRIVATE = 0x2, 0x4, 0x4000, 0x40000
SYS_OPEN_TREE, SYS_MOVE_MOUNT = 428, 429  # the same number on x86-64 and AArch64
AT_FDCWD, OPEN_TREE_CLONE, MOVE_MOUNT_F_EMPTY_PATH, MNT_DETACH = -100, 1, 4, 2
PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 4, 24, 22, 2
CAP_VERSION_3 = 0x20080522
LAST_CAP = 63


class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]


class CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _check(rc, what):
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _private_folders(workdir, sizes, runtime_dir):
    """Fresh tmpfs folders of the child's own; of the zygote's socket folders, only the child's (its path kept)."""
    _check(LIBC.unshare(CLONE_NEWNS), "unshare")
    _check(LIBC.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "mount --make-rprivate /")
    own = LIBC.syscall(SYS_OPEN_TREE, AT_FDCWD, runtime_dir.encode(), OPEN_TREE_CLONE | os.O_CLOEXEC)
    if own < 0:
        _check(own, "open_tree")
    for path, mode in ((workdir, "0777"), ("/tmp", "1777"), ("/dev/shm", "1777")):
        _check(LIBC.umount2(path.encode(), MNT_DETACH), f"umount {path}")  # the zygote's, with its socket folders
        options = f"mode={mode},size={sizes[path]}".encode()
        _check(LIBC.mount(b"tmpfs", path.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, options), f"mount {path}")
    os.makedirs(runtime_dir, mode=0o755)
    _check(LIBC.syscall(SYS_MOVE_MOUNT, own, b"", AT_FDCWD, runtime_dir.encode(), MOVE_MOUNT_F_EMPTY_PATH), "move_mount")
    os.close(own)
    os.chdir(workdir)


def _drop_privileges(uid):
    for cap in range(LAST_CAP + 1):  # what setpriv --bounding-set=-all does; past the last cap: EINVAL
        LIBC.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)  # effective and permitted capabilities go with root
    none = (CapData * 2)()
    _check(LIBC.capset(ctypes.byref(CapHeader(CAP_VERSION_3, 0)), none), "capset")  # inheritable too
    LIBC.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)  # as after an exec: the uid change made it 0


def _tmp_files():
    """What the imports wrote to the zygote's /tmp (matplotlib's font cache): a fresh kernel's /tmp has it too."""
    found = {}
    for entry in os.scandir("/tmp"):
        if entry.is_file(follow_symlinks=False):
            with open(entry.path, "rb") as f:
                found[entry.name] = f.read()
    return found


def _fill(inbox):
    for name in sorted(os.listdir(inbox)):
        path = os.path.join(inbox, name)
        if os.path.isfile(path) and not os.path.islink(path):
            with open(path, "rb") as f, open(name, "wb") as g:
                g.write(f.read())


def _become_kernel(request, workdir, inbox, program, go):
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.setsid()
    devnull = os.open("/dev/null", os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(2, 1)  # stdout is the zygote's reply pipe
    os.close(devnull)
    carried = _tmp_files()
    _private_folders(workdir, request["sizes"], request["runtime_dir"])
    if os.read(go, 1) != b"1":  # the grader moved this process into its cgroup (or has none for it)
        raise OSError("no go")
    os.close(go)
    _check(LIBC.unshare(CLONE_NEWCGROUP), "unshare cgroup")  # its cgroup seen as the root, as a kernel's
    _drop_privileges(request["uid"])
    for name, data in carried.items():
        with open(os.path.join("/tmp", name), "wb") as f:
            f.write(data)
    _fill(inbox)
    os.environ.clear()
    os.environ.update(request["env"])
    prog = SockFprog(len(program) // 8, program)
    _check(LIBC.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0), "seccomp")
    sys.argv = [sys.argv[0], *request["argv"]]
    sys.path[0] = workdir  # as `python -m` puts it
    runpy._run_module_as_main("ipykernel_launcher")


def _reap(*_):
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass


def _lines(fd):
    """Requests, read unbuffered: a child inherits nothing of the ones after its own."""
    pending = b""
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            return
        pending += chunk
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            yield json.loads(line)


def _reply(message):
    os.write(1, json.dumps(message).encode() + b"\n")


def _child(request, workdir, inbox, program, go):
    code = 1
    try:
        _become_kernel(request, workdir, inbox, program, go)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 0
    except BaseException:
        import traceback

        traceback.print_exc()
    os._exit(code)


def main():
    workdir, inbox = sys.argv[1], sys.argv[2]
    requests = _lines(0)
    setup = next(requests)
    program = bytes.fromhex(setup["filter"])
    for name in setup["imports"]:
        __import__(name)
    signal.signal(signal.SIGCHLD, _reap)
    _reply({"ready": os.readlink("/proc/self/ns/pid")})
    waiting = {}  # child pid -> the pipe it waits on before it goes on
    for request in requests:
        if "go" in request:
            fd = waiting.pop(request["go"], None)
            if fd is not None:
                os.write(fd, b"1")
                os.close(fd)
            continue
        go, went = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(went)
            for fd in waiting.values():
                os.close(fd)
            _child(request, workdir, inbox, program, go)
        os.close(go)
        waiting[pid] = went
        _reply({"pid": pid})


main()
