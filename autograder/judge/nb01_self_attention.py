"""Answers of notebook 01 (§1): float64 references and the outputs of the known bugs, per case."""
import numpy as np

from .references import naive_softmax, softmax


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


ORACLES = {
    "softmax": {
        "ref": lambda c: {"y": softmax(c["x"], c["axis"])},
        "naive": lambda c: {"y": naive_softmax(c["x"], c["axis"])},
        "wrong_axis": _wrong_axis,
        "global_max": _global_max,
        "no_norm": lambda c: {"y": np.exp(c["x"] - c["x"].max(axis=c["axis"], keepdims=True))},
        "global_sum": lambda c: {"y": np.exp(c["x"] - c["x"].max()) / np.exp(c["x"] - c["x"].max()).sum()},
    },
    "self_attention": {
        "ref": _attention,
        "no_scale": lambda c: _attention(c, scale=1.0),
        "scale_d": lambda c: _attention(c, scale=1 / np.sqrt(c["X"].shape[1])),
        "axis0": lambda c: _attention(c, axis=0),
        "scale_dk": lambda c: _attention(c, scale=1 / c["W_q"].shape[1]),
    },
    "score_diagnostics": {
        "ref": lambda c: _diag(c["S"]),
        "argmax_axis0": lambda c: {"rate": _diag(c["S"], rate_axis=0)["rate"]},
        "count": lambda c: {"rate": _diag(c["S"], count=True)["rate"]},
        "unnormalised": lambda c: {"asym": _diag(c["S"], asym="absolute")["asym"]},
        "max_norm": lambda c: {"asym": _diag(c["S"], asym="max")["asym"]},
    },
}
