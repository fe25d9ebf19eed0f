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
        """The kernel started first, if it is up and was started for `key`; else None."""
        if self._kernels and self._kernels[0][0] == key and self._kernels[0][1].has_kernel:
            return self._kernels.pop(0)[1]
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
            try:
                run_sync(km.shutdown_kernel)(now=True)
            finally:
                if not km.context.closed:
                    km.context.destroy(linger=0)


POOL = Pool()
