"""The class report of a grading run, on the demo class of 30 (tools/report_demo_class.py, whose mix is
known): the counts in the CSV files are the planted ones, the page is inert and renders (figures,
Chinese text in a CJK font), hand grading shows up after `python -m autograder report`, and the
planted copies are exactly the pairs found. Screenshot: test-output/report/class_report.png."""
import csv
import html.parser
import subprocess
import sys
import unicodedata
from collections import defaultdict
from pathlib import Path

import pytest

from autograder.command.grade import grade
from autograder.course import ASSIGNMENT
from autograder.page_policy import CSP_META
from autograder.report.grade_tables import graded_cells
from tools import report_demo_class as demo

ROOT = Path(__file__).resolve().parents[1]
SHOTS = ROOT / "test-output" / "report"  # ignored by git, like the browser tests' screenshots


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("report")
    demo.write(tmp / "class")
    grade(tmp / "class", tmp / "out", jobs=2, seed=11, log=lambda *_: None)
    return tmp / "out"


def rows(path):
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def answering(grade_id):
    expected = demo.EXPECTED[grade_id]
    return {s for group in expected.values() for s in (group if isinstance(group, list) else
                                                        [x for ids in group.values() for x in ids])}


def diagnosed(run):
    """{grade_id: {mistake key or description: {students}}} from diagnoses.csv."""
    found = defaultdict(lambda: defaultdict(set))
    for r in rows(run / "diagnoses.csv"):
        for key in r["mistake"].split("/") if r["mistake"] else [r["description"]]:  # bugs that share a message
            found[r["grade_id"]][key].add(r["student_id"])
    return found


@pytest.mark.parametrize("grade_id", sorted(demo.EXPECTED))
def test_each_planted_mistake_is_counted_for_exactly_its_students(run, grade_id):
    expected, found = demo.EXPECTED[grade_id], diagnosed(run)[grade_id]
    for bug, ids in expected.get("mistakes", {}).items():
        assert found.get(bug, set()) == set(ids), (bug, found)
    for says, ids in expected.get("named_error", {}).items():
        assert {s for text, who in found.items() if says in text for s in who} == set(ids), (says, found)
    assert found.get("未作答", set()) == set(expected.get("unanswered", [])), found
    unnamed = found.get("未识别", set())
    assert set(expected.get("unrecognised", [])) <= unnamed <= set(expected.get("unrecognised", [])) | set(
        expected.get("public_only", [])), found
    unkeyed = [(r["student_id"]) for r in rows(run / "diagnoses.csv") if r["grade_id"] == grade_id and not r["mistake"]]
    assert len(unkeyed) == len(set(unkeyed)), "one student's mistake counted twice"
    lost = {s for students in found.values() for s in students}
    assert not lost & set(expected.get("full", [])), "a student with full marks has a diagnosis"


@pytest.mark.parametrize("grade_id", sorted(demo.EXPECTED))
def test_exercise_statistics_match_the_mix(run, grade_id):
    stats = {r["grade_id"]: r for r in rows(run / "exercise_stats.csv")}[grade_id]
    expected, n = demo.EXPECTED[grade_id], len(answering(grade_id))
    assert int(stats["students"]) == n
    assert float(stats["full_share"]) == pytest.approx(len(expected.get("full", [])) / n, abs=1e-3)
    assert float(stats["public_pass_hidden_lost_share"]) == pytest.approx(len(expected.get("public_only", [])) / n,
                                                                        abs=1e-3)
    zero = set(expected.get("zero", [])) | set(expected.get("unanswered", []))
    assert float(stats["zero_share"]) >= len(zero) / n - 1e-3


def test_the_similar_pairs_are_exactly_the_planted_copies(run):
    found = {(r["grade_id"], *sorted((r["a"], r["b"]))) for r in rows(run / "similarity.csv") if r["kind"] != "not_compared"}
    assert found == {(gid, *sorted((a, b))) for gid, a, b in demo.PLANTED_COPIES}


class Inert(html.parser.HTMLParser):
    """Every tag, attribute and link of a page that could run, load or send something."""

    def __init__(self):
        super().__init__()
        self.live, self.links = [], []

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "iframe", "object", "embed", "form", "link", "base", "img"):
            self.live.append(tag)
        for name, value in attrs:
            if name == "xmlns":
                continue
            if name.startswith("on") or (value or "").strip().lower().startswith(("javascript:", "http", "//")):
                self.live.append(f"{tag} {name}={value}")
            if tag == "a" and name == "href":
                self.links.append(value)


def test_the_page_runs_nothing_and_links_only_feedback_pages(run):
    page = (run / "report.html").read_text(encoding="utf-8")
    assert CSP_META in page
    parser = Inert()
    parser.feed(page)
    assert parser.live == []
    assert not [ch for ch in page if unicodedata.category(ch) in ("Cc", "Cf") and ch not in "\n\t"]
    assert "\\x1b[1m\\u202e" in page                       # feng_rui's comment, shown escaped
    assert parser.links, "no student is linked to a feedback page"
    for link in parser.links:
        assert link.startswith("feedback/") and (run / link).is_file(), link


def test_the_page_tells_the_instructor_what_the_class_got_wrong(run):
    page = (run / "report.html").read_text(encoding="utf-8")
    stats = rows(run / "exercise_stats.csv")
    hardest = min((r for r in stats if int(r["students"])), key=lambda r: float(r["difficulty"]))
    assert f"最难的题：<b>{hardest['grade_id']}</b>" in page
    top = max(demo.EXPECTED["mha"]["mistakes"].items(), key=lambda kv: len(kv[1]))
    assert f"<code>{top[0]}</code>" in page
    assert all(f"feedback/{s}/04_multihead.html" in page for s in top[1])
    notes = page[page.index("<h2>5. "):page.index("<h2>6. ")]
    renamed = next(iter(demo.FILE_NAMES.values()))
    assert any(f"{name}</code>" in notes or f"`{name}`" in notes for name in renamed.values()), notes
    a, b = next((a, b) for gid, a, b in demo.PLANTED_COPIES if gid == "mha")
    assert f"{a} 与 {b}" in page or f"{b} 与 {a}" in page


def test_hand_grading_shows_up_after_report(run):
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{run / 'nbgrader' / 'gradebook.db'}") as gb:
        sub = gb.find_submission(ASSIGNMENT, demo.STUDENTS[0])
        nb = next(n for n in sub.notebooks if n.name == "04_multihead")
        grade_row = next(g for g in nb.grades if g.name == "q4_one_head_dims")
        grade_row.manual_score = 1.0
        gb.db.commit()
    result = subprocess.run([sys.executable, "-m", "autograder", "report", str(run)], capture_output=True,
                            text=True, cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stderr
    page = (run / "report.html").read_text(encoding="utf-8")
    row = page[page.index("<code>q4_one_head_dims</code>"):].split("</tr>", 1)[0]
    assert "1 分 × 1" in row, row


def test_the_page_renders_its_figures_and_chinese_text(run):
    from playwright.sync_api import sync_playwright

    from tests.lab_browser import CHROMIUM, LAUNCH_ARGS

    SHOTS.mkdir(parents=True, exist_ok=True)
    shot = SHOTS / "class_report.png"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        errors = []
        page.on("console", lambda m: errors.append(m.text))
        page.goto((run / "report.html").as_uri())
        bars = page.locator("svg rect[fill='#4a7fc1']")
        assert bars.count() > 10
        assert bars.first.bounding_box()["height"] > 0
        cdp = page.context.new_cdp_session(page)
        cdp.send("DOM.enable")
        cdp.send("CSS.enable")
        root = cdp.send("DOM.getDocument")["root"]["nodeId"]
        h1 = cdp.send("DOM.querySelector", {"nodeId": root, "selector": "h1"})["nodeId"]
        fonts = cdp.send("CSS.getPlatformFontsForNode", {"nodeId": h1})["fonts"]
        page.screenshot(path=str(shot), full_page=True)
        browser.close()
    assert not [e for e in errors if "Content Security Policy" in e or "Refused" in e], errors
    cjk = [f for f in fonts if any(k in f["familyName"] for k in ("WenQuanYi", "Noto Sans CJK", "Droid Sans Fallback"))]
    assert cjk and sum(f["glyphCount"] for f in cjk) >= len("全班评分报告"), fonts
    assert shot.stat().st_size > 50_000


def test_report_of_a_missing_run_says_so(tmp_path):
    result = subprocess.run([sys.executable, "-m", "autograder", "report", str(tmp_path / "nothing")],
                            capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert result.returncode == 2 and "找不到评分结果文件夹" in result.stderr, result.stderr
    (tmp_path / "empty").mkdir()
    result = subprocess.run([sys.executable, "-m", "autograder", "report", str(tmp_path / "empty")],
                            capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert result.returncode == 2 and "没有评分结果" in result.stderr, result.stderr


def test_a_report_that_fails_costs_only_itself(tmp_path, monkeypatch):
    """Grades are published without the report, and the log says how to make it again."""
    import shutil

    from autograder.report import class_report

    shutil.copytree(ROOT / "data" / "demo_class" / "alice", tmp_path / "class" / "alice")

    def broken(*args, **kwargs):
        raise RuntimeError("report bug")

    monkeypatch.setattr(class_report, "for_run", broken)
    said = []
    grade(tmp_path / "class", tmp_path / "out", seed=3, log=said.append)
    full = sum(points for _, points in graded_cells("01_self_attention")[0])  # alice answers 01 and gets it all
    assert float(rows(tmp_path / "out" / "totals.csv")[0]["auto_score"]) == full > 0
    assert not (tmp_path / "out" / "report.html").exists()
    assert any("全班报告没有生成" in line and "report bug" in line for line in said), said
    monkeypatch.undo()
    class_report.rebuild(tmp_path / "out")
    assert "W1D1 全班评分报告" in (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
