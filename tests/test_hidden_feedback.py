"""A hidden check's message never shows its cases' inputs or expected values (nor the student's values,
which give the expected ones away wherever they are right): it names the mistake and where it shows.

Every hidden case of every exercise gets wrong answers (the solution's outputs on that case, each
output in turn spoiled in a few ways); the hidden verdict must contain none of the number strings that
would show that case's inputs or the expected outputs. The same wrong answers judged as a public
check must show them: that is what makes this test able to fail.
"""
import re
import warnings

import numpy as np
import pytest
from w1d1_student import wire
from w1d1_student.engine import fmt
from w1d1_student.runner import judge, run_cases

from autograder.exercises.checks import make_cases, with_answers
from tests.test_mutations import VARIANTS

NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e[+-]?\d+)?")
# the labels under which a public message shows values; a grid of a bool mask; a self-check's `name = value`
VALUE_LABELS = re.compile(r"输入：|期望的|期望：|期望（|你的 `|你的：|\[ [✗·]|有错：[a-z_]+ = ")


def _significant(token):
    digits = token.lstrip("-").split("e")[0].replace(".", "").lstrip("0")
    return len(digits) >= 3


def _numbers(value):
    arr = np.asarray(value)
    if arr.dtype.kind not in "fiu" or arr.size == 0:
        return set()
    texts = [fmt(arr), fmt(arr, max_items=80)]
    if arr.ndim == 0:
        texts += [repr(value), f"{float(arr):.4g}"]
    return {t for text in texts for t in NUMBER.findall(text) if _significant(t)}


def secrets(case, expected):
    """Number strings that would show the case's inputs or the expected outputs (minus its name's own)."""
    found = set()
    for key, value in list(case.items()) + list(expected.items()):
        if key not in ("stage", "_oracle") and not isinstance(value, (str, bool)):
            found |= _numbers(value)
    return found - set(NUMBER.findall(case.get("stage", "")))


def leaks(message, case, expected):
    shown = {t for t in secrets(case, expected) if re.search(rf"(?<![\d.]){re.escape(t)}(?![\d])", message)}
    return sorted(shown) + (VALUE_LABELS.findall(message) or [])


def spoiled(value):
    """Wrong versions of one correct output (none for flags and type names)."""
    if isinstance(value, (bool, str)) or value is None:
        return []
    if isinstance(value, int):
        return [value + 1, value * 2 + 3]
    if isinstance(value, float):
        return [value * 1.37 + 0.01, value + 0.5]
    arr = np.asarray(value)
    if arr.size == 0 or arr.dtype.kind not in "fiub":
        return []
    if arr.dtype.kind == "b":
        flipped = arr.copy()
        flipped.flat[0] = not flipped.flat[0]
        return [flipped, ~arr]
    one = arr.copy()
    one.flat[arr.size // 2] += 0.5 + abs(one.flat[arr.size // 2])
    noise = np.random.default_rng(0).normal(size=arr.shape) * (float(np.std(arr)) + 1.0) * 0.3
    return [one, arr * 1.37 + 0.01, (arr + noise).astype(arr.dtype)]


def _solution_results(grade_id, cases):
    ns = {"__name__": "__main__"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec(compile(VARIANTS[grade_id]["solution"], "<answer cell>", "exec"), ns)
        payload = run_cases(grade_id, ns, cases, hidden=True)
    return wire.loads(wire.dumps(payload))["results"]


@pytest.mark.parametrize("grade_id", sorted(VARIANTS))
def test_hidden_messages_show_no_inputs_or_expected_values(grade_id):
    cases = make_cases(grade_id, 0, True)
    answered = with_answers(grade_id, cases)
    good = _solution_results(grade_id, cases)
    assert judge(grade_id, answered, good, hidden=True).passed
    hidden_leaks, public_shows, wrong = [], 0, 0
    for i, (case, res) in enumerate(zip(cases, good)):
        expected = {k: v for k, v in res["out"].items() if not k.endswith(("_dtype", "_type"))}
        for key, value in expected.items():
            for bad in spoiled(value):
                results = [dict(r, out=dict(r["out"])) for r in good]
                results[i]["out"][key] = bad
                hidden = judge(grade_id, answered, results, hidden=True)
                if hidden.passed:
                    continue  # an output the checks do not compare on its own
                wrong += 1
                found = leaks(hidden.message, case, expected)
                if found:
                    hidden_leaks.append((case["stage"], key, found[:5], hidden.message[:300]))
                public_shows += bool(leaks(judge(grade_id, answered, results, hidden=False).message, case, expected))
    assert wrong, "no spoiled output failed the hidden check"
    assert not hidden_leaks, hidden_leaks[:3]
    assert public_shows, "the same wrong answers judged publicly show nothing either: the detector finds nothing"


# the student's output chooses these: its shape, which elements are wrong, how many (red team of issue 36: an empty
# array whose shape spelled a hidden case's inputs to 4 digits showed up as "得到 (0, 520673, 540187, 515783)")
SHAPES = ((0, 5237, 6113), (0, 7919, 8443))


def _chosen_by_the_student(arr):
    """Pairs of wrong versions of one correct output that differ only in what the student's output chooses: its
    shape, the position of a wrong element, the number of wrong elements."""
    if arr.dtype.kind not in "fiub" or arr.size == 0:
        return []
    pairs = [tuple(np.zeros(shape, dtype=arr.dtype) for shape in SHAPES)]
    if arr.size >= 3:
        def wrong_at(*where):
            bad = arr.copy()
            for i in where:
                bad.flat[i] = (not bad.flat[i]) if arr.dtype.kind == "b" else bad.flat[i] + 0.5 + abs(bad.flat[i])
            return bad
        pairs += [(wrong_at(0), wrong_at(arr.size - 1)), (wrong_at(arr.size - 1), wrong_at(0, arr.size - 1))]
    return pairs


def _apart(messages):
    """Whether two messages say the same in words and show different numbers (None when their words differ: they
    name different mistakes, a verdict the student's output may choose)."""
    words = [NUMBER.sub("#", m) for m in messages]
    return None if words[0] != words[1] else sorted(NUMBER.findall(messages[0])) != sorted(NUMBER.findall(messages[1]))


def test_hidden_messages_show_no_number_the_students_output_chooses():
    """On every exercise: two wrong answers that differ only in their shape, or in which or how many elements are
    wrong, get hidden messages that show the same numbers wherever they say the same words (none of the shapes'
    numbers, in any). Judged publicly, such pairs show different numbers: the test can see them."""
    told_apart, public_apart, compared = [], set(), set()
    for grade_id in sorted(VARIANTS):
        cases = make_cases(grade_id, 0, True)
        answered = with_answers(grade_id, cases)
        good = _solution_results(grade_id, cases)
        for i, (case, res) in enumerate(zip(cases, good)):
            for key, value in res["out"].items():
                if key.endswith(("_dtype", "_type")) or isinstance(value, (bool, str)) or value is None:
                    continue
                for pair in _chosen_by_the_student(np.asarray(value)):
                    messages = {}
                    for hidden in (True, False):
                        verdicts = []
                        for bad in pair:
                            results = [dict(r, out=dict(r["out"])) for r in good]
                            results[i]["out"][key] = bad
                            verdicts.append(judge(grade_id, answered, results, hidden=hidden))
                        messages[hidden] = [v.message for v in verdicts if not v.passed]
                    if len(messages[True]) < 2:
                        continue
                    compared.add(grade_id)
                    if _apart(messages[False]):
                        public_apart.add(grade_id)
                    shown = [n for shape in SHAPES for n in map(str, shape[1:]) if any(n in m for m in messages[True])]
                    if _apart(messages[True]) or shown:
                        told_apart.append((grade_id, case["stage"], key, shown, *messages[True]))
    assert not told_apart, told_apart[:3]
    assert compared == set(VARIANTS), set(VARIANTS) - compared
    assert {"softmax", "attention_forward", "mha"} <= public_apart, public_apart


def test_running_out_of_memory_is_named_on_a_hidden_case():
    """numpy's memory error is a private subclass of MemoryError (red team round 7, H5: a full softmax Jacobian at
    T = 768): the hidden verdict names MemoryError and says why, never the batch/transpose hint, never the text."""
    src = VARIANTS["attention_backward"]["solution"] + '''
import numpy as _np
_correct = attention_backward


def attention_backward(dY, cache):
    if _np.shape(dY)[-2] > 64:
        raise _np.core._exceptions._ArrayMemoryError((768, 768, 768), _np.dtype(float))
    return _correct(dY, cache)
'''
    ns = {"__name__": "__main__"}
    exec(compile(src, "<answer cell>", "exec"), ns)
    cases = make_cases("attention_backward", 0, True)
    assert any(np.shape(c["dY"])[-2] > 64 for c in cases)
    results = wire.loads(wire.dumps(run_cases("attention_backward", ns, cases, hidden=True)))["results"]
    verdict = judge("attention_backward", with_answers("attention_backward", cases), results, hidden=True)
    assert not verdict.passed and "内存不够（MemoryError）" in verdict.message, verdict.message
    assert "MemoryError（隐藏检查不显示报错内容）" in verdict.message and "Unable to allocate" not in verdict.message
    assert "x.T" not in verdict.message


def test_an_errors_class_is_read_without_running_the_students_code():
    """The nearest built-in class of an error is found by identity: a metaclass's __eq__ (the student's code, run
    outside any watch) is never called."""
    src = VARIANTS["softmax"]["solution"] + '''
CALLED = []


class _Meta(type):
    def __eq__(cls, other):
        CALLED.append(other)
        return False

    __hash__ = type.__hash__


class Oops(ValueError, metaclass=_Meta):
    pass


def softmax(x, axis=-1):
    raise Oops("no")
'''
    ns = {"__name__": "__main__"}
    exec(compile(src, "<answer cell>", "exec"), ns)
    results = run_cases("softmax", ns, make_cases("softmax", 0, True), hidden=True)["results"]
    assert ns["CALLED"] == [] and {r["kind"] for r in results} == {"ValueError"}
