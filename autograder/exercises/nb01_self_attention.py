"""Notebook 01 (§1) on the grader's side: its cases and its answer key, one exercise next to the other.

Cases: plain data the student's code runs on, made from the run's seed (they travel to the kernel as data).
Answers: float64 references and the outputs of the known bugs, per case.
"""
import numpy as np

from .references import naive_softmax, softmax
from .seeding import graded, rng

# ------------------------------------------------------------ cases

def _softmax_cases(seed, hidden, salt):
    g = rng(seed, salt + str(hidden))
    if not hidden:
        return [
            {"stage": "2×3 的小例子，默认 axis=-1", "x": np.array([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]]), "axis": -1},
            {"stage": "沿 axis=0 归一化", "x": np.array([[1.0, 2.0], [3.0, 5.0], [0.5, -1.0]]), "axis": 0},
            # rows with different maxima: subtracting the one global maximum underflows the last two rows to 0/0
            {"stage": "数值稳定性：±1e4 的输入，各行的最大值不同", "axis": -1,
             "x": np.array([[1e4, 0.0, -1e4], [1e4, 1e4 - 1.0, 1e4 - 2.0], [-1e4, -1e4 - 1.0, -1e4 - 2.0],
                            [1.0, 2.0, 3.0]])},
        ]
    return [
        {"stage": "一维输入", "x": g.normal(size=7), "axis": -1},
        {"stage": "三维输入 (2,3,4)，axis=1", "x": g.normal(size=(2, 3, 4)) * 3, "axis": 1},
        {"stage": "三维输入，axis=-2", "x": g.normal(size=(3, 5, 2)), "axis": -2},
        {"stage": "大数值（1e4 量级）的随机输入", "x": g.normal(size=(4, 6)) * 1e4, "axis": -1},
        {"stage": "全部相等的一行", "x": np.full((2, 5), 7.0), "axis": -1},
        {"stage": "随机输入 (5,8)", "x": g.normal(size=(5, 8)) * 2, "axis": -1},
    ]


def _attention_inputs(g, T, d, d_k, d_v, scale=1.0):
    return {"X": g.normal(size=(T, d)), "W_q": g.normal(size=(d, d_k)) * scale,
            "W_k": g.normal(size=(d, d_k)) * scale, "W_v": g.normal(size=(d, d_v))}


def _self_attention_cases(seed, hidden, salt):
    g = rng(seed, salt + str(hidden))
    if not hidden:
        return [
            {"stage": "T=1：只有一个 token，A 必须是 [[1]]，Y 就是 V", **_attention_inputs(g, 1, 4, 3, 2)},
            {"stage": "d_k=4 ≠ d=6：缩放要用 √d_k", **_attention_inputs(g, 3, 6, 4, 5)},
        ]
    return [
        {"stage": "随机输入 T=5, d=8, d_k=4, d_v=3", **_attention_inputs(g, 5, 8, 4, 3)},
        {"stage": "随机输入 T=7, d=4, d_k=16, d_v=6（d_k > d）", **_attention_inputs(g, 7, 4, 16, 6)},
        {"stage": "大分数（投影放大 30 倍）：softmax 必须数值稳定", **_attention_inputs(g, 4, 5, 3, 2, scale=30.0)},
    ]


def _diag_cases(seed, hidden, salt):
    g = rng(seed, salt + str(hidden))
    if not hidden:
        return [
            {"stage": "对角线最大的 3×3 对称矩阵：比率 1，非对称度 0",
             "S": np.array([[5.0, 1.0, 2.0], [1.0, 4.0, 0.5], [2.0, 0.5, 6.0]])},
            {"stage": "一个非对称的 3×3 矩阵", "S": np.array([[0.0, 2.0, 1.0], [0.5, 1.0, 3.0], [0.0, 0.0, 1.0]])},
        ]
    cases = []
    for T in (4, 9, 20):
        S = g.normal(size=(T, T))
        cases.append({"stage": f"随机 {T}×{T} 分数矩阵", "S": S})
    X = g.normal(size=(12, 6))
    cases.append({"stage": "不投影的 XXᵀ（对称、对角占优）", "S": X @ X.T})
    return cases


# ------------------------------------------------------------ answers

def _attention(c, scale=None, axis=-1):
    X, W_q, W_k, W_v = c["X"], c["W_q"], c["W_k"], c["W_v"]
    Q, K, V = X @ W_q, X @ W_k, X @ W_v
    s = 1.0 / np.sqrt(W_q.shape[1]) if scale is None else scale
    A = softmax(Q @ K.T * s, axis=axis)
    return {"Y": A @ V, "A": A}


def _wrong_axis(c):
    other = 0 if c["axis"] in (-1, c["x"].ndim - 1) else -1
    return {"y": softmax(c["x"], axis=other)}


def _global_max(c):
    """The one maximum of the whole array subtracted (no axis): a slice far below it underflows to 0/0."""
    with np.errstate(all="ignore"):
        e = np.exp(c["x"] - c["x"].max())
        return {"y": e / e.sum(axis=c["axis"], keepdims=True)}


def _diag(S, rate_axis=1, count=False, asym="relative"):
    hits = np.argmax(S, axis=rate_axis) == np.arange(S.shape[0])
    out = {"rate": np.float64(np.sum(hits) if count else np.mean(hits))}
    if asym == "relative":
        out["asym"] = np.float64(np.linalg.norm(S - S.T) / np.linalg.norm(S))
    elif asym == "absolute":
        out["asym"] = np.float64(np.linalg.norm(S - S.T))
    else:
        out["asym"] = np.float64(np.abs(S - S.T).max() / np.abs(S).max())
    return out


CASES, ANSWERS = graded({
    "softmax": (_softmax_cases, {
        "ref": lambda c: {"y": softmax(c["x"], c["axis"])},
        "naive": lambda c: {"y": naive_softmax(c["x"], c["axis"])},
        "wrong_axis": _wrong_axis,
        "global_max": _global_max,
        "no_norm": lambda c: {"y": np.exp(c["x"] - c["x"].max(axis=c["axis"], keepdims=True))},
        "global_sum": lambda c: {"y": np.exp(c["x"] - c["x"].max()) / np.exp(c["x"] - c["x"].max()).sum()},
    }),
    "self_attention": (_self_attention_cases, {
        "ref": _attention,
        "no_scale": lambda c: _attention(c, scale=1.0),
        "scale_d": lambda c: _attention(c, scale=1 / np.sqrt(c["X"].shape[1])),
        "axis0": lambda c: _attention(c, axis=0),
        "scale_dk": lambda c: _attention(c, scale=1 / c["W_q"].shape[1]),
    }),
    "score_diagnostics": (_diag_cases, {
        "ref": lambda c: _diag(c["S"]),
        "argmax_axis0": lambda c: {"rate": _diag(c["S"], rate_axis=0)["rate"]},
        "count": lambda c: {"rate": _diag(c["S"], count=True)["rate"]},
        "unnormalised": lambda c: {"asym": _diag(c["S"], asym="absolute")["asym"]},
        "max_norm": lambda c: {"asym": _diag(c["S"], asym="max")["asym"]},
    }),
})
