"""Notebook 06 (§A) on the grader's side: its cases and its answer key, one exercise next to the other.

Cases: plain data the student's code runs on, made from the run's seed (they travel to the kernel as data).
Answers: SDPA, KV-cache decoding, nn.MultiheadAttention — references and known bugs.

A buggy reference may leave NaN in rows where its mask blocks every key; the verdict table ignores those rows.
"""
import numpy as np

from .references import softmax, swap, triu
from .seeding import graded, rng, with_defaults

# ------------------------------------------------------------ cases

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


SDPA_CASE = {"dtype": "float64", "mask": None, "is_causal": None, "dropout_p": None, "training": None, "kind": "plain",
             "identity_v": False, "scale": 1.0}


def _sdpa_case(g, stage, shape, **options):
    """One case of shape (B, h, T, S, dk); `options` sets what differs from SDPA_CASE."""
    B, h, T, S, dk = shape
    dtype, mask, is_causal, dropout_p, training, kind, identity_v, scale = with_defaults(options, SDPA_CASE).values()
    q, k = g.normal(size=(B, h, T, dk)) * scale, g.normal(size=(B, h, S, dk)) * scale
    v = np.broadcast_to(np.eye(S), (B, h, S, S)).copy() if identity_v else g.normal(size=(B, h, S, dk))
    return {"stage": stage, "q": q, "k": k, "v": v, "mask": mask, "is_causal": is_causal, "dropout_p": dropout_p,
            "training": training, "dtype": dtype, "kind": kind, "torch_seed": int(g.integers(2**31))}


def _sdpa_cases(seed, hidden, salt):
    g = rng(seed, salt + str(hidden))
    if not hidden:
        return [
            _sdpa_case(g, "形状与 dtype：float32，不带掩码", (1, 2, 3, 3, 4), dtype="float32"),
            _sdpa_case(g, "布尔掩码（课程约定 True = 屏蔽）：key padding，形状 (B,1,1,S)", (2, 2, 5, 5, 4),
                       mask=_padding([3, 4], 5)[:, None, None, :]),
            _sdpa_case(g, "is_causal=True，不带 mask", (1, 2, 5, 5, 4), is_causal=True),
            _sdpa_case(g, "mask 与 is_causal=True 同时给：padding + 因果", (2, 2, 5, 5, 4),
                       mask=_padding([3, 4], 5)[:, None, None, :], is_causal=True),
            _sdpa_case(g, "dropout_p=0.5 但 training=False：必须是确定的、不做 dropout", (2, 2, 4, 4, 4),
                       dropout_p=0.5, training=False),
            _sdpa_case(g, "training=True、dropout_p=0.5：训练时要做 dropout（V 取单位阵，输出就是权重）", (1, 2, 16, 16, 4),
                       dropout_p=0.5, training=True, kind="dropout_train", identity_v=True, scale=0.5),
        ]
    return [
        _sdpa_case(g, "T=3 ≠ S=6，二维掩码 (T,S)，float32", (2, 2, 3, 6, 8), dtype="float32",
                   mask=_random_mask(g, (3, 6))),
        _sdpa_case(g, "每个头各自的掩码 (B,h,T,T)", (2, 3, 6, 6, 4), mask=_random_mask(g, (2, 3, 6, 6))),
        _sdpa_case(g, "每个头各自的掩码 + is_causal=True，float32", (2, 3, 6, 6, 4), dtype="float32",
                   mask=_random_mask(g, (2, 3, 6, 6), keep_diag=True), is_causal=True),
        _sdpa_case(g, "is_causal=True 且 training=False、dropout_p=0.5", (1, 2, 7, 7, 4), is_causal=True,
                   dropout_p=0.5, training=False),
        _sdpa_case(g, "training=True、dropout_p=0.3：权重被随机置 0，保留的除以 1-p（V 取单位阵，输出就是权重）",
                   (2, 2, 8, 8, 4), dropout_p=0.3, training=True, kind="dropout_train", identity_v=True, scale=0.5),
    ]


def _decode_cases(seed, hidden, salt):
    g = rng(seed, salt + str(hidden))

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


_PROJ = ("W_q", "W_k", "W_v", "W_o")


def _to_torch_cases(seed, hidden, salt):
    g = rng(seed, salt + str(hidden))

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


FORWARD_CASE = {"bias": True, "B": 2, "T": 5, "lengths": None, "causal": None, "dtype": "float64"}


def _forward_cases(seed, hidden, salt):
    g = rng(seed, salt + str(hidden))

    def case(stage, d, h, **options):
        bias, B, T, lengths, causal, dtype = with_defaults(options, FORWARD_CASE).values()
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


# ------------------------------------------------------------ answers

def attention_ref(q, k, v, blocked=None, scale=None, add=None):
    """Softmax attention, blocked True = -inf; rows with every key blocked come out NaN."""
    s = q @ swap(k) * (1.0 / np.sqrt(q.shape[-1]) if scale is None else scale)
    if add is not None:
        s = s + add
    if blocked is not None:
        s = np.where(np.broadcast_to(blocked, s.shape), -np.inf, s)
    a = softmax(s)
    return a @ v, a


def _sdpa_blocked(case):
    T, S = case["q"].shape[-2], case["k"].shape[-2]
    blocked = np.zeros((T, S), dtype=bool)
    if case["mask"] is not None:
        blocked = blocked | case["mask"]
    if case["is_causal"]:
        blocked = blocked | triu(T, S)
    return blocked


def sdpa_ref(case):
    return attention_ref(case["q"], case["k"], case["v"], _sdpa_blocked(case))[0]


def _with_blocked(f):
    def bug(c):
        if c["mask"] is None:
            return None
        T, S = c["q"].shape[-2], c["k"].shape[-2]
        blocked = f(c["mask"], triu(T, S), bool(c["is_causal"]))
        return None if blocked is None else attention_ref(c["q"], c["k"], c["v"], blocked)[0]
    return bug


def _float_mask(sign):
    def bug(c):
        if c["mask"] is None:
            return None
        T, S = c["q"].shape[-2], c["k"].shape[-2]
        m = c["mask"] if sign > 0 else ~c["mask"]
        causal = triu(T, S) if c["is_causal"] else None
        return attention_ref(c["q"], c["k"], c["v"], causal, add=m.astype(float))[0]
    return bug


def _causal_variant(block):
    def bug(c):
        if not c["is_causal"]:
            return None
        T, S = c["q"].shape[-2], c["k"].shape[-2]
        m = np.zeros((T, S), dtype=bool) if c["mask"] is None else c["mask"]
        return attention_ref(c["q"], c["k"], c["v"], m | block(T, S))[0]
    return bug


def _decode(keys=slice(None), scale=None):
    return lambda c: attention_ref(c["q_new"], c["k_cache"][..., keys, :], c["v_cache"][..., keys, :], scale=scale)[0]


def mha_ref(x, weights, h, blocked=None):
    """nn.MultiheadAttention(batch_first=True) in float64; weights = (w_in, b_in, w_out, b_out); blocked (B,T,T) or
    (T,T), True = blocked."""
    (B, T, d), (w_in, b_in, w_out, b_out) = x.shape, weights
    qkv = x @ w_in.T + (0.0 if b_in is None else b_in)
    q, k, v = (qkv[..., i * d:(i + 1) * d].reshape(B, T, h, d // h).transpose(0, 2, 1, 3) for i in range(3))
    if blocked is not None and blocked.ndim == 3:
        blocked = blocked[:, None]
    y = attention_ref(q, k, v, blocked)[0]
    return y.transpose(0, 2, 1, 3).reshape(B, T, d) @ w_out.T + (0.0 if b_out is None else b_out)


def _cat(case, order, transpose=False, key=""):
    parts = [case[f"W_{c}{key}"] for c in order]
    if key:
        return np.concatenate(parts)
    return np.concatenate([p.T if transpose else p for p in parts], axis=0)


def _forward_ref(case, blocked_fn=None, transpose_x=False):
    x = case["x"]
    B, T, _ = x.shape
    if transpose_x:
        if case["key_padding"] is not None or case["causal"]:
            return None
        x = x.transpose(1, 0, 2)
        B, T = T, B
    blocked = np.zeros((B, T, T), dtype=bool)
    kp = np.zeros((B, T), dtype=bool) if case["key_padding"] is None else case["key_padding"]
    causal = bool(case["causal"])
    if blocked_fn is None:
        blocked = blocked | kp[:, None, :] | (triu(T, T) if causal else False)
    else:
        blocked = blocked_fn(kp, causal, T)
        if blocked is None:
            return None
        blocked = np.broadcast_to(blocked, (B, T, T))
    weights = (case["in_proj_weight"], case["in_proj_bias"], case["out_proj_weight"], case["out_proj_bias"])
    y = mha_ref(x, weights, case["n_heads"], blocked)
    return y.transpose(1, 0, 2) if transpose_x else y


def _pad(kp):
    return kp[:, None, :]


def _fwd_bug(when, blocked_fn):
    return lambda c: _forward_ref(c, blocked_fn) if when(c) else None


def _y_to_torch(c):
    b_in = _cat(c, "qkv", key="_bias") if c["bias"] else None
    return mha_ref(c["x"], (_cat(c, "qkv"), b_in, c["W_o"], c["W_o_bias"]), c["n_heads"])


CASES, ANSWERS = graded({
    "sdpa_attention": (_sdpa_cases, {
        "ref": sdpa_ref,
        "weights": lambda c: attention_ref(c["q"], c["k"], c["v"])[1],
        "flip_tril": _with_blocked(lambda m, c, causal: ~m | c if causal else ~m),    # allowed = mask & tril
        "flip_or": _with_blocked(lambda m, c, causal: ~(m | c) if causal else ~m),    # allowed = mask | triu1
        "mask_only": _with_blocked(lambda m, c, causal: m if causal else None),
        "causal_only": _with_blocked(lambda m, c, causal: c if causal else None),
        "float_mask": _float_mask(+1),
        "float_mask_inverted": _float_mask(-1),
        "causal_lower": _causal_variant(lambda T, S: np.tril(np.ones((T, S), dtype=bool), -1)),
        "causal_diagonal0": _causal_variant(lambda T, S: np.triu(np.ones((T, S), dtype=bool), 0)),
        "scale_dk": lambda c: attention_ref(c["q"], c["k"], c["v"], _sdpa_blocked(c), scale=1.0 / c["q"].shape[-1])[0],
    }),
    "decode_step": (_decode_cases, {
        "ref": _decode(),
        "first_key": _decode(slice(0, 1)),
        "no_last_key": lambda c: _decode(slice(0, -1))(c) if c["k_cache"].shape[-2] > 1 else np.zeros(c["q_new"].shape),
        "last_key": _decode(slice(-1, None)),
        "scale_dk": lambda c: _decode(scale=1.0 / c["q_new"].shape[-1])(c),
        "no_scale": _decode(scale=1.0),
    }),
    "to_torch_mha": (_to_torch_cases, {
        "in_proj_weight": lambda c: _cat(c, "qkv"),
        "in_proj_bias": lambda c: _cat(c, "qkv", key="_bias"),
        **{f"layout_{order}_{tr}": (lambda c, order=order, tr=tr: _cat(c, order, tr))
           for order in ("qkv", "kqv", "qvk", "vqk", "kvq", "vkq") for tr in (False, True)},
        "y": _y_to_torch,
    }),
    "torch_mha_forward": (_forward_cases, {
        "ref": _forward_ref,
        "padding_inverted": _fwd_bug(lambda c: c["key_padding"] is not None,
                                     lambda kp, causal, T: _pad(~kp) | (triu(T) if causal else False)),
        "padding_ignored": _fwd_bug(lambda c: c["key_padding"] is not None,
                                    lambda kp, causal, T: triu(T) if causal else np.zeros((T, T), bool)),
        "causal_ignored": _fwd_bug(lambda c: c["causal"], lambda kp, causal, T: _pad(kp)),
        "causal_tril": _fwd_bug(lambda c: c["causal"], lambda kp, causal, T: _pad(kp) | np.tril(np.ones((T, T), dtype=bool))),
        "causal_diagonal0": _fwd_bug(lambda c: c["causal"], lambda kp, causal, T: _pad(kp) | triu(T, k=0)),
        "transposed_x": lambda c: _forward_ref(c, transpose_x=True),
    }),
})
