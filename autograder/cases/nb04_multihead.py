"""Cases of notebook 04: plain data the student's code runs on (grader side; travels to the kernel as data)."""
import numpy as np

from .seeding import rng


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
