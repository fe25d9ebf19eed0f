"""Grade one class folder through each entry point and read back what each one gave.

- `by_command`: `python -m autograder grade` (the function behind it);
- `by_nbgrader`: plain `nbgrader generate_assignment / autograde / generate_feedback` in a course folder
  whose nbgrader_config.py loads the repo's, as deploy/ writes it for the instructor on the hub.

Both return a `Graded`: scores per (student, notebook, grade_id), the feedback page of each notebook
and the command's own exit status and log, so a test can assert the same thing of both paths.
"""
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from autograder.course import ASSIGNMENT

ENTRY_POINTS = ("command", "nbgrader")
VENV_BIN = Path(sys.executable).parent


@dataclass
class Graded:
    path: str                     # "command" or "nbgrader"
    root: Path                    # the grading output (command) or the course folder (nbgrader)
    scores: dict = field(default_factory=dict)    # (student, notebook, grade_id) -> auto score
    returncode: int = 0
    log: str = ""

    def points(self, student, notebook=None):
        return sum(s for (sid, nb, _), s in self.scores.items() if sid == student and notebook in (None, nb))

    def score(self, student, notebook, grade_id):
        return self.scores.get((student, notebook, grade_id))

    def page_path(self, student, notebook):
        if self.path == "command":
            return self.root / "feedback" / student / f"{notebook}.html"
        return self.root / "feedback" / student / ASSIGNMENT / f"{notebook}.html"

    def page(self, student, notebook):
        p = self.page_path(student, notebook)
        return p.read_text(encoding="utf-8") if p.exists() else None

    def graded_text(self, student, notebook):
        """Every output of the autograded notebook (the grader's own file: what the kernel printed,
        which the feedback page leaves out except for the checks' verdicts)."""
        import nbformat

        root = self.root / "nbgrader" if self.path == "command" else self.root
        path = root / "autograded" / student / ASSIGNMENT / f"{notebook}.ipynb"
        if not path.exists():
            return ""
        parts = []
        for cell in nbformat.read(path, as_version=4).cells:
            for out in cell.get("outputs", []):
                parts += [str(out.get(k, "")) for k in ("text", "ename", "evalue")] + [str(out.get("data", {}).get("text/plain", ""))]
        return "\n".join(parts)


def gradebook_scores(db):
    """(student, notebook, grade_id) -> auto score of every autograded test cell in `db`."""
    from nbgrader.api import Gradebook

    found = {}
    with Gradebook(f"sqlite:///{db}") as gb:
        for student in gb.students:
            for sub in gb.assignment_submissions(ASSIGNMENT):
                if sub.student_id != student.id:
                    continue
                for nb in sub.notebooks:
                    for grade in nb.grades:
                        if grade.cell.cell_type == "code" and grade.auto_score is not None:
                            found[(student.id, nb.name, grade.name)] = float(grade.auto_score)
    return found


def by_command(submissions, out, jobs=1, seed=None, **kw):
    from autograder.command.grade import grade

    lines = []
    code = 0
    try:
        grade(submissions, out, jobs=jobs, seed=seed, log=lines.append, **kw)
    except Exception as exc:  # the test decides whether a failure is expected
        code, lines = 1, lines + [f"{type(exc).__name__}: {exc}"]
    out = Path(out)
    db = out / "nbgrader" / "gradebook.db"
    return Graded("command", out, gradebook_scores(db) if db.exists() else {}, code, "\n".join(lines))


def course_config(course, exchange):
    """The instructor's nbgrader_config.py, exactly as deploy/ writes it."""
    from deploy.classroom import instructor_nbgrader_config

    return instructor_nbgrader_config(course, exchange)


def run_nbgrader(course, *args, timeout=1800):
    env = {**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run([str(VENV_BIN / "nbgrader"), *args], cwd=course, env=env, capture_output=True,
                          text=True, timeout=timeout)


def by_nbgrader(submissions, course, feedback=True, timeout=None):
    """Copy each student folder to course/submitted/<student>/w1d1 (as `nbgrader collect` leaves it),
    then autograde and generate feedback with nbgrader's own commands; `timeout`: a cell's limit in seconds, set
    in the course's nbgrader_config.py as an instructor would (the course's own when None)."""
    course = Path(course)
    course.mkdir(parents=True, exist_ok=True)
    own = f"\nc.SandboxedExecute.timeout = {timeout}\n" if timeout else ""
    (course / "nbgrader_config.py").write_text(course_config(course, course / "exchange") + own, encoding="utf-8")
    logs, code = [], 0
    gen = run_nbgrader(course, "generate_assignment", ASSIGNMENT, "--force")
    logs.append(gen.stdout + gen.stderr)
    if gen.returncode:
        return Graded("nbgrader", course, {}, gen.returncode, "\n".join(logs))
    for folder in sorted(Path(submissions).iterdir()):
        if folder.is_dir() and not folder.name.startswith("."):
            shutil.copytree(folder, course / "submitted" / folder.name / ASSIGNMENT, symlinks=True)
    steps = [("autograde", ASSIGNMENT, "--force")] + ([("generate_feedback", ASSIGNMENT, "--force")] if feedback else [])
    for step in steps:
        run = run_nbgrader(course, *step)
        logs.append(run.stdout + run.stderr)
        code = code or run.returncode
    return Graded("nbgrader", course, gradebook_scores(course / "gradebook.db"), code, "\n".join(logs))


def grade_both(submissions, tmp, **kw):
    """{entry point: Graded} for the same class. nbgrader's subprocesses run in a thread meanwhile: one
    grading run keeps less than one core busy (kernel starts wait), so the two overlap well."""
    from concurrent.futures import ThreadPoolExecutor

    tmp = Path(tmp)
    with ThreadPoolExecutor(max_workers=1) as pool:
        hub_path = pool.submit(by_nbgrader, submissions, tmp / "by-nbgrader", timeout=kw.get("timeout"))
        command = by_command(submissions, tmp / "by-command", **kw)   # main thread: it may set signal handlers
        return {"command": command, "nbgrader": hub_path.result()}



def through_chain(path, name=None):
    """The notebook nbgrader's configured chain makes of the file at `path` (reading and repair),
    without a kernel: what the rest of nbgrader's steps then work on."""
    import nbformat

    from autograder.chain.intake_chain import RepairSubmission, SubmissionReader

    reader = SubmissionReader()
    reader.register_preprocessor(RepairSubmission(), enabled=True)
    text, _ = reader.from_filename(str(path), {"nbgrader": {"notebook": name or Path(path).stem}})
    return nbformat.reads(text, as_version=4)
