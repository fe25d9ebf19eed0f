"""Answers of notebook 04 (§4): split/merge heads and multi-head attention from the case's own weights.

Float64 references in nn.Linear layout; options reproduce the known bugs.
"""
import numpy as np

from .references import softmax


def split_ref(x, h, how="ok"):
    B, T, d = x.shape
    dk = d // h
    if how == "view":  # view(B,h,T,d_k) straight away
        return x.reshape(B, h, T, dk)
    if how == "interleave":  # head i = features i::h
        return x.reshape(B, T, dk, h).transpose(0, 3, 1, 2)
    return x.reshape(B, T, h, dk).transpose(0, 2, 1, 3)


def merge_ref(y, how="ok"):
    B, h, T, dk = y.shape
    if how == "no_transpose":  # view(B,T,d) without transpose: heads of different positions mixed
        return y.reshape(B, T, h * dk)
    if how == "interleave":
        return y.transpose(0, 2, 3, 1).reshape(B, T, h * dk)
    return y.transpose(0, 2, 1, 3).reshape(B, T, h * dk)


def _lin(z, W, b):
    return z @ W.T + (0.0 if b is None else b)


def mha_ref(c, *, split="ok", merge="ok", scale="dk", mask_mode="ok", wo=True, axis=-1, x=None,
            want_cache=False):
    """Float64 MHA from the case's weights (nn.Linear layout: y = z Wᵀ + b). Options reproduce bugs."""
    x = c["x"] if x is None else x
    d = x.shape[-1]
    h = c["h"]
    dk = d // h
    Q, K, V = (split_ref(_lin(x, c["W" + n], c["b" + n]), h, split) for n in "qkv")
    s = {"dk": 1 / np.sqrt(dk), "dmodel": 1 / np.sqrt(d), "none": 1.0, "dk_lin": 1 / dk}[scale]
    S = Q @ K.swapaxes(-1, -2) * s
    mask = c.get("mask")
    if mask is not None and mask_mode != "ignored":
        blocked = np.broadcast_to(mask, S.shape)
        if mask_mode in ("inverted", "inverted_finite"):
            blocked = ~blocked
        if mask_mode == "transposed":
            blocked = np.broadcast_to(np.swapaxes(mask, -1, -2), S.shape)
        if mask_mode == "after_softmax":
            A = np.where(blocked, 0.0, softmax(S, axis))
        else:
            A = softmax(np.where(blocked, -1e9 if mask_mode == "inverted_finite" else -np.inf, S), axis)
    else:
        blocked = np.zeros(S.shape, dtype=bool)
        A = softmax(S, axis)
    O = A @ V
    M = merge_ref(O, merge)
    y = _lin(M, c["Wo"], c["bo"]) if wo else M
    if want_cache:
        return {"y": y, "attn": A, "Q": Q, "K": K, "V": V, "M": M, "scale": s, "blocked": blocked}
    return {"y": y, "attn": A}


def mha_grads_ref(c):
    """Gradients of sum(y * dy) w.r.t. the weights, biases and x (manual backprop of mha_ref)."""
    r = mha_ref(c, want_cache=True)
    x, dy, A, Q, K, V, M, s = c["x"], c["dy"], r["attn"], r["Q"], r["K"], r["V"], r["M"], r["scale"]
    g = {"y": r["y"]}
    g["g_W_o_weight"] = np.einsum("btj,bti->ji", dy, M)
    dM = dy @ c["Wo"]
    dO = split_ref(dM, c["h"])
    dA = dO @ V.swapaxes(-1, -2)
    dV = A.swapaxes(-1, -2) @ dO
    dS = A * (dA - (dA * A).sum(-1, keepdims=True))
    dQ = dS @ K * s
    dK = dS.swapaxes(-1, -2) @ Q * s
    gx = 0.0
    for n, dZ in (("q", dQ), ("k", dK), ("v", dV)):
        dz = merge_ref(dZ)
        g[f"g_W_{n}_weight"] = np.einsum("btj,bti->ji", dz, x)
        if c["bias"]:
            g[f"g_W_{n}_bias"] = dz.sum((0, 1))
        gx = gx + dz @ c["W" + n]
    if c["bias"]:
        g["g_W_o_bias"] = dy.sum((0, 1))
    g["g_x"] = gx
    return g


def _split_merge(split="ok", merge="ok"):
    def answer(c):
        if c["kind"] != "split":
            return {"m": merge_ref(c["y"], merge)}
        s = split_ref(c["x"], c["h"], split)
        return {"s": s, "roundtrip": c["x"] if (split, merge) == ("ok", "ok") else merge_ref(s, merge)}
    return answer


def _only_s(how):
    return lambda c: {"s": split_ref(c["x"], c["h"], how)}


def _detached(c):
    g = mha_grads_ref(c)
    return {k: (np.zeros_like(v) if k in ("g_W_q_weight", "g_W_k_weight", "g_W_q_bias", "g_W_k_bias") else v)
            for k, v in g.items() if k != "g_x"}


MHA_BUGS = {
    "merge_no_transpose": dict(merge="no_transpose"), "scale_dmodel": dict(scale="dmodel"),
    "scale_none": dict(scale="none"), "scale_dk_lin": dict(scale="dk_lin"),
    "mask_inverted": dict(mask_mode="inverted"), "mask_inverted_finite": dict(mask_mode="inverted_finite"),
    "mask_after_softmax": dict(mask_mode="after_softmax"), "mask_transposed": dict(mask_mode="transposed"),
    "mask_ignored": dict(mask_mode="ignored"), "no_wo": dict(wo=False), "axis": dict(axis=-2),
    "split_view_merge_no_transpose": dict(split="view", merge="no_transpose"), "split_view": dict(split="view"),
    "split_interleave_merge_interleave": dict(split="interleave", merge="interleave"),
    "split_interleave": dict(split="interleave"),
}

ORACLES = {
    "split_merge_heads": {
        "ref": _split_merge(),
        "view_roundtrip": lambda c: _split_merge("view", "no_transpose")(c) if c["kind"] == "split" else None,
        "view": _only_s("view"),
        "interleave": _only_s("interleave"),
        "merge_no_transpose": _split_merge(merge="no_transpose"),
        "merge_interleave": _split_merge(merge="interleave"),
    },
    "mha": {
        "ref": mha_ref,
        **{name: (lambda c, kw=kw: mha_ref(c, **kw)) for name, kw in MHA_BUGS.items()},
        "grads": mha_grads_ref,
        "grads_detached": _detached,
        "perm": lambda c: {"y": mha_ref(c)["y"], "y_perm": mha_ref(c, x=c["x"][:, c["perm"]])["y"]},
    },
}
