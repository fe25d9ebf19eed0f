"""Drivers of notebook 06 (§A): sdpa_attention, decode_step, to_torch_mha, torch_mha_forward.

Every call of `F.scaled_dot_product_attention` while the student's function runs is recorded by a
torch function mode (`torch_calls.watching`: an alias, functools.partial or a default argument is
seen too), so the checks know that it was called and with which flags.
Modules are built here and their weights SET from the case; nothing is read back from the
student's objects except what their torch module computes and holds.
"""
import inspect
from contextlib import contextmanager

import numpy as np
import torch
from torch import nn

from ..driver import Driver, dtype_name, lookup, to_numpy
from .torch_calls import watching

_DT = {"float32": torch.float32, "float64": torch.float64}


def _arg(args, kwargs, name, pos, default):
    if name in kwargs:
        return kwargs[name]
    return args[pos] if len(args) > pos else default


def _make_sdpa_calls(watching):
    @contextmanager
    def sdpa_calls():
        """Record every call of F.scaled_dot_product_attention, however the student's code reached it."""
        calls = []

        def seen(name, args, kwargs):
            mask = _arg(args, kwargs, "attn_mask", 3, None)
            p = _arg(args, kwargs, "dropout_p", 4, 0.0)
            calls.append({"is_causal": bool(_arg(args, kwargs, "is_causal", 5, False)),
                          "dropout_p": float(p), "has_mask": mask is not None,
                          "mask_dtype": dtype_name(mask) if mask is not None else ""})

        with watching(("scaled_dot_product_attention",), seen):
            yield calls

    return sdpa_calls


sdpa_calls = _make_sdpa_calls(watching)


def _summary(calls):
    return {"sdpa_calls": len(calls),
            "max_dropout_p": max((c["dropout_p"] for c in calls), default=0.0),
            "any_is_causal": any(c["is_causal"] for c in calls),
            "causal_and_mask": any(c["is_causal"] and c["has_mask"] for c in calls)}


def _tensor(a, dtype):
    return torch.tensor(np.asarray(a), dtype=dtype)


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
    with torch.random.fork_rng(devices=[]), sdpa_calls() as calls:
        torch.manual_seed(case["torch_seed"])
        y = fn(q, k, v, **kwargs)
    return {"y": to_numpy(y), "y_dtype": dtype_name(y), "y_is_tensor": isinstance(y, torch.Tensor),
            "input_changed": any(not torch.equal(a, b) for a, b in zip(inputs, before)), **_summary(calls)}


def _call_decode(ns, case):
    fn = lookup(ns, "decode_step")
    dt = _DT[case["dtype"]]
    inputs = [_tensor(case[n], dt) for n in ("q_new", "k_cache", "v_cache")]
    before = [t.clone() for t in inputs]
    with sdpa_calls() as calls:
        y = fn(*inputs)
    return {"y": to_numpy(y), "y_dtype": dtype_name(y), "y_is_tensor": isinstance(y, torch.Tensor),
            "input_changed": any(not torch.equal(a, b) for a, b in zip(inputs, before)), **_summary(calls)}


_PROJ = ("W_q", "W_k", "W_v", "W_o")


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
    "sdpa_attention": Driver(("sdpa_attention",), _call_sdpa),
    "decode_step": Driver(("decode_step",), _call_decode),
    "to_torch_mha": Driver(("to_torch_mha",), _call_to_torch),
    "torch_mha_forward": Driver(("torch_mha_forward",), _call_forward),
}
