"""Drivers of notebook 01 (§1): softmax, self_attention, score_diagnostics.

One bug costs one exercise: while self_attention is checked, the name `softmax` in the student's
namespace means torch's softmax (`_library_softmax`, a library call, no formula of the course), so
an answer that calls its own `softmax` is judged on self_attention's own work, whatever exercise 1
got. Where the student's code cannot run with it (a softmax of another signature or return type),
the check runs it again with the student's own `softmax`. An answer that computes the softmax inline
is judged as written.
"""
import numpy as np

from ..driver import Driver, lookup, to_numpy

_ABSENT = object()


def _library_softmax(x, axis=-1):
    """torch.softmax along `axis`, on a numpy array (returns numpy, same dtype) or a tensor (returns a tensor)."""
    import torch

    if isinstance(x, torch.Tensor):
        return torch.softmax(x, dim=axis)
    arr = np.asarray(x)
    t = torch.from_numpy(np.array(arr, dtype=arr.dtype if arr.dtype.kind == "f" else np.float64))
    return torch.softmax(t, dim=axis).numpy()


def _call_softmax(ns, case):
    fn = lookup(ns, "softmax")
    x = case["x"].copy()
    y = fn(x) if case["axis"] == -1 else fn(x, axis=case["axis"])
    return {"y": to_numpy(y), "input_changed": not np.array_equal(x, case["x"])}


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
