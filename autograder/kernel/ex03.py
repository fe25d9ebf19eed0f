"""Drivers of notebook 03 (§3): causal_mask, padding_mask, attention_mask, masked_softmax, leftpad_safe.

Cases are plain data; `run` builds the torch inputs, calls the student's function on copies and
sends back numpy outputs, dtype names and flags. No reference implementation lives here.
"""
import numpy as np

from .driver import Driver, dtype_name, lookup, rng, to_numpy

_DTYPES = {"float32": "float32", "float64": "float64"}


def _torch():
    import torch

    return torch


def _is_tensor(x):
    return type(x).__module__.startswith("torch") and hasattr(x, "dtype") and hasattr(x, "detach")


def _mask_out(m):
    return {"m": to_numpy(m), "m_dtype": dtype_name(m), "m_is_tensor": _is_tensor(m)}


def _left_pad(lengths, T):
    pos = np.arange(T)
    return pos[None, :] < (T - np.asarray(lengths))[:, None]


def _right_pad(lengths, T):
    pos = np.arange(T)
    return pos[None, :] >= np.asarray(lengths)[:, None]


# ---------------------------------------------------------------- causal_mask


def _causal_cases(seed, hidden):
    if not hidden:
        return [
            {"stage": "T=1：唯一的 query 必须能看到自己", "T": 1},
            {"stage": "T=2：只屏蔽右上角一个位置", "T": 2},
            {"stage": "T=4：严格上三角", "T": 4},
        ]
    g = rng(seed, "causal_mask")
    return [{"stage": f"T={T}", "T": int(T)} for T in (3, 7, int(g.integers(10, 20)), 33)]


def _call_causal(ns, case):
    return _mask_out(lookup(ns, "causal_mask")(case["T"]))


# ---------------------------------------------------------------- padding_mask


def _padding_cases(seed, hidden):
    if not hidden:
        return [
            {"stage": "一个样本，T=1，长度 1（没有 pad），默认 side", "lengths": np.array([1]), "T": 1,
             "side": None, "as": "list"},
            {"stage": "右补齐（默认 side），lengths=[3, 1]（list），T=3", "lengths": np.array([3, 1]), "T": 3,
             "side": None, "as": "list"},
            {"stage": "左补齐 side='left'，lengths=[2, 4]（list），T=4", "lengths": np.array([2, 4]), "T": 4,
             "side": "left", "as": "list"},
            {"stage": "1 维 tensor 的 lengths=[5, 0, 2]，T=5，side='right'（含长度 0 和长度 = T）",
             "lengths": np.array([5, 0, 2]), "T": 5, "side": "right", "as": "tensor"},
        ]
    g = rng(seed, "padding_mask")
    cases = [
        {"stage": "左补齐，1 维 tensor，含长度 0 和长度 = T", "lengths": np.array([0, 6, 3]), "T": 6,
         "side": "left", "as": "tensor"},
        {"stage": "右补齐，list，一个样本", "lengths": np.array([2]), "T": 7, "side": "right", "as": "list"},
    ]
    for side, kind in (("right", "tensor"), ("left", "list"), ("left", "tensor")):
        T = int(g.integers(5, 12))
        lengths = g.integers(0, T + 1, size=int(g.integers(2, 6)))
        cases.append({"stage": f"随机长度，T={T}，side='{side}'，lengths 为 {kind}", "lengths": lengths,
                      "T": T, "side": side, "as": kind})
    return cases


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


# ---------------------------------------------------------------- attention_mask


def _attention_mask_cases(seed, hidden):
    if not hidden:
        return [
            {"stage": "B=1，T=1，没有 pad，causal=True", "kp": np.array([[False]]), "causal": True},
            {"stage": "B=1，T=3，没有 pad，默认 causal（应为 True）", "kp": np.zeros((1, 3), bool), "causal": None},
            {"stage": "右补齐 B=2，T=4，causal=False：只按 key 屏蔽",
             "kp": _right_pad([4, 2], 4), "causal": False},
            {"stage": "右补齐 B=2，T=4，causal=True：因果 ∪ padding",
             "kp": _right_pad([4, 2], 4), "causal": True},
        ]
    g = rng(seed, "attention_mask")
    cases = [{"stage": "左补齐 [pad, pad, A, B, C]，causal=True", "kp": _left_pad([3, 5], 5), "causal": True}]
    for causal in (True, False, True):
        B, T = int(g.integers(2, 5)), int(g.integers(4, 10))
        lengths = g.integers(1, T + 1, size=B)
        side = "left" if g.random() < 0.5 else "right"
        kp = _left_pad(lengths, T) if side == "left" else _right_pad(lengths, T)
        cases.append({"stage": f"随机 {side} 补齐，B={B}，T={T}，causal={causal}", "kp": kp, "causal": causal})
    return cases


def _call_attention_mask(ns, case):
    torch = _torch()
    fn = lookup(ns, "attention_mask")
    kp = torch.from_numpy(case["kp"].copy())
    out = fn(kp) if case["causal"] is None else fn(kp, causal=case["causal"])
    changed = not np.array_equal(kp.numpy(), case["kp"])
    return {**_mask_out(out), "input_changed": bool(changed)}


# ---------------------------------------------------------------- masked_softmax


def _ms_case(g, stage, shape, mask, dtype, scale=2.0):
    return {"stage": stage, "scores": g.normal(size=shape) * scale, "mask": np.asarray(mask, bool),
            "g": g.normal(size=shape), "dtype": dtype}


def _causal(T, S=None):
    S = T if S is None else S
    return np.triu(np.ones((T, S), bool), k=1)


def _masked_softmax_cases(seed, hidden):
    g = rng(seed, "masked_softmax" + str(hidden))
    if not hidden:
        return [
            _ms_case(g, "1×3，不屏蔽任何位置：就是普通 softmax（float64）", (1, 3), np.zeros((1, 3)), "float64"),
            _ms_case(g, "3×3 因果掩码（float64）：被屏蔽处必须恰好是 0", (3, 3), _causal(3), "float64"),
            _ms_case(g, "(2,2,4,4) 的分数 + (2,1,1,4) 的 key padding 掩码（广播，float32）", (2, 2, 4, 4),
                     _right_pad([4, 2], 4)[:, None, None, :], "float32"),
            _ms_case(g, "整行被屏蔽：第 0 行全是 True（float64），结果必须有限（全 0 或均匀）", (3, 4),
                     np.array([[1, 1, 1, 1], [0, 1, 1, 1], [0, 0, 1, 0]]), "float64"),
        ]
    lp = _left_pad([2, 5], 5)[:, None, None, :] | _causal(5)  # (2,1,5,5): rows 0-2 of sample 0 fully blocked
    return [
        _ms_case(g, "(2,3,5,5) + 因果掩码 (5,5)（float32）", (2, 3, 5, 5), _causal(5), "float32"),
        _ms_case(g, "T≠S：(4,6) 的分数，每行屏蔽不同的 key（float64）", (4, 6),
                 g.random((4, 6)) < 0.4, "float64"),
        _ms_case(g, "左补齐 + 因果：(2,2,5,5)，样本 0 的前 3 行整行被屏蔽（float32）", (2, 2, 5, 5), lp, "float32"),
        _ms_case(g, "同上（float64），梯度也必须有限", (2, 2, 5, 5), lp, "float64"),
        _ms_case(g, "整个掩码全 True（float32）", (2, 3), np.ones((2, 3)), "float32"),
        _ms_case(g, "大分数（±50 量级），随机掩码（float32）", (3, 8), g.random((3, 8)) < 0.5, "float32",
                 scale=50.0),
        _ms_case(g, "(3,1,6,6) 的分数 + (6,) 的 key 掩码（最后一维广播）", (3, 1, 6, 6),
                 np.array([0, 0, 1, 0, 1, 0]), "float64"),
    ]


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


# ---------------------------------------------------------------- leftpad_safe


def _lp_case(g, stage, lengths, T, d, dtype, pad_upstream="zero"):
    B = len(lengths)
    kp = _left_pad(lengths, T)
    gy = g.normal(size=(B, T, d))
    if pad_upstream == "zero":
        gy[kp] = 0.0
    return {"stage": stage, "q": g.normal(size=(B, T, d)), "k": g.normal(size=(B, T, d)),
            "v": g.normal(size=(B, T, d)), "kp": kp, "gy": gy, "dtype": dtype, "pad_upstream": pad_upstream}


def _leftpad_cases(seed, hidden):
    g = rng(seed, "leftpad_safe" + str(hidden))
    if not hidden:
        return [
            _lp_case(g, "B=1，T=3，没有 pad：就是普通的因果注意力（float64）", [3], 3, 2, "float64"),
            _lp_case(g, "左补齐 [pad, pad, A, B, C] 与一个满长样本（float64），pad 行的上游梯度为 0",
                     [3, 5], 5, 4, "float64"),
            _lp_case(g, "左补齐 B=3，T=6，lengths=[6, 2, 4]（float32），pad 行的上游梯度为 0",
                     [6, 2, 4], 6, 8, "float32"),
        ]
    return [
        _lp_case(g, "pad 行的上游梯度不为 0：输出和梯度仍须处处有限（float64）", [2, 4, 1], 4, 3, "float64",
                 pad_upstream="random"),
        _lp_case(g, "只有最后一个位置是真实 token（float32）", [1, 7], 7, 4, "float32"),
        _lp_case(g, "整条样本都是 pad（长度 0）（float64）：仍须有限", [0, 5], 5, 4, "float64"),
        _lp_case(g, "随机长度 B=4，T=9，d=16（float32），pad 行上游梯度不为 0", [9, 3, 6, 1], 9, 16, "float32",
                 pad_upstream="random"),
        _lp_case(g, "随机长度 B=4，T=9，d=16（float64）", list(g.integers(1, 10, size=4)), 9, 16, "float64"),
    ]


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
    "causal_mask": Driver(("causal_mask",), _causal_cases, _call_causal),
    "padding_mask": Driver(("padding_mask",), _padding_cases, _call_padding),
    "attention_mask": Driver(("attention_mask",), _attention_mask_cases, _call_attention_mask),
    "masked_softmax": Driver(("masked_softmax",), _masked_softmax_cases, _call_masked_softmax),
    "leftpad_safe": Driver(("safe_causal_attention",), _leftpad_cases, _call_leftpad),
}
