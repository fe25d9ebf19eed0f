"""The grader's own references agree with each other; the staged loop names bugs and checks counts."""
import numpy as np
from w1d1_student.engine import Exercise, Number, Output, compare, known
from w1d1_student.judges.nb02_scaled_dot_product import independent_checks

from autograder.judge import nb02_scaled_dot_product as ex02
from autograder.judge import with_answers


def test_backward_references_agree():
    g = np.random.default_rng(3)
    case = {"Q": g.normal(size=(2, 3, 4)), "K": g.normal(size=(2, 5, 4)), "V": g.normal(size=(2, 5, 3)),
            "dY": g.normal(size=(2, 3, 3)), "mask": np.triu(np.ones((3, 5), dtype=bool), k=3)}
    analytic = ex02.backward_ref(case["Q"], case["K"], case["V"], case["mask"], case["dY"])
    auto = ex02.autograd_grads(case)
    fd = ex02.finite_difference_grads(case)
    for key in ("dQ", "dK", "dV"):
        assert np.allclose(analytic[key], auto[key], rtol=1e-10, atol=1e-12), key
        assert np.allclose(analytic[key], fd[key], rtol=1e-5, atol=1e-7), key


def test_independent_check_catches_a_wrong_gradient():
    g = np.random.default_rng(4)
    case = {"stage": "t", "Q": g.normal(size=(3, 2)), "K": g.normal(size=(3, 2)), "V": g.normal(size=(3, 2)),
            "dY": g.normal(size=(3, 2)), "mask": None}
    (answered,) = with_answers("attention_backward", [case])
    good = ex02.autograd_grads(case)
    assert independent_checks(answered, {"out": good}) is None
    bad = {**good, "dK": good["dK"] * 1.01}
    assert independent_checks(answered, {"out": bad}) is not None


def _verdict_for(got, want):
    """compare() on one case whose reference is `want` and whose student output is `got`."""
    results = [{"ok": True, "out": {"y": np.asarray(got)}}]
    return compare([{"stage": "t"}], results, lambda case: {"y": np.asarray(want)}, ["y"])


def test_a_wrong_answer_is_described_when_no_known_bug_matches():
    g = np.random.default_rng(5)
    want = g.normal(size=(4, 4))
    cases = {
        "全是 0": np.zeros_like(want),
        "每个元素都等于 0.25": np.full_like(want, 0.25),
        "转置": want.T,
        "0.125 倍": want / 8,
        "1 / 16 个元素不对，第一个在下标 [2, 3]": np.where(np.arange(16).reshape(4, 4) == 11, 7.0, want),
    }
    for expected, got in cases.items():
        verdict = _verdict_for(got, want)
        assert not verdict.passed and expected in verdict.message, (expected, verdict.message)
    plain = _verdict_for(want + g.normal(size=want.shape), want)
    assert not plain.passed and plain.message.startswith("【t】`y` 的数值与参考答案不一致。")
    assert _verdict_for(want.copy(), want).passed


def _two_outputs(rate, asym):
    """One case with two outputs; a known bug that gives only `rate` (the right one, on this case) and
    one that gives only `asym`."""
    case = {"stage": "t", "_oracle": {"ref": {"rate": 1.0, "asym": 0.5}, "rate_bug": {"rate": 1.0},
                                      "asym_bug": {"asym": 2.0}}}
    ex = Exercise((Output("rate"), Output("asym")),
                  diagnoses=[("RATE-BUG", known("rate_bug")), ("ASYM-BUG", known("asym_bug"))], untouched=None)
    return ex([case], [{"ok": True, "out": {"rate": rate, "asym": asym}}])


def test_a_known_bug_is_named_only_for_an_output_it_explains():
    """A bug whose own output happens to equal the student's correct one does not name another mistake."""
    assert _two_outputs(1.0, 0.5).passed
    wrong_asym = _two_outputs(1.0, 2.0).message
    assert "ASYM-BUG" in wrong_asym and "RATE-BUG" not in wrong_asym
    unknown = _two_outputs(1.0, 0.7).message
    assert "BUG" not in unknown and "`asym` 的数值与参考答案不一致" in unknown


def test_exact_counts_are_ints_and_name_their_bug():
    case = {"stage": "t", "_oracle": {"n": 2**70, "macs": 2**69}}
    ex = Exercise((Number("n", expected=known("n"), diagnoses=[("MACS", known("macs"))], type_note="INT"),),
                  untouched=None)

    def verdict(value, type_name):
        return ex([case], [{"ok": True, "out": {"n": value, "n_type": type_name}}])

    assert verdict(2**70, "int").passed
    assert "MACS" in verdict(2**69, "int").message
    assert "类型是 float" in verdict(float(2**70), "float").message
    assert "超过了 int64" in verdict(-(2**63), "int64").message
    assert "应当是一个数" in verdict("many", "str").message
