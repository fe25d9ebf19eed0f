"""The machine's processes as /proc shows them, for tests that look for what a run left or started."""
import os
from pathlib import Path


def processes():
    """{pid: (the stat fields after the command name, the command line)}; processes that end meanwhile are left out."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        found[int(entry)] = (stat[stat.rindex(")") + 2:].split(), cmdline)
    return found
