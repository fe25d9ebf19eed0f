"""Every solution notebook runs top to bottom at home: no errors, every check passes, no glyph warnings."""
import os

import nbformat
import pytest
from nbclient import NotebookClient

from autograder.course import ASSIGNMENT, SOURCE_DIR, available_notebooks
from autograder.nbgrader_plugins import check_calls


def execute(path, cwd):
    nb = nbformat.read(path, as_version=4)
    os.environ.pop("MPLBACKEND", None)  # the kernel's inline backend draws the figures
    NotebookClient(nb, timeout=180, kernel_name="python3", resources={"metadata": {"path": str(cwd)}},
                   allow_errors=True).execute()
    return nb


@pytest.mark.parametrize("name", available_notebooks())
def test_solution_notebook_runs_clean(name):
    nb = execute(SOURCE_DIR / ASSIGNMENT / f"{name}.ipynb", SOURCE_DIR / ASSIGNMENT)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        for out in cell.outputs:
            assert out.output_type != "error", f"cell {i}: {out.get('ename')}: {out.get('evalue')}"
            text = out.get("text", "")
            assert "Glyph" not in text and "missing from font" not in text, f"cell {i}: {text[:300]}"
            assert not (out.output_type == "stream" and out.get("name") == "stderr" and "Warning" in text), text[:300]
        printed = "".join(o.get("text", "") for o in cell.outputs)
        for grade_id, hidden in check_calls(cell.source):
            kind = "隐藏检查" if hidden else "公开检查"
            assert f"✅ {kind}通过：{grade_id}" in printed, f"{name}: {grade_id} ({kind}) did not pass"
    figures = sum("image/png" in o.get("data", {}) for c in nb.cells for o in c.get("outputs", []))
    assert figures >= 1, f"{name}: no figure was drawn"
