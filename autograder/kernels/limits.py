"""A kernel's resource limits: prlimit caps address space, CPU time, processes and file sizes; its /tmp, working
folder and /dev/shm are tmpfs of a fixed size. The memory cgroup, where the machine allows one, is cgroup_limits.py's.
"""

NPROC = 256
MB = 2**20


class Limits:
    """Resource limits of one kernel."""

    def __init__(self, memory_mb=3072, cpu_seconds=600, tmp_mb=256, work_mb=256, shm_mb=64, file_mb=256):
        self.memory_mb, self.cpu_seconds = memory_mb, cpu_seconds
        self.tmp_mb, self.work_mb, self.shm_mb, self.file_mb = tmp_mb, work_mb, shm_mb, file_mb
