"""Drivers of notebook 01 (§1): softmax, self_attention, score_diagnostics.
"""
import numpy as np

from ..driver import Driver, lookup, to_numpy


def _call_softmax(ns, case):
    fn = lookup(ns, "softmax")
    x = case["x"].copy()
    y = fn(x) if case["axis"] == -1 else fn(x, axis=case["axis"])
    return {"y": to_numpy(y), "input_changed": not np.array_equal(x, case["x"])}


def _call_self_attention(ns, case):
    fn = lookup(ns, "self_attention")
    args = [case[k].copy() for k in ("X", "W_q", "W_k", "W_v")]
    out = fn(*args)
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise TypeError(f"self_attention 应返回 (Y, A) 两个值，得到 {type(out).__name__}")
    changed = any(not np.array_equal(a, case[k]) for a, k in zip(args, ("X", "W_q", "W_k", "W_v")))
    return {"Y": to_numpy(out[0]), "A": to_numpy(out[1]), "input_changed": changed}


def _call_diag(ns, case):
    rate = lookup(ns, "self_argmax_rate")(case["S"].copy())
    asym = lookup(ns, "asymmetry")(case["S"].copy())
    return {"rate": to_numpy(rate), "asym": to_numpy(asym)}


DRIVERS = {
    "softmax": Driver(("softmax",), _call_softmax),
    "self_attention": Driver(("self_attention",), _call_self_attention),
    "score_diagnostics": Driver(("self_argmax_rate", "asymmetry"), _call_diag),
}
