"""The nbgrader worker: one student's autograde and feedback, in a process of its own (the pool's)."""
import os
import time
import warnings
from pathlib import Path

from . import timing
from .course import ASSIGNMENT, api
from .notes import stored_in


def chain_notes(work, student):
    """{notebook: the notes nbgrader's chain stored in it} for one student's autograded notebooks."""
    import nbformat

    found = {}
    for path in sorted((Path(work) / "autograded" / student / ASSIGNMENT).glob("*.ipynb")):
        try:
            found[path.stem] = stored_in(nbformat.read(path, as_version=4))
        except Exception:  # our own file: a failure here is a grader bug, reported by the missing notes
            found[path.stem] = []
    return found


def grade_student(work, student, case_file, sandbox, timeout, feedback_only=False):
    """Worker: autograde one student and make their feedback (runs in its own process)."""
    started = time.monotonic()
    timing.WHO["student"] = student
    timing.record("worker start", timing.since_process_start() or 0.0)
    warnings.filterwarnings("ignore", module="nbgrader")  # SQLAlchemy notes from nbgrader's own gradebook code
    os.environ["JUPYTER_RUNTIME_DIR"] = str(Path(work) / "runtime" / student)
    Path(os.environ["JUPYTER_RUNTIME_DIR"]).mkdir(parents=True, exist_ok=True)
    with timing.timed("imports"):  # what api() and the chain import anyway, measured apart
        import nbgrader.apps  # noqa: F401

        from . import nbgrader_plugins
    with timing.timed("nbgrader start"):
        nbg = api(work)
    nbg.coursedir.config.SandboxedExecute.timeout = timeout
    nbg.coursedir.config.SandboxKernelManager.case_file = case_file  # cases and verdicts: one file, one seed
    nbg.coursedir.config.SandboxKernelManager.sandbox = sandbox
    # each notebook's kernel boots while the one before it runs (fresh kernels all the same)
    submitted = list((Path(work) / "submitted" / student / ASSIGNMENT).glob("*.ipynb"))
    nbg.coursedir.config.SandboxedExecute.spare_kernels = max(len(submitted) - 1, 0)
    try:
        result, failed = ({"success": True}, []) if feedback_only else _autograde(nbg, work, student)
    finally:
        nbgrader_plugins.discard_spare_kernel()
    with timing.timed("feedback"):
        feedback = nbg.generate_feedback(ASSIGNMENT, student, force=True) if result["success"] else {"success": False}
    timing.record("student", time.monotonic() - started)
    return {"student": student, "success": result["success"], "error": (result.get("error") or "")[-2000:],
            "log": (result.get("log") or "")[-4000:], "feedback": feedback["success"], "failed": failed,
            "notes": chain_notes(work, student), "seconds": time.monotonic() - started}


def _tolerant_autograde():
    """nbgrader's Autograde, except that a notebook whose grading raises is dropped (its partial
    file removed) and the submission's other notebooks go on; `failed` names the dropped ones."""
    from nbgrader.converters import Autograde

    class TolerantAutograde(Autograde):
        def convert_single_notebook(self, notebook_filename):
            try:
                super().convert_single_notebook(notebook_filename)
            except Exception:
                name = Path(notebook_filename).stem
                self.log.exception("grading %s failed; the other notebooks go on", name)
                self.failed.append(name)
                partial = Path(self.writer.build_directory) / f"{name}.ipynb"
                if partial.is_file():
                    partial.unlink()

    return TolerantAutograde


def _autograde_once(nbg, student, notebook_id="*"):
    from nbgrader.utils import capture_log, temp_attrs

    with temp_attrs(nbg.coursedir, assignment_id=ASSIGNMENT, student_id=student, notebook_id=notebook_id):
        with timing.timed("nbgrader start"):
            app = _tolerant_autograde()(coursedir=nbg.coursedir, parent=nbg)
        app.force, app.create_student, app.failed = True, True, []
        with timing.timed("autograde"):
            result = capture_log(app)
    return result, app.failed


def _autograde(nbg, work, student):
    """One nbgrader autograde of the whole submission; a notebook that breaks grading is tried once
    more on its own (a slow kernel start), then costs only itself: the others are graded once.
    Returns (result, notebooks that failed)."""
    result, failed = _autograde_once(nbg, student)
    if not result["success"]:  # the assignment as a whole (gradebook, folders): nothing to keep
        return result, []
    still = []
    for name in failed:
        one, again = _autograde_once(nbg, student, name)
        if not one["success"] or again:
            still.append(name)
            result = {**result, "log": (result.get("log") or "") + (one.get("log") or "")}
    names = list((Path(work) / "submitted" / student / ASSIGNMENT).glob("*.ipynb"))
    return {**result, "success": len(still) < len(names)}, still
