"""Kernels forked from a warm zygote (the grading command's) are the kernels a fresh start makes (plain nbgrader's):
what a cell can see of its process, folders and limits is the same but for random names; each forked kernel has
its own uid, folders and memory cgroup, cannot fork, and nothing one of them leaves is seen by the next."""
import asyncio
import json
import re
from pathlib import Path

import pytest
from traitlets.config import Config

from autograder.kernels import sandbox, zygote

pytestmark = pytest.mark.skipif(not sandbox.own_uid_works(), reason="forked kernels need kernels of their own uid")

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


def _normalised(text):
    """A kernel's own random names (socket folders, connection file) as placeholders."""
    return re.sub(r"w1d1([rk])-[a-z0-9_]{8}", r"w1d1\1-*", re.sub(r"k[0-9a-f]{8}\.json", "k*.json", text))


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


def _manager(forked):
    config = Config()
    config.SandboxKernelManager.zygote = forked
    return sandbox.SandboxKernelManager(config=config)


async def _seen_by(km, *codes):
    await km.start_kernel()
    try:
        return [await _run(km, code) for code in codes]
    finally:
        await km.shutdown_kernel(now=True)


@pytest.fixture
def fresh_zygote():
    zygote.stop_all()
    yield
    zygote.stop_all()


def test_a_forked_kernel_sees_what_a_fresh_one_sees(fresh_zygote):
    fresh = _manager(False)
    forked = _manager(True)
    assert fresh._zygote is None and forked._zygote is not None
    (seen_fresh,) = asyncio.run(_seen_by(fresh, SEEN))
    (seen_forked,) = asyncio.run(_seen_by(forked, SEEN))
    assert forked.forked and not fresh.forked
    a, b = json.loads(_normalised(seen_fresh)), json.loads(_normalised(seen_forked))
    assert a["fork"] == b["fork"] == 1  # EPERM: one process, both ways
    assert a["uid_is_own"] and b["uid_is_own"] and a["proc_owner"] and b["proc_owner"]
    assert a["status"]["CapBnd"] == b["status"]["CapBnd"] == "0000000000000000"
    assert a["cgroup"] == b["cgroup"]  # its own cgroup seen as the root
    assert a["loopback"] == "connected" and a["sysv"] == [] and a["fd_targets"] == ["pipe", "/dev/null", "/dev/null"]
    for key in a:
        if key not in ("uid", "ns", "seeds"):
            assert a[key] == b[key], (key, a[key], b[key])


def test_forked_kernels_share_nothing_with_each_other(fresh_zygote):
    first, second = _manager(True), _manager(True)

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
    assert first._zygote is second._zygote
    for folder in ("workdir", "tmp", "shm"):
        assert "left_by_the_first.txt" not in seen[folder], folder
    assert seen["sysv"] == []  # the first's System V segment is gone with its IPC namespace
    for name, first_ns in seen_first["ns"].items():
        assert seen["ns"][name] != first_ns, name  # namespaces of its own (the pid namespace is the zygote's)
    assert seen["seeds"][0] != seen_first["seeds"][0] and seen["seeds"][1] != seen_first["seeds"][1]
    assert reach["listed"] == 2  # the first kernel's socket folder is not in the second's world
    assert len(reach["others"]) >= 2  # the zygote and the first kernel (and bwrap's init) share its pid namespace...
    assert {tuple(v) for v in reach["others"].values()} == {(1, 13)}, reach  # ...but cannot be signalled or read


def test_a_forked_kernel_is_in_its_memory_cgroup_and_stops_when_told(fresh_zygote):
    km = _manager(True)

    async def go():
        await km.start_kernel()
        try:
            pid = km.provisioner.pid
            if km._cgroup is not None:
                assert str(pid) in (km._cgroup.path / "cgroup.procs").read_text().split()
                # less what it shares with the zygote, which is charged there (a fresh kernel's cgroup pays for it)
                cap = int((km._cgroup.path / km._cgroup.limit_file).read_text())
                assert 50 * 2**20 < km.memory_mb * 2**20 - cap < 1024 * 2**20, cap
            kc = km.client()
            kc.start_channels()
            await kc.wait_for_ready(timeout=120)
            msg_id = kc.execute("while True: pass")
            await asyncio.sleep(1)
            await km.interrupt_kernel()
            reply = await kc.get_shell_msg(timeout=60)
            while reply["parent_header"].get("msg_id") != msg_id:  # a late kernel_info reply of wait_for_ready's
                reply = await kc.get_shell_msg(timeout=60)
            kc.stop_channels()
            assert reply["content"]["ename"] == "KeyboardInterrupt"
            assert await km.is_alive()
            return pid
        finally:
            await km.shutdown_kernel(now=True)

    pid = asyncio.run(go())
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]


def test_without_a_zygote_kernels_start_afresh(fresh_zygote, monkeypatch):
    def broken(*_):
        raise zygote.ZygoteFailed("no zygote today")

    monkeypatch.setattr(zygote.Zygote, "fork_kernel", broken)
    km = _manager(True)
    (seen,) = asyncio.run(_seen_by(km, "print(6 * 7)"))
    assert seen.strip() == "42" and not km.forked  # it ran, in a kernel started afresh


def test_the_zygote_and_its_kernels_end_with_the_worker(fresh_zygote):
    km = _manager(True)
    asyncio.run(_seen_by(km, "1"))
    z = km._zygote
    root = z.runtime_root
    assert z.alive() and root.exists()
    zygote.stop_all()
    assert not z.alive() and not root.exists()


@pytest.mark.parametrize("forked", [False, True], ids=["fresh", "forked"])
def test_a_kernel_writes_nothing_to_the_graders_terminal(fresh_zygote, capfd, forked):
    """Red team: an answer wrote terminal escapes to the kernel's first fds 1 and 2 (ipykernel keeps copies), which
    were the grader's terminal and log; they are /dev/null now, fresh or forked."""
    marker = "\\x1b[1;32mSPOOF every student 38/38\\x1b[0m\\n"
    code = ("import os, sys\n"
            "for fd in (sys.stdout._original_stdstream_copy, sys.stderr._original_stdstream_copy):\n"
            f"    os.write(fd, {marker!r}.encode())\n")
    asyncio.run(_seen_by(_manager(forked), code))
    out, err = capfd.readouterr()
    assert "SPOOF" not in out and "SPOOF" not in err
