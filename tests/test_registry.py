"""One registry: the exercises of w1d1_student.registry are exactly the test cells of solutions/w1d1/*.ipynb,
and each has its driver, its cases, its answers and its judge under its notebook's name."""
import importlib

import nbformat
from w1d1_student import registry

from autograder.course import ASSIGNMENT, SOURCE_DIR, available_notebooks


def _test_cells():
    found = {}
    for name in available_notebooks():
        nb = nbformat.read(SOURCE_DIR / ASSIGNMENT / f"{name}.ipynb", as_version=4)
        for cell in nb.cells:
            meta = cell.metadata.get("nbgrader", {})
            gid = meta.get("grade_id", "")
            if cell.cell_type == "code" and meta.get("grade") and gid.startswith("test_") and not gid.endswith("__hidden"):
                found[gid[len("test_"):]] = name
    return found


def test_registry_is_the_notebooks_test_cells():
    assert available_notebooks()[0] == "01_self_attention" and len(available_notebooks()) == 6
    assert _test_cells() == registry.NOTEBOOK_OF


def test_every_exercise_has_driver_cases_answers_and_judge():
    for gid in registry.NOTEBOOK_OF:
        topic = registry.topic(gid)
        assert registry.driver(gid).names, gid
        assert callable(registry.judge(gid)), gid
        module = importlib.import_module(f"autograder.exercises.{topic}")
        assert gid in module.CASES and gid in module.ANSWERS, gid
