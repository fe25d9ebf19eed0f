"""Notebook 04 (§4) on the grader's side: its cases and its answer key, one exercise next to the other.

Cases: plain data the student's code runs on, made from the run's seed (they travel to the kernel as data).
Answers: split/merge heads and multi-head attention from the case's own weights.

Float64 references in nn.Linear layout; options reproduce the known bugs.
"""
import numpy as np

from .references import softmax
from .seeding import rng

# ------------------------------------------------------------ cases

def _f32(a):
    """Round to float32-representable values so float32 and float64 runs see the same inputs."""
    return np.asarray(a, dtype=np.float64).astype(np.float32).astype(np.float64)


def _split_cases(seed, hidden):
    g = rng(seed, "split_merge_heads" + str(hidden))
    if not hidden:
        return [
            {"stage": "split_heads：B=1, T=2, d=4, h=2，x = arange（第 0 个头应是前 d_k=2 个特征）", "kind": "split",
             "x": np.arange(8.0).reshape(1, 2, 4), "h": 2, "dtype": "float64"},
            {"stage": "split_heads：B=2, T=3, d=6, h=3，随机输入", "kind": "split",
             "x": _f32(g.normal(size=(2, 3, 6))), "h": 3, "dtype": "float64"},
            {"stage": "merge_heads：连续的 (B,h,T,d_k) = (1,2,3,2) 输入", "kind": "merge",
             "y": np.arange(12.0).reshape(1, 2, 3, 2), "layout": "contiguous", "dtype": "float64"},
            {"stage": "merge_heads：不连续的输入（(B,T,h,d_k) 存储后 transpose(1,2) 得到）", "kind": "merge",
             "y": _f32(g.normal(size=(2, 2, 3, 2))), "layout": "transposed", "dtype": "float64"},
        ]
    cases = []
    for B, T, d, h, dt in ((1, 1, 4, 1, "float64"), (2, 5, 12, 4, "float32"), (3, 4, 8, 8, "float64"),
                           (2, 7, 16, 2, "float32")):
        cases.append({"stage": f"split_heads：B={B}, T={T}, d={d}, h={h}，{dt}", "kind": "split",
                      "x": _f32(g.normal(size=(B, T, d))), "h": h, "dtype": dt})
    for layout, label in (("contiguous", "连续"), ("transposed", "transpose(1,2) 得到的不连续"),
                          ("last2", "最后两维转置存储的不连续"), ("strided", "步长为 2 的切片（不连续）")):
        for B, h, T, dk, dt in ((2, 3, 4, 5, "float32"), (1, 4, 6, 2, "float64")):
            cases.append({"stage": f"merge_heads：{label}输入 (B,h,T,d_k)=({B},{h},{T},{dk})，{dt}", "kind": "merge",
                          "y": _f32(g.normal(size=(B, h, T, dk))), "layout": layout, "dtype": dt})
    return cases


def _mask(g, kind, B, h, T):
    """Boolean mask (True = blocked) of the given kind; every query keeps at least one key."""
    causal = np.triu(np.ones((T, T), dtype=bool), 1)
    if kind is None:
        return None
    if kind == "causal_TT":
        return causal
    lengths = g.integers(1, T + 1, size=B)
    lengths[0] = T
    if B > 1:
        lengths[1] = max(1, T // 2)
    pad = np.arange(T)[None, :] >= lengths[:, None]  # (B,T) True = pad (right padding)
    key_pad = np.broadcast_to(pad[:, None, None, :], (B, 1, T, T))
    if kind == "pad_B1TT":
        return np.ascontiguousarray(key_pad)
    if kind == "causal_pad_B1TT":
        return np.ascontiguousarray(key_pad | causal[None, None])
    if kind == "perhead_BhTT":
        m = g.random((B, h, T, T)) < 0.45
        m[..., np.arange(T), np.arange(T)] = False  # the diagonal stays open
        return m
    raise ValueError(kind)


_MASK_LABEL = {None: "无掩码", "causal_TT": "因果掩码 (T,T)", "pad_B1TT": "padding 掩码 (B,1,T,T)",
               "causal_pad_B1TT": "因果 + padding 合成掩码 (B,1,T,T)", "perhead_BhTT": "每个头各自的掩码 (B,h,T,T)"}


def _mha_case(g, stage, *, kind="forward", B=2, T=4, d=8, h=2, bias=True, dtype="float64", mask=None,
              w_scale=1.5):
    case = {"stage": stage, "kind": kind, "B": B, "T": T, "d": d, "h": h, "bias": bias, "dtype": dtype,
            "mask_kind": mask}
    for name in ("q", "k", "v", "o"):
        case["W" + name] = _f32(g.normal(size=(d, d)) * w_scale / np.sqrt(d))
        case["b" + name] = _f32(g.normal(size=d) * 0.3) if bias else None
    case["x"] = _f32(g.normal(size=(B, T, d)))
    case["mask"] = _mask(g, mask, B, h, T)
    if kind == "backward":
        case["dy"] = _f32(g.normal(size=(B, T, d)))
    if kind == "perm":
        case["perm"] = g.permutation(T)
    return case


def _mha_cases(seed, hidden):
    g = rng(seed, "mha" + str(hidden))
    if not hidden:
        return [
            {"stage": "结构：MultiHeadAttention(8, 2)：属性、四个 nn.Linear、参数名与参数量 4d²+4d", "kind": "struct",
             "d": 8, "h": 2, "bias": True},
            {"stage": "结构：bias=False：参数量应为 4d²", "kind": "struct", "d": 8, "h": 4, "bias": False},
            _mha_case(g, "T=1：只有一个 token，注意力必为 1，只剩值路径 W_v → W_o", B=1, T=1, d=4, h=2),
            _mha_case(g, "h=1：应与单头注意力逐元素相等（d=6）", B=2, T=4, d=6, h=1),
            _mha_case(g, "h=2, d=8（d_k=4 ≠ d_model），无掩码，float64", B=2, T=5, d=8, h=2),
            _mha_case(g, "h=2，因果掩码 (T,T)，float64", B=2, T=5, d=8, h=2, mask="causal_TT"),
            _mha_case(g, "h=4，因果 + padding 合成掩码 (B,1,T,T)，float32", B=2, T=6, d=8, h=4,
                      mask="causal_pad_B1TT", dtype="float32"),
            _mha_case(g, "梯度：y.backward(dy) 后四个投影（权重、偏置）和 x 都要有梯度，float64",
                      kind="backward", B=2, T=4, d=8, h=2, mask="causal_TT"),
        ]
    cases = [
        {"stage": "结构：MultiHeadAttention(12, 3)", "kind": "struct", "d": 12, "h": 3, "bias": True},
        {"stage": "结构：MultiHeadAttention(16, 16, bias=False)", "kind": "struct", "d": 16, "h": 16, "bias": False},
        _mha_case(g, "h=1，无偏置，float32：与单头注意力一致", B=1, T=6, d=4, h=1, bias=False, dtype="float32"),
        _mha_case(g, "h=3, d=12，无掩码，float32", B=3, T=7, d=12, h=3, dtype="float32"),
        _mha_case(g, "h=4, d=8（d_k=2），无偏置，无掩码", B=2, T=6, d=8, h=4, bias=False),
        _mha_case(g, "h=d=4（d_k=1）", B=2, T=5, d=4, h=4),
    ]
    for mk, h, dt in (("causal_TT", 3, "float32"), ("pad_B1TT", 2, "float64"), ("causal_pad_B1TT", 4, "float64"),
                      ("perhead_BhTT", 2, "float64"), ("perhead_BhTT", 4, "float32")):
        d = 4 * h if h != 4 else 8
        cases.append(_mha_case(g, f"h={h}, d={d}，{_MASK_LABEL[mk]}，{dt}", B=3, T=6, d=d, h=h, mask=mk, dtype=dt))
    cases += [
        _mha_case(g, "置换等变：无掩码时 f(PX) = P f(X)", kind="perm", B=2, T=7, d=8, h=2),
        _mha_case(g, "梯度，因果 + padding 掩码 (B,1,T,T)，float64", kind="backward", B=3, T=5, d=12, h=3,
                  mask="causal_pad_B1TT"),
        _mha_case(g, "梯度，每头掩码 (B,h,T,T)，无偏置，float64", kind="backward", B=2, T=5, d=8, h=4, bias=False,
                  mask="perhead_BhTT"),
        _mha_case(g, "梯度，无掩码，float32", kind="backward", B=2, T=4, d=6, h=2, dtype="float32"),
    ]
    return cases


CASES = {
    "split_merge_heads": _split_cases,
    "mha": _mha_cases,
}


# ------------------------------------------------------------ answers

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

ANSWERS = {
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
