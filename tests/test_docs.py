"""The README is one page and the docs/ it points to hold together: relative links reach files and headings, and
every test docs/trust.md names as the proof of a guarantee exists."""
import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
TRUST = ROOT / "docs" / "trust.md"
MIN_TRUST_ROWS = 40  # the trust section of the old README, one guarantee a row

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
TEST_REF = re.compile(r"tests/([\w/]+\.py)::([A-Za-z_]\w*(?:::[A-Za-z_]\w*)?)")


def prose(text):
    """The Markdown outside fenced code blocks and inline code spans, line by line."""
    lines, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        lines.append("" if fenced else re.sub(r"`[^`]*`", "", line))
    return lines


def slug(heading):
    """GitHub's anchor of a heading: lower case, punctuation dropped (letters of any script kept), spaces to '-'."""
    text = re.sub(r"`|\*\*|\[|\]\([^)]*\)", "", heading.strip()).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path):
    seen, found = {}, set()
    for line in prose(path.read_text(encoding="utf-8")):
        m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            base = slug(m.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
    return found


def links(path):
    return [(path, target) for line in prose(path.read_text(encoding="utf-8")) for target in LINK.findall(line)]


def test_the_readme_is_one_page():
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 150


def test_the_readme_gives_the_two_set_up_commands():
    text = README.read_text(encoding="utf-8")
    for command in ("make lab", "make test"):
        assert re.search(rf"(?<![\w-]){command}(?![\w-])", text), command


def test_the_checker_sees_links_and_headings():
    """The readers below find what they are meant to (so that the tests that use them can fail)."""
    assert ("README.md", "docs/trust.md") in {(p.name, t) for p, t in links(README)}
    assert slug("评分如何保证可信") == "评分如何保证可信"
    assert slug("性能数字（`make bench`）") == "性能数字make-bench"
    assert "保证一览" in anchors(TRUST)


@pytest.mark.parametrize("path,target", [pair for doc in [README, *DOCS] for pair in links(doc)],
                         ids=lambda v: v.name if isinstance(v, Path) else v)
def test_every_relative_link_reaches_its_file_and_heading(path, target):
    if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:: not ours to check
        return
    file_part, _, anchor = target.partition("#")
    dest = (path.parent / file_part).resolve() if file_part else path
    assert dest.exists(), f"{path.name}: {target}"
    if anchor:
        assert dest.suffix == ".md" and anchor in anchors(dest), f"{path.name}: {target}"


def _defined(test_file, name):
    tree = ast.parse((ROOT / "tests" / test_file).read_text(encoding="utf-8"))
    scope = tree.body
    for part in name.split("::"):
        found = [n for n in scope if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                 and n.name == part]
        if not found:
            return False
        scope = found[0].body
    return True


def test_every_test_the_trust_model_names_exists():
    refs = TEST_REF.findall(TRUST.read_text(encoding="utf-8"))
    assert len(refs) >= MIN_TRUST_ROWS
    missing = [f"tests/{f}::{n}" for f, n in refs if not (ROOT / "tests" / f).exists() or not _defined(f, n)]
    assert not missing


def trust_rows():
    """The cells of each row of the table under '## 保证一览' (header and rule left out)."""
    section = TRUST.read_text(encoding="utf-8").split("## 保证一览", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    assert [c.strip() for c in rows[0].strip("|").split("|")] == ["保证", "在哪里实现", "证明它的测试", "不保证"]
    return [[c.strip() for c in line.strip().strip("|").split("|")] for line in rows[2:]]


def test_the_trust_model_is_a_table_of_four_full_columns():
    rows = trust_rows()
    assert len(rows) >= MIN_TRUST_ROWS
    for row in rows:
        assert len(row) == 4 and all(row), row
        assert TEST_REF.search(row[2]), row[0]  # each guarantee names the test that shows it
        assert re.search(r"`(autograder|student|nbgrader_config|bench)[\w/.]*", row[1]), row[0]
