"""The grading kernel's start-up line takes its working folder off the import path, even when a release module
fails to import there (the line's errors are only logged, so an open path would go unnoticed)."""
import sys

import pytest
from w1d1_student.working_folder import ClosedPathError, close


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


def test_a_cell_that_changes_the_closed_path_is_told_why(tmp_path, monkeypatch):
    """Red team round 13 (P4): `sys.path.append(...)` works at home and failed while grading with "'tuple' object has
    no attribute 'append'", and the feedback then said the answer's names were not defined. The closed path still
    takes no folder, by any of list's ways, and imports still read it."""
    import importlib

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", ["", *sys.path])
    close(())
    for change in (lambda p: p.append(str(tmp_path)), lambda p: p.insert(0, ""), lambda p: p.extend([""]),
                   lambda p: p.__setitem__(0, "")):
        with pytest.raises(ClosedPathError, match="sys.path 不能修改"):
            change(sys.path)
    with pytest.raises(ClosedPathError, match="sys.path 不能修改"):
        sys.path += [str(tmp_path)]
    with pytest.raises(TypeError):
        list.append(sys.path, str(tmp_path))
    assert str(tmp_path) not in sys.path and "" not in sys.path
    monkeypatch.delitem(sys.modules, "colorsys", raising=False)
    assert importlib.import_module("colorsys").rgb_to_hsv(1, 0, 0)[0] == 0


def test_a_missing_answer_after_the_closed_path_stopped_its_cell_names_that_cause(monkeypatch):
    """The feedback said only "没有找到 `split_heads` 的定义" when the answer cell had stopped at `sys.path.append`."""
    from w1d1_student.driver import MissingDefinition, lookup

    monkeypatch.setattr(sys, "last_value", ClosedPathError("x"), raising=False)
    with pytest.raises(MissingDefinition, match="sys.path 的那一行停了下来"):
        lookup({}, "split_heads")
    monkeypatch.setattr(sys, "last_value", ValueError("x"), raising=False)
    with pytest.raises(MissingDefinition) as raised:
        lookup({}, "split_heads")
    assert "sys.path" not in str(raised.value)
