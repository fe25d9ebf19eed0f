"""The grading kernel's start-up line takes its working folder off the import path, even when a release module
fails to import there (the line's errors are only logged, so an open path would go unnoticed)."""
import sys

import pytest
from w1d1_student.working_folder import close


def test_the_folder_leaves_the_import_path_even_when_an_import_fails(tmp_path, monkeypatch):
    (tmp_path / "fine.py").write_text("VALUE = 1\n")
    (tmp_path / "broken.py").write_text("raise RuntimeError('release module broken')\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", ["", str(tmp_path), *sys.path])
    for name in ("fine", "broken"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    with pytest.raises(RuntimeError):
        close(("fine", "broken"))
    assert isinstance(sys.path, tuple) and "" not in sys.path and str(tmp_path) not in sys.path
    assert sys.modules["fine"].VALUE == 1
