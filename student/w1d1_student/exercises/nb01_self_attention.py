"""Exercises of notebook 01 (§1): softmax, self_attention, score_diagnostics.

One bug costs one exercise: while self_attention is checked, the name `softmax` in the student's
namespace means torch's softmax (`_library_softmax`, a library call, no formula of the course), so
an answer that calls its own `softmax` is judged on self_attention's own work, whatever exercise 1
got. Where the student's code cannot run with it (a softmax of another signature or return type),
the check runs it again with the student's own `softmax`. An answer that computes the softmax inline
is judged as written.

Verdicts: tables for the engine's one loop.
"""
import numpy as np

from ..driver import Driver, items, lookup, to_numpy
from ..engine import Output, VerdictTable, fmt, known

NOTEBOOK = "01_self_attention"


# softmax ─────────────────────────────────────────────────────────────────────

def _call_softmax(ns, case):
    fn = lookup(ns, "softmax")
    x = case["x"].copy()
    y = fn(x) if case["axis"] == -1 else fn(x, axis=case["axis"])
    return {"y": to_numpy(y), "input_changed": not np.array_equal(x, case["x"])}


SOFTMAX = VerdictTable(
    (Output("y", tol=(1e-6, 1e-10)),),
    diagnoses=[
        ("softmax 数值不稳定：exp 之前先减去该轴上的最大值（平移不变性），否则大输入会溢出成 inf/NaN。", known("naive")),
        ("减去了全局最大值而不是沿 axis 的最大值：x.max() 不带 axis 时是整个数组的最大值，"
         "比它小得多的行（或切片）exp 之后全部下溢成 0，得到 0/0 = NaN。要写 np.max(x, axis=axis, keepdims=True)。",
         known("global_max")),
        ("归一化的轴不对：应该沿参数 axis 指定的那一维求和（默认最后一维）。", known("wrong_axis")),
        ("忘了归一化：exp 之后要除以该轴上的和。", known("no_norm")),
        ("除以了全部元素的和，而不是沿 axis 的和（sum 时要指定 axis 并 keepdims=True）。", known("global_sum")),
    ],
    show=lambda c: f"x={fmt(c['x'])}, axis={c['axis']}",
    hints=[(("could not be broadcast",), "形状广播不了：沿 axis 求的 max、sum 要带 keepdims=True"
            "（np.max(x, axis=axis, keepdims=True)），结果保留长度为 1 的那一维，才能和 x 逐元素相减、相除。")])


# self_attention ──────────────────────────────────────────────────────────────

def _library_softmax(x, axis=-1):
    """torch.softmax along `axis`, on a numpy array (returns numpy, same dtype) or a tensor (returns a tensor)."""
    import torch

    if isinstance(x, torch.Tensor):
        return torch.softmax(x, dim=axis)
    arr = np.asarray(x)
    t = torch.from_numpy(np.array(arr, dtype=arr.dtype if arr.dtype.kind == "f" else np.float64))
    return torch.softmax(t, dim=axis).numpy()


_ABSENT = object()


def _with_softmax(ns, softmax, fn, args):
    """fn(*args) with ns["softmax"] bound to `softmax` meanwhile (restored, or removed, afterwards)."""
    own = ns.get("softmax", _ABSENT)
    ns["softmax"] = softmax
    try:
        return fn(*args)
    finally:
        if own is _ABSENT:
            ns.pop("softmax", None)
        else:
            ns["softmax"] = own


def _call_self_attention(ns, case):
    fn = lookup(ns, "self_attention")
    args = [case[k].copy() for k in ("X", "W_q", "W_k", "W_v")]
    try:
        out = _with_softmax(ns, _library_softmax, fn, args)
    except Exception as with_library:
        if "softmax" not in ns:
            raise
        args = [case[k].copy() for k in ("X", "W_q", "W_k", "W_v")]
        try:
            out = fn(*args)  # the student's own softmax, as written
        except NotImplementedError:
            raise with_library from None  # exercise 1 unanswered: the error is self_attention's own
    Y, A = items(out, 2, "self_attention 应返回 (Y, A) 两个值")
    changed = any(not np.array_equal(a, case[k]) for a, k in zip(args, ("X", "W_q", "W_k", "W_v")))
    return {"Y": to_numpy(Y), "A": to_numpy(A), "input_changed": changed}


SELF_ATTENTION = VerdictTable(
    (Output("A", tol=(1e-6, 1e-9)), Output("Y", tol=(1e-6, 1e-9))),
    diagnoses=[
        ("缺少缩放：分数要除以 √d_k。", known("no_scale")),
        ("缩放用错了维度：应除以 √d_k（W_q 的列数），不是 √d（输入维度）。", known("scale_d")),
        ("softmax 的方向不对：每一行（对 key 那一维）归一化，即 axis=-1。", known("axis0")),
        ("除以了 d_k 而不是 √d_k。", known("scale_dk")),
    ],
    show=lambda c: f"T={c['X'].shape[0]}, d={c['X'].shape[1]}, d_k={c['W_q'].shape[1]}, d_v={c['W_v'].shape[1]}")


# score_diagnostics ───────────────────────────────────────────────────────────

def _call_diag(ns, case):
    rate = lookup(ns, "self_argmax_rate")(case["S"].copy())
    asym = lookup(ns, "asymmetry")(case["S"].copy())
    return {"rate": to_numpy(rate), "asym": to_numpy(asym)}


SCORE_DIAGNOSTICS = VerdictTable(
    (Output("rate", tol=(1e-6, 1e-9)), Output("asym", tol=(1e-6, 1e-9))),
    diagnoses=[
        ("self_argmax_rate 看错了方向：要看每一行（每个 query）的最大值是否在对角线上，即 argmax(axis=1)。",
         known("argmax_axis0")),
        ("self_argmax_rate 应返回比例（0 到 1 之间），不是个数。", known("count")),
        ("asymmetry 忘了除以 ‖S‖_F：要的是相对值 ‖S−Sᵀ‖_F / ‖S‖_F。", known("unnormalised")),
        ("asymmetry 用了别的范数：应当是 Frobenius 范数（所有元素平方和开根号）。", known("max_norm")),
    ],
    show=lambda c: f"S={fmt(c['S'])}", untouched=None)


# grade_id -> (driver: how to run the student's code on one case, verdict table: how to read its outputs)
EXERCISES = {
    "softmax": (Driver(("softmax",), _call_softmax), SOFTMAX),
    "self_attention": (Driver(("self_attention",), _call_self_attention), SELF_ATTENTION),
    "score_diagnostics": (Driver(("self_argmax_rate", "asymmetry"), _call_diag), SCORE_DIAGNOSTICS),
}
