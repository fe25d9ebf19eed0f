"""What a notebook's outputs may cost: each cell and the whole notebook have a byte budget, and a test cell
may send as many check results as it has checks (they have a budget of their own: they never reach the
notebook, the verdict replaces them). Every check result is also kept as it arrives, in the grader's memory:
the verdict reads these, not the cell's outputs, which later messages of the kernel's (a clear_output from a
thread of the student's) could change."""
import json

from w1d1_format import MIME
from w1d1_student import wire


class OutputBudget:
    def __init__(self, per_cell, per_notebook, checks):
        self.per_cell, self.per_notebook = per_cell, per_notebook
        self._checks = checks  # {test cell index: how many checks it calls}
        self._probes, self._bytes = {}, {}
        self.arrived = {}      # {cell index: [every check result the kernel sent while it ran]}

    def note(self):
        return f"\n…（输出超过 {self.per_cell} 字节或整本 {self.per_notebook} 字节，其余部分已丢弃）\n"

    def keep_probe(self, content, cell_index):
        data = content.get("data")
        if isinstance(data, dict) and MIME in data:
            self.arrived.setdefault(cell_index, []).append(data[MIME])

    def admit(self, content, cell_index):
        """Count one output against the cell's and the notebook's budgets; False when it is dropped."""
        size = len(json.dumps(content, default=str))
        if self._is_probe(content, cell_index, size):
            return True
        used = self._bytes.get(cell_index, 0) + size
        if used > self.per_cell or sum(self._bytes.values()) + size > self.per_notebook:
            return False
        self._bytes[cell_index] = used
        return True

    def _is_probe(self, content, cell_index, size):
        """A check's result: only in a test cell, only as many as it has checks, plain and small."""
        data = content.get("data", {})
        if set(data) != {MIME, "text/plain"} or size > wire.MAX_PAYLOAD_BYTES + 4096:
            return False
        seen = self._probes.get(cell_index, 0)
        if seen >= self._checks.get(cell_index, 0):
            return False
        self._probes[cell_index] = seen + 1
        return True
