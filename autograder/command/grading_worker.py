"""The nbgrader worker: one student's autograde and feedback, in a process of its own (the pool's)."""
import os
import time
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

from autograder import timing
from autograder.chain.nbgrader_chain import api
from autograder.course import ASSIGNMENT
from autograder.notes import stored_in


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


_GATE = {"students": None}  # the run's semaphore: how many workers may have kernels at a time


def share_gate(gate):
    """Pool initializer: the run's gate (a semaphore of --jobs places)."""
    _GATE["students"] = gate


@contextmanager
def kernels_turn(wait):
    """Hold one of the run's --jobs places while notebooks run: a worker starts, boots its first kernel
    and writes pages outside it (beside the student who holds it). Waits at most `wait` seconds, so a worker that died
    holding a place slows the others down, never stops them."""
    gate, asked = _GATE["students"], time.monotonic()
    held = gate.acquire(timeout=wait) if gate is not None else False
    try:
        yield time.monotonic() - asked  # seconds spent waiting for the place
    finally:
        if held:
            gate.release()


class Job(NamedTuple):
    """What every worker of a run is given: the run's nbgrader folder, its case file, and the settings."""
    work: str
    case_file: str
    sandbox: bool
    timeout: int


def grade_student(job, student, feedback_only=False, page_notes=None):
    """Worker: autograde one student and make their feedback (runs in its own process). page_notes:
    {notebook: the command's own notes for its page}."""
    work, case_file, sandbox, timeout = job
    started = time.monotonic()
    timing.WHO["student"] = student
    timing.record("worker start", timing.since_process_start() or 0.0)
    warnings.filterwarnings("ignore", module="nbgrader")  # SQLAlchemy notes from nbgrader's own gradebook code
    os.environ["JUPYTER_RUNTIME_DIR"] = str(Path(work) / "runtime" / student)
    Path(os.environ["JUPYTER_RUNTIME_DIR"]).mkdir(parents=True, exist_ok=True)
    with timing.timed("imports"):  # what api() and the chain import anyway, measured apart
        import nbgrader.apps  # noqa: F401

        from autograder.chain import kernel_pool, sandboxed_execute
    with timing.timed("nbgrader start"):
        nbg = api(work)
    nbg.coursedir.config.SandboxedExecute.timeout = timeout
    nbg.coursedir.config.SandboxKernelManager.case_file = case_file  # cases and verdicts: one file, one seed
    nbg.coursedir.config.SandboxKernelManager.sandbox = sandbox
    nbg.coursedir.config.SafeHTMLExporter.more_notes = page_notes or {}
    # each notebook's kernel boots while the ones before it run (fresh kernels all the same); the first
    # while nbgrader starts (sandboxed only: its working folder is its own, not the one nbgrader remakes)
    submitted = list((Path(work) / "submitted" / student / ASSIGNMENT).glob("*.ipynb"))
    first_now = sandbox and bool(submitted) and not feedback_only
    nbg.coursedir.config.SandboxedExecute.kernels_ahead_in_all = max(len(submitted) - (not first_now), 0)
    waited = 0.0
    if feedback_only:
        result, failed = {"success": True}, []
    else:
        budget = sandboxed_execute.SandboxedExecute.notebook_timeout.default_value
        try:
            if first_now:  # boots while the student before still holds the place
                graded_in = nbg.coursedir.format_path(nbg.coursedir.autograded_directory, student, ASSIGNMENT)
                sandboxed_execute.start_first_kernel(nbg.coursedir.config, graded_in)
            with kernels_turn(len(submitted) * budget + 60) as waited:
                result, failed = _autograde(nbg, work, student)
        finally:
            kernel_pool.POOL.discard()
    with timing.timed("feedback"):
        feedback = nbg.generate_feedback(ASSIGNMENT, student, force=True) if result["success"] else {"success": False}
    seconds = time.monotonic() - started - waited
    timing.record("student", seconds)
    return {"student": student, "success": result["success"], "error": (result.get("error") or "")[-2000:],
            "log": (result.get("log") or "")[-4000:], "feedback": feedback["success"], "failed": failed,
            "notes": chain_notes(work, student), "seconds": seconds}


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
