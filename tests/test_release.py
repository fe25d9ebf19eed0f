"""The committed student release is exactly what nbgrader generates from solutions/."""
import filecmp
import json
from pathlib import Path

import nbformat
import pytest

from autograder.course import ASSIGNMENT, RELEASE_DIR, SOURCE_DIR, available_notebooks
from autograder.release import generate
from autograder.report.grade_tables import graded_cells


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


def _weights_table():
    """The (notebook, exercise) -> (public, hidden) points of docs/AUTHORING.md's table."""
    table = {}
    for line in (SOURCE_DIR.parent / "docs" / "AUTHORING.md").read_text().splitlines():
        cols = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cols) == 4 and cols[1].startswith("`") and "+" in cols[2]:
            pub, hid = (int(x) for x in cols[2].split("+"))
            table[(cols[0], cols[1].strip("`"))] = (pub, hid)
    return table


def test_points_follow_the_authoring_table():
    table = _weights_table()
    got = {}
    for name in available_notebooks():
        for grade_id, points in graded_cells(name)[0]:
            exercise = grade_id[len("test_"):].split("__")[0]
            pub, hid = got.get((name[:2], exercise), (0, 0))
            got[(name[:2], exercise)] = (pub, hid + points) if "__hidden" in grade_id else (pub + points, hid)
    assert got == table
    # the two-hour hand-written MHA outweighs every one-line exercise, and the backward pass outweighs softmax
    assert sum(table[("04", "mha")]) > 2 * sum(table[("01", "softmax")])
    assert sum(table[("02", "attention_backward")]) > sum(table[("01", "softmax")])


def test_the_authoring_table_is_the_one_generated_from_the_notebooks():
    """Points are typed once, in the notebook: `python tools/points_table.py` writes the table and its totals."""
    from tools import points_table

    text = points_table.AUTHORING.read_text(encoding="utf-8")
    assert points_table.rendered(text) == text, "run: .venv/bin/python tools/points_table.py"
    lines = [line for line in points_table.rendered(text.replace("| 03 | `padding_mask` | 1 + 1 |", "| 03 | `padding_mask` | 9 + 9 |")
                                                     .replace("| 05 | `attn_memory` | 1 + 1 | one product |\n", "")).splitlines()
             if "padding_mask" in line or "attn_memory" in line]
    assert lines == ["| 03 | `padding_mask` | 1 + 1 | a comparison with `arange`, two sides |",
                     "| 05 | `attn_memory` | 1 + 1 | 练习 2：`attn_matrix_bytes` |"], lines


def test_points_stated_in_headings_match_the_metadata():
    """Every graded exercise's heading states "（a + b 分）", the public + hidden points of its test cells."""
    import re
    for name in available_notebooks():
        nb = nbformat.read(SOURCE_DIR / ASSIGNMENT / f"{name}.ipynb", as_version=4)
        stated = None
        for c in nb.cells:
            found = re.search(r"（(\d+) \+ (\d+) 分）", c.source) if c.cell_type == "markdown" else None
            if found:
                stated = (int(found[1]), int(found[2]))
            meta = c.metadata.get("nbgrader", {})
            if meta.get("grade") and c.cell_type == "code":
                assert stated, f"{name} {meta['grade_id']}: its exercise heading states no points"
                want = stated[1] if meta["grade_id"].endswith("__hidden") else stated[0]
                assert meta["points"] == want, (name, meta["grade_id"])
                if meta["grade_id"].endswith("__hidden"):
                    stated = None
