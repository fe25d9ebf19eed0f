"""The zygote's program, run inside the sandbox (its source as `python -c`; the grader imports it only to read it): import a kernel's
stack once, then fork one kernel per request read from stdin.

Each child makes itself what a freshly started sandboxed kernel is (sandbox.bwrap_command with setpriv and
the launcher): mount, IPC, network and UTS namespaces of its own (fresh working folder, /tmp, /dev/shm and
/dev/pts, the release's files copied in as its own uid; loopback up), its cgroup namespace once the grader has moved it into
its cgroup, no capabilities, the kernel's environment and command line (sys.orig_argv, /proc/self/cmdline and
environ), a pipe as stdin and /dev/null as stdout and stderr, fresh random seeds and thread names, the one-process
seccomp filter; then it runs
`python -m ipykernel_launcher ...` in place, as runpy does for `-m`. The parent only forks and reaps: it never
runs a cell, and a child never reads its requests.
argv: WORKDIR INBOX REPLY_FD; stdin: a JSON line {filter (hex), imports}, then one per kernel; REPLY_FD: one reply
per line.
"""
import ctypes
import itertools
import json
import os
import runpy
import signal
import sys
import threading

LIBC = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWNET = 0x20000, 0x2000000, 0x4000000, 0x8000000, 0x40000000
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
PR_SET_MM, PR_SET_MM_MAP = 35, 14
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REC, MS_PRIVATE = 0x2, 0x4, 0x8, 0x4000, 0x40000
SYS_OPEN_TREE, SYS_MOVE_MOUNT = 428, 429  # the same number on x86-64 and AArch64
AT_FDCWD, OPEN_TREE_CLONE, AT_RECURSIVE, MOVE_MOUNT_F_EMPTY_PATH, MNT_DETACH = -100, 1, 0x8000, 4, 2
PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 4, 24, 22, 2
CAP_VERSION_3 = 0x20080522
LAST_CAP = 63


class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]


class CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


class MmMap(ctypes.Structure):  # struct prctl_mm_map
    _fields_ = [(name, ctypes.c_uint64) for name in ("start_code", "end_code", "start_data", "end_data", "start_brk",
                                                     "brk", "start_stack", "arg_start", "arg_end", "env_start",
                                                     "env_end", "auxv")] + [("auxv_size", ctypes.c_uint32),
                                                                            ("exe_fd", ctypes.c_int32)]


KEPT = []  # the buffers /proc/self/cmdline and environ now point into: alive as long as the process


def _check(rc, what):
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _loopback_up():
    """What bwrap --unshare-net does in a fresh network namespace."""
    import fcntl
    import socket
    import struct

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        flags = struct.unpack("16sH", fcntl.ioctl(s, SIOCGIFFLAGS, struct.pack("16sH", b"lo", 0)))[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH", b"lo", flags | IFF_UP))


def _clone(path, flags=0):
    fd = LIBC.syscall(SYS_OPEN_TREE, AT_FDCWD, path.encode(), OPEN_TREE_CLONE | flags | os.O_CLOEXEC)
    if fd < 0:
        _check(fd, f"open_tree {path}")
    return fd


def _attach(fd, path):
    _check(LIBC.syscall(SYS_MOVE_MOUNT, fd, b"", AT_FDCWD, path.encode(), MOVE_MOUNT_F_EMPTY_PATH), f"move_mount {path}")
    os.close(fd)


def _private_folders(workdir, sizes, runtime_dir, keep):
    """Fresh tmpfs folders of the child's own; of the zygote's socket folders, only the child's (its path kept);
    what `keep` lists in them put back as the zygote had it (python folders, with their own mounts, links and the
    folders above them: a venv under /tmp); IPC objects, network and host name of its own too."""
    _check(LIBC.unshare(CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWNET | CLONE_NEWUTS), "unshare")
    _loopback_up()
    _check(LIBC.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "mount --make-rprivate /")
    own = _clone(runtime_dir)
    kept = {path: _clone(path, AT_RECURSIVE) for kind, path, *_ in keep if kind == "mount"}
    for path, mode in ((workdir, "0777"), ("/tmp", "1777"), ("/dev/shm", "1777")):
        _check(LIBC.umount2(path.encode(), MNT_DETACH), f"umount {path}")  # the zygote's, with its socket folders
        options = f"mode={mode},size={sizes[path]}".encode()
        _check(LIBC.mount(b"tmpfs", path.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, options), f"mount {path}")
    _check(LIBC.umount2(b"/dev/pts", MNT_DETACH), "umount /dev/pts")  # terminals of its own, as bwrap --dev gives
    _check(LIBC.mount(b"devpts", b"/dev/pts", b"devpts", MS_NOSUID | MS_NOEXEC,
                      b"newinstance,ptmxmode=0666,mode=620"), "mount /dev/pts")
    for kind, path, *target in keep:
        if kind == "symlink":
            os.symlink(target[0], path)
            continue
        os.mkdir(path)
        os.chmod(path, 0o755)
        if kind == "mount":
            _attach(kept[path], path)
    os.makedirs(runtime_dir, mode=0o755)
    _attach(own, runtime_dir)
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


def _look_started_as(argv, env):
    """/proc/self/cmdline and /proc/self/environ as an exec of `argv` with `env` would show them."""
    args = b"".join(a.encode() + b"\0" for a in argv)
    envs = b"".join(f"{k}={v}".encode() + b"\0" for k, v in env.items())
    auxv = open("/proc/self/auxv", "rb").read()
    field = open("/proc/self/stat").read().rsplit(")", 1)[1].split()
    at = lambda n: int(field[n - 3])  # noqa: E731  (proc(5) numbers the fields from 1; two come before ")")
    arg_start, arg_end = at(48), at(49)
    if len(args) + len(envs) <= arg_end - arg_start:  # on the stack, where an exec puts them (the zygote's
        ctypes.memmove(arg_start, args + envs, len(args) + len(envs))  # command line holds its whole source)
        start = [arg_start, arg_start + len(args)]
    else:
        KEPT.extend(ctypes.create_string_buffer(data, len(data)) for data in (args, envs))
        start = [ctypes.addressof(b) for b in KEPT[-2:]]
    saved_auxv = ctypes.create_string_buffer(auxv, len(auxv))  # the kernel keeps its own copy
    LIBC.sbrk.restype = ctypes.c_void_p
    mm = MmMap(at(26), at(27), at(45), at(46), at(47), LIBC.sbrk(0), at(28), start[0], start[0] + len(args),
               start[1], start[1] + len(envs), ctypes.addressof(saved_auxv), len(auxv), -1)
    _check(LIBC.prctl(PR_SET_MM, PR_SET_MM_MAP, ctypes.byref(mm), ctypes.sizeof(mm), 0), "prctl PR_SET_MM_MAP")
    sys.orig_argv = list(argv)


def _fresh_seeds():
    """Import seeded torch's and numpy's generators from the OS (Python's random is reseeded at fork)."""
    if "torch" in sys.modules:
        sys.modules["torch"].default_generator.seed()
    if "numpy.random" in sys.modules:
        sys.modules["numpy.random"].seed()


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


def _become_kernel(request, workdir, inbox, program, go, stdin):
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.dup2(stdin, 0)  # a pipe nobody writes to, as jupyter_client gives a kernel
    os.close(stdin)
    carried = _tmp_files()
    _private_folders(workdir, request["sizes"], request["runtime_dir"], request["keep"])
    if os.read(go, 1) != b"1":  # the grader moved this process into its cgroup (or has none for it)
        raise OSError("no go")
    os.close(go)
    _check(LIBC.unshare(CLONE_NEWCGROUP), "unshare cgroup")  # its cgroup seen as the root, as a kernel's
    _look_started_as(request["cmd"], request["env"])  # needs CAP_SYS_RESOURCE
    _drop_privileges(request["uid"])
    for name, data in carried.items():
        with open(os.path.join("/tmp", name), "wb") as f:
            f.write(data)
    _fill(inbox)
    os.environ.clear()
    os.environ.update(request["env"])
    _fresh_seeds()
    prog = SockFprog(len(program) // 8, program)
    _check(LIBC.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0), "seccomp")
    if request["cmd"][1] == "-c":  # cmd: python -c PROGRAM ARGS (the start-up check, autograder/kernels/sandbox_check.py)
        sys.argv = ["-c", *request["cmd"][3:]]
        sys.path[0] = ""
        exec(compile(request["cmd"][2], "<string>", "exec"), {"__name__": "__main__"})
        return
    sys.argv = [sys.argv[0], *request["cmd"][3:]]  # cmd: python -m ipykernel_launcher ARGS
    sys.path[0] = workdir  # as `python -m` puts it
    threading._counter = itertools.count(1).__next__  # thread names from Thread-1, as in a fresh interpreter
    devnull = os.open("/dev/null", os.O_RDWR)  # stdout and stderr: the grader's terminal is not the kernel's
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    os.close(devnull)
    runpy._run_module_as_main("ipykernel_launcher")


def _reap(writers):
    try:
        while True:
            pid = os.waitpid(-1, os.WNOHANG)[0]
            if not pid:
                return
            fd = writers.pop(pid, None)
            if fd is not None:
                os.close(fd)
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


def _child(request, workdir, inbox, program, go, stdin):
    code = 1
    try:
        _become_kernel(request, workdir, inbox, program, go, stdin)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 0
    except BaseException:
        import traceback

        traceback.print_exc()
    os._exit(code)


def main():
    workdir, inbox, reply_fd = sys.argv[1], sys.argv[2], int(sys.argv[3])

    def reply(message):
        os.write(reply_fd, json.dumps(message).encode() + b"\n")

    requests = _lines(0)
    setup = next(requests)
    program = bytes.fromhex(setup["filter"])
    for name in setup["imports"]:
        __import__(name)
    writers = {}  # child pid -> the write end of its stdin, held until it ends
    signal.signal(signal.SIGCHLD, lambda *_: _reap(writers))
    reply({"ready": os.readlink("/proc/self/ns/pid")})
    waiting = {}  # child pid -> the pipe it waits on before it goes on
    for request in requests:
        if "go" in request:
            fd = waiting.pop(request["go"], None)
            if fd is not None:
                os.write(fd, b"1")
                os.close(fd)
            continue
        go, went = os.pipe()
        stdin, held = os.pipe()
        pid = os.fork()
        if pid == 0:
            for fd in (went, held, reply_fd, *waiting.values(), *writers.values()):
                os.close(fd)
            _child(request, workdir, inbox, program, go, stdin)
        os.close(go)
        os.close(stdin)
        waiting[pid], writers[pid] = went, held
        reply({"pid": pid})


if __name__ == "__main__":
    main()
