"""Attacks on intake, isolation, feedback pages and grades.csv, graded by the real sandboxed grader
(issue 11, findings 2, 7 and 8). Full marks come from the source notebook, never hard-coded."""
import csv
import json
import os
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest

from autograder.chain.feedback_page import MAX_PAGE_BYTES, SafeOutputs, clean_html, finish_page
from autograder.command.grade import grade
from autograder.course import ASSIGNMENT, SOURCE_DIR
from autograder.report.grade_tables import graded_cells
from tests import grading_class as gc
from tests.lab_browser import CHROMIUM, LAUNCH_ARGS, ensure_chromium

pytestmark = pytest.mark.filterwarnings("ignore::nbformat.warnings.DuplicateCellId")
FORMULA = '=HYPERLINK("evil.example","click")'
AT_ID = "@evil.example"  # a valid student id that a spreadsheet would still read as a formula
SECRET = "root:x:0:0:W1D1-SECRET-FIRST-LINE"
MARK = "document.documentElement.dataset.pwned={}"  # no quotes: it nests in HTML and Python strings
WRITTEN = f"""<img src=x onerror="{MARK.format(1)}"><script>{MARK.format(2)}</script>
<svg onload="{MARK.format(3)}"></svg> [x](javascript:{MARK.format(4)}) ![y](javascript:{MARK.format(5)})
[w](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==) <a href=" DATA:text/html,<b>x</b>">v</a>
<a href="&#100;ata:text/html,<h1>x</h1>">u</a> <a href="da&#9;ta:text/html,x">t</a>"""
RICH = f"""
from IPython.display import HTML, Markdown, Javascript, SVG, display
display(HTML('<script>{MARK.format(6)}</script><img src=x onerror="{MARK.format(7)}">'))
display(Markdown('<img src=y onerror="{MARK.format(8)}"> [z](javascript:{MARK.format(9)})'))
display(Javascript("{MARK.format(10)}"))
display(SVG('<svg xmlns="http://www.w3.org/2000/svg" onload="{MARK.format(11)}"></svg>'))
print("RICH-RAN")
"""


NB2 = "02_scaled_dot_product"
JUDGE_CRASH = """import pkgutil
_r = pkgutil.resolve_name("w1d1_student.runner")
_r.run_cases = lambda gid, ns, cases, hidden=False: {"grade_id": gid, "hidden": hidden, "results": "x"}
"""


def _raw(nb, grade_id, src):
    gc.cell(nb, grade_id).source = src
    return nb


def build(root, outside):
    root.mkdir()
    students = {}

    def put(name, nb=None, raw=None):
        folder = root / name
        folder.mkdir()
        if raw is not None:
            (folder / f"{gc.NB}.ipynb").write_text(raw)
        elif nb is not None:
            nbformat.write(nb, folder / f"{gc.NB}.ipynb")
        students[name] = folder
        return folder

    put("honest", gc.solved())
    # finding 2: nbgrader metadata of the wrong type passes nbformat.validate
    for name, meta in (("meta_list", ["x"]), ("meta_str", "x"), ("meta_gid_list", {"grade_id": ["softmax"], "solution": True})):
        nb = json.loads(nbformat.writes(gc.solved()))
        nb["cells"][gc.index(gc.solved(), "softmax")]["metadata"]["nbgrader"] = meta
        put(name, raw=json.dumps(nb))
    # a crafted probe payload that breaks the judge of notebook 01; notebook 02 must still count
    folder = put("judge_crash", gc.solved(softmax=gc._answers()["softmax"] + JUDGE_CRASH))
    shutil.copy(SOURCE_DIR / ASSIGNMENT / f"{NB2}.ipynb", folder / f"{NB2}.ipynb")
    put("bad_utf8").joinpath(f"{gc.NB}.ipynb").write_bytes(b'{"cells": [\xff\xfe]}')
    # finding 7: live markup in a written answer and in rich outputs (answer cells run while grading);
    # as much HTML as the output limits let through
    flood = "for k in range(40):\n    display(HTML(f'<p>{k}' + 'A' * 60_000 + '</p>'))\n"
    nb = _raw(gc.solved(softmax=gc._answers()["softmax"] + RICH,
                        self_attention=gc._answers()["self_attention"] + RICH + flood), "q1_two_problems", WRITTEN)
    put("xss", nb)
    # finding 8: a formula as a folder name (not an id: skipped), an id a spreadsheet reads as a
    # formula; links, FIFOs and big files at intake
    put(FORMULA, gc.solved())
    put(AT_ID, gc.solved())
    folder = put("linker")
    os.symlink(outside / "passwd", folder / f"{gc.NB}.ipynb")
    os.mkfifo(folder / "02_scaled_dot_product.ipynb")
    (folder / "03_masks.ipynb").write_bytes(b" " * (21 * 2**20))
    (outside / "victim").mkdir()
    nbformat.write(gc.solved(), outside / "victim" / f"{gc.NB}.ipynb")
    os.symlink(outside / "victim", root / "linked_folder")
    return students


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("trust")
    outside = tmp / "outside"
    outside.mkdir()
    (outside / "passwd").write_text(SECRET + "\n")
    build(tmp / "class", outside)
    out = tmp / "out"
    log = []
    grade(tmp / "class", out, jobs=2, timeout=30, seed=4321, log=log.append)
    with open(out / "grades.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    return {"out": out, "rows": rows, "log": "\n".join(log)}


def points(rows, student, name=gc.NB):
    got = [(float(r[3]), float(r[4])) for r in rows[1:] if r[0] == student and r[1] == name]
    return sum(g for g, _ in got), sum(m for _, m in got)


FULL = sum(p for _, p in graded_cells(gc.NB)[0])


def feedback(graded, student, name=gc.NB):
    return (graded["out"] / "feedback" / student / f"{name}.html").read_text(encoding="utf-8")


def test_malformed_metadata_costs_only_that_student(graded):
    rows = graded["rows"]
    assert points(rows, "honest") == (FULL, FULL)
    for student in ("meta_list", "meta_str", "meta_gid_list"):
        got, total = points(rows, student)
        # the broken metadata is dropped, and the answer cell is recognised by its cell id, as it ran at home
        assert (got, total) == (FULL, FULL), student
        assert "元数据被改坏" in feedback(graded, student) and "认出并恢复" in feedback(graded, student)
    assert points(rows, "bad_utf8") == (0, FULL)
    assert "无法读取" in feedback(graded, "bad_utf8")


class LiveMarkup(HTMLParser):
    """Script elements, event handlers, javascript: and data: links and inline SVG after the page's <head>."""

    def __init__(self):
        super().__init__()
        self.in_body, self.found = False, []

    def handle_starttag(self, tag, attrs):
        self.in_body = self.in_body or tag == "body"
        if not self.in_body:
            return
        if tag in ("script", "svg", "iframe", "object", "embed", "base", "meta"):
            self.found.append(tag)
        for key, value in attrs:
            url = re.sub(r"[\x00-\x20\x7f]", "", value or "").lower()  # HTMLParser has decoded the entities
            if key.startswith("on") or url.startswith("javascript:") or (key == "href" and url.startswith("data:")):
                self.found.append(f"{tag} {key}={value}")


def test_a_notebook_that_breaks_grading_costs_only_itself(graded):
    """Whatever the judge makes of a forged payload, notebook 02 of the same student keeps its marks."""
    full2 = sum(p for _, p in graded_cells(NB2)[0])
    assert points(graded["rows"], "judge_crash", NB2) == (full2, full2)
    assert points(graded["rows"], "judge_crash")[0] < FULL
    assert points(graded["rows"], "honest") == (FULL, FULL)


def test_feedback_pages_carry_no_live_student_markup(graded):
    page = feedback(graded, "xss")
    assert 'http-equiv="Content-Security-Policy"' in page and "script-src 'none'" in page
    assert page.index("Content-Security-Policy") < min(i.start() for i in re.finditer("<script|<style", page))
    assert "dataset.pwned=2" in page[page.index("<body"):]  # the payload is shown, as text
    assert "RICH-RAN" in page  # the rich outputs were made
    parser = LiveMarkup()
    parser.feed(page)
    assert parser.in_body and parser.found == []
    assert points(graded["rows"], "xss") == (FULL, FULL)


def test_feedback_page_stays_under_two_megabytes(graded):
    out = graded["out"]
    for page in (out / "feedback").rglob("*.html"):
        assert page.stat().st_size < 2_000_000, page
    flooded = graded["out"] / "nbgrader" / "autograded" / "xss" / ASSIGNMENT / f"{gc.NB}.ipynb"
    assert flooded.read_text(encoding="utf-8").count("A" * 1000) >= 5  # the flood ran, cut to the output limits
    assert feedback(graded, "xss").count("A" * 1000) == 0  # and the page shows only the checks' verdicts


def test_feedback_budget_cuts_outputs_and_sources():
    """Whatever reaches the feedback step (limits changed, a notebook graded elsewhere) fits on a page."""
    nb = gc.solved()
    big = nbformat.v4.new_output("display_data", data={"text/html": "<p>" + "A" * 200_000 + "</p>",
                                                       "application/javascript": "alert(1)"})
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = [big] * 3
    nb.cells.append(nbformat.v4.new_markdown_cell("B" * 5_000_000))
    out, _ = SafeOutputs().preprocess(nb, {})
    assert len(nbformat.writes(out)) < MAX_PAGE_BYTES
    shown = [o for c in out.cells if c.cell_type == "code" for o in c.outputs]
    assert any("输出太大" in o.get("text", "") for o in shown)
    assert all("application/javascript" not in o.get("data", {}) for o in shown)
    assert out.cells[-1].source.endswith("反馈里只显示开头）")
    page = finish_page("<html><head></head><body>" + "C" * 3_000_000 + "</body></html>", ["注意"])
    assert len(page.encode()) < MAX_PAGE_BYTES and "注意" in page and "Content-Security-Policy" in page


def test_a_page_export_renders_each_shared_cell_once_and_the_same(monkeypatch):
    """One exporter for a class: a cell every page shares (the release's) is highlighted and rendered once, and
    each page is what a fresh exporter makes of it; a student's own text is never another's, and a markdown cell
    with attachments (its images) is rendered anew."""
    import pygments
    from nbconvert.exporters.html import HTMLExporter

    from autograder.chain.feedback_page import SafeHTMLExporter

    calls, rendered = [], []
    real = pygments.highlight
    monkeypatch.setattr(pygments, "highlight", lambda *a, **k: calls.append(1) or real(*a, **k))
    render = HTMLExporter.markdown2html
    monkeypatch.setattr(HTMLExporter, "markdown2html", lambda self, c, text: rendered.append(text) or render(self, c, text))
    first, second = gc.solved(), gc.solved()
    mine = nbformat.v4.new_markdown_cell("**second's own answer**")
    pictured = nbformat.v4.new_markdown_cell("![x](attachment:x.png)", attachments={"x.png": {"image/png": "iVBORw0KGgo="}})
    second.cells += [mine, pictured]
    exporter = SafeHTMLExporter()
    exporter.from_notebook_node(first, {"metadata": {"name": gc.NB, "path": "/class/ada"}})
    highlighted, before = len(calls), len(rendered)
    page, _ = exporter.from_notebook_node(second, {"metadata": {"name": gc.NB, "path": "/class/bo"}})
    assert highlighted > 0 and len(calls) == highlighted  # the second page highlighted nothing anew
    assert before > 0 and rendered[before:] == [mine.source, pictured.source]  # each student's folder: its own only
    assert page == SafeHTMLExporter().from_notebook_node(second, {"metadata": {"name": gc.NB}})[0]
    assert "second&#39;s own answer" in page or "second's own answer" in page
    assert 'src="data:image/png;base64,iVBORw0KGgo="' in page
    # what it keeps is bounded in characters, whatever the cells (a huge cell is forgotten first)
    monkeypatch.setattr("autograder.chain.feedback_page.REMEMBERED_CHARS", 200_000)
    bounded = SafeHTMLExporter()
    big = gc.solved()
    big.cells += [nbformat.v4.new_code_cell(f"x{i} = 1 + " + "2 * " * 5_000 + "3") for i in range(12)]
    for nb in (big, gc.solved()):
        bounded.from_notebook_node(nb, {"metadata": {"name": gc.NB}})
        assert bounded._made_chars <= 200_000
        assert bounded._made_chars == sum(size for _, size in bounded._made.values())
    assert bounded._made_chars > 0


def test_feedback_images_come_only_from_the_page():
    """An image may not fetch anything (a tracking pixel would tell who opened the page, and when)."""
    text = clean_html('<img src="http://evil.example/x.png" alt="a"><img src=" HTTPS://evil.example/y">'
                      '<img src="data:image/png;base64,iVBORw0KGgo=" width="3"><a href="https://docs.python.org">doc</a>')
    assert "evil.example" not in text and 'alt="a"' in text
    assert 'src="data:image/png;base64,iVBORw0KGgo="' in text and 'width="3"' in text
    assert 'href="https://docs.python.org"' in text


def test_grades_csv_neutralises_formulas(graded):
    for name in ("grades.csv", "totals.csv", "manual_grades.csv"):
        text = (graded["out"] / name).read_text(encoding="utf-8")
        cells = [c for row in csv.reader(text.splitlines()) for c in row]
        assert "'" + AT_ID in cells, name
        assert not any(c.startswith(("=", "+", "-", "@")) for c in cells), name
        assert not any("HYPERLINK" in c for c in cells), name
    assert points(graded["rows"], "'" + AT_ID) == (FULL, FULL)
    assert f"跳过 `{FORMULA}`" in graded["log"]  # not a student id: never graded


def test_intake_refuses_links_fifos_and_big_files(graded):
    rows, out = graded["rows"], graded["out"]
    assert points(rows, "linker") == (0, FULL)
    linker = [r for r in rows[1:] if r[0] == "linker"]
    assert {r[1] for r in linker} == {gc.NB, "02_scaled_dot_product", "03_masks"}
    assert all(float(r[3]) == 0 for r in linker)
    page = feedback(graded, "linker")
    assert "符号链接" in page
    assert "不是普通文件" in feedback(graded, "linker", "02_scaled_dot_product")
    assert "MB" in feedback(graded, "linker", "03_masks")
    everything = graded["log"] + "".join(p.read_text(errors="replace") for p in Path(out).rglob("*.html"))
    everything += "".join((out / n).read_text() for n in ("grades.csv", "totals.csv"))
    assert "W1D1-SECRET" not in everything
    assert "linked_folder" not in {r[0] for r in rows[1:]}
    assert "linked_folder" in graded["log"] and "符号链接" in graded["log"]


def test_no_script_runs_in_chromium(graded):
    """The hostile feedback page in headless Chromium: nothing ran; the same markup unsanitised would."""
    reason = ensure_chromium()
    if reason:
        pytest.fail(f"the browser check needs Chromium: {reason}")
    from playwright.sync_api import sync_playwright

    page_path = graded["out"] / "feedback" / "xss" / f"{gc.NB}.html"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS)
        try:
            page = browser.new_page()
            dialogs, requests = [], []
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            page.on("requestfinished", lambda r: requests.append(r.url))  # CSP-blocked ones fail
            page.goto(page_path.resolve().as_uri())
            page.wait_for_load_state("load")
            page.wait_for_timeout(500)
            assert page.evaluate("document.documentElement.dataset.pwned") is None
            assert dialogs == []
            assert [u for u in requests if not u.startswith(("file:", "data:"))] == []
            assert "评分说明" in page.content() or "softmax" in page.content()
            # control: the detector sees a script that does run
            control = browser.new_page()
            control.set_content(f"<html><body>{WRITTEN}</body></html>")
            control.wait_for_timeout(500)
            assert control.evaluate("document.documentElement.dataset.pwned") is not None
        finally:
            browser.close()
