"""Answers of notebook 03 (§3): masks, masked softmax, left padding — references and known bugs."""
import numpy as np
from w1d1_student.judges.nb03_masks import lp_inputs, ms_inputs

from .references import softmax, triu


def causal(T, diagonal=1):
    return triu(T, k=diagonal)


def padding(lengths, T, side="right"):
    pos = np.arange(T)[None, :]
    lengths = np.asarray(lengths)[:, None]
    return pos >= lengths if side == "right" else pos < T - lengths


def attention_mask(kp, causal_flag=True, *, axis="key", op="or", diagonal=1):
    B, T = kp.shape
    pad = {"key": kp[:, None, None, :], "query": kp[:, None, :, None],
           "both": kp[:, None, None, :] | kp[:, None, :, None]}[axis]
    if not causal_flag:
        return np.broadcast_to(pad, (B, 1, T, T)).copy()
    c = causal(T, diagonal)
    return np.broadcast_to(pad | c if op == "or" else pad & c, (B, 1, T, T)).copy()


def softmax_masked(s, m, axis=-1, empty="zero"):
    """Masked softmax along `axis` in float64; fully blocked slices give 0, NaN or uniform."""
    z = np.where(m, -np.inf, s)
    blocked = m.all(axis=axis, keepdims=True)
    mx = np.where(blocked, 0.0, np.max(z, axis=axis, keepdims=True))
    e = np.exp(z - mx)
    p = e / np.where(blocked, 1.0, e.sum(axis=axis, keepdims=True))
    if empty == "nan":
        p = np.where(blocked, np.nan, p)
    elif empty == "uniform":
        p = np.where(blocked, 1.0 / s.shape[axis], p)
    return p


def masked_softmax_ref(c):
    s, m = ms_inputs(c)
    p = softmax_masked(s, m)
    g = c["g"]
    return {"p": p, "grad": p * (g - (p * g).sum(-1, keepdims=True))}


def lp_mask(kp, T):
    return causal(T)[None] | kp[:, None, :]


def lp_attention(c, mask_fn=lp_mask, after=False, scale=True):
    """Batched attention weights in float64; the judge never looks at pad query rows of the output."""
    q, k, _, kp, _ = lp_inputs(c)
    mask = mask_fn(kp, q.shape[1])
    S = q @ np.swapaxes(k, 1, 2) / (np.sqrt(q.shape[-1]) if scale else 1.0)
    return softmax(S) * ~mask if after else softmax_masked(S, mask)


def leftpad_ref(c):
    q, k, v, kp, gy = lp_inputs(c)
    A = lp_attention(c)
    y = A @ v
    dy = np.where(kp[..., None], 0.0, gy)
    s = 1.0 / np.sqrt(q.shape[-1])
    dA = dy @ np.swapaxes(v, 1, 2)
    dS = A * (dA - (dy * y).sum(-1, keepdims=True))
    return {"y": y, "dq": s * dS @ k, "dk": s * np.swapaxes(dS, 1, 2) @ q, "dv": np.swapaxes(A, 1, 2) @ dy}


def _lp_bug(**kw):
    return lambda c: {"y": lp_attention(c, **kw) @ lp_inputs(c)[2]}


def _side(c):
    return c["side"] or "right"


def _pad(f):
    return lambda c: {"m": f(c["lengths"], c["T"], c)}


def _am(**kw):
    return lambda c: {"m": attention_mask(c["kp"], True if c["causal"] is None else c["causal"], **kw)}


def _am_causal(flag):
    return lambda c: {"m": attention_mask(c["kp"], flag(True if c["causal"] is None else c["causal"], c))}


def _ms(f):
    return lambda c: {"p": f(*ms_inputs(c))}


ORACLES = {
    "causal_mask": {
        "ref": lambda c: {"m": causal(c["T"])},
        "diagonal0": lambda c: {"m": causal(c["T"], 0)},
        "inverted": lambda c: {"m": ~causal(c["T"])},
        "lower": lambda c: {"m": causal(c["T"]).T.copy()},
        "diagonal2": lambda c: {"m": causal(c["T"], 2)},
    },
    "padding_mask": {
        "ref": _pad(lambda n, T, c: padding(n, T, _side(c))),
        "other_side": _pad(lambda n, T, c: padding(n, T, {"left": "right", "right": "left"}[_side(c)])),
        "always_right": _pad(lambda n, T, c: padding(n, T, "right")),
        "default_left": _pad(lambda n, T, c: padding(n, T, c["side"] or "left")),
        "inverted": _pad(lambda n, T, c: ~padding(n, T, _side(c))),
        "off_by_one": _pad(lambda n, T, c: (np.arange(T)[None, :] > np.asarray(n)[:, None]) if _side(c) == "right"
                           else (np.arange(T)[None, :] <= T - np.asarray(n)[:, None])),
    },
    "attention_mask": {
        "ref": _am(),
        "and": _am(op="and"),
        "query_axis": _am(axis="query"),
        "both_axes": _am(axis="both"),
        "inverted": lambda c: {"m": ~_am()(c)["m"]},
        "diagonal0": _am(diagonal=0),
        "causal_flipped": _am_causal(lambda flag, c: not flag),
        "default_not_causal": _am_causal(lambda flag, c: bool(c["causal"])),
        "never_causal": _am_causal(lambda flag, c: False),
        "always_causal": _am_causal(lambda flag, c: True),
    },
    "masked_softmax": {
        "ref": masked_softmax_ref,
        "after": _ms(lambda s, m: softmax(s) * ~m),
        "unmasked": _ms(lambda s, m: softmax(s)),
        **{f"inverted_{e}": _ms(lambda s, m, e=e: softmax_masked(s, ~m, empty=e)) for e in ("zero", "uniform", "nan")},
        **{f"axis_{e}": _ms(lambda s, m, e=e: softmax_masked(s, m, axis=-2, empty=e)) for e in ("zero", "nan")},
    },
    "leftpad_safe": {
        "ref": leftpad_ref,
        "sees_pad": _lp_bug(mask_fn=lambda kp, T: np.broadcast_to(causal(T), (len(kp), T, T))),
        "and": _lp_bug(mask_fn=lambda kp, T: causal(T)[None] & kp[:, None, :]),
        "not_causal": _lp_bug(mask_fn=lambda kp, T: np.broadcast_to(kp[:, None, :], (len(kp), T, T))),
        "after": _lp_bug(after=True),
        "column0": _lp_bug(mask_fn=lambda kp, T: lp_mask(kp, T) & (np.arange(T) != 0)),
        "no_scale": _lp_bug(scale=False),
        "inverted": _lp_bug(mask_fn=lambda kp, T: ~lp_mask(kp, T)),
    },
}
