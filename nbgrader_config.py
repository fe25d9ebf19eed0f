"""nbgrader configuration: the repo root is the course.

source = solutions/, release = notebooks/, assignment w1d1. Grading runs each student kernel in
a bubblewrap sandbox and reaches verdicts in the grader's own process (see autograder/).
"""
import os
import secrets
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from nbconvert.preprocessors import (
    ClearMetadataPreprocessor,  # noqa: E402
    CSSHTMLHeaderPreprocessor,  # noqa: E402
)
from nbgrader.preprocessors import (  # noqa: E402
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

from autograder.feedback_page import SafeHTMLExporter, SafeOutputs  # noqa: E402
from autograder.intake_chain import RepairSubmission, SubmissionReader  # noqa: E402
from autograder.nbgrader_plugins import JudgeProbes, SandboxedExecute  # noqa: E402

c = get_config()  # noqa: F821

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
# repair the notebook before nbgrader's own steps (autograder/intake_chain.py)
c.Autograde.exporter_class = SubmissionReader
c.Autograde.sanitize_preprocessors = [
    RepairSubmission, ClearOutput, DeduplicateIds, OverwriteKernelspec, OverwriteCells, CheckCellMetadata,
]
c.Autograde.autograde_preprocessors = [
    SandboxedExecute, JudgeProbes, ClearMetadataPreprocessor, LimitOutput, SaveAutoGrades,
    AssignLatePenalties, CheckCellMetadata,
]
# one seed per grading run: it makes the run's case file, which feeds both the kernels (cases) and the
# verdicts, so hidden cases differ from run to run on every path (the grading command makes its own file)
c.SandboxKernelManager.grader_seed = c.JudgeProbes.seed = secrets.randbelow(2**31)
c.Execute.timeout = 120
c.SandboxedExecute.timeout = 120
c.Execute.startup_timeout = 180
c.Execute.extra_arguments = ["--HistoryManager.hist_file=:memory:"]

# feedback never shows the hidden checks' source, nor live student markup (autograder/feedback_page.py)
c.ClearHiddenTests.enforce_metadata = False
c.GenerateFeedback.preprocessors = [GetGrades, ClearHiddenTests, SafeOutputs, CSSHTMLHeaderPreprocessor]
c.GenerateFeedback.exporter_class = SafeHTMLExporter
c.HTMLExporter.sanitize_html = True
c.HTMLExporter.filters = {"clean_html": "autograder.feedback_page.clean_html"}
