"""A grading kernel's working folder holds the release's files, and a cell may write more there. Its start-up line
imports the release's modules from it (the companion script, the plotting helpers), then takes the folder off the
import path: a module a cell writes is then not found by name, `try: import mine` included, so the code a graded
kernel imports is the library's or the release's, never text the static check did not read. The path left is a
tuple: no call puts a folder back on it (assigning sys.path is the static check's)."""
import os
import sys


def close(modules):
    """Import `modules` (the release's, from the working folder), then drop that folder from sys.path, which becomes
    a tuple."""
    here = os.getcwd()
    try:
        for name in modules:
            if os.path.isfile(os.path.join(here, f"{name}.py")):
                __import__(name)
    finally:  # closed even when a module fails to import: the start-up line's errors are only logged
        sys.path = tuple(p for p in sys.path if os.path.abspath(p or os.curdir) != here)
    return True
