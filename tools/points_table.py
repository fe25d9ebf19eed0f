"""The points table of docs/AUTHORING.md, generated from the source notebooks (points are typed once).

A test cell's points live in its nbgrader metadata; this rewrites the table's points and the totals line
from them, in notebook order. Each row keeps its "why"; a new exercise's row starts with its heading in
the notebook. `python tools/points_table.py` rewrites the file, `--check` exits 1 when it would change it
(tests/test_release.py).
"""
import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from autograder.course import ASSIGNMENT, SOURCE_DIR, available_notebooks  # noqa: E402

AUTHORING = ROOT / "docs" / "AUTHORING.md"
HEADER = "| notebook | exercise | public + hidden | why |\n|---|---|---|---|\n"
ROW = re.compile(r"^\| (\d\d) \| `([a-z_0-9]+)` \| \d+ \+ \d+ \| (.*) \|$", re.M)
TOTAL = re.compile(r"^Automatic total: .*?\)\.", re.M)
HEADING = re.compile(r"^#+\s*(.+?)\s*(?:（\d+ \+ \d+ 分）)?\s*$", re.M)


def exercise_points():
    """[(notebook number, exercise, public, hidden, heading)] in notebook order."""
    rows = {}
    for name in available_notebooks():
        heading = ""
        for cell in nbformat.read(SOURCE_DIR / ASSIGNMENT / f"{name}.ipynb", as_version=4).cells:
            found = HEADING.findall(cell.source) if cell.cell_type == "markdown" else None
            heading = found[-1] if found else heading
            meta = cell.metadata.get("nbgrader", {})
            if cell.cell_type != "code" or not meta.get("grade") or meta.get("solution"):
                continue
            exercise = meta["grade_id"].removeprefix("test_").split("__")[0]
            row = rows.setdefault((name[:2], exercise), [0, 0, heading])
            row[1 if meta["grade_id"].endswith("__hidden") else 0] += int(meta.get("points", 0))
    return [(nb, ex, pub, hid, heading) for (nb, ex), (pub, hid, heading) in rows.items()]


def rendered(text):
    """AUTHORING.md's text with the table and the totals line made from the notebooks."""
    why = {(nb, ex): reason for nb, ex, reason in ROW.findall(text)}
    points = exercise_points()
    table = HEADER + "".join(f"| {nb} | `{ex}` | {pub} + {hid} | {why.get((nb, ex), heading)} |\n"
                             for nb, ex, pub, hid, heading in points)
    rows = list(ROW.finditer(text))
    start = text.index(HEADER)
    text = text[:start] + table + text[rows[-1].end() + 1:]
    per_notebook = {}
    for nb, _, pub, hid, _ in points:
        per_notebook[nb] = per_notebook.get(nb, 0) + pub + hid
    total = (f"Automatic total: {sum(per_notebook.values())} points ("
             + ", ".join(f"{nb}: {n}" for nb, n in per_notebook.items()) + ").")
    return TOTAL.sub(total, text, count=1)


def main(argv):
    text = AUTHORING.read_text(encoding="utf-8")
    new = rendered(text)
    if "--check" in argv:
        return 0 if new == text else 1
    AUTHORING.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
