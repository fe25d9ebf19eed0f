"""Every graded kernel starts alike on every path (kernel_manager.SandboxKernelManager): one process, a uid of its own as
root, no capability, its first fds 1 and 2 on /dev/null; two kernels of one student see nothing of each other, and
each is in its memory cgroup where the machine has one, gone with its kernel."""
import asyncio
import json
from pathlib import Path

from autograder.kernels import bwrap, kernel_manager, kernel_view

SEEN = r'''
import json, os, resource, socket, sys
def loopback():
    with socket.socket() as server, socket.socket() as client:
        server.bind(("127.0.0.1", 0)); server.listen(1); client.connect(server.getsockname())
        return "connected"
def on_stack():
    stat = open("/proc/self/stat").read().rsplit(")", 1)[1].split()
    low, high = next([int(x, 16) for x in l.split()[0].split("-")] for l in open("/proc/self/maps") if "[stack]" in l)
    return [low <= int(stat[n - 3]) < high for n in (48, 49, 50, 51)]
status = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines())
try:
    os.fork()
    forked = "forked"
except OSError as exc:
    forked = exc.errno
print(json.dumps({
    "status": {k: status[k].strip() for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs",
                                              "Seccomp", "Seccomp_filters", "Groups")},
    "uid_is_own": os.getuid() == os.geteuid() == os.getgid() != 0, "cwd": os.getcwd(),
    "workdir": sorted(os.listdir(".")), "tmp": sorted(os.listdir("/tmp")), "shm": sorted(os.listdir("/dev/shm")),
    "env": dict(os.environ), "argv": sys.argv, "path": sys.path, "modules": sorted(sys.modules),
    "fds": sorted(os.listdir("/proc/self/fd")), "mounts": sorted(l.split()[1] for l in open("/proc/self/mounts")),
    "limits": [resource.getrlimit(getattr(resource, r)) for r in ("RLIMIT_AS", "RLIMIT_CPU", "RLIMIT_NPROC",
                                                                   "RLIMIT_FSIZE", "RLIMIT_CORE")],
    "cgroup": open("/proc/self/cgroup").read(), "main": sys.modules["__main__"].__name__, "fork": forked,
    "proc_owner": os.stat("/proc/self/status").st_uid == os.getuid(), "uid": os.getuid(),
    "orig_argv": sys.orig_argv, "cmdline": open("/proc/self/cmdline", "rb").read().decode().split("\0"),
    "environ": sorted(open("/proc/self/environ", "rb").read().decode().split("\0")),
    "fd_targets": [os.readlink(f"/proc/self/fd/{n}").split(":")[0]  # ipykernel's copies of the first fds 1 and 2
                   for n in (0, sys.stdout._original_stdstream_copy, sys.stderr._original_stdstream_copy)],
    "loopback": loopback(), "sysv": open("/proc/sysvipc/shm").read().splitlines()[1:],
    "hostname": os.uname().nodename, "ns": {n: os.readlink(f"/proc/self/ns/{n}") for n in ("ipc", "net", "uts", "mnt")},
    "seeds": [__import__("torch").initial_seed(), int(__import__("numpy").random.randint(2**31))],
    "leader": [os.getsid(0) == os.getpid(), os.getpgrp() == os.getpid()],
    "threads": sorted(t.name for t in __import__("threading").enumerate()), "pts": sorted(os.listdir("/dev/pts")),
    "args_on_stack": on_stack(), "mount_options": sorted(" ".join(l.split()[1:4]) for l in open("/proc/self/mounts"))}))
'''
LEAVE = r'''
import ctypes, os
for folder in (".", "/tmp", "/dev/shm"):
    open(os.path.join(folder, "left_by_the_first.txt"), "w").write("x")
assert ctypes.CDLL(None).shmget(0, 2**20, 0o1666) >= 0  # a System V segment, left behind
'''
REACH = r'''
import json, os
def errno_of(call):
    try:
        call()
        return 0
    except OSError as exc:
        return exc.errno
others = {}
for pid in (int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()):
    others[pid] = (errno_of(lambda: os.kill(pid, 0)), errno_of(lambda: open(f"/proc/{pid}/environ").read()))
print(json.dumps({"listed": errno_of(lambda: os.listdir("OWN")), "others": others}))
'''


async def _run(km, code):
    kc = km.client()
    kc.start_channels()
    try:
        await kc.wait_for_ready(timeout=120)
        out, errors = [], []
        hook = (lambda m: out.append(m["content"]["text"]) if m["msg_type"] == "stream"
                else errors.append(m["content"]) if m["msg_type"] == "error" else None)
        await kc.execute_interactive(code, output_hook=hook, timeout=120)
        assert not errors, errors
        return "".join(out)
    finally:
        kc.stop_channels()


def _manager():
    return kernel_manager.SandboxKernelManager()


async def _seen_by(km, *codes):
    await km.start_kernel()
    try:
        return [await _run(km, code) for code in codes]
    finally:
        await km.shutdown_kernel(now=True)


def test_a_kernel_is_one_process_with_nothing_of_the_graders():
    (seen,) = asyncio.run(_seen_by(_manager(), SEEN))
    a = json.loads(seen)
    assert a["fork"] == 1  # EPERM: one process
    assert a["status"]["CapBnd"] == "0000000000000000" and a["status"]["Seccomp"] == "2"
    assert a["fd_targets"] == ["pipe", "/dev/null", "/dev/null"] and a["sysv"] == [] and a["loopback"] == "connected"
    assert a["argv"][0].endswith("ipykernel_launcher.py") and a["cwd"] == kernel_view.WORKDIR
    assert not any(key.startswith(("W1D1_CASES", "JUPYTER_TOKEN")) for key in a["env"])
    if bwrap.own_uid_works():  # as root: a uid of its own
        assert a["uid_is_own"] and a["proc_owner"]


def test_kernels_share_nothing_with_each_other():
    first, second = _manager(), _manager()

    async def both():
        await first.start_kernel()
        await second.start_kernel()  # started while the first is alive, as the grading command's kernels ahead are
        try:
            seen_first = json.loads(await _run(first, SEEN))
            await _run(first, LEAVE)
            seen = json.loads(await _run(second, SEEN))
            own = Path(first.connection_file).parent
            reach = json.loads(await _run(second, REACH.replace("OWN", str(own))))
            return seen_first, seen, reach
        finally:
            await first.shutdown_kernel(now=True)
            await second.shutdown_kernel(now=True)

    seen_first, seen, reach = asyncio.run(both())
    for folder in ("workdir", "tmp", "shm"):
        assert "left_by_the_first.txt" not in seen[folder], folder
    assert seen["sysv"] == []  # the first's System V segment is gone with its IPC namespace
    for name, first_ns in seen_first["ns"].items():
        assert seen["ns"][name] != first_ns, name
    assert reach["listed"] == 2  # the first kernel's socket folder is not in the second's world
    assert {tuple(v) for v in reach["others"].values()} <= {(1, 13)}, reach  # nothing it can signal or read


def test_a_kernel_is_in_its_memory_cgroup_and_ends_with_its_manager():
    km = _manager()

    async def go():
        await km.start_kernel()
        try:
            pid = km.provisioner.pid
            assert (await _run(km, "print(6 * 7)")).strip() == "42"  # its launcher joined the cgroup before it started
            if km._cgroup is not None:
                assert str(pid) in (km._cgroup.path / "cgroup.procs").read_text().split()
                assert int((km._cgroup.path / km._cgroup.limit_file).read_text()) == km.memory_mb * 2**20
            return pid, km._cgroup
        finally:
            await km.shutdown_kernel(now=True)

    pid, cgroup = asyncio.run(go())
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]
    assert cgroup is None or not cgroup.path.exists()


def test_a_kernel_writes_nothing_to_the_graders_terminal(capfd):
    """Red team: an answer wrote terminal escapes to the kernel's first fds 1 and 2 (ipykernel keeps copies), which
    were the grader's terminal and log; they are /dev/null now."""
    marker = "\\x1b[1;32mSPOOF every student 38/38\\x1b[0m\\n"
    code = ("import os, sys\n"
            "for fd in (sys.stdout._original_stdstream_copy, sys.stderr._original_stdstream_copy):\n"
            f"    os.write(fd, {marker!r}.encode())\n")
    asyncio.run(_seen_by(_manager(), code))
    out, err = capfd.readouterr()
    assert "SPOOF" not in out and "SPOOF" not in err
