"""A verdict carries only text the grader wrote (issue 36 §2): type and dtype names from a fixed vocabulary,
shapes and positions as integers, never a string a student's object supplied.

The drivers read returned objects by their exact type (w1d1_student/driver.py), and the judge turns any text of
a result that is not a word of the vocabulary into a fixed word (runner.judge): hypothesis feeds every exercise's
verdict table results whose texts are arbitrary (of an alphabet no message of the grader holds) in every field,
and none may reach the message or the mistakes the class report counts; the student's own error message is
shown by a public check only. Nor does a number of the student's reach a hidden verdict (a public one shows
the student's values). Through the real grader: a masked_softmax whose returned object names its dtype with
every hidden case's inputs (the issue's leak) shows none of it."""
import functools
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from w1d1_student import wire
from w1d1_student.runner import judge, run_cases

from autograder.exercises.checks import make_cases, with_answers
from tests.entry_points import ENTRY_POINTS
from tests.red_team_submissions import answer_cell, put, solved
from tests.shared_class import attack_class
from tests.test_mutations import VARIANTS

# Cherokee letters: printable (a repr keeps them as they are) and in no message of the grader
STUDENT_TEXT = st.text(alphabet=st.characters(min_codepoint=0x13A0, max_codepoint=0x13F4), min_size=1, max_size=30)


def _student_text_in(text):
    return any(0x13A0 <= ord(ch) <= 0x13F4 for ch in text)


@functools.lru_cache(maxsize=None)
def _judged(grade_id, hidden):
    """The cases of one check with their answers, and the solution's results on them (as the grader reads them)."""
    cases = make_cases(grade_id, 0, hidden)
    ns = {"__name__": "__main__"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec(compile(VARIANTS[grade_id]["solution"], "<answer cell>", "exec"), ns)
        payload = run_cases(grade_id, ns, cases, hidden=hidden)
    return with_answers(grade_id, cases), wire.loads(wire.dumps(payload))["results"]


def _retexted(value, text):
    """`value` with every text in it (and in the keys of its dicts) `text`, and every empty list holding it."""
    if isinstance(value, str):
        return text
    if isinstance(value, dict):
        return {f"{text}{n}": _retexted(v, text) for n, v in enumerate(value.values())}
    if isinstance(value, list):
        return [_retexted(v, text) for v in value] or [text]
    return value


# the texts the verdict tables recognise in an error (each exercise's hints), so that those messages are tried too
HINTED = ["", "could not be broadcast", "matmul", "boolean index did not match", "incorrect number of gradients",
          "scalar type dtype", "overflow", "view size is not compatible", "must match the size", "is_causal attn_mask",
          "copy_", "只返回 y", "source code"]


@st.composite
def kernel_results(draw, results):
    """The solution's results with text of the student's in every text they hold, and in one more place: a
    field, a new field, a case's error, a whole result. Returns (results, whether the error is the student's
    text: a public check shows the student's own error)."""
    text = draw(STUDENT_TEXT)
    out = [dict(r, out={k: _retexted(v, text) for k, v in r["out"].items()}) for r in results]
    i = draw(st.integers(0, len(out) - 1))
    how = draw(st.sampled_from(["field", "new field", "error", "result"]))
    if how == "field":
        key = draw(st.sampled_from(sorted(out[i]["out"])))
        out[i]["out"][key] = draw(st.sampled_from([text, [text], {text: text}, {"forward": {"calls": [text]}}]))
    elif how == "new field":
        out[i]["out"][text] = text
    elif how == "error":
        name = draw(st.sampled_from(["ValueError", "RuntimeError", "KeyError", text]))
        needle = draw(st.sampled_from(HINTED))  # an error a verdict table recognises, with its own hint
        out[i] = {"ok": False, "error": f"{name}: {text} {needle}" + draw(st.sampled_from(["", "\n" + text, " x"]))}
    else:
        out[i] = text
    return out, how == "error"


MARKERS = (7.3e77, 73137731737)   # a float and an int no message holds: shown as "e+77", "73137731737"


def _marked(value, marker):
    if isinstance(value, (bool, str)) or value is None:
        return value
    if isinstance(value, (int, float)):
        return marker
    arr = np.array(value, dtype=float) if np.asarray(value).dtype.kind in "fiu" else None
    if arr is None or arr.size == 0:
        return value
    arr.flat[len(arr.flat) // 2] = float(marker)
    return arr


@pytest.mark.parametrize("grade_id", sorted(VARIANTS))
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_no_number_of_the_students_reaches_a_hidden_verdict(grade_id, data):
    cases, good = _judged(grade_id, True)
    i = data.draw(st.integers(0, len(good) - 1))
    marker = data.draw(st.sampled_from(MARKERS))
    keys = data.draw(st.sets(st.sampled_from(sorted(good[i]["out"])), min_size=1))
    results = [dict(r, out=dict(r["out"])) for r in good]
    results[i]["out"].update({k: _marked(results[i]["out"][k], marker) for k in keys})
    verdict = judge(grade_id, cases, results, hidden=True)
    shown = "\n".join([verdict.message, *(text for _, text in verdict.mistakes)])
    assert "e+77" not in shown and "73137731737" not in shown, verdict


@pytest.mark.parametrize("grade_id", sorted(VARIANTS))
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), hidden=st.booleans())
def test_no_text_of_the_kernel_reaches_a_verdict(grade_id, data, hidden):
    cases, good = _judged(grade_id, hidden)
    results, error_text = data.draw(kernel_results(good))
    verdict = judge(grade_id, cases, results, hidden=hidden)
    if error_text and not hidden:
        return  # a public check shows the student's own error (the student's own code, the student's own page)
    shown = [verdict.message, *(text for _, text in verdict.mistakes), str(verdict.stage)]
    assert not any(map(_student_text_in, shown)), verdict


def test_the_solutions_results_hold_only_words_of_the_vocabulary():
    """What the drivers send back: every text of a solution's results (values, keys of nested dicts) is a word of
    the vocabulary."""
    from w1d1_student.registry import VOCABULARY

    def texts(value, top=True):
        if isinstance(value, str):
            yield value
        elif isinstance(value, dict):
            for k, v in value.items():
                yield from ([] if top else [k])
                yield from texts(v, top=False)
        elif isinstance(value, list):
            for v in value:
                yield from texts(v, top=False)

    found = {t for gid in VARIANTS for hidden in (False, True) for r in _judged(gid, hidden)[1]
             for t in texts(r.get("out", {}))}
    assert found and found <= VOCABULARY, sorted(found - VOCABULARY)


# --------------------------------------------------------------------------- through the real grader
NB03 = "03_masks"
LEAK = "LEAK"
# right on every case but the last hidden one (4 public cases, then 7 hidden), where the returned object's values
# are right and its dtype holds every input it was given (the report, measured on both paths before)
LEAKING_MASKED_SOFTMAX = answer_cell(NB03, "masked_softmax").replace("def masked_softmax(", "def _masked_softmax(") + '''
_SEEN = []


class _Weights:
    def __init__(self, p):
        self._p, self.dtype = p, "LE" + "AK" + repr(_SEEN)  # one word only at run time: the page shows this code

    def __array__(self, dtype=None, copy=None):
        return self._p.detach().numpy()


def masked_softmax(scores, mask):
    _SEEN.append((scores.tolist(), mask.tolist()))
    p = _masked_softmax(scores, mask)
    return _Weights(p) if len(_SEEN) == 11 else p
'''


def build(root):
    put(root, "v1_dtype_leak", NB03, solved(NB03, masked_softmax=LEAKING_MASKED_SOFTMAX))


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    return attack_class(tmp_path_factory)  # build()'s student, graded with the other attack files'


@pytest.mark.parametrize("path", ENTRY_POINTS)
def test_a_returned_objects_text_never_reaches_the_hidden_verdict(graded, path):
    g = graded[path]
    page = g.page("v1_dtype_leak", NB03)
    assert page and "masked_softmax" in page, (path, g.log[-2000:])
    assert LEAK not in page and LEAK not in g.graded_text("v1_dtype_leak", NB03), path
    assert g.score("v1_dtype_leak", NB03, "test_masked_softmax") == 1.0   # the public cases: right
    assert g.score("v1_dtype_leak", NB03, "test_masked_softmax__hidden") == 0.0
