"""The chain every path runs: nbgrader's steps with ours, and their settings.

nbgrader_config.py (the repo root is the course) applies `configure`, and so do the grading command
and the hub's instructor config (which loads that file): one chain on every path. `api` is nbgrader's
API for a throw-away course root.
"""
import functools
import secrets
from pathlib import Path

from nbconvert.preprocessors import ClearMetadataPreprocessor, CSSHTMLHeaderPreprocessor
from nbgrader.preprocessors import (
    AssignLatePenalties,
    CheckCellMetadata,
    ClearHiddenTests,
    ClearOutput,
    DeduplicateIds,
    GetGrades,
    LimitOutput,
    OverwriteCells,
    OverwriteKernelspec,
    SaveAutoGrades,
)
from traitlets.config import Config

from autograder.course import SOURCE_DIR

# our steps by name: nbgrader imports them when a step runs, so generate_assignment and generate_feedback do not
# load torch and the exercises (1.4 s of each process's start)
SUBMISSION_READER, REPAIR = "autograder.chain.intake_chain.SubmissionReader", "autograder.chain.intake_chain.RepairSubmission"
EXECUTE, JUDGE = "autograder.chain.sandboxed_execute.SandboxedExecute", "autograder.chain.verdicts.JudgeProbes"
PAGE, PAGE_OUTPUTS = "autograder.chain.feedback_page.SafeHTMLExporter", "autograder.chain.feedback_page.SafeOutputs"


def configure(c):
    """Set the chain and its settings on nbgrader's config object `c`."""
    _stamp_gradebooks_in_process()
    c.CourseDirectory.course_id = "w1d1-attention"
    # nbgrader logs student file names as they are: make them printable (no forged lines, no terminal escapes)
    c.Application.logging_config = {"filters": {"printable": {"()": "autograder.notes.PrintableLog"}},
                                    "handlers": {"console": {"filters": ["printable"]}}}
    c.CourseDirectory.source_directory = "solutions"
    c.CourseDirectory.release_directory = "notebooks"

    c.ClearSolutions.code_stub = {"python": "# 在这里写你的代码\nraise NotImplementedError()"}
    c.ClearSolutions.text_stub = "在这里写下你的回答。"

    # restore deleted test / locked cells instead of silently skipping them
    c.OverwriteCells.add_missing_cells = True

    # intake on every path (grading command, nbgrader autograde, formgrader): read the file safely, then
    # repair the notebook before nbgrader's own steps (autograder/chain/intake_chain.py)
    c.Autograde.exporter_class = SUBMISSION_READER
    c.Autograde.sanitize_preprocessors = [
        REPAIR, ClearOutput, DeduplicateIds, OverwriteKernelspec, OverwriteCells, CheckCellMetadata,
    ]
    c.Autograde.autograde_preprocessors = [
        EXECUTE, JUDGE, ClearMetadataPreprocessor, LimitOutput, SaveAutoGrades,
        AssignLatePenalties, CheckCellMetadata,
    ]
    # one seed per grading run: it makes the run's case file, which feeds both the kernels (cases) and the
    # verdicts, so hidden cases differ from run to run on every path (the grading command makes its own file)
    c.SandboxKernelManager.grader_seed = c.JudgeProbes.seed = secrets.randbelow(2**31)
    c.Execute.timeout = 120
    c.SandboxedExecute.timeout = 120
    c.Execute.startup_timeout = 180
    c.Execute.extra_arguments = ["--HistoryManager.hist_file=:memory:"]

    # feedback never shows the hidden checks' source, nor live student markup (autograder/chain/feedback_page.py)
    c.ClearHiddenTests.enforce_metadata = False
    c.GenerateFeedback.preprocessors = [GetGrades, ClearHiddenTests, PAGE_OUTPUTS, CSSHTMLHeaderPreprocessor]
    c.GenerateFeedback.exporter_class = PAGE
    c.HTMLExporter.sanitize_html = True
    c.HTMLExporter.filters = {"clean_html": "autograder.chain.feedback_page.clean_html"}


def nbgrader_config(root, release_dir="release"):
    """The chain's configuration, pointed at a separate course root (its own gradebook)."""
    cfg = Config()
    configure(cfg)
    extra = Config()
    extra.CourseDirectory.root = str(Path(root).resolve())
    extra.CourseDirectory.source_directory = str(SOURCE_DIR)
    extra.CourseDirectory.release_directory = str(release_dir)
    extra.CourseDirectory.db_url = f"sqlite:///{Path(root).resolve() / 'gradebook.db'}"
    cfg.merge(extra)
    return cfg


def alembic_head():
    """The head of nbgrader's migrations, which it stamps into every gradebook it creates: what its
    `get_alembic_version` reads from a new `alembic heads` process (about 2 s of a core each time), read here."""
    from alembic.config import Config as AlembicConfig
    from alembic.script import ScriptDirectory
    from nbgrader.dbutil import _temp_alembic_ini

    with _temp_alembic_ini("sqlite:////tmp/gradebook.db") as ini:
        return ScriptDirectory.from_config(AlembicConfig(ini)).get_current_head()


def _stamp_gradebooks_in_process():
    """nbgrader has no setting for how it reads the head: its module function is replaced, on every path."""
    import nbgrader.api

    if getattr(nbgrader.api.get_alembic_version, "__wrapped__", None) is not alembic_head:
        nbgrader.api.get_alembic_version = functools.cache(alembic_head)


def api(root, release_dir="release"):
    """nbgrader's API for the course at `root`."""
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory

    cfg = nbgrader_config(root, release_dir)
    return NbGraderAPI(coursedir=CourseDirectory(config=cfg), config=cfg)
