"""Regenerate data/demo_class from the release: the tiny class `make grade` grades.

alice answered notebook 01 with the solutions; bob handed in the release untouched; carol's
softmax ignores its input (her other two answers are the solutions). Every locked and test cell
is the release's own, so grading them reports no tampering. Run after `make release`:
`.venv/bin/python tools/demo_class.py` (tests/test_demo_class.py checks the folder is in sync).
"""
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = "01_self_attention"
CAROL_SOFTMAX = "import numpy as np\ndef softmax(x, axis=-1):\n    return np.ones_like(x) / x.shape[axis]\n"


def _answers():
    nb = nbformat.read(ROOT / "solutions" / "w1d1" / f"{NOTEBOOK}.ipynb", as_version=4)
    return {c.metadata["nbgrader"]["grade_id"]: c.source for c in nb.cells
            if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("solution")}


def students():
    """{student: notebook} of the demo class."""
    answers = _answers()
    chosen = {"alice": answers, "bob": {}, "carol": {**answers, "softmax": CAROL_SOFTMAX}}
    out = {}
    for student, cells in chosen.items():
        nb = nbformat.read(ROOT / "notebooks" / "w1d1" / f"{NOTEBOOK}.ipynb", as_version=4)
        for cell in nb.cells:
            gid = cell.metadata.get("nbgrader", {}).get("grade_id")
            if cell.cell_type == "code" and gid in cells:
                cell.source = cells[gid]
        out[student] = nb
    return out


def write(dest=ROOT / "data" / "demo_class"):
    for student, nb in students().items():
        folder = Path(dest) / student
        folder.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, folder / f"{NOTEBOOK}.ipynb")


if __name__ == "__main__":
    write(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "data" / "demo_class")
