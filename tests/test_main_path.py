"""The release's main path reads as the course text's day: its Markdown outside collapsed `<details>` boxes
(audits of the text, deep tangents) holds at most 2.5 times the course text's Han characters and at most 20
asides about what "正文" says. Every box renders: a `<summary>` first, blank lines around the Markdown inside
(JupyterLab's marked and nbconvert's mistune then parse it as Markdown, math included)."""
import re

import nbformat
import pytest
from nbconvert.filters.markdown_mistune import markdown2html_mistune

from autograder.course import ASSIGNMENT, RELEASE_DIR, available_notebooks

COURSE_TEXT_HAN = 7211      # Han characters of the course text (course-text/000_c8fc179c5a2ab75d.txt, §0–§C)
MAX_RATIO, MAX_ASIDES = 2.5, 20
HAN = re.compile(r"[\u4e00-\u9fff]")
BOX = re.compile(r"<details>(.*?)</details>", re.S)
CODE = re.compile(r"```.*?```|`[^`\n]*`", re.S)


def _markdown(name):
    nb = nbformat.read(RELEASE_DIR / ASSIGNMENT / f"{name}.ipynb", as_version=4)
    return [(c.id, c.source) for c in nb.cells if c.cell_type == "markdown"]


def main_path(markdown):
    """The Markdown a reader sees without opening a box."""
    return BOX.sub("", markdown)


def test_the_counter_reads_boxes_and_asides():
    text = "正文说 $x$。\n\n<details>\n<summary>对照正文</summary>\n\n正文的数字\n\n</details>\n\n后文"
    assert len(HAN.findall(main_path(text))) == 5 and main_path(text).count("正文") == 1


def test_main_path_is_at_most_two_and_a_half_times_the_text():
    han = asides = 0
    for name in available_notebooks():
        for _, source in _markdown(name):
            han += len(HAN.findall(main_path(source)))
            asides += main_path(source).count("正文")
    assert han <= MAX_RATIO * COURSE_TEXT_HAN, f"{han} Han characters on the main path ({han / COURSE_TEXT_HAN:.2f}x the text)"
    assert asides <= MAX_ASIDES, f"{asides} asides about 正文 on the main path"


@pytest.mark.parametrize("name", available_notebooks())
def test_every_box_renders_its_markdown(name):
    for cell_id, source in _markdown(name):
        assert source.count("<details>") == source.count("</details>") == len(BOX.findall(source)), cell_id
        for body in BOX.findall(source):
            assert "<details>" not in body, f"{cell_id}: nested box"
            head, sep, rest = body.lstrip("\n").partition("</summary>")
            assert head.startswith("<summary>") and sep and rest.startswith("\n\n") and rest.endswith("\n\n"), \
                f"{cell_id}: a box needs <summary>…</summary>, then a blank line, and a blank line before </details>"
            html = re.sub(r"<code>.*?</code>", "", markdown2html_mistune(f"<details>{body}</details>"), flags=re.S)
            prose = CODE.sub("", body)
            if "**" in prose:
                assert "<strong>" in html, f"{cell_id}: Markdown inside the box is not rendered"
            assert html.count("$") == prose.count("$"), f"{cell_id}: math inside the box lost its dollars"


@pytest.mark.parametrize("name", available_notebooks())
def test_no_stray_space_between_chinese_characters(name):
    """`KV 缓存 的` once read as two words: a space between two Han characters in prose is a typo."""
    for cell_id, source in _markdown(name):
        prose = re.sub(r"\$[^$]*\$", "", CODE.sub("", source))
        assert not re.search(r"[\u4e00-\u9fff] [\u4e00-\u9fff]", prose), cell_id
