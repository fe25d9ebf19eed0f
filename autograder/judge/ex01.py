"""Verdicts of notebook 01 (§1)."""
import numpy as np

from .core import compare, fail, fmt


def softmax_ref(x, axis=-1):
    z = x - x.max(axis=axis, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=axis, keepdims=True)


def _naive_softmax(x, axis=-1):
    with np.errstate(all="ignore"):
        e = np.exp(x)
        return e / e.sum(axis=axis, keepdims=True)


def _inputs_untouched(results):
    for res in results:
        if res.get("ok") and res["out"].get("input_changed"):
            return fail("你的函数修改了输入数组。函数不能原地修改输入（先复制，或写成不修改输入的形式）。")
    return None


def _wrong_axis(case):
    other = 0 if case["axis"] in (-1, case["x"].ndim - 1) else -1
    return {"y": softmax_ref(case["x"], axis=other)}


def judge_softmax(cases, results):
    diagnoses = [
        ("softmax 数值不稳定：exp 之前先减去该轴上的最大值（平移不变性），否则大输入会溢出成 inf/NaN。",
         lambda c: {"y": _naive_softmax(c["x"], c["axis"])}),
        ("归一化的轴不对：应该沿参数 axis 指定的那一维求和（默认最后一维）。", _wrong_axis),
        ("忘了归一化：exp 之后要除以该轴上的和。", lambda c: {"y": np.exp(c["x"] - c["x"].max(axis=c["axis"], keepdims=True))}),
        ("除以了全部元素的和，而不是沿 axis 的和（sum 时要指定 axis 并 keepdims=True）。",
         lambda c: {"y": np.exp(c["x"] - c["x"].max()) / np.exp(c["x"] - c["x"].max()).sum()}),
    ]
    verdict = compare(cases, results, lambda c: {"y": softmax_ref(c["x"], c["axis"])}, ["y"],
                      diagnoses=diagnoses, rtol=1e-6, atol=1e-10,
                      show=lambda c: f"x={fmt(c['x'])}, axis={c['axis']}")
    return verdict if not verdict.passed else (_inputs_untouched(results) or verdict)


def attention_ref(X, W_q, W_k, W_v, scale=None, axis=-1):
    Q, K, V = X @ W_q, X @ W_k, X @ W_v
    s = 1.0 / np.sqrt(W_q.shape[1]) if scale is None else scale
    A = softmax_ref(Q @ K.T * s, axis=axis)
    return {"Y": A @ V, "A": A}


def judge_self_attention(cases, results):
    d = lambda c: c["X"].shape[1]  # noqa: E731
    diagnoses = [
        ("缺少缩放：分数要除以 √d_k。", lambda c: attention_ref(c["X"], c["W_q"], c["W_k"], c["W_v"], scale=1.0)),
        ("缩放用错了维度：应除以 √d_k（W_q 的列数），不是 √d（输入维度）。",
         lambda c: attention_ref(c["X"], c["W_q"], c["W_k"], c["W_v"], scale=1 / np.sqrt(d(c)))),
        ("softmax 的方向不对：每一行（对 key 那一维）归一化，即 axis=-1。",
         lambda c: attention_ref(c["X"], c["W_q"], c["W_k"], c["W_v"], axis=0)),
        ("除以了 d_k 而不是 √d_k。",
         lambda c: attention_ref(c["X"], c["W_q"], c["W_k"], c["W_v"], scale=1 / c["W_q"].shape[1])),
    ]
    verdict = compare(cases, results, lambda c: attention_ref(c["X"], c["W_q"], c["W_k"], c["W_v"]), ["A", "Y"],
                      diagnoses=diagnoses, rtol=1e-6, atol=1e-9,
                      show=lambda c: f"T={c['X'].shape[0]}, d={d(c)}, d_k={c['W_q'].shape[1]}, d_v={c['W_v'].shape[1]}")
    return verdict if not verdict.passed else (_inputs_untouched(results) or verdict)


def diag_ref(S):
    rate = float(np.mean(np.argmax(S, axis=1) == np.arange(S.shape[0])))
    asym = float(np.linalg.norm(S - S.T) / np.linalg.norm(S))
    return {"rate": np.float64(rate), "asym": np.float64(asym)}


def judge_score_diagnostics(cases, results):
    diagnoses = [
        ("self_argmax_rate 看错了方向：要看每一行（每个 query）的最大值是否在对角线上，即 argmax(axis=1)。",
         lambda c: {"rate": np.float64(np.mean(np.argmax(c["S"], axis=0) == np.arange(len(c["S"]))))}),
        ("self_argmax_rate 应返回比例（0 到 1 之间），不是个数。",
         lambda c: {"rate": np.float64(np.sum(np.argmax(c["S"], axis=1) == np.arange(len(c["S"]))))}),
        ("asymmetry 忘了除以 ‖S‖_F：要的是相对值 ‖S−Sᵀ‖_F / ‖S‖_F。",
         lambda c: {"asym": np.float64(np.linalg.norm(c["S"] - c["S"].T))}),
        ("asymmetry 用了别的范数：应当是 Frobenius 范数（所有元素平方和开根号）。",
         lambda c: {"asym": np.float64(np.abs(c["S"] - c["S"].T).max() / np.abs(c["S"]).max())}),
    ]
    return compare(cases, results, lambda c: diag_ref(c["S"]), ["rate", "asym"], diagnoses=diagnoses,
                   rtol=1e-6, atol=1e-9, show=lambda c: f"S={fmt(c['S'])}")


JUDGES = {
    "softmax": judge_softmax,
    "self_attention": judge_self_attention,
    "score_diagnostics": judge_score_diagnostics,
}
