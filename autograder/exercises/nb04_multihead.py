"""Notebook 04 (§4) on the grader's side: its cases and its answer key, one exercise next to the other.

Cases: plain data the student's code runs on, made from the run's seed (they travel to the kernel as data).
Answers: split/merge heads and multi-head attention from the case's own weights.

Float64 references in nn.Linear layout; options reproduce the known bugs.
"""
import ast
import builtins
import keyword
import re

import numpy as np

from .private import PRIVATE
from .references import softmax
from .seeding import graded, rng, with_defaults

# ------------------------------------------------------------ cases

def _f32(a):
    """Round to float32-representable values so float32 and float64 runs see the same inputs."""
    return np.asarray(a, dtype=np.float64).astype(np.float32).astype(np.float64)


def _split_cases(seed, hidden, salt):
    g = rng(seed, salt + str(hidden))
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


MHA_CASE = {"kind": "forward", "B": 2, "T": 4, "d": 8, "h": 2, "bias": True, "dtype": "float64", "mask": None,
            "w_scale": 1.5}


def _mha_case(g, stage, **shape):
    """One case; `shape` sets what differs from MHA_CASE."""
    kind, B, T, d, h, bias, dtype, mask, w_scale = with_defaults(shape, MHA_CASE).values()
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


def _mha_cases(seed, hidden, salt):
    g = rng(seed, salt + str(hidden))
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


MHA_RIGHT = {"split": "ok", "merge": "ok", "scale": "dk", "mask_mode": "ok", "wo": True, "axis": -1}


def mha_ref(c, x=None, want_cache=False, **bug):
    """Float64 MHA from the case's weights (nn.Linear layout: y = z Wᵀ + b); `bug` sets what differs from MHA_RIGHT."""
    split, merge, scale, mask_mode, wo, axis = with_defaults(bug, MHA_RIGHT).values()
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

CASES, ANSWERS = graded({
    "split_merge_heads": (_split_cases, {
        "ref": _split_merge(),
        "view_roundtrip": lambda c: _split_merge("view", "no_transpose")(c) if c["kind"] == "split" else None,
        "view": _only_s("view"),
        "interleave": _only_s("interleave"),
        "merge_no_transpose": _split_merge(merge="no_transpose"),
        "merge_interleave": _split_merge(merge="interleave"),
    }),
    "mha": (_mha_cases, {
        "ref": mha_ref,
        **{name: (lambda c, kw=kw: mha_ref(c, **kw)) for name, kw in MHA_BUGS.items()},
        "grads": mha_grads_ref,
        "grads_detached": _detached,
        "perm": lambda c: {"y": mha_ref(c)["y"], "y_perm": mha_ref(c, x=c["x"][:, c["perm"]])["y"]},
    }),
})


# ------------------------------------------------------------ mha_selfcheck: the classes under test
#
# The student's checker is graded by mutation analysis: it runs on correct classes in several styles (every
# value ≈ 0) and on classes with one known bug each (the properties that see the bug clearly non-zero).
# Each class travels to the kernel as source text, named and placed like the student's own class. The
# public ones ship in the wheel, so they are no answer to exercise `mha`: their attention is PyTorch's own
# (F.multi_head_attention_forward, which `mha` forbids). The hand-written ones go only into the hidden cases,
# sent to the kernel just before the hidden check (never while a test cell of an exercise in CARRIES is still
# to run: autograder/chain/case_delivery.py).

# bug: (the properties that must see it, the properties blind to it by the math: on that bug a correct checker's
# value stays ≈ 0, as on a correct class, whatever mask, sizes or dtype it uses). A checker that writes one number
# (say, the output's distance to a reference of its own) under every key fails on both sides. Blind spots that
# hold only for some masks are left out: row_sum sees an inverted or transposed -inf mask where it blocks a whole
# row (NaN), masked sees softmax over the wrong axis where a key is blocked for every query. The h = 1 blind spot
# of single_head is a lesson of the course (§A.5).
_ROW, _MASKED, _H1, _PERM = "row_sum", "masked", "single_head", "equivariance"
SELFCHECK_TABLE = {
    "merge_no_transpose": ((_PERM, "sdpa"), (_ROW, _MASKED, _H1)),
    "split_view": ((_PERM, "sdpa"), (_ROW, _MASKED, _H1)),
    "split_interleave": (("sdpa",), (_ROW, _MASKED, _H1, _PERM)),
    "scale_dmodel": (("sdpa",), (_ROW, _MASKED, _H1, _PERM)),
    "scale_none": ((_H1, "sdpa"), (_ROW, _MASKED, _PERM)),
    "scale_dk_lin": ((_H1, "sdpa"), (_ROW, _MASKED, _PERM)),
    "mask_inverted": ((_MASKED, "sdpa"), (_PERM,)),
    "mask_inverted_finite": ((_MASKED, "sdpa"), (_ROW, _PERM)),
    "mask_after_softmax": ((_ROW, "sdpa"), (_MASKED, _PERM)),
    "mask_transposed": ((_MASKED, "sdpa"), (_PERM,)),
    "mask_ignored": ((_MASKED, "sdpa"), (_ROW, _PERM)),
    "no_wo": ((_H1, "sdpa"), (_ROW, _MASKED, _PERM)),
    "axis": ((_ROW, _H1, "sdpa"), (_PERM,)),
}

# exercise whose hidden cases hold correct classes -> the exercises those classes answer
CARRIES = {"mha_selfcheck": ("split_merge_heads", "mha")}

_CLASS = '''import math

import torch
import torch.nn.functional as F
from torch import nn


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, bias=True):
        super().__init__()
        self.d_model, self.n_heads = d_model, n_heads
        self.W_q = nn.Linear(d_model, d_model, bias=bias)
        self.W_k = nn.Linear(d_model, d_model, bias=bias)
        self.W_v = nn.Linear(d_model, d_model, bias=bias)
        self.W_o = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, mask=None, need_weights=False):
        B, T, d = x.shape
        h = self.n_heads
        d_k = d // h
'''

_TORCH_OWN = '''        q, k, v = (lin(x).transpose(0, 1) for lin in (self.W_q, self.W_k, self.W_v))
        if mask is not None and mask.dim() == 4:
            mask = mask.expand(B, h, T, T).reshape(B * h, T, T)
        eye = torch.eye(d, dtype=x.dtype)
        y, att = F.multi_head_attention_forward(
            q, k, v, d, h, None, None, None, None, False, 0.0, self.W_o.weight, self.W_o.bias, training=False,
            need_weights=True, attn_mask=mask, use_separate_proj_weight=True, q_proj_weight=eye,
            k_proj_weight=eye, v_proj_weight=eye, average_attn_weights=False)
        y = y.transpose(0, 1)
        return (y, att) if need_weights else y
'''

_MATMUL = '''        q = self.W_q(x).view(B, T, h, d_k).transpose(1, 2)
        k = self.W_k(x).view(B, T, h, d_k).transpose(1, 2)
        v = self.W_v(x).view(B, T, h, d_k).transpose(1, 2)
        att = q @ k.transpose(-2, -1) / math.sqrt(d_k)
        if mask is not None:
            att = att.masked_fill(mask, float("-inf"))
        att = att.softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, d)
        y = self.W_o(y)
        return (y, att) if need_weights else y
'''

_EINSUM = '''        q = self.W_q(x).reshape(B, T, h, d_k)
        k = self.W_k(x).reshape(B, T, h, d_k)
        v = self.W_v(x).reshape(B, T, h, d_k)
        att = torch.einsum("bqhd,bkhd->bhqk", q, k) * d_k ** -0.5
        if mask is not None:
            att = att.masked_fill(mask, float("-inf"))
        att = torch.softmax(att, dim=-1)
        y = torch.einsum("bhqk,bkhd->bqhd", att, v).reshape(B, T, d)
        y = self.W_o(y)
        return (y, att) if need_weights else y
'''

_LOOP = '''        q, k, v = self.W_q(x), self.W_k(x), self.W_v(x)
        if mask is not None:
            mask = mask.expand(B, h, T, T)
        heads, weights = [], []
        for i in range(h):
            cols = slice(i * d_k, (i + 1) * d_k)
            s = q[..., cols] @ k[..., cols].transpose(-2, -1) / math.sqrt(d_k)
            if mask is not None:
                s = s.masked_fill(mask[:, i], float("-inf"))
            a = torch.softmax(s, dim=-1)
            heads.append(a @ v[..., cols])
            weights.append(a)
        y = self.W_o(torch.cat(heads, dim=-1))
        att = torch.stack(weights, dim=1)
        return (y, att) if need_weights else y
'''

_BMM = '''        def heads(t):
            return t.reshape(B, T, h, d_k).permute(0, 2, 1, 3).reshape(B * h, T, d_k)

        q = heads(F.linear(x, self.W_q.weight, self.W_q.bias))
        k = heads(F.linear(x, self.W_k.weight, self.W_k.bias))
        v = heads(F.linear(x, self.W_v.weight, self.W_v.bias))
        s = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(d_k)
        if mask is not None:
            s = s + torch.zeros_like(s).masked_fill(mask.expand(B, h, T, T).reshape(B * h, T, T), -1e9)
        a = F.softmax(s, dim=-1)
        o = torch.bmm(a, v).reshape(B, h, T, d_k).permute(0, 2, 1, 3).reshape(B, T, d)
        y = F.linear(o, self.W_o.weight, self.W_o.bias)
        att = a.reshape(B, h, T, T)
        return (y, att) if need_weights else y
'''

_STACKED = '''        def proj(lin, z):
            return z @ lin.weight.T + (0 if lin.bias is None else lin.bias)

        def heads(t):
            return torch.stack(t.split(d_k, dim=-1), dim=1)

        q, k, v = heads(proj(self.W_q, x)), heads(proj(self.W_k, x)), heads(proj(self.W_v, x))
        s = torch.matmul(q, k.mT) / d_k ** 0.5
        if mask is not None:
            s = torch.where(mask, float("-inf"), s)
        e = torch.exp(s - s.amax(dim=-1, keepdim=True))
        att = e / e.sum(dim=-1, keepdim=True)
        y = proj(self.W_o, torch.cat((att @ v).unbind(1), dim=-1))
        return (y, att) if need_weights else y
'''

# style: (how the stage calls it, the forward's body)
_STYLES = {
    "torch_own": ("PyTorch 自带的多头注意力", _TORCH_OWN),
    "matmul": ("§4.3 的写法", _MATMUL),
    "finfo": ("§4.3 的写法，用 torch.finfo(dtype).min 填充", _MATMUL.replace('float("-inf")', "torch.finfo(att.dtype).min")),
    "einsum": ("einsum 写法", _EINSUM),
    "loop": ("逐头循环", _LOOP),
    "bmm": ("合并 batch 与头维、bmm、加法掩码 -1e9", _BMM),
    "stacked": ("split/stack 拆头、unbind/cat 合并、手写 softmax", _STACKED),
}

_MASK_LINES = '        if mask is not None:\n            att = att.masked_fill(mask, float("-inf"))\n'
# bug -> [(style, [(text of the style, the bug's text), ...]), ...]: each style the grader can write the bug in
_BUG_EDITS = {
    "merge_no_transpose": [("matmul", [("(att @ v).transpose(1, 2).reshape(B, T, d)", "(att @ v).reshape(B, T, d)")]),
                           ("einsum", [('"bhqk,bkhd->bqhd"', '"bhqk,bkhd->bhqd"')])],
    "split_view": [("matmul", [("view(B, T, h, d_k).transpose(1, 2)", "view(B, h, T, d_k)")]),
                   ("bmm", [("t.reshape(B, T, h, d_k).permute(0, 2, 1, 3).reshape(B * h, T, d_k)",
                             "t.reshape(B * h, T, d_k)")])],
    "split_interleave": [("matmul", [("view(B, T, h, d_k).transpose(1, 2)", "view(B, T, d_k, h).permute(0, 3, 1, 2)"),
                                     ("(att @ v).transpose(1, 2)", "(att @ v).permute(0, 2, 3, 1)")]),
                         ("loop", [("slice(i * d_k, (i + 1) * d_k)", "slice(i, None, h)")])],
    "scale_dmodel": [("matmul", [("math.sqrt(d_k)", "math.sqrt(d)")]), ("einsum", [("d_k ** -0.5", "d ** -0.5")]),
                     ("loop", [("math.sqrt(d_k)", "math.sqrt(d)")])],
    "scale_none": [("matmul", [(" / math.sqrt(d_k)", "")]), ("stacked", [(" / d_k ** 0.5", "")])],
    "scale_dk_lin": [("matmul", [("math.sqrt(d_k)", "d_k")]), ("bmm", [("math.sqrt(d_k)", "d_k")])],
    "mask_inverted": [("matmul", [("masked_fill(mask,", "masked_fill(~mask,")]),
                      ("stacked", [("torch.where(mask,", "torch.where(~mask,")])],
    "mask_inverted_finite": [("finfo", [("masked_fill(mask,", "masked_fill(~mask,")]),
                             ("bmm", [("masked_fill(mask.expand", "masked_fill(~mask.expand")])],
    "mask_after_softmax": [("matmul", [(_MASK_LINES, ""), ("att.softmax(dim=-1)\n", "att.softmax(dim=-1)\n"
                                       "        if mask is not None:\n            att = att.masked_fill(mask, 0.0)\n")]),
                           ("einsum", [(_MASK_LINES, ""), ("torch.softmax(att, dim=-1)\n", "torch.softmax(att, dim=-1)\n"
                                        "        if mask is not None:\n            att = att.masked_fill(mask, 0.0)\n")])],
    "mask_transposed": [("matmul", [("masked_fill(mask,", "masked_fill(mask.transpose(-2, -1),")]),
                        ("loop", [("mask[:, i],", "mask[:, i].transpose(-2, -1),")])],
    "mask_ignored": [("matmul", [(_MASK_LINES, "")]),
                     ("stacked", [('            s = torch.where(mask, float("-inf"), s)\n', "            pass\n")])],
    "no_wo": [("matmul", [("        y = self.W_o(y)\n", "")]), ("einsum", [("        y = self.W_o(y)\n", "")]),
              ("bmm", [("F.linear(o, self.W_o.weight, self.W_o.bias)", "o")]),
              ("torch_own", [("self.W_o.weight, self.W_o.bias", "eye, None")])],
    "axis": [("matmul", [("att.softmax(dim=-1)", "att.softmax(dim=-2)")]),
             ("einsum", [("torch.softmax(att, dim=-1)", "torch.softmax(att, dim=-2)")]),
             ("stacked", [("s.amax(dim=-1, keepdim=True)", "s.amax(dim=-2, keepdim=True)"),
                          ("e.sum(dim=-1, keepdim=True)", "e.sum(dim=-2, keepdim=True)")])],
}
_BUG_EDITS["mask_inverted"].append(("torch_own", [("attn_mask=mask", "attn_mask=None if mask is None else ~mask")]))


def _class_source(style, edits=()):
    body = _STYLES[style][1]
    for old, new in edits:
        assert old in body, (style, old)
        body = body.replace(old, new)
    return _CLASS + body


# source -> (style, bug or None): the classes as written above (the public cases' and the templates of the hidden ones)
CLASSES = {_class_source(style): (style, None) for style in _STYLES}
CLASSES.update({_class_source(style, edits): (style, bug) for bug, ways in _BUG_EDITS.items() for style, edits in ways})
PUBLIC_CLASSES = (("torch_own", None), ("torch_own", "mask_inverted"), ("torch_own", "no_wo"))
_SIZES = ((16, 4), (24, 3), (8, 2), (32, 8), (12, 6), (20, 5))

# ------------------------------------------------------------ hidden classes, written afresh for each case
#
# A checker must measure a class, not recognise it. Every hidden class is its template (style + bug, above) written
# again from the run's seed: equivalent spellings drawn for each occurrence, independent statements in a random
# order, local names and docstrings drawn at random, blank lines that move the line table. No exact property of
# its code objects (bytecode, names, constants, line numbers) is the same from one run to the next, so a table of
# them made ahead of time names no class; what the class computes is its template's, to the last rounding.

# pattern -> equivalent spellings ("\\1": the pattern's group)
_SPELLINGS = (
    (r"math\.sqrt\((\w+)\)", (r"math.sqrt(\1)", r"\1 ** 0.5", r"math.sqrt(float(\1))", r"(\1 ** 0.5)")),
    (r'float\("-inf"\)', ('float("-inf")', "-math.inf", "float('-inf')", '-float("inf")', "-torch.inf")),
    (r"\.transpose\(1, 2\)", (".transpose(1, 2)", ".transpose(2, 1)", ".swapaxes(1, 2)", ".swapdims(2, 1)")),
    (r"\.transpose\(-2, -1\)", (".transpose(-2, -1)", ".transpose(-1, -2)", ".mT", ".swapaxes(-1, -2)")),
    (r"\.view\(", (".view(", ".reshape(")),
    (r"dim=(-\d)", (r"dim=\1", r"\1")),
    (r"self\.(W_[qkvo])\((\w+)\)", (r"self.\1(\2)", r"F.linear(\2, self.\1.weight, self.\1.bias)")),
    (r"(\w+) = \1\.masked_fill\(", (r"\1 = \1.masked_fill(", r"\1 = torch.masked_fill(\1, ")),
)
_FORWARD_ARGS = {"self", "x", "mask", "need_weights"}
_WORDS = ("多头", "注意力", "拆头", "合并", "缩放", "掩码", "投影", "分数", "权重", "输出", "heads", "scores", "weights",
          "attention", "project", "split", "merge", "mask", "scale", "output")


def _respelled(text, g):
    for pattern, ways in _SPELLINGS:
        text = re.sub(pattern, lambda m, ways=ways: m.expand(ways[int(g.integers(len(ways)))]), text)
    return text


def _shuffled_runs(lines, g, starts):
    """Runs of consecutive lines that each start with one of `starts` (independent statements), shuffled."""
    out, i = [], 0
    while i < len(lines):
        j = i
        while j < len(lines) and lines[j].lstrip().startswith(starts):
            j += 1
        if j - i > 1:
            out += [lines[i + int(k)] for k in g.permutation(j - i)]
            i = j
        else:
            out.append(lines[i])
            i += 1
    return out


def _fresh_names(names, g):
    """name -> a new random identifier, none a keyword, builtin or name the class uses otherwise."""
    taken = set(dir(builtins)) | set(keyword.kwlist) | {"torch", "F", "nn", "math"} | _FORWARD_ARGS
    out = {}
    for name in sorted(names):
        new = ""
        while not new or new in taken:
            new = "".join(g.choice(list("abcdefghijklmnopqrstuvwxyz"), size=int(g.integers(1, 7))))
            if g.random() < 0.3:
                new += "_" + str(int(g.integers(100)))
        taken.add(new)
        out[name] = new
    return out


def _local_names(forward_text):
    """The names `forward` binds itself (locals, helpers and their parameters), not its own parameters."""
    tree = ast.parse("class C:\n" + forward_text)
    names = set()
    for node in ast.walk(tree.body[0].body[0]):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.Lambda)) and node is not tree.body[0].body[0]:
            names.update(a.arg for a in node.args.args)
            if isinstance(node, ast.FunctionDef):
                names.add(node.name)
    return names - _FORWARD_ARGS


def _docstring(g, indent):
    words = [_WORDS[int(i)] for i in g.integers(len(_WORDS), size=int(g.integers(2, 6)))]
    return f'{indent}"""{" ".join(words)} {int(g.integers(10**6))}"""\n'


def _written_afresh(source, g):
    """The class `source` written again: same computation, new text (see above)."""
    head, forward = source.split("    def forward(", 1)
    forward = "    def forward(" + _respelled(forward, g)
    names = _fresh_names(_local_names(forward), g)
    forward = re.sub(r"(?<![\w.\"'])(" + "|".join(map(re.escape, sorted(names, key=len, reverse=True))) + r")(?![\w\"'])",
                     lambda m: names[m.group(1)], forward)
    first, body = forward.split("\n", 1)
    lines = _shuffled_runs(body.splitlines(), g, tuple(f"{names.get(n, n)} = " for n in "qkv"))
    depth, spaced = 0, []
    for line in lines:
        spaced.append(line)
        depth += line.count("(") + line.count("[") - line.count(")") - line.count("]")
        if depth == 0 and line.strip() and g.random() < 0.3:
            spaced.append("")
    forward = first + "\n" + _docstring(g, " " * 8) + "\n".join(spaced) + "\n"
    head = head.replace(
        "class MultiHeadAttention(nn.Module):\n", "class MultiHeadAttention(nn.Module):\n" + _docstring(g, " " * 4))
    if g.random() < 0.5:
        pair = ["        self.d_model = d_model", "        self.n_heads = n_heads"]
        head = head.replace("        self.d_model, self.n_heads = d_model, n_heads", "\n".join(pair[::1 - 2 * int(g.integers(2))]))
    head = "\n".join(_shuffled_runs(head.splitlines(), g, ("self.W_",))) + "\n"
    return head + forward


def _selfcheck_case(stage, style, bug, sizes, g=None):
    """A case holding one class: the template as written (public), or written afresh from `g` (hidden). What the
    grader knows of the class stays in the grader's case file (PRIVATE: never sent to a kernel)."""
    source = next(src for src, role in CLASSES.items() if role == (style, bug))
    d_model, n_heads = sizes or (None, None)
    size = "默认大小" if sizes is None else f"d_model={d_model}, n_heads={n_heads}"
    return {"stage": f"{stage}（{_STYLES[style][0]}），{size}", "d_model": d_model, "n_heads": n_heads,
            "source": source if g is None else _written_afresh(source, g),
            "torch_seed": 0 if g is None else int(g.integers(2**31)), PRIVATE: {"style": style, "bug": bug}}


def _selfcheck_cases(seed, hidden, salt):
    if not hidden:
        return [_selfcheck_case("正确的实现", *PUBLIC_CLASSES[0], None),
                _selfcheck_case("有一个错误的实现 A", *PUBLIC_CLASSES[1], None),
                _selfcheck_case("有一个错误的实现 B", *PUBLIC_CLASSES[2], (16, 4))]
    g = rng(seed, salt)
    roles = [(style, None) for style in _STYLES if style != "torch_own"]
    roles += [(str(g.choice([s for s, _ in ways if s != "torch_own"])), bug) for bug, ways in _BUG_EDITS.items()]
    order = g.permutation(len(roles))
    cases = []
    for i, j in enumerate(order, start=1):
        style, bug = roles[j]
        sizes = None if i % 3 == 1 else tuple(int(n) for n in _SIZES[int(g.integers(len(_SIZES)))])
        cases.append(_selfcheck_case(f"隐藏检查的第 {i} 个类", style, bug, sizes, g))
    return cases



def _role(c):
    """What the grader knows of a case's class: its bug (None: a correct class), from the grader's own case data."""
    return {"bug": c[PRIVATE]["bug"]}


graded({"mha_selfcheck": (_selfcheck_cases, {
    "ref": _role,
    **{bug: (lambda c, sees=sees, blind=blind: {"sees": list(sees), "blind": list(blind)})
       for bug, (sees, blind) in SELFCHECK_TABLE.items()},
})}, CASES, ANSWERS)
