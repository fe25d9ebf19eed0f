"""The CSV files of a grading run, read from the gradebook (so hand grading shows up in them).

grades.csv         one row per test cell of each submitted notebook (automatic points);
manual_grades.csv  one row per hand-graded written answer: manual score, comment, and whether
                   nbgrader asks for (re)grading it;
totals.csv         one row per student: automatic + manual + extra credit = total (what to import).
Every text cell that a spreadsheet would read as a formula is neutralised.
"""
import csv
import hashlib
import io
import json

import nbformat

from autograder.course import ASSIGNMENT, SOURCE_DIR
from autograder.notes import texts

CSV_HEADER = ["student_id", "notebook", "grade_id", "score", "max_score"]
MANUAL_HEADER = ["student_id", "notebook", "grade_id", "manual_score", "max_score", "needs_grading", "comment"]
TOTALS_HEADER = ["student_id", "auto_score", "manual_score", "extra_credit", "total", "max_score",
                 "needs_manual_grading", "notes"]
FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\n")


def csv_safe(value):
    """Text a spreadsheet would run as a formula gets a leading apostrophe."""
    text = str(value)
    return "'" + text if text.startswith(FORMULA_START) else text


def graded_cells(name):
    """(test cells, hand-graded cells) of a source notebook, each as [(grade_id, points)]."""
    nb = nbformat.read(SOURCE_DIR / ASSIGNMENT / f"{name}.ipynb", as_version=4)
    tests, manual = [], []
    for c in nb.cells:
        meta = c.metadata.get("nbgrader", {})
        if meta.get("grade"):
            item = (meta["grade_id"], float(meta.get("points", 0)))
            (manual if meta.get("solution") else tests).append(item)
    return tests, manual


def _find(gb, kind, grade_id, notebook, student):
    try:
        return getattr(gb, f"find_{kind}")(grade_id, notebook, ASSIGNMENT, student)
    except Exception:  # no such row: the notebook was never graded
        return None


def gradebook_fingerprint(gb, student):
    """A digest of everything hand-editable about a student's grades (scores, extra credit, comments)."""
    try:
        sub = gb.find_submission(ASSIGNMENT, student)
    except Exception:
        return None
    items = []
    for nb in sub.notebooks:
        items += [("g", nb.name, g.name, g.auto_score, g.manual_score, g.extra_credit) for g in nb.grades]
        items += [("c", nb.name, c.name, c.auto_comment, c.manual_comment) for c in nb.comments]
    return hashlib.sha256(json.dumps(sorted(items, key=str), default=str).encode()).hexdigest()


def build(gb, records, notebooks):
    """The three tables from the gradebook. `records`: {student: {"notebooks", "broken", "ok", "notes"}}."""
    cells = {name: graded_cells(name) for name in notebooks}
    grades, manual, totals = [], [], []
    max_total = sum(p for tests, hand in cells.values() for _, p in tests + hand)
    for student in sorted(records):
        rec = records[student]
        auto = hand_sum = extra = 0.0
        waiting = 0
        for name in notebooks:
            if name not in rec["notebooks"] and name not in rec["broken"]:
                continue
            graded = rec["ok"] and name in rec["notebooks"]
            tests, hand = cells[name]
            for grade_id, points in tests:
                grade = _find(gb, "grade", grade_id, name, student) if graded else None
                score = float(grade.score or 0.0) if grade else 0.0
                extra += float(grade.extra_credit or 0.0) if grade else 0.0
                auto += score
                grades.append([csv_safe(student), name, grade_id, f"{score:g}", f"{points:g}"])
            for grade_id, points in hand:
                grade = _find(gb, "grade", grade_id, name, student) if graded else None
                comment = _find(gb, "comment", grade_id, name, student) if graded else None
                score = grade.manual_score if grade else None
                # nbgrader's own flag: not graded yet, or graded before a resubmission (to review)
                needs = bool(grade is not None and grade.needs_manual_grade)
                waiting += needs
                hand_sum += float(score or 0.0)
                extra += float(grade.extra_credit or 0.0) if grade else 0.0
                manual.append([csv_safe(student), name, grade_id, "" if score is None else f"{score:g}",
                               f"{points:g}", "yes" if needs else "no",
                               csv_safe((comment.manual_comment or "") if comment else "")])
        totals.append([csv_safe(student), f"{auto:g}", f"{hand_sum:g}", f"{extra:g}", f"{auto + hand_sum + extra:g}",
                       f"{max_total:g}", str(waiting), csv_safe(" ".join(texts(rec["notes"]))[:1000])])
    return {"grades.csv": (CSV_HEADER, grades), "manual_grades.csv": (MANUAL_HEADER, manual),
            "totals.csv": (TOTALS_HEADER, totals)}


def render(header, rows):
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(header)
    writer.writerows(rows)
    return buf.getvalue()
