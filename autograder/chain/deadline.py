"""A notebook's wall-clock budget: it bounds every cell's timeout, replayed cells included."""
import time


class Deadline:
    def __init__(self, seconds):
        self.seconds = seconds
        self._end = time.monotonic() + seconds

    def left(self):
        return self._end - time.monotonic()

    def bound(self, timeout):
        """A cell's timeout (None: none of its own), never past the deadline."""
        left = max(self.left(), 0.1)
        return left if timeout is None else min(timeout, left)

    def reason(self):
        return f"整本笔记本超过了 {self.seconds} 秒的时间上限，"
