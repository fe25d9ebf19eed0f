"""The grader's own references agree with each other; the engine's one loop names bugs and checks counts."""
import numpy as np
from w1d1_student.engine import Number, Output, VerdictTable, compare, known
from w1d1_student.exercises.nb02_scaled_dot_product import independent_checks
from w1d1_student.runner import judge

from autograder.exercises import nb02_scaled_dot_product as ex02
from autograder.exercises.checks import make_cases, with_answers


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
        "每个元素都相同，没有随输入变化（都等于 0.25）": np.full_like(want, 0.25),
        "转置": want.T,
        "0.125 倍": want / 8,
        "只有少数元素不对（1 / 16 个），第一个在下标 [2, 3]": np.where(np.arange(16).reshape(4, 4) == 11, 7.0, want),
    }
    for expected, got in cases.items():
        verdict = _verdict_for(got, want)
        assert not verdict.passed and expected in verdict.message, (expected, verdict.message)
        (key, label), = verdict.mistakes          # the class report's row: the error's shape, not its values
        assert key is None and label in verdict.message and not any(v in label for v in ("0.25", "0.125", "16", "[2, 3]")), label
    plain = _verdict_for(want + g.normal(size=want.shape), want)
    assert not plain.passed and plain.message.startswith("【t】`y` 的数值与参考答案不一致。") and plain.mistakes == ()
    assert _verdict_for(want.copy(), want).passed


def _two_outputs(rate, asym):
    """One case with two outputs; a known bug that gives only `rate` (the right one, on this case) and
    one that gives only `asym`."""
    case = {"stage": "t", "_oracle": {"ref": {"rate": 1.0, "asym": 0.5}, "rate_bug": {"rate": 1.0},
                                      "asym_bug": {"asym": 2.0}}}
    ex = VerdictTable((Output("rate"), Output("asym")),
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
    ex = VerdictTable((Number("n", expected=known("n"), diagnoses=[("MACS", known("macs"))], type_note="INT"),),
                  untouched=None)

    def verdict(value, type_name):
        return ex([case], [{"ok": True, "out": {"n": value, "n_type": type_name}}])

    assert verdict(2**70, "int").passed
    assert "MACS" in verdict(2**69, "int").message
    assert "类型是 float" in verdict(float(2**70), "float").message
    assert "超过了 int64" in verdict(-(2**63), "int64").message
    assert "应当是一个数" in verdict("many", "str").message


def _masked_row(p, ex, bug=((0.25, 0.75), (np.nan, np.nan))):
    """One case whose reference has a fully masked row of 0; a known bug gives NaN there (by default)."""
    case = {"stage": "t", "_oracle": {"ref": {"p": np.array([[0.25, 0.75], [0.0, 0.0]])},
                                      "nan_bug": {"p": np.array(bug)}}}
    return ex([case], [{"ok": True, "out": {"p": np.asarray(p), "p_dtype": "float64"}}])


def test_a_bug_whose_nan_is_its_output_is_named_by_a_nan():
    """nan_matches: a NaN of the bug's must meet a NaN of the student's, even where the bug is NaN everywhere."""
    def ex(nan_matches):
        return VerdictTable((Output("p", nan_matches=nan_matches, fallback="OTHER"),),
                        diagnoses=[("NAN-BUG", known("nan_bug"))], untouched=None)

    all_nan = np.full((2, 2), np.nan)
    assert "NAN-BUG" in _masked_row(all_nan, ex(True), bug=all_nan).message
    assert "OTHER" in _masked_row(all_nan, ex(False), bug=all_nan).message  # default: no defined part to match
    assert "NAN-BUG" in _masked_row([[0.25, 0.75], [np.nan, np.nan]], ex(True)).message
    assert "OTHER" in _masked_row([[0.25, 0.75], [0.5, 0.5]], ex(True)).message
    assert "NAN-BUG" in _masked_row([[0.25, 0.75], [0.5, 0.5]], ex(False)).message  # default: NaN skipped


def test_an_output_says_which_input_its_shape_and_dtype_follow():
    ex = VerdictTable((Output("p", dtype="float32", name="输出", same_as="scores"),), untouched=None)
    assert "期望 float32（与 scores 相同），得到 float64。" in _masked_row(np.zeros((2, 2)), ex).message
    short = ex([{"stage": "t", "_oracle": {"ref": {"p": np.zeros((2, 2))}}}],
               [{"ok": True, "out": {"p": np.zeros(2), "p_dtype": "float32"}}])
    assert "输出的形状不对：期望 (2, 2)（与 scores 相同），得到 (2,)。" in short.message


def test_an_untouched_message_names_the_first_case_that_changed_its_input():
    ex = VerdictTable((Output("y"),), untouched="CHANGED")
    cases = [{"stage": "a", "_oracle": {"ref": {"y": 1.0}}}, {"stage": "b", "_oracle": {"ref": {"y": 2.0}}}]
    kept, changed = {"ok": True, "out": {"y": 1.0}}, {"ok": True, "out": {"y": 2.0, "input_changed": True}}
    assert ex(cases, [kept, {"ok": True, "out": {"y": 2.0}}]).passed
    assert ex(cases, [kept, changed]).message == "【b】CHANGED"


def test_a_result_the_checks_cannot_compare_costs_that_exercise_only():
    """Odd values get a verdict, never an exception that would cost the whole notebook."""
    cases = with_answers("flops", make_cases("flops", 0, False))
    huge = [{"ok": True, "out": {"flops": c["_oracle"]["flops"], "flops_type": "int", "share": 10**400,
                                 "share_type": "int"}} for c in cases]
    assert not judge("flops", cases, huge).passed
    odd = [{"ok": True, "out": {"flops": [1], "flops_type": "list", "share": 0.5, "share_type": "float"}}
           for _ in cases]
    verdict = judge("flops", cases, odd)
    assert not verdict.passed and "检查没法比较你的结果" in verdict.message


def test_a_hidden_verdict_names_the_mistake_and_where_without_values():
    """The same wrong answers as above, judged as a hidden check: what and where, no number of the case."""
    from w1d1_student.engine import HIDDEN_NOTE, judging

    g = np.random.default_rng(5)
    want = g.normal(size=(4, 4))
    one_wrong = np.where(np.arange(16).reshape(4, 4) == 11, 7.0, want)
    with judging(True):
        scaled = _verdict_for(want / 8, want).message
        constant = _verdict_for(np.full_like(want, 0.25), want).message
        single = _verdict_for(one_wrong, want).message
        count = _two_outputs(1.0, 2.0).message
    assert "只差一个常数因子" in scaled and "0.125" not in scaled
    assert "每个元素都相同" in constant and "0.25" not in constant
    # which element is wrong, and how many, are the student's output's: named in words only (issue 36, red team)
    assert "只有少数元素不对" in single and "出错的输出：`y`，形状 (4, 4)\n" in single and "[2, 3]" not in single
    assert "ASYM-BUG" in count and "出错的输出：`asym`" in count
    for message in (scaled, constant, single, count):
        assert message.endswith(HIDDEN_NOTE) or "ASYM" in message
        assert "期望的" not in message and "你的 `" not in message and f"{want[0, 0]:.4f}" not in message
    case = {"stage": "t", "_oracle": {"n": 123456789, "macs": 61728394}}
    ex = VerdictTable((Number("n", expected=known("n"), diagnoses=[("MACS", known("macs"))]),), show=lambda c: "T=98765",
                  untouched=None)
    with judging(True):
        hidden = ex([case], [{"ok": True, "out": {"n": 61728394, "n_type": "int"}}]).message
    public = ex([case], [{"ok": True, "out": {"n": 61728394, "n_type": "int"}}]).message
    assert hidden == f"【t】MACS\n出错的输出：`n`（类型 int）\n{HIDDEN_NOTE}"
    assert "123456789" in public and "98765" in public
