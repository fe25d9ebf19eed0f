"""The student notebooks in real JupyterLab, in headless Chromium (Playwright).

Each released notebook: one Run All reaches the last cell, draws exactly the figures that the kernel
draws outside a browser, every one loads and fits the notebook's width; every exercise check shows
the stub's `NotImplementedError` (and no checker traceback); every explorer widget renders and
redraws on a change.
Notebook 01: typed-in correct answers print their public pass messages, and nbgrader's Validate
button fails the untouched notebook and passes the answered one. Screenshots: test-output/browser/.
"""
import contextlib
import re

import nbformat
import pytest
from w1d1_student.cell_source import check_calls

from autograder.course import ASSIGNMENT, RELEASE_DIR, SOURCE_DIR, available_notebooks
from tests.lab_browser import CHROMIUM, LAUNCH_ARGS, ROOT, Notebook, copy_notebooks, ensure_chromium, lab_server
from tests.run_cache import executed_release
from tools.build_site import figure_cells

SHOTS = ROOT / "test-output" / "browser"
PASS_MESSAGE = "✅ 公开检查通过：{}"
EXPLORER = re.compile(r"^viz\.explorer\(", re.M)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    reason = ensure_chromium()
    if reason:
        pytest.skip(f"browser tests need Chromium: {reason}")
    from playwright.sync_api import sync_playwright

    work = tmp_path_factory.mktemp("lab")
    with lab_server(work / "notebooks", work) as base, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS)
        yield base, browser, work / "notebooks"
        browser.close()


@contextlib.contextmanager
def open_notebook(lab, name, folder):
    """A fresh copy of released notebook `name` in its own folder, open in a new page; a screenshot on failure."""
    base, browser, root = lab
    copy_notebooks(RELEASE_DIR / ASSIGNMENT, root / folder, {name})
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    nb = Notebook(page, base, f"{folder}/{name}.ipynb", SHOTS)
    try:
        nb.open()
        yield nb
    except BaseException:
        nb.shot("failure")
        raise
    finally:
        page.close()


def public_check_cells(cells):
    return {i: gid for i, c in enumerate(cells) if c.cell_type == "code"
            for gid, hidden in check_calls(c.source) if not hidden}


@pytest.mark.parametrize("name", available_notebooks())
def test_notebook_runs_in_jupyterlab(lab, name, tmp_path_factory):
    released = nbformat.read(RELEASE_DIR / ASSIGNMENT / f"{name}.ipynb", as_version=4)
    expected_figures = figure_cells(executed_release(tmp_path_factory, name))  # the run test_site's build() makes
    with open_notebook(lab, name, f"run-{name}") as nb:
        not_run = nb.run_all()
        checks = public_check_cells(released.cells)
        # a failing check (tagged raises-exception) shows its error and Run All goes on to the end
        assert not_run == [], f"{name}: Run All stopped before cells {not_run}"
        for i, gid in checks.items():
            shown = nb.output_text(i)
            assert "NotImplementedError" in shown, f"{name}: check {gid} does not show the stub error"
            assert "runner.py" not in shown, f"{name}: check {gid} shows the checker's own traceback"
        nb.show(min(checks))
        nb.shot("stub-error")

        figures = nb.figures()
        assert [f["cell"] for f in figures] == expected_figures, "the browser shows other figures than the kernel drew"
        for f in figures:
            assert f["loaded"], f"{name}: the figure of cell {f['cell']} did not load"
            assert f["natural"] <= f["room"], f"{name}: the figure of cell {f['cell']} is wider than the notebook"
        nb.show(expected_figures[0])
        nb.shot("figure")

        explorers = [i for i, c in enumerate(released.cells) if c.cell_type == "code" and EXPLORER.search(c.source)]
        for i in explorers:
            assert_widget_reacts(nb, i)


def assert_widget_reacts(nb, index):
    """The explorer in cell `index` shows its controls; changing one redraws its figure."""
    box = nb.cells().nth(index).locator(".widget-interact")
    box.wait_for(timeout=60_000)
    box.scroll_into_view_if_needed()
    figure = box.locator(".jp-OutputArea-output img")
    before = figure.first.get_attribute("src") if figure.count() else None
    select = box.locator("select")
    if select.count():
        options = select.first.locator("option").all_inner_texts()
        choice = next(o for o in options if o != select.first.input_value())
        select.first.select_option(label=choice)
    else:
        handle = box.locator(".noUi-handle").first
        handle.focus()
        nb.page.keyboard.press("ArrowRight")
    nb.page.wait_for_function(
        "([el, before]) => { const img = el.querySelector('.jp-OutputArea-output img');"
        " return img && img.complete && img.naturalWidth > 0 && img.src !== before; }",
        arg=[box.element_handle(), before], timeout=60_000)
    nb.shot(f"widget-cell{index}")


def solution_code(cell):
    """A model answer cell without nbgrader's markers: what a student who solved it would have typed."""
    return "\n".join(line for line in cell.source.splitlines()
                     if line.strip() not in ("### BEGIN SOLUTION", "### END SOLUTION"))


def test_answers_pass_and_validate_in_jupyterlab(lab):
    name = "01_self_attention"
    solution = nbformat.read(SOURCE_DIR / ASSIGNMENT / f"{name}.ipynb", as_version=4)
    answers = {i: c for i, c in enumerate(solution.cells) if c.metadata.get("nbgrader", {}).get("solution")}
    code = {i: c for i, c in answers.items() if c.cell_type == "code"}
    checks = public_check_cells(solution.cells)
    with open_notebook(lab, name, "answer") as nb:
        untouched = nb.validate()
        assert "Success" not in untouched and "NotImplementedError" in untouched, untouched[:500]

        nb.run_all()
        first = min(checks)
        assert "NotImplementedError" in nb.output_text(first)
        nb.set_source(min(code), solution_code(code[min(code)]))
        nb.run_cell(min(code))
        nb.run_cell(first)
        assert PASS_MESSAGE.format(checks[first]) in nb.output_text(first)
        nb.show(first)
        nb.shot("first-answer-passes")

        for i, cell in answers.items():  # code and written answers
            nb.set_source(i, solution_code(cell))
        nb.render_markdown()
        nb.run_all()
        for i, gid in checks.items():
            assert PASS_MESSAGE.format(gid) in nb.output_text(i), gid

        result = nb.validate()
        assert "Success! Your notebook passes all the tests." in result, result[:500]
