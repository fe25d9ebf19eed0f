"""Every `$` in the notebooks' prose opens or closes a math span the way Markdown's dollar-math reads it.

Shell expansion once turned `($a=1$ 或 $a=0$)` into `（=1$ 或 bash$）`: the dollar count stayed even, but
the opening `$` is followed by a space, so JupyterLab shows the dollars as text.
"""
import re

import nbformat
import pytest

from autograder.course import ASSIGNMENT, SOURCE_DIR, available_notebooks

CODE = re.compile(r"```.*?```|`[^`\n]*`", re.S)
DISPLAY = re.compile(r"\$\$.+?\$\$", re.S)
INLINE = re.compile(r"\$(?=\S)(?:\\\$|[^$\n])+?(?<=\S)\$(?!\d)")


def stray_dollars(markdown):
    """The paragraphs of `markdown` that hold a `$` no math span explains."""
    text = DISPLAY.sub(" ", CODE.sub(" ", markdown))
    bad = []
    for paragraph in re.split(r"\n\s*\n", text):
        rest = INLINE.sub(" ", paragraph.replace(r"\$", " "))
        if "$" in rest:
            bad.append(paragraph.strip()[:120])
    return bad


def test_the_checker_finds_the_shell_damage_and_passes_math():
    assert stray_dollars("放弃一个位置（=1$ 或 bash$）")
    assert stray_dollars("a $x$ and $ y$")
    assert stray_dollars("cost $5 and $x$")
    assert not stray_dollars("放弃一个位置（$\\alpha=1$ 或 $\\alpha=0$）")
    assert not stray_dollars("$$\n y = \\sum_j a_j v_j \n$$\n\n`price$` and $T\\times d$, 价格 \\$5")


@pytest.mark.parametrize("name", available_notebooks())
def test_markdown_math_is_balanced(name):
    nb = nbformat.read(SOURCE_DIR / ASSIGNMENT / f"{name}.ipynb", as_version=4)
    bad = {c.id: stray_dollars(c.source) for c in nb.cells if c.cell_type == "markdown"}
    assert not {k: v for k, v in bad.items() if v}
