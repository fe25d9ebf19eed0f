"""A grading kernel's working folder holds the release's files, and a cell may write more there. Its start-up line
imports the release's modules from it (the companion script, the plotting helpers), then takes the folder off the
import path: a module a cell writes is then not found by name, `try: import mine` included, so the code a graded
kernel imports is the library's or the release's, never text the static check did not read. The path left is a
tuple: no call puts a folder back on it (assigning sys.path is the static check's)."""
import os
import sys


class ClosedPathError(RuntimeError):
    """A cell changed the closed sys.path (driver.lookup names it when the answer's names are then missing)."""


class ClosedPath(tuple):
    """A grading kernel's sys.path after close(): a tuple whose changing methods say why they fail (at home the
    path is a list and `sys.path.append(...)` works; while grading the same line stops the cell)."""

    def _closed(self, *args, **kwargs):
        raise ClosedPathError("评分内核的 sys.path 不能修改：评分时只导入库和发布文件里的模块，工作文件夹不在导入路径上"
                           "（在家可以改，评分时这一行会失败）。请删掉答案单元格里修改 sys.path 的代码。")

    append = insert = extend = remove = pop = clear = reverse = sort = _closed
    __setitem__ = __delitem__ = __iadd__ = _closed


def close(modules):
    """Import `modules` (the release's, from the working folder), then drop that folder from sys.path, which becomes
    a tuple."""
    here = os.getcwd()
    try:
        for name in modules:
            if os.path.isfile(os.path.join(here, f"{name}.py")):
                __import__(name)
    finally:  # closed even when a module fails to import: the start-up line's errors are only logged
        sys.path = ClosedPath(p for p in sys.path if os.path.abspath(p or os.curdir) != here)
    return True
