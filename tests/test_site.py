"""`make html`: every student notebook page exists, with its figures inline, linked from the index."""
import re

from autograder.course import available_notebooks
from tests.run_cache import executed_release
from tools import build_site
from tools.build_site import build


def test_static_site(tmp_path, tmp_path_factory, monkeypatch):
    # each release notebook runs once per test run: test_browser compares its figures with the same run
    monkeypatch.setattr(build_site, "execute_release", lambda name: executed_release(tmp_path_factory, name))
    entries = build(tmp_path)
    index = (tmp_path / "index.html").read_text()
    for name, _title, figures in entries:
        page = (tmp_path / f"{name}.html").read_text()
        assert f'href="{name}.html"' in index
        inline = len(re.findall(r'<img[^>]+src="data:image/png;base64', page))
        assert figures >= 1 and inline >= figures, (name, figures, inline)
        assert "BEGIN SOLUTION" not in page and "BEGIN HIDDEN TESTS" not in page
    assert [e[0] for e in entries] == available_notebooks()
