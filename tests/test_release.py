"""The committed student release is exactly what nbgrader generates from solutions/."""
import filecmp
import json
from pathlib import Path

import nbformat
import pytest

from autograder.course import ASSIGNMENT, RELEASE_DIR, SOURCE_DIR, available_notebooks
from autograder.release import generate


@pytest.fixture(scope="module")
def fresh_release(tmp_path_factory):
    return generate(tmp_path_factory.mktemp("release"))


def _cells(path):
    nb = nbformat.read(path, as_version=4)
    return [(c.cell_type, c.source, json.dumps(c.metadata.get("nbgrader", {}), sort_keys=True)) for c in nb.cells]


def test_six_notebook_names_are_the_target():
    names = available_notebooks()
    assert names and names[0] == "01_self_attention"


def test_release_in_sync(fresh_release):
    committed = RELEASE_DIR / ASSIGNMENT
    for name in available_notebooks():
        got, want = _cells(committed / f"{name}.ipynb"), _cells(fresh_release / f"{name}.ipynb")
        assert len(got) == len(want), f"{name}: run `make release`"
        for i, (a, b) in enumerate(zip(got, want)):
            assert a == b, f"{name} cell {i} differs from a fresh release: run `make release`"
    extra = {p.name for p in committed.iterdir()} ^ {p.name for p in fresh_release.iterdir()}
    assert not (extra - {"__pycache__", ".ipynb_checkpoints"}), extra
    for path in fresh_release.iterdir():
        if path.suffix != ".ipynb" and path.is_file():
            assert filecmp.cmp(path, committed / path.name, shallow=False), path.name


def test_release_has_no_solutions_or_hidden_tests(fresh_release):
    for name in available_notebooks():
        text = (fresh_release / f"{name}.ipynb").read_text()
        assert "BEGIN SOLUTION" not in text and "BEGIN HIDDEN TESTS" not in text
        assert "raise NotImplementedError()" in text
    assert not (RELEASE_DIR / ASSIGNMENT / "w1d1_attention.py").exists()


@pytest.mark.parametrize("path", sorted((SOURCE_DIR / ASSIGNMENT).glob("*.ipynb")), ids=lambda p: p.name)
def test_sources_stored_clean_with_stable_ids(path):
    raw = json.loads(Path(path).read_text())
    assert raw["nbformat"] == 4 and raw["nbformat_minor"] >= 5
    ids = [c.get("id") for c in raw["cells"]]
    assert all(ids) and len(set(ids)) == len(ids)
    for c in raw["cells"]:
        if c["cell_type"] == "code":
            assert c["outputs"] == [] and c["execution_count"] is None
    grade_ids = [c["metadata"]["nbgrader"]["grade_id"] for c in raw["cells"] if "nbgrader" in c["metadata"]]
    assert len(set(grade_ids)) == len(grade_ids)
