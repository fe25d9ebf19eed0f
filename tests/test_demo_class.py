"""data/demo_class is in sync with the release: tools/demo_class.py regenerates it unchanged, and
reading it for grading reports no tampering (what `make grade` prints)."""
import tempfile
from pathlib import Path

from autograder.command.intake import read_submission
from autograder.course import ASSIGNMENT, available_notebooks
from autograder.notes import stored_in
from tests.entry_points import through_chain
from tools import demo_class

DEMO = Path(__file__).resolve().parents[1] / "data" / "demo_class"


def test_demo_class_is_what_the_tool_makes_from_the_release():
    with tempfile.TemporaryDirectory() as tmp:
        demo_class.write(tmp)
        made = sorted(p.relative_to(tmp) for p in Path(tmp).rglob("*.ipynb"))
        assert made == sorted(p.relative_to(DEMO) for p in DEMO.rglob("*.ipynb"))
        for rel in made:
            assert (Path(tmp) / rel).read_text(encoding="utf-8") == (DEMO / rel).read_text(encoding="utf-8"), rel


def test_grading_the_demo_class_reports_no_tampering(tmp_path):
    for folder in sorted(DEMO.iterdir()):
        sub = read_submission(folder, available_notebooks(), tmp_path / folder.name / ASSIGNMENT)
        assert sub.notebooks and not sub.broken, folder.name
        assert sub.notes == [], (folder.name, sub.notes)
        for path in sub.notebooks.values():  # nbgrader's chain repairs nothing either
            assert stored_in(through_chain(path)) == [], (folder.name, path.name)
