"""Every solution notebook runs top to bottom at home: no errors, every check passes, no glyph warnings,
every figure fits the notebook's width and labels its axes, every explorer's draw function also works
as a plain call."""
import base64
import json
import os
import struct

import nbformat
import pytest
from nbclient import NotebookClient
from w1d1_student.cell_source import check_calls
from w1d1_student.runner import CASES_ENV

from autograder.checks import case_file_data
from autograder.course import ASSIGNMENT, REPO, SOURCE_DIR, available_notebooks
from tests.explorer_calls import explorer_calls

MAX_FIGURE_PX = 1000  # 10 inches at the inline backend's 100 dpi: no figure is shrunk in the notebook


def png_width(data):
    return struct.unpack(">I", base64.b64decode(data)[16:20])[0]


def execute(path, cwd):
    nb = nbformat.read(path, as_version=4)
    calls = [call for c in nb.cells if c.cell_type == "code" for call in explorer_calls(c.source)]
    nb.cells += [nbformat.v4.new_code_cell(f"{call}\nplt.show()", metadata={"explorer_call": call}) for call in calls]
    # the kernel sees the student package, not the repo: the probe alone comes from tests/
    probe = nbformat.v4.new_code_cell(f"import sys\nsys.path.insert(0, {str(REPO)!r})\nfrom tests import figure_probe\n"
                                      "figure_probe.install()\nsys.path.pop(0)", metadata={"probe": 1})
    report = nbformat.v4.new_code_cell("import json\nprint(json.dumps(figure_probe.UNLABELLED))", metadata={"probe": 1})
    nb.cells = [probe] + nb.cells + [report]
    os.environ.pop("MPLBACKEND", None)  # the kernel's inline backend draws the figures
    NotebookClient(nb, timeout=180, kernel_name="python3", resources={"metadata": {"path": str(cwd)}},
                   allow_errors=True).execute()
    return nb


@pytest.fixture(scope="module")
def case_file(tmp_path_factory):
    """The cases of seed 0 with the grader's answers: the hidden checks can be judged in the kernel too."""
    path = tmp_path_factory.mktemp("cases") / "cases.json"
    path.write_text(json.dumps(case_file_data(0, answers=True)), encoding="utf-8")
    return path


@pytest.mark.parametrize("name", available_notebooks())
def test_solution_notebook_runs_clean(name, case_file, monkeypatch):
    monkeypatch.setenv(CASES_ENV, str(case_file))
    nb = execute(SOURCE_DIR / ASSIGNMENT / f"{name}.ipynb", SOURCE_DIR / ASSIGNMENT)
    unlabelled = json.loads(nb.cells[-1].outputs[0].text)
    assert unlabelled == [], f"{name}: axes without labels: {unlabelled}"
    for i, cell in enumerate(nb.cells, start=-1):  # i: the index in the notebook, without the probe cell in front
        if cell.cell_type != "code" or "probe" in cell.metadata:
            continue
        for out in cell.outputs:
            assert out.output_type != "error", f"cell {i}: {out.get('ename')}: {out.get('evalue')}"
            text = out.get("text", "")
            assert "Glyph" not in text and "missing from font" not in text, f"cell {i}: {text[:300]}"
            assert not (out.output_type == "stream" and out.get("name") == "stderr" and "Warning" in text), text[:300]
            if "image/png" in out.get("data", {}):
                width = png_width(out.data["image/png"])
                assert width <= MAX_FIGURE_PX, f"{name}: cell {i} draws a figure {width} px wide"
        printed = "".join(o.get("text", "") for o in cell.outputs)
        for grade_id, hidden in check_calls(cell.source):
            kind = "隐藏检查" if hidden else "公开检查"
            assert f"✅ {kind}通过：{grade_id}" in printed, f"{name}: {grade_id} ({kind}) did not pass"
    for i, cell in enumerate(nb.cells, start=-1):  # the static default stands in for the widget; the plain call draws too
        if cell.cell_type == "code" and (explorer_calls(cell.source) or "explorer_call" in cell.metadata):
            assert any("image/png" in o.get("data", {}) for o in cell.outputs), f"{name}: cell {i} drew no figure"
    figures = sum("image/png" in o.get("data", {}) for c in nb.cells for o in c.get("outputs", []))
    assert figures >= 1, f"{name}: no figure was drawn"
