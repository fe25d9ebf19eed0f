"""`make html`: every student notebook page exists, with its figures inline, linked from the index."""
import re

from autograder.course import available_notebooks
from tools.build_site import build


def test_static_site(tmp_path):
    entries = build(tmp_path)
    index = (tmp_path / "index.html").read_text()
    for name, _title, figures in entries:
        page = (tmp_path / f"{name}.html").read_text()
        assert f'href="{name}.html"' in index
        inline = len(re.findall(r'<img[^>]+src="data:image/png;base64', page))
        assert figures >= 1 and inline >= figures, (name, figures, inline)
        assert "BEGIN SOLUTION" not in page and "BEGIN HIDDEN TESTS" not in page
    assert [e[0] for e in entries] == available_notebooks()
