"""What the class report reads from one grading run: scores from the gradebook, the verdicts as data
that nbgrader's chain stored in each graded notebook, the answer cells, and the notes.

The same reader serves both paths: a run of `python -m autograder grade` (OUT/.current, with its
state.json) and an nbgrader course folder graded with `nbgrader autograde` (on the hub), where the
students and their notebooks come from the gradebook. Every text a student controls is made
printable here, once (`notes.printable`), before anything renders it.
"""
import os
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from w1d1_format import OWN_KEY, VERDICTS_KEY, copy_of

from autograder.course import ASSIGNMENT, RELEASE_DIR, available_notebooks
from autograder.notes import from_data, is_printable, printable, stored_in, texts
from autograder.report import grade_tables

COMPANION = "w1day1_checks.py"


@dataclass
class Exercise:
    grade_id: str
    notebook: str
    public: tuple   # (test cell grade_id, points)
    hidden: tuple

    @property
    def points(self):
        return self.public[1] + self.hidden[1]


@dataclass
class ClassData:
    students: list                   # student ids, sorted
    notebooks: list                  # notebook names in course order
    submitted: dict                  # student -> set of graded notebooks
    scores: dict                     # (student, test cell grade_id) -> score
    totals: dict                     # student -> (auto, manual, extra, total)
    max_total: float
    manual: list                     # rows of manual_grades.csv: student, notebook, grade_id, score, max, needs, comment
    exercises: list                  # [Exercise] in course order
    verdicts: dict                   # (student, test cell grade_id) -> [verdict record]
    answers: dict                    # grade_id -> {student: answer source}
    stubs: dict                      # grade_id -> the release's answer cell
    references: dict                 # label -> code students can see
    notes: dict                      # student -> [note text]
    skipped: dict = field(default_factory=dict)   # folder -> why it was not graded
    feedback: dict = field(default_factory=dict)  # (student, notebook) -> link relative to the report


CODE = "\n\t"  # the control characters code keeps when it is shown


def safe(text, keep=""):
    """Student-controlled text, printable and encodable (escaped as the notes are); `keep=CODE` for source."""
    text = str(text)
    return text if is_printable(text, keep) else printable(text, keep)


def exercises(notebooks):
    """The graded exercises of the notebooks: each answer's public and hidden test cell with points."""
    out = []
    for name in notebooks:
        tests, _ = grade_tables.graded_cells(name)
        points = dict(tests)
        for cell_id in points:
            if cell_id.startswith("test_") and not cell_id.endswith("__hidden"):
                gid = cell_id[len("test_"):]
                hidden = f"{cell_id}__hidden"
                out.append(Exercise(gid, name, (cell_id, points[cell_id]), (hidden, points.get(hidden, 0.0))))
    return out


def release_cells(name):
    """({grade_id: the release's answer cell}, the release's locked code cells joined) of one notebook."""
    nb = nbformat.read(RELEASE_DIR / ASSIGNMENT / f"{name}.ipynb", as_version=4)
    stubs, locked = {}, []
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type != "code":
            continue
        if meta.get("solution"):
            stubs[meta["grade_id"]] = cell.source
        elif not meta.get("grade"):
            locked.append(cell.source)
    return stubs, "\n\n".join(locked)


def _read_graded(path, wanted):
    """(verdict records by test cell, answer sources by grade_id, notes) of one graded notebook."""
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception:  # unreadable: nothing for the report, the scores still come from the gradebook
        return {}, {}, []
    verdicts, answers = {}, {}
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {}) if isinstance(cell.metadata.get("nbgrader"), dict) else {}
        gid = meta.get("grade_id") if isinstance(meta.get("grade_id"), str) else None
        own = cell.metadata.get(OWN_KEY)
        if gid in wanted["tests"] and isinstance(own, dict) and isinstance(own.get(VERDICTS_KEY), list):
            verdicts[gid] = [r for r in own[VERDICTS_KEY] if isinstance(r, dict)]
        answer = gid if meta.get("solution") else copy_of(cell)
        if cell.cell_type == "code" and answer in wanted["answers"]:
            answers[answer] = answers.get(answer, "") + ("\n\n" if answer in answers else "") + cell.source
    return verdicts, answers, stored_in(nb)


def _feedback_link(report_dir, page):
    """The page's path relative to the report's folder (`../…` where the page lies outside it, as on the
    hub, where the report is written beside the course folder)."""
    try:
        return Path(os.path.relpath(Path(page).resolve(), Path(report_dir).resolve())).as_posix()
    except ValueError:  # another drive
        return None


def read(gb, work, records, notebooks=None, report_dir=None, feedback_pages=None):
    """The class as the report sees it. `work`: the nbgrader course folder; `records`: {student:
    {"notebooks", "broken", "ok", "notes"}} as the grading command keeps them (None: from the gradebook);
    `feedback_pages(student, notebook)` -> the page's path (links are made relative to `report_dir`)."""
    notebooks = notebooks or available_notebooks()
    work = Path(work)
    if records is None:
        records = records_from_gradebook(gb, work, notebooks)
    tables = grade_tables.build(gb, records, notebooks)
    data = from_tables(tables, records, notebooks)
    wanted = {"tests": {c for ex in data.exercises for c in (ex.public[0], ex.hidden[0])},
              "answers": {ex.grade_id for ex in data.exercises}}
    for student in data.students:
        for name in sorted(data.submitted[student]):
            path = work / "autograded" / student / ASSIGNMENT / f"{name}.ipynb"
            verdicts, answers, _ = _read_graded(path, wanted)
            for cell_id, recs in verdicts.items():
                data.verdicts[(student, cell_id)] = recs
            for gid, src in answers.items():
                data.answers.setdefault(gid, {})[student] = safe(src, CODE)
            page = feedback_pages(student, name) if feedback_pages else None
            if page is not None and Path(page).exists() and report_dir is not None:
                data.feedback[(student, name)] = _feedback_link(report_dir, page)
    return data


def records_from_gradebook(gb, work, notebooks):
    """Records of a course graded by nbgrader itself (the hub): every submission in the gradebook,
    its notebooks that have a graded file, and the notes the chain stored in them."""
    records = {}
    try:
        submissions = gb.find_assignment(ASSIGNMENT).submissions
    except Exception:  # nothing graded yet
        return records
    for sub in submissions:
        sid = sub.student.id
        graded = [nb.name for nb in sub.notebooks if nb.name in notebooks
                  and (work / "autograded" / sid / ASSIGNMENT / f"{nb.name}.ipynb").exists()]
        notes = []
        for name in graded:
            try:
                stored = stored_in(nbformat.read(work / "autograded" / sid / ASSIGNMENT / f"{name}.ipynb", as_version=4))
            except Exception:
                stored = []
            notes += [(name, t) for t in stored]
        records[sid] = {"notebooks": graded, "broken": {}, "ok": True, "notes": from_data(notes)}
    return records


def from_tables(tables, records, notebooks):
    """ClassData from the three tables `grade_tables.build` made (scores only; verdicts and answers empty)."""
    grades = tables["grades.csv"][1]
    students = sorted(records)
    scores = {(_unquote(s), cell): float(score) for s, _, cell, score, _ in grades}
    totals = {}
    for row in tables["totals.csv"][1]:
        totals[_unquote(row[0])] = tuple(float(x) for x in row[1:5])
    max_total = float(tables["totals.csv"][1][0][5]) if tables["totals.csv"][1] else 0.0
    manual = [[_unquote(r[0]), *r[1:]] for r in tables["manual_grades.csv"][1]]
    submitted = {s: set(records[s]["notebooks"]) if records[s].get("ok") else set() for s in students}
    stubs, references = {}, {}
    for name in notebooks:
        own, locked = release_cells(name)
        stubs.update(own)
        references[f"发布版 {name} 的锁定单元格"] = locked
    references[COMPANION] = (RELEASE_DIR / ASSIGNMENT / COMPANION).read_text(encoding="utf-8")
    notes = {s: [safe(t) for t in texts(records[s].get("notes", []))] for s in students}
    return ClassData(students=students, notebooks=list(notebooks), submitted=submitted, scores=scores,
                     totals=totals, max_total=max_total, manual=manual, exercises=exercises(notebooks),
                     verdicts={}, answers={}, stubs=stubs, references=references, notes=notes)


def _unquote(cell):
    """A student id as the tables hold it (csv_safe may have prefixed an apostrophe)."""
    return cell[1:] if cell.startswith("'") and cell[1:].startswith(grade_tables.FORMULA_START) else cell
