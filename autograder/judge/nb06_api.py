"""Answers of notebook 06 (§A): SDPA, KV-cache decoding, nn.MultiheadAttention — references and known bugs.

A buggy reference may leave NaN in rows where its mask blocks every key; the judge ignores those rows.
"""
import numpy as np

from .references import softmax, swap, triu


def attention_ref(q, k, v, blocked=None, scale=None, add=None):
    """Softmax attention, blocked True = -inf; rows with every key blocked come out NaN."""
    s = q @ swap(k) * (1.0 / np.sqrt(q.shape[-1]) if scale is None else scale)
    if add is not None:
        s = s + add
    if blocked is not None:
        s = np.where(np.broadcast_to(blocked, s.shape), -np.inf, s)
    a = softmax(s)
    return a @ v, a


def _sdpa_blocked(case):
    T, S = case["q"].shape[-2], case["k"].shape[-2]
    blocked = np.zeros((T, S), dtype=bool)
    if case["mask"] is not None:
        blocked = blocked | case["mask"]
    if case["is_causal"]:
        blocked = blocked | triu(T, S)
    return blocked


def sdpa_ref(case):
    return attention_ref(case["q"], case["k"], case["v"], _sdpa_blocked(case))[0]


def _with_blocked(f):
    def bug(c):
        if c["mask"] is None:
            return None
        T, S = c["q"].shape[-2], c["k"].shape[-2]
        blocked = f(c["mask"], triu(T, S), bool(c["is_causal"]))
        return None if blocked is None else attention_ref(c["q"], c["k"], c["v"], blocked)[0]
    return bug


def _float_mask(sign):
    def bug(c):
        if c["mask"] is None:
            return None
        T, S = c["q"].shape[-2], c["k"].shape[-2]
        m = c["mask"] if sign > 0 else ~c["mask"]
        causal = triu(T, S) if c["is_causal"] else None
        return attention_ref(c["q"], c["k"], c["v"], causal, add=m.astype(float))[0]
    return bug


def _causal_variant(block):
    def bug(c):
        if not c["is_causal"]:
            return None
        T, S = c["q"].shape[-2], c["k"].shape[-2]
        m = np.zeros((T, S), dtype=bool) if c["mask"] is None else c["mask"]
        return attention_ref(c["q"], c["k"], c["v"], m | block(T, S))[0]
    return bug


def _decode(keys=slice(None), scale=None):
    return lambda c: attention_ref(c["q_new"], c["k_cache"][..., keys, :], c["v_cache"][..., keys, :], scale=scale)[0]


def mha_ref(x, w_in, b_in, w_out, b_out, h, blocked=None):
    """nn.MultiheadAttention(batch_first=True) in float64; blocked (B,T,T) or (T,T), True = blocked."""
    B, T, d = x.shape
    qkv = x @ w_in.T + (0.0 if b_in is None else b_in)
    q, k, v = (qkv[..., i * d:(i + 1) * d].reshape(B, T, h, d // h).transpose(0, 2, 1, 3) for i in range(3))
    if blocked is not None and blocked.ndim == 3:
        blocked = blocked[:, None]
    y = attention_ref(q, k, v, blocked)[0]
    return y.transpose(0, 2, 1, 3).reshape(B, T, d) @ w_out.T + (0.0 if b_out is None else b_out)


def _cat(case, order, transpose=False, key=""):
    parts = [case[f"W_{c}{key}"] for c in order]
    if key:
        return np.concatenate(parts)
    return np.concatenate([p.T if transpose else p for p in parts], axis=0)


def _forward_ref(case, blocked_fn=None, transpose_x=False):
    x = case["x"]
    B, T, _ = x.shape
    if transpose_x:
        if case["key_padding"] is not None or case["causal"]:
            return None
        x = x.transpose(1, 0, 2)
        B, T = T, B
    blocked = np.zeros((B, T, T), dtype=bool)
    kp = np.zeros((B, T), dtype=bool) if case["key_padding"] is None else case["key_padding"]
    causal = bool(case["causal"])
    if blocked_fn is None:
        blocked = blocked | kp[:, None, :] | (triu(T, T) if causal else False)
    else:
        blocked = blocked_fn(kp, causal, T)
        if blocked is None:
            return None
        blocked = np.broadcast_to(blocked, (B, T, T))
    y = mha_ref(x, case["in_proj_weight"], case["in_proj_bias"], case["out_proj_weight"], case["out_proj_bias"],
                case["n_heads"], blocked)
    return y.transpose(1, 0, 2) if transpose_x else y


def _pad(kp):
    return kp[:, None, :]


def _fwd_bug(when, blocked_fn):
    return lambda c: _forward_ref(c, blocked_fn) if when(c) else None


def _y_to_torch(c):
    b_in = _cat(c, "qkv", key="_bias") if c["bias"] else None
    return mha_ref(c["x"], _cat(c, "qkv"), b_in, c["W_o"], c["W_o_bias"], c["n_heads"])


ORACLES = {
    "sdpa_attention": {
        "ref": sdpa_ref,
        "weights": lambda c: attention_ref(c["q"], c["k"], c["v"])[1],
        "flip_tril": _with_blocked(lambda m, c, causal: ~m | c if causal else ~m),    # allowed = mask & tril
        "flip_or": _with_blocked(lambda m, c, causal: ~(m | c) if causal else ~m),    # allowed = mask | triu1
        "mask_only": _with_blocked(lambda m, c, causal: m if causal else None),
        "causal_only": _with_blocked(lambda m, c, causal: c if causal else None),
        "float_mask": _float_mask(+1),
        "float_mask_inverted": _float_mask(-1),
        "causal_lower": _causal_variant(lambda T, S: np.tril(np.ones((T, S), dtype=bool), -1)),
        "causal_diagonal0": _causal_variant(lambda T, S: np.triu(np.ones((T, S), dtype=bool), 0)),
        "scale_dk": lambda c: attention_ref(c["q"], c["k"], c["v"], _sdpa_blocked(c), scale=1.0 / c["q"].shape[-1])[0],
    },
    "decode_step": {
        "ref": _decode(),
        "first_key": _decode(slice(0, 1)),
        "no_last_key": lambda c: _decode(slice(0, -1))(c) if c["k_cache"].shape[-2] > 1 else np.zeros(c["q_new"].shape),
        "last_key": _decode(slice(-1, None)),
        "scale_dk": lambda c: _decode(scale=1.0 / c["q_new"].shape[-1])(c),
        "no_scale": _decode(scale=1.0),
    },
    "to_torch_mha": {
        "in_proj_weight": lambda c: _cat(c, "qkv"),
        "in_proj_bias": lambda c: _cat(c, "qkv", key="_bias"),
        **{f"layout_{order}_{tr}": (lambda c, order=order, tr=tr: _cat(c, order, tr))
           for order in ("qkv", "kqv", "qvk", "vqk", "kvq", "vkq") for tr in (False, True)},
        "y": _y_to_torch,
    },
    "torch_mha_forward": {
        "ref": _forward_ref,
        "padding_inverted": _fwd_bug(lambda c: c["key_padding"] is not None,
                                     lambda kp, causal, T: _pad(~kp) | (triu(T) if causal else False)),
        "padding_ignored": _fwd_bug(lambda c: c["key_padding"] is not None,
                                    lambda kp, causal, T: triu(T) if causal else np.zeros((T, T), bool)),
        "causal_ignored": _fwd_bug(lambda c: c["causal"], lambda kp, causal, T: _pad(kp)),
        "causal_tril": _fwd_bug(lambda c: c["causal"], lambda kp, causal, T: _pad(kp) | np.tril(np.ones((T, T), dtype=bool))),
        "causal_diagonal0": _fwd_bug(lambda c: c["causal"], lambda kp, causal, T: _pad(kp) | triu(T, k=0)),
        "transposed_x": lambda c: _forward_ref(c, transpose_x=True),
    },
}
