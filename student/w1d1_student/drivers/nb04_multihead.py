"""Drivers of notebook 04 (§4): split_merge_heads, mha.

Cases are plain data; `run` builds the torch inputs (float32 or float64), SETS the module's four
projections from the case arrays, calls the student's code and sends back numpy outputs, dtype
names, structure facts and flags. No reference implementation lives here.

Forbidden APIs (`F.scaled_dot_product_attention`, `nn.MultiheadAttention`, their functional forms) are
detected at run time by torch function/dispatch modes (`torch_calls.watching`), which see a call
however it was reached; nothing is patched. The grader also rejects direct uses in the answer's
source (autograder/forbidden_calls.py), which no code in the kernel can change. The modes see only
the calling thread, so starting a Python thread is itself reported.
"""
import contextlib
import sys
import threading

import numpy as np

from ..driver import Driver, dtype_name, lookup, to_numpy
from .torch_calls import watching


def _torch():
    import torch

    return torch


def _tensor(a, dtype):
    torch = _torch()
    return torch.tensor(np.asarray(a), dtype=getattr(torch, dtype))


def _is_tensor(x):
    return type(x).__module__.startswith("torch") and hasattr(x, "dtype") and hasattr(x, "detach")


def _layout(y, layout, dtype):
    """Build a tensor equal to `y` (B,h,T,d_k) with the requested memory layout."""
    if layout == "contiguous":
        return _tensor(y, dtype)
    if layout == "transposed":  # stored as (B,T,h,d_k)
        return _tensor(np.ascontiguousarray(y.transpose(0, 2, 1, 3)), dtype).transpose(1, 2)
    if layout == "last2":  # stored as (B,h,d_k,T)
        return _tensor(np.ascontiguousarray(y.transpose(0, 1, 3, 2)), dtype).transpose(-2, -1)
    if layout == "strided":  # every other element of a wider tensor
        wide = np.zeros(y.shape[:-1] + (2 * y.shape[-1],))
        wide[..., ::2] = y
        return _tensor(wide, dtype)[..., ::2]
    raise ValueError(layout)


def _call_split(ns, case):
    if case["kind"] == "split":
        split = lookup(ns, "split_heads")
        merge = lookup(ns, "merge_heads")
        x = _tensor(case["x"], case["dtype"])
        x0 = x.clone()
        s = split(x, case["h"])
        if not _is_tensor(s):
            raise TypeError(f"split_heads 应返回 torch.Tensor，得到 {type(s).__name__}")
        back = merge(s)
        return {"s": to_numpy(s), "s_dtype": dtype_name(s), "roundtrip": to_numpy(back),
                "roundtrip_dtype": dtype_name(back), "input_changed": not bool((x == x0).all())}
    merge = lookup(ns, "merge_heads")
    y = _layout(case["y"], case["layout"], case["dtype"])
    y0 = y.clone()
    m = merge(y)
    if not _is_tensor(m):
        raise TypeError(f"merge_heads 应返回 torch.Tensor，得到 {type(m).__name__}")
    return {"m": to_numpy(m), "m_dtype": dtype_name(m), "input_contiguous": bool(y.is_contiguous()),
            "input_changed": not bool((y == y0).all())}


_FORBIDDEN_NAMES = ("scaled_dot_product", "multi_head_attention", "MultiheadAttention")


def _make_call_mha(watching):
    """The mha driver, holding its own reference to the detector of forbidden calls."""

    def tripwires():
        flags = {"used_sdpa": False, "used_torch_mha": False}

        def seen(name, args, kwargs):
            if "scaled_dot_product" in name:
                flags["used_sdpa"] = True
            if "multi_head_attention" in name or "MultiheadAttention" in name:
                flags["used_torch_mha"] = True

        return flags, watching(_FORBIDDEN_NAMES, seen, operators=True)

    def call_mha(ns, case):
        torch = _torch()
        flags, detector = tripwires()
        with detector, _threads_started(flags):
            try:
                m = _build(ns, case)
                if case["kind"] == "struct":
                    out = _structure(m)
                else:
                    _set_weights(m, case)
                    run = {"forward": _run_forward, "backward": _run_backward, "perm": _run_perm}[case["kind"]]
                    with torch.enable_grad():
                        out = run(m, case)
            except Exception:
                if flags["used_sdpa"] or flags["used_torch_mha"]:
                    return dict(flags)  # the forbidden use is the verdict, whatever failed after it
                raise
        out.update(flags)
        return out

    return call_mha


@contextlib.contextmanager
def _threads_started(flags):
    """flags["used_threads"]: the student's code started a Python thread (the torch modes above see the
    calling thread only). Seen by threading's profile hook, and by threads still alive afterwards."""
    before, started = set(sys._current_frames()), []

    def hook(*args):
        started.append(True)
        sys.setprofile(None)

    previous = threading.getprofile()
    threading.setprofile(hook)
    try:
        yield
    finally:
        threading.setprofile(previous)
        flags["used_threads"] = bool(started or set(sys._current_frames()) - before)


def _build(ns, case):
    cls = lookup(ns, "MultiHeadAttention")
    return cls(case["d"], case["h"], bias=case["bias"])


def _structure(m):
    params = list(m.named_parameters())
    out = {"param_names": sorted(n for n, _ in params), "param_count": int(sum(p.numel() for _, p in params))}
    for attr in ("d_model", "n_heads"):
        val = getattr(m, attr, None)
        out[attr] = int(val) if isinstance(val, (int, np.integer)) and not isinstance(val, bool) else None
    torch = _torch()
    kinds = {}
    for name in ("W_q", "W_k", "W_v", "W_o"):
        lin = getattr(m, name, None)
        kinds[name] = ("Linear" if isinstance(lin, torch.nn.Linear) else "missing" if lin is None
                       else type(lin).__name__)
    out["linear_kinds"] = kinds
    return out


def _set_weights(m, case):
    torch = _torch()
    dtype = getattr(torch, case["dtype"])
    m.to(dtype)
    with torch.no_grad():
        for name in ("q", "k", "v", "o"):
            lin = getattr(m, "W_" + name)
            lin.weight.copy_(_tensor(case["W" + name], case["dtype"]))
            if case["bias"]:
                lin.bias.copy_(_tensor(case["b" + name], case["dtype"]))
    for p in m.parameters():
        p.grad = None
    return dtype


def _mask_tensor(case):
    return None if case["mask"] is None else _tensor(case["mask"], "bool")


def _forward(m, x, mask, need_weights):
    if mask is None and not need_weights:
        return m(x)
    if not need_weights:
        return m(x, mask)
    return m(x, mask, need_weights=True)


def _run_forward(m, case):
    x = _tensor(case["x"], case["dtype"])
    x0 = x.clone()
    mask = _mask_tensor(case)
    out = _forward(m, x, mask, True)
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise TypeError(f"need_weights=True 时应返回 (y, attn) 两个值，得到 {type(out).__name__}")
    y, attn = out
    plain = _forward(m, x, mask, False)
    res = {"y": to_numpy(y), "y_dtype": dtype_name(y), "attn": to_numpy(attn), "attn_dtype": dtype_name(attn),
           "plain_is_tuple": isinstance(plain, (tuple, list)),
           "input_changed": not bool((x == x0).all())}
    if mask is not None:
        res["mask_changed"] = not np.array_equal(mask.numpy(), case["mask"])
    if not res["plain_is_tuple"]:
        res["y_plain"] = to_numpy(plain)
    return res


def _run_backward(m, case):
    torch = _torch()
    x = _tensor(case["x"], case["dtype"]).requires_grad_(True)
    y = _forward(m, x, _mask_tensor(case), False)
    if isinstance(y, (tuple, list)):
        raise TypeError("need_weights=False（默认）时应只返回 y，不是元组")
    dy = _tensor(case["dy"], case["dtype"])
    with torch.enable_grad():
        y.backward(dy)
    res, missing = {"y": to_numpy(y)}, []
    names = [("W_" + n, "weight") for n in "qkvo"] + ([("W_" + n, "bias") for n in "qkvo"] if case["bias"] else [])
    for mod, kind in names:
        p = getattr(getattr(m, mod), kind)
        key = f"g_{mod}_{kind}"
        if p.grad is None:
            missing.append(f"{mod}.{kind}")
            res[key] = np.zeros(tuple(p.shape))
        else:
            res[key] = to_numpy(p.grad)
    if x.grad is None:
        missing.append("x")
        res["g_x"] = np.zeros(tuple(x.shape))
    else:
        res["g_x"] = to_numpy(x.grad)
    res["grad_missing"] = missing
    return res


def _run_perm(m, case):
    torch = _torch()
    x = _tensor(case["x"], case["dtype"])
    perm = torch.as_tensor(np.asarray(case["perm"]), dtype=torch.long)
    with torch.no_grad():
        y = m(x)
        yp = m(x[:, perm].contiguous())
    return {"y": to_numpy(y), "y_perm": to_numpy(yp)}


DRIVERS = {
    "split_merge_heads": Driver(("split_heads", "merge_heads"), _call_split),
    "mha": Driver(("MultiHeadAttention",), _make_call_mha(watching)),
}
