"""Drivers of notebook 04 (§4): split_merge_heads, mha.

Cases are plain data; `run` builds the torch inputs (float32 or float64), SETS the module's four
projections from the case arrays, calls the student's code and sends back numpy outputs, dtype
names, structure facts and flags. No reference implementation lives here.

Forbidden APIs (`F.scaled_dot_product_attention`, `nn.MultiheadAttention`) are detected at run time:
tripwires wrap the functions for the duration of one case, and a torch function/dispatch mode
records any call that reaches them under another name; everything is restored in `finally`.
"""
import contextlib

import numpy as np

from .driver import Driver, dtype_name, lookup, rng, to_numpy


def _torch():
    import torch

    return torch


def _f32(a):
    """Round to float32-representable values so float32 and float64 runs see the same inputs."""
    return np.asarray(a, dtype=np.float64).astype(np.float32).astype(np.float64)


def _tensor(a, dtype):
    torch = _torch()
    return torch.tensor(np.asarray(a), dtype=getattr(torch, dtype))


def _is_tensor(x):
    return type(x).__module__.startswith("torch") and hasattr(x, "dtype") and hasattr(x, "detach")


# ---------------------------------------------------------------- split_merge_heads


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


# ---------------------------------------------------------------- mha: cases


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


# ---------------------------------------------------------------- mha: tripwires


_FORBIDDEN_NAMES = ("scaled_dot_product", "multi_head_attention")


@contextlib.contextmanager
def _tripwires():
    """Record any use of F.scaled_dot_product_attention or nn.MultiheadAttention while active."""
    torch = _torch()
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode

    flags = {"used_sdpa": False, "used_torch_mha": False}

    def note(name):
        name = str(name)
        if "scaled_dot_product" in name:
            flags["used_sdpa"] = True
        if "multi_head_attention" in name or "MultiheadAttention" in name:
            flags["used_torch_mha"] = True

    def wrap(fn, name):
        def tripwire(*args, **kwargs):
            note(name)
            return fn(*args, **kwargs)
        return tripwire

    class _FnMode(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            name = getattr(func, "__name__", "")
            if any(s in name for s in _FORBIDDEN_NAMES):
                note(name)
            return func(*args, **(kwargs or {}))

    class _OpMode(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = str(func)
            if any(s in name for s in _FORBIDDEN_NAMES):
                note(name)
            return func(*args, **(kwargs or {}))

    F = torch.nn.functional
    mha_cls = torch.nn.MultiheadAttention
    saved = [(F, "scaled_dot_product_attention", F.scaled_dot_product_attention),
             (torch._C._nn, "scaled_dot_product_attention", torch._C._nn.scaled_dot_product_attention),
             (mha_cls, "forward", mha_cls.__dict__["forward"]),
             (mha_cls, "__init__", mha_cls.__dict__["__init__"])]
    try:
        for owner, attr, fn in saved:
            setattr(owner, attr, wrap(fn, "MultiheadAttention" if owner is mha_cls else attr))
        with _FnMode(), _OpMode():
            yield flags
    finally:
        for owner, attr, fn in saved:
            setattr(owner, attr, fn)


# ---------------------------------------------------------------- mha: run


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


def _call_mha(ns, case):
    torch = _torch()
    with _tripwires() as flags:
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


DRIVERS = {
    "split_merge_heads": Driver(("split_heads", "merge_heads"), _split_cases, _call_split),
    "mha": Driver(("MultiHeadAttention",), _mha_cases, _call_mha),
}
