"""Where check() takes its cases: the wheel's public data at home; while grading, what the grader sent
just before the test cell (or a case file, for the solution notebooks' own tests)."""
import json

import pytest
from w1d1_student import runner

from autograder.exercises.checks import case_file_data


def test_public_cases_at_home_come_with_the_graders_answers(monkeypatch):
    monkeypatch.delenv(runner.CASES_ENV, raising=False)
    monkeypatch.delenv("W1D1_GRADING", raising=False)
    cases = runner.cases_for("softmax", hidden=False)
    assert cases and all("y" in c["_oracle"]["ref"] for c in cases)
    assert runner.cases_for("softmax", hidden=True) is None  # no hidden case ships with the package


def test_hidden_check_at_home_says_it_runs_when_graded(monkeypatch, capsys):
    monkeypatch.delenv(runner.CASES_ENV, raising=False)
    monkeypatch.delenv("W1D1_GRADING", raising=False)
    assert runner.check("softmax", hidden=True) is None
    assert "隐藏检查在提交后由评分系统运行：softmax" in capsys.readouterr().out


def test_grading_reads_the_case_file_and_nothing_else(monkeypatch, tmp_path):
    path = tmp_path / "cases.json"
    path.write_text(json.dumps(case_file_data(7)), encoding="utf-8")
    monkeypatch.setenv(runner.CASES_ENV, str(path))
    hidden = runner.cases_for("self_attention", hidden=True)
    assert [c["stage"] for c in hidden] == [c["stage"] for c in json.loads(path.read_text())["self_attention"]["hidden"]]
    assert all("_oracle" not in c for c in hidden)  # the graded kernel gets inputs only
    monkeypatch.delenv(runner.CASES_ENV)
    monkeypatch.setenv("W1D1_GRADING", "1")
    with pytest.raises(RuntimeError, match="没有送来"):  # never the packaged seed-0 cases while grading
        runner.cases_for("self_attention", hidden=False)


def test_grading_takes_only_the_cases_sent_for_the_cell_about_to_run(monkeypatch):
    monkeypatch.delenv(runner.CASES_ENV, raising=False)
    monkeypatch.setenv("W1D1_GRADING", "1")
    data = case_file_data(7)
    runner.receive(json.dumps({"softmax": {"hidden": data["softmax"]["hidden"]}}))
    assert [c["stage"] for c in runner.cases_for("softmax", hidden=True)] == [c["stage"] for c in data["softmax"]["hidden"]]
    runner.receive(json.dumps({"self_attention": {"public": data["self_attention"]["public"]}}))
    with pytest.raises(RuntimeError, match="没有送来"):  # what was sent for an earlier cell is gone
        runner.cases_for("softmax", hidden=True)


def test_unknown_exercise_is_a_clear_error():
    with pytest.raises(KeyError, match="未知的练习"):
        runner.cases_for("no_such_exercise", hidden=False)


def test_a_hidden_verdict_shows_no_text_the_student_wrote_in_an_error():
    """Red team round 5b: an exception class named after the inputs (L_m1p011024_…) would carry them onto
    the page; a hidden verdict names only built-in exception types."""
    from autograder.exercises.checks import judge_payload, make_cases

    n = len(make_cases("softmax", 7, True))
    for error, shown in (("L_m1p011024_0p485830: x", "异常"), ("ValueError: x=[-1.0110236, 0.48583]", "ValueError")):
        payload = {"grade_id": "softmax", "hidden": True, "results": [{"ok": False, "error": error}] * n}
        message = judge_payload(payload, seed=7).message
        assert "m1p011024" not in message and "1.0110236" not in message, message
        assert shown in message, message
        public = judge_payload({**payload, "hidden": False, "results": [{"ok": False, "error": error}]
                                * len(make_cases("softmax", 7, False))}, seed=7).message
        assert error.split(":")[0] in public  # a public check shows the student's error as it is


# ---- issue 36 (red team, round 2): what check() uses while grading is held from the runner's import on

def _graded_softmax(monkeypatch, capsys):
    """check("softmax") as a grading kernel runs it, on the public cases the grader sent; the printed result (IPython's
    display prints where no shell runs) read back."""
    from w1d1_student import wire
    from w1d1_student.runner import public_cases

    monkeypatch.delenv(runner.CASES_ENV, raising=False)
    monkeypatch.setenv("W1D1_GRADING", "1")
    runner.receive(json.dumps({"softmax": {"public": wire.encode(public_cases()["softmax"])}}))
    ns = {"check": runner.check}
    exec("import numpy as np\ndef softmax(x, axis=-1):\n    e = np.exp(x - x.max(axis, keepdims=True))\n"
         "    return e / e.sum(axis, keepdims=True)\ncheck('softmax')", ns)
    return capsys.readouterr().out


def test_a_check_publishes_with_the_display_bound_when_the_runner_was_imported(monkeypatch, capsys):
    """Red team: an answer cell replaced IPython.display.display with a wrapper that rewrote the check's result."""
    import IPython.display

    seen = []
    monkeypatch.setattr(IPython.display, "display", lambda *a, **k: seen.append(a))
    printed = _graded_softmax(monkeypatch, capsys)
    # printed by the display held at import: the raw bundle, or its text/plain where an IPython shell ran earlier
    assert not seen and "[softmax] 检查结果已提交评分" in printed


def test_the_registry_runs_the_drivers_it_held_when_imported(monkeypatch):
    """Red team: a notebook reached the driver module and replaced its EXERCISES entry with an unwatched driver."""
    from w1d1_student import registry
    from w1d1_student.exercises import nb02_scaled_dot_product as nb02

    held, table = registry.driver("attention_backward"), registry.verdict_table("attention_backward")
    monkeypatch.setitem(nb02.EXERCISES, "attention_backward", (None, None))
    monkeypatch.setattr(registry, "MODULES", ())
    assert registry.driver("attention_backward") is held and registry.verdict_table("attention_backward") is table
