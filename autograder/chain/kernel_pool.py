"""Kernels started ahead: each boots while the notebooks before it run, so the next notebook finds its kernel
ready. One pool per process, on every path: the grading command's workers and plain nbgrader (the hub,
formgrader). A kernel started ahead is fresh like any other (no cell has run in it), and a sandboxed one is
the same whatever folder nbgrader grades in (its working folder is the release's), so the next notebook takes
it, whoever's it is. Plain nbgrader does not say how many notebooks are left: it keeps `ahead` kernels
started, and the ones no notebook took end with the process (or at `discard`)."""
import atexit
import logging

from jupyter_core.utils import ensure_async, run_sync

from autograder import timing

log = logging.getLogger(__name__)


class Pool:
    def __init__(self):
        self._kernels = []  # (key, kernel manager), in the order started
        self.started = 0    # kernels this pool started since `discard`
        self._ending = False

    def take(self, key):
        """The first kernel that is up and was started for `key`, else None. Kernels started before it that no
        notebook can take (down, or started for another folder: only without the sandbox) are ended: left at
        the head, they would send every later notebook to a cold start."""
        while self._kernels:
            started_for, km = self._kernels.pop(0)
            if started_for == key and _up(km):
                return km
            _end(km)
        return None

    def wants(self, ahead, in_all):
        """Whether to start one more: fewer than `ahead` waiting, fewer than `in_all` started (-1: no bound)."""
        return len(self._kernels) < ahead and (in_all < 0 or self.started < in_all)

    async def start(self, manager, key, start_args):
        """Start `manager`'s kernel (`start_args`: start_kernel's keywords) and keep it for a notebook of `key`."""
        self.started += 1
        try:
            with timing.timed("kernel start"):
                await ensure_async(manager.start_kernel(**start_args))
        except Exception as exc:  # the next notebook starts its own, as without one started ahead
            log.warning("starting a kernel ahead failed: %s", exc)
            return
        self._kernels.append((key, manager))
        if not self._ending:  # before the managers' own finalizers: the kernels end before their folders go
            atexit.register(self.discard)
            self._ending = True

    def discard(self):
        """End the kernels no notebook took, and start counting again."""
        kernels, self._kernels, self.started = self._kernels, [], 0
        for _, km in kernels:
            _end(km)


def _up(km):
    """Whether the kernel's process is still running (one that died while it waited is no use)."""
    process = getattr(km.provisioner, "process", None) if km.has_kernel else None
    return process is not None and process.poll() is None


def _end(km):
    try:
        if km.has_kernel:
            run_sync(km.shutdown_kernel)(now=True)
    finally:
        if not km.context.closed:
            km.context.destroy(linger=0)


POOL = Pool()
