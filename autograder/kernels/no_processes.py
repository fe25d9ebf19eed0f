"""A seccomp filter that keeps a graded kernel to one process: threads yes, child processes no.

bwrap loads it (`--seccomp FD`: a compiled classic-BPF program, an array of struct sock_filter, read
from that fd) just before it starts the kernel's command, and the kernel inherits it for good. A
process the kernel started would be out of sight of the checks that run in the kernel (torch's
function and dispatch modes see their own thread only), and no exercise needs one.

- fork, vfork, and clone without CLONE_THREAD fail with EPERM (os.fork, subprocess, os.system,
  multiprocessing: an OSError, or -1 from os.system);
- clone3 fails with ENOSYS: its flags sit in memory, out of the filter's reach; glibc then falls
  back to clone for pthread_create, so Python threads and torch's intra-op threads keep working;
- ptrace fails with EPERM (a traced process could be made to fork on the kernel's behalf);
- a syscall of another ABI (x32, or i386 through int 0x80) fails with EPERM.

Only x86-64 and AArch64 are known; on any other machine `program()` raises, and the grader refuses
to grade rather than run kernels without the filter.
"""
import os
import platform
import struct
import sys

# classic BPF opcodes (linux/filter.h, linux/bpf_common.h)
LD_W_ABS = 0x00 | 0x00 | 0x20
JEQ_K = 0x05 | 0x10
JGE_K = 0x05 | 0x30
JSET_K = 0x05 | 0x40
RET_K = 0x06

RET_ALLOW = 0x7FFF0000
RET_ERRNO = 0x00050000
EPERM, ENOSYS = 1, 38

# struct seccomp_data: int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6]
NR, ARCH, ARG0_LOW = 0, 4, 16  # ARG0_LOW: the low half of args[0] (little-endian, which both arches are)

CLONE_THREAD = 0x00010000
X32_SYSCALL_BIT = 0x40000000

# audit arch -> syscall numbers; only little-endian 64-bit arches
ARCHES = {
    "x86_64": {"arch": 0xC000003E, "fork": 57, "vfork": 58, "clone": 56, "clone3": 435, "ptrace": 101},
    "aarch64": {"arch": 0xC00000B7, "clone": 220, "clone3": 435, "ptrace": 117},
}
MACHINES = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}


class UnsupportedArch(RuntimeError):
    pass


def machine():
    """The key of ARCHES for this interpreter, or raise UnsupportedArch."""
    name = MACHINES.get(platform.machine().lower())
    if name is None or struct.calcsize("P") != 8 or sys.byteorder != "little":
        raise UnsupportedArch(f"没有为这种机器写好的 seccomp 过滤器（{platform.machine()}，{struct.calcsize('P') * 8} 位，"
                              f"{sys.byteorder}-endian）：只支持 x86_64 与 aarch64，拒绝在没有它的沙箱里评分。")
    return name


def _assemble(code):
    """code: [(opcode, jump if true, jump if false, k)], jumps given as labels (str) or 0; labels as str items."""
    at, out = {}, []
    for item in code:
        if isinstance(item, str):
            at[item] = len(out)
        else:
            out.append(item)
    packed = []
    for i, (op, jt, jf, k) in enumerate(out):
        offsets = [0 if j == 0 else at[j] - i - 1 for j in (jt, jf)]
        assert all(0 <= o <= 255 for o in offsets), (i, offsets)
        packed.append(struct.pack("=HBBI", op, *offsets, k))
    return b"".join(packed)


def program(name=None):
    """The compiled filter (bytes: struct sock_filter[]) for machine `name` (default: this one)."""
    name = name or machine()
    if name not in ARCHES:
        raise UnsupportedArch(f"没有为 {name} 写好的 seccomp 过滤器")
    nr = ARCHES[name]
    code = [(LD_W_ABS, 0, 0, ARCH),
            (JEQ_K, 0, "eperm", nr["arch"]),
            (LD_W_ABS, 0, 0, NR)]
    if name == "x86_64":  # x32 numbers are the x86-64 ones with a high bit set, under the same arch
        code.append((JGE_K, "eperm", 0, X32_SYSCALL_BIT))
    for call in ("fork", "vfork", "ptrace"):
        if call in nr:
            code.append((JEQ_K, "eperm", 0, nr[call]))
    code += [(JEQ_K, "enosys", 0, nr["clone3"]),
             (JEQ_K, 0, "allow", nr["clone"]),
             (LD_W_ABS, 0, 0, ARG0_LOW),
             (JSET_K, "allow", "eperm", CLONE_THREAD),
             "allow", (RET_K, 0, 0, RET_ALLOW),
             "eperm", (RET_K, 0, 0, RET_ERRNO | EPERM),
             "enosys", (RET_K, 0, 0, RET_ERRNO | ENOSYS)]
    return _assemble(code)


def write_program(folder):
    """The filter as a file in `folder` (read-only), for bwrap to read through an fd; returns its path."""
    path = os.path.join(folder, "no_processes.bpf")
    data = program()
    if not os.path.lexists(path):  # in a private folder of the grader's: written once
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
    return path
