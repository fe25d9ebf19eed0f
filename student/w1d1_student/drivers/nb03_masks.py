"""Drivers of notebook 03 (§3): causal_mask, padding_mask, attention_mask, masked_softmax, leftpad_safe.

Cases are plain data; `run` builds the torch inputs, calls the student's function on copies and
sends back numpy outputs, dtype names and flags. No reference implementation lives here.
"""
import numpy as np

from ..driver import Driver, dtype_name, lookup, to_numpy

_DTYPES = {"float32": "float32", "float64": "float64"}


def _torch():
    import torch

    return torch


def _is_tensor(x):
    return type(x).__module__.startswith("torch") and hasattr(x, "dtype") and hasattr(x, "detach")


def _mask_out(m):
    return {"m": to_numpy(m), "m_dtype": dtype_name(m), "m_is_tensor": _is_tensor(m)}


def _call_causal(ns, case):
    return _mask_out(lookup(ns, "causal_mask")(case["T"]))


def _call_padding(ns, case):
    torch = _torch()
    fn = lookup(ns, "padding_mask")
    if case["as"] == "tensor":
        lengths = torch.tensor(case["lengths"], dtype=torch.int64)
        before = lengths.clone()
    else:
        lengths = [int(n) for n in case["lengths"]]
        before = list(lengths)
    out = fn(lengths, case["T"]) if case["side"] is None else fn(lengths, case["T"], side=case["side"])
    changed = (not torch.equal(lengths, before)) if case["as"] == "tensor" else lengths != before
    return {**_mask_out(out), "input_changed": bool(changed)}


def _call_attention_mask(ns, case):
    torch = _torch()
    fn = lookup(ns, "attention_mask")
    kp = torch.from_numpy(case["kp"].copy())
    out = fn(kp) if case["causal"] is None else fn(kp, causal=case["causal"])
    changed = not np.array_equal(kp.numpy(), case["kp"])
    return {**_mask_out(out), "input_changed": bool(changed)}


def _call_masked_softmax(ns, case):
    torch = _torch()
    fn = lookup(ns, "masked_softmax")
    dtype = getattr(torch, _DTYPES[case["dtype"]])
    leaf = torch.tensor(case["scores"], dtype=dtype, requires_grad=True)
    scores = leaf.clone()  # non-leaf: an in-place edit is allowed by autograd and detected below
    mask = torch.from_numpy(case["mask"].copy())
    p = fn(scores, mask)
    changed = (not torch.equal(scores.detach(), leaf.detach())) or not np.array_equal(mask.numpy(), case["mask"])
    out = {"p": to_numpy(p), "p_dtype": dtype_name(p), "input_changed": bool(changed)}
    if getattr(p, "requires_grad", False) and tuple(p.shape) == case["g"].shape:
        (p * torch.tensor(case["g"], dtype=p.dtype)).sum().backward()
    grad = leaf.grad
    out["grad_missing"] = grad is None
    out["grad"] = np.zeros(case["scores"].shape) if grad is None else to_numpy(grad)
    return out


def _call_leftpad(ns, case):
    torch = _torch()
    fn = lookup(ns, "safe_causal_attention")
    dtype = getattr(torch, _DTYPES[case["dtype"]])
    leaves = [torch.tensor(case[n], dtype=dtype, requires_grad=True) for n in ("q", "k", "v")]
    args = [t.clone() for t in leaves]
    kp = torch.from_numpy(case["kp"].copy())
    y = fn(*args, kp)
    changed = any(not torch.equal(a.detach(), t.detach()) for a, t in zip(args, leaves))
    changed = changed or not np.array_equal(kp.numpy(), case["kp"])
    out = {"y": to_numpy(y), "y_dtype": dtype_name(y), "input_changed": bool(changed)}
    if getattr(y, "requires_grad", False) and tuple(y.shape) == case["gy"].shape:
        y.backward(torch.tensor(case["gy"], dtype=y.dtype))
    missing = []
    for name, t in zip(("dq", "dk", "dv"), leaves):
        if t.grad is None:
            missing.append(name)
            out[name] = np.zeros(case[name[1]].shape)
        else:
            out[name] = to_numpy(t.grad)
    out["grad_missing"] = ",".join(missing)
    return out


DRIVERS = {
    "causal_mask": Driver(("causal_mask",), _call_causal),
    "padding_mask": Driver(("padding_mask",), _call_padding),
    "attention_mask": Driver(("attention_mask",), _call_attention_mask),
    "masked_softmax": Driver(("masked_softmax",), _call_masked_softmax),
    "leftpad_safe": Driver(("safe_causal_attention",), _call_leftpad),
}
