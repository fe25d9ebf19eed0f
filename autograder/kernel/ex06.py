"""Drivers of notebook 06 (§A): sdpa_attention, decode_step, to_torch_mha, torch_mha_forward.

`F.scaled_dot_product_attention` is wrapped while the student's function runs (a counting
tripwire, restored in `finally`), so the checks know that it was called and with which flags.
Modules are built here and their weights SET from the case; nothing is read back from the
student's objects except what their torch module computes and holds.
"""
import inspect
from contextlib import contextmanager

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .driver import Driver, dtype_name, lookup, rng, to_numpy

_DT = {"float32": torch.float32, "float64": torch.float64}


def _arg(args, kwargs, name, pos, default):
    if name in kwargs:
        return kwargs[name]
    return args[pos] if len(args) > pos else default


@contextmanager
def sdpa_tripwire(ns):
    """Count the calls of F.scaled_dot_product_attention (also when imported by name into `ns`)."""
    original = F.scaled_dot_product_attention
    calls = []

    def counting(*args, **kwargs):
        mask = _arg(args, kwargs, "attn_mask", 3, None)
        p = _arg(args, kwargs, "dropout_p", 4, 0.0)
        calls.append({"is_causal": bool(_arg(args, kwargs, "is_causal", 5, False)),
                      "dropout_p": float(p), "has_mask": mask is not None,
                      "mask_dtype": dtype_name(mask) if mask is not None else ""})
        return original(*args, **kwargs)

    aliases = [name for name, value in list(ns.items()) if value is original]
    F.scaled_dot_product_attention = counting
    for name in aliases:
        ns[name] = counting
    try:
        yield calls
    finally:
        F.scaled_dot_product_attention = original
        for name in aliases:
            if ns.get(name) is counting:
                ns[name] = original


def _summary(calls):
    return {"sdpa_calls": len(calls),
            "max_dropout_p": max((c["dropout_p"] for c in calls), default=0.0),
            "any_is_causal": any(c["is_causal"] for c in calls),
            "causal_and_mask": any(c["is_causal"] and c["has_mask"] for c in calls)}


def _tensor(a, dtype):
    return torch.tensor(np.asarray(a), dtype=dtype)


def _padding(lengths, S):
    return np.arange(S)[None, :] >= np.asarray(lengths)[:, None]  # (B,S) True = pad


def _random_mask(g, shape, keep_diag=False):
    """A bool mask (True = blocked) with every row holding at least one allowed and one blocked key."""
    m = g.random(shape) < 0.4
    rows = m.reshape(-1, shape[-1])
    for r in rows:
        r[g.integers(shape[-1])] = False
        if r.all() or not r.any():
            r[g.integers(shape[-1])] = True
    m = rows.reshape(shape)
    if keep_diag:
        n = min(shape[-2], shape[-1])
        m[..., np.arange(n), np.arange(n)] = False
    return m


# ------------------------------------------------------------------ sdpa_attention


def _sdpa_case(g, stage, B, h, T, S, dk, dtype="float64", mask=None, is_causal=None, dropout_p=None,
               training=None, kind="plain", identity_v=False, scale=1.0):
    q, k = g.normal(size=(B, h, T, dk)) * scale, g.normal(size=(B, h, S, dk)) * scale
    v = np.broadcast_to(np.eye(S), (B, h, S, S)).copy() if identity_v else g.normal(size=(B, h, S, dk))
    return {"stage": stage, "q": q, "k": k, "v": v, "mask": mask, "is_causal": is_causal, "dropout_p": dropout_p,
            "training": training, "dtype": dtype, "kind": kind, "torch_seed": int(g.integers(2**31))}


def _sdpa_cases(seed, hidden):
    g = rng(seed, "sdpa_attention" + str(hidden))
    if not hidden:
        return [
            _sdpa_case(g, "形状与 dtype：float32，不带掩码", 1, 2, 3, 3, 4, dtype="float32"),
            _sdpa_case(g, "布尔掩码（课程约定 True = 屏蔽）：key padding，形状 (B,1,1,S)", 2, 2, 5, 5, 4,
                       mask=_padding([3, 4], 5)[:, None, None, :]),
            _sdpa_case(g, "is_causal=True，不带 mask", 1, 2, 5, 5, 4, is_causal=True),
            _sdpa_case(g, "mask 与 is_causal=True 同时给：padding + 因果", 2, 2, 5, 5, 4,
                       mask=_padding([3, 4], 5)[:, None, None, :], is_causal=True),
            _sdpa_case(g, "dropout_p=0.5 但 training=False：必须是确定的、不做 dropout", 2, 2, 4, 4, 4,
                       dropout_p=0.5, training=False),
        ]
    return [
        _sdpa_case(g, "T=3 ≠ S=6，二维掩码 (T,S)，float32", 2, 2, 3, 6, 8, dtype="float32",
                   mask=_random_mask(g, (3, 6))),
        _sdpa_case(g, "每个头各自的掩码 (B,h,T,T)", 2, 3, 6, 6, 4, mask=_random_mask(g, (2, 3, 6, 6))),
        _sdpa_case(g, "每个头各自的掩码 + is_causal=True，float32", 2, 3, 6, 6, 4, dtype="float32",
                   mask=_random_mask(g, (2, 3, 6, 6), keep_diag=True), is_causal=True),
        _sdpa_case(g, "is_causal=True 且 training=False、dropout_p=0.5", 1, 2, 7, 7, 4, is_causal=True,
                   dropout_p=0.5, training=False),
        _sdpa_case(g, "training=True、dropout_p=0.3：权重被随机置 0，保留的除以 1-p（V 取单位阵，输出就是权重）",
                   2, 2, 8, 8, 4, dropout_p=0.3, training=True, kind="dropout_train", identity_v=True, scale=0.5),
    ]


def _call_sdpa(ns, case):
    fn = lookup(ns, "sdpa_attention")
    dt = _DT[case["dtype"]]
    q, k, v = (_tensor(case[n], dt) for n in ("q", "k", "v"))
    inputs = [q, k, v]
    kwargs = {}
    if case["mask"] is not None:
        kwargs["mask"] = torch.tensor(case["mask"])
        inputs.append(kwargs["mask"])
    for name in ("is_causal", "dropout_p", "training"):
        if case[name] is not None:
            kwargs[name] = case[name]
    before = [t.clone() for t in inputs]
    with torch.random.fork_rng(devices=[]), sdpa_tripwire(ns) as calls:
        torch.manual_seed(case["torch_seed"])
        y = fn(q, k, v, **kwargs)
    return {"y": to_numpy(y), "y_dtype": dtype_name(y), "y_is_tensor": isinstance(y, torch.Tensor),
            "input_changed": any(not torch.equal(a, b) for a, b in zip(inputs, before)), **_summary(calls)}


# ------------------------------------------------------------------ decode_step


def _decode_cases(seed, hidden):
    g = rng(seed, "decode_step" + str(hidden))

    def case(stage, B, h, S, dk, dtype="float64"):
        return {"stage": stage, "q_new": g.normal(size=(B, h, 1, dk)), "k_cache": g.normal(size=(B, h, S, dk)),
                "v_cache": g.normal(size=(B, h, S, dk)), "dtype": dtype}

    if not hidden:
        return [
            case("缓存里只有 1 个 token（S=1）：输出就是那个 value，float32", 1, 1, 1, 4, dtype="float32"),
            case("S=5：新 token 要看全部 5 个缓存的 key", 1, 2, 5, 4),
        ]
    return [
        case("B=2, h=3, S=8, float32", 2, 3, 8, 4, dtype="float32"),
        case("S=16, d_k=8", 2, 2, 16, 8),
        case("S=2", 3, 1, 2, 6),
    ]


def _call_decode(ns, case):
    fn = lookup(ns, "decode_step")
    dt = _DT[case["dtype"]]
    inputs = [_tensor(case[n], dt) for n in ("q_new", "k_cache", "v_cache")]
    before = [t.clone() for t in inputs]
    with sdpa_tripwire(ns) as calls:
        y = fn(*inputs)
    return {"y": to_numpy(y), "y_dtype": dtype_name(y), "y_is_tensor": isinstance(y, torch.Tensor),
            "input_changed": any(not torch.equal(a, b) for a, b in zip(inputs, before)), **_summary(calls)}


# ------------------------------------------------------------------ to_torch_mha

_PROJ = ("W_q", "W_k", "W_v", "W_o")


def _to_torch_cases(seed, hidden):
    g = rng(seed, "to_torch_mha" + str(hidden))

    def case(stage, d, h, bias, B=2, T=5):
        c = {"stage": stage, "d_model": d, "n_heads": h, "bias": bias, "x": g.normal(size=(B, T, d))}
        for name in _PROJ:
            c[name] = g.normal(size=(d, d)) / np.sqrt(d)
            c[name + "_bias"] = g.normal(size=d) * 0.5 if bias else None
        return c

    if not hidden:
        return [
            case("d_model=4, 1 个头, 有 bias", 4, 1, True),
            case("d_model=8, 2 个头, 无 bias", 8, 2, False),
            case("d_model=8, 4 个头, 有 bias", 8, 4, True),
        ]
    return [
        case("d_model=12, 3 个头, 有 bias", 12, 3, True, B=3, T=4),
        case("d_model=16, 4 个头, 无 bias", 16, 4, False),
        case("d_model=6, 6 个头（d_k=1）, 有 bias", 6, 6, True, B=1, T=7),
    ]


def _param(module, name):
    p = getattr(module, name, None)
    return None if p is None else to_numpy(p)


def _call_to_torch(ns, case):
    cls = lookup(ns, "MultiHeadAttention")
    convert = lookup(ns, "to_torch_mha")
    mha = cls(case["d_model"], case["n_heads"], bias=case["bias"])
    with torch.no_grad():
        for name in _PROJ:
            layer = getattr(mha, name)
            layer.weight.copy_(_tensor(case[name], layer.weight.dtype))
            if case["bias"]:
                layer.bias.copy_(_tensor(case[name + "_bias"], layer.bias.dtype))
    tm = convert(mha)
    if not isinstance(tm, nn.MultiheadAttention):
        raise TypeError(f"to_torch_mha 应返回 nn.MultiheadAttention，得到 {type(tm).__name__}")
    if tm.in_proj_weight is None:
        raise TypeError("返回的 nn.MultiheadAttention 没有合并的 in_proj_weight（不要给 kdim/vdim）")
    x = _tensor(case["x"], tm.in_proj_weight.dtype)
    out = tm(x, x, x, need_weights=False)
    y = out[0] if isinstance(out, (tuple, list)) else out
    return {"y": to_numpy(y), "batch_first": bool(tm.batch_first), "num_heads": int(tm.num_heads),
            "in_proj_weight": _param(tm, "in_proj_weight"), "in_proj_bias": _param(tm, "in_proj_bias"),
            "out_proj_weight": _param(tm.out_proj, "weight"), "out_proj_bias": _param(tm.out_proj, "bias")}


# ------------------------------------------------------------------ torch_mha_forward

_FORWARD = inspect.signature(nn.MultiheadAttention.forward)


class RecordingMHA(nn.MultiheadAttention):
    """nn.MultiheadAttention that remembers how it was called (need_weights, self-attention)."""

    def forward(self, *args, **kwargs):
        bound = _FORWARD.bind(self, *args, **kwargs)
        bound.apply_defaults()
        a = bound.arguments
        self.calls.append({"need_weights": bool(a["need_weights"]),
                           "self_attention": a["query"] is a["key"] is a["value"]})
        return super().forward(*args, **kwargs)


def _forward_cases(seed, hidden):
    g = rng(seed, "torch_mha_forward" + str(hidden))

    def case(stage, d, h, bias=True, B=2, T=5, lengths=None, causal=None, dtype="float64"):
        return {"stage": stage, "d_model": d, "n_heads": h, "bias": bias, "dtype": dtype,
                "x": g.normal(size=(B, T, d)),
                "in_proj_weight": g.normal(size=(3 * d, d)) / np.sqrt(d),
                "in_proj_bias": g.normal(size=3 * d) * 0.5 if bias else None,
                "out_proj_weight": g.normal(size=(d, d)) / np.sqrt(d),
                "out_proj_bias": g.normal(size=d) * 0.5 if bias else None,
                "key_padding": None if lengths is None else _padding(lengths, T), "causal": causal}

    if not hidden:
        return [
            case("不带掩码，float32：只要 y，形状 (B,T,d)", 8, 2, dtype="float32"),
            case("key_padding（True = pad，右补齐）", 8, 2, lengths=[3, 4]),
            case("causal=True", 8, 2, causal=True),
        ]
    return [
        case("key_padding + causal，float32", 8, 4, lengths=[5, 3], causal=True, dtype="float32", B=2, T=5),
        case("无 bias，d=12，3 个头，padding", 12, 3, bias=False, lengths=[2, 6, 4], B=3, T=6),
        case("1 个头，padding + causal", 6, 1, lengths=[4, 2], causal=True, T=4),
        case("causal=False 显式给出、key_padding=None", 8, 2, causal=False, B=3, T=3),
    ]


def _call_forward(ns, case):
    fn = lookup(ns, "torch_mha_forward")
    dt = _DT[case["dtype"]]
    d = case["d_model"]
    tm = RecordingMHA(d, case["n_heads"], bias=case["bias"], batch_first=True, dtype=dt)
    tm.calls = []
    with torch.no_grad():
        tm.in_proj_weight.copy_(_tensor(case["in_proj_weight"], dt))
        tm.out_proj.weight.copy_(_tensor(case["out_proj_weight"], dt))
        if case["bias"]:
            tm.in_proj_bias.copy_(_tensor(case["in_proj_bias"], dt))
            tm.out_proj.bias.copy_(_tensor(case["out_proj_bias"], dt))
    x = _tensor(case["x"], dt)
    inputs = [x]
    kwargs = {}
    if case["key_padding"] is not None:
        kwargs["key_padding"] = torch.tensor(case["key_padding"])
        inputs.append(kwargs["key_padding"])
    if case["causal"] is not None:
        kwargs["causal"] = case["causal"]
    before = [t.clone() for t in inputs]
    y = fn(tm, x, **kwargs)
    if isinstance(y, (tuple, list)):
        raise TypeError(f"torch_mha_forward 应只返回 y，得到长度为 {len(y)} 的 {type(y).__name__}："
                        "nn.MultiheadAttention 返回 (y, weights)，要取出 y")
    return {"y": to_numpy(y), "y_dtype": dtype_name(y), "y_is_tensor": isinstance(y, torch.Tensor),
            "input_changed": any(not torch.equal(a, b) for a, b in zip(inputs, before)),
            "mha_calls": len(tm.calls), "need_weights": any(c["need_weights"] for c in tm.calls),
            "self_attention": all(c["self_attention"] for c in tm.calls)}


DRIVERS = {
    "sdpa_attention": Driver(("sdpa_attention",), _sdpa_cases, _call_sdpa),
    "decode_step": Driver(("decode_step",), _decode_cases, _call_decode),
    "to_torch_mha": Driver(("to_torch_mha",), _to_torch_cases, _call_to_torch),
    "torch_mha_forward": Driver(("torch_mha_forward",), _forward_cases, _call_forward),
}
