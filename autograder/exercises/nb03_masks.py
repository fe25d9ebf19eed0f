"""Notebook 03 (§3) on the grader's side: its cases and its answer key, one exercise next to the other.

Cases: plain data the student's code runs on, made from the run's seed (they travel to the kernel as data).
Answers: masks, masked softmax, left padding — references and known bugs.
"""
import numpy as np
from w1d1_student.case_inputs import lp_inputs, ms_inputs

from .references import softmax, triu
from .seeding import graded, rng

# ------------------------------------------------------------ cases

def _left_pad(lengths, T):
    pos = np.arange(T)
    return pos[None, :] < (T - np.asarray(lengths))[:, None]


def _right_pad(lengths, T):
    pos = np.arange(T)
    return pos[None, :] >= np.asarray(lengths)[:, None]


def _causal_cases(seed, hidden, salt):
    if not hidden:
        return [
            {"stage": "T=1：唯一的 query 必须能看到自己", "T": 1},
            {"stage": "T=2：只屏蔽右上角一个位置", "T": 2},
            {"stage": "T=4：严格上三角", "T": 4},
        ]
    g = rng(seed, salt)
    return [{"stage": f"T={T}", "T": int(T)} for T in (3, 7, int(g.integers(10, 20)), 33)]


def _padding_cases(seed, hidden, salt):
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
    g = rng(seed, salt)
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


def _attention_mask_cases(seed, hidden, salt):
    if not hidden:
        return [
            {"stage": "B=1，T=1，没有 pad，causal=True", "kp": np.array([[False]]), "causal": True},
            {"stage": "B=1，T=3，没有 pad，默认 causal（应为 True）", "kp": np.zeros((1, 3), bool), "causal": None},
            {"stage": "右补齐 B=2，T=4，causal=False：只按 key 屏蔽",
             "kp": _right_pad([4, 2], 4), "causal": False},
            {"stage": "右补齐 B=2，T=4，causal=True：因果 ∪ padding",
             "kp": _right_pad([4, 2], 4), "causal": True},
        ]
    g = rng(seed, salt)
    cases = [{"stage": "左补齐 [pad, pad, A, B, C]，causal=True", "kp": _left_pad([3, 5], 5), "causal": True}]
    for causal in (True, False, True):
        B, T = int(g.integers(2, 5)), int(g.integers(4, 10))
        lengths = g.integers(1, T + 1, size=B)
        side = "left" if g.random() < 0.5 else "right"
        kp = _left_pad(lengths, T) if side == "left" else _right_pad(lengths, T)
        cases.append({"stage": f"随机 {side} 补齐，B={B}，T={T}，causal={causal}", "kp": kp, "causal": causal})
    return cases


def _ms_case(g, stage, shape, mask, dtype, scale=2.0):
    return {"stage": stage, "scores": g.normal(size=shape) * scale, "mask": np.asarray(mask, bool),
            "g": g.normal(size=shape), "dtype": dtype}


def _causal(T, S=None):
    S = T if S is None else S
    return np.triu(np.ones((T, S), bool), k=1)


def _masked_softmax_cases(seed, hidden, salt):
    g = rng(seed, salt + str(hidden))
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


def _lp_case(g, stage, lengths, size, dtype, pad_upstream="zero"):
    """One left-padded case; size = (T, d)."""
    (T, d), B = size, len(lengths)
    kp = _left_pad(lengths, T)
    gy = g.normal(size=(B, T, d))
    if pad_upstream == "zero":
        gy[kp] = 0.0
    return {"stage": stage, "q": g.normal(size=(B, T, d)), "k": g.normal(size=(B, T, d)),
            "v": g.normal(size=(B, T, d)), "kp": kp, "gy": gy, "dtype": dtype, "pad_upstream": pad_upstream}


def _leftpad_cases(seed, hidden, salt):
    g = rng(seed, salt + str(hidden))
    if not hidden:
        return [
            _lp_case(g, "B=1，T=3，没有 pad：就是普通的因果注意力（float64）", [3], (3, 2), "float64"),
            _lp_case(g, "左补齐 [pad, pad, A, B, C] 与一个满长样本（float64），pad 行的上游梯度为 0",
                     [3, 5], (5, 4), "float64"),
            _lp_case(g, "左补齐 B=3，T=6，lengths=[6, 2, 4]（float32），pad 行的上游梯度为 0",
                     [6, 2, 4], (6, 8), "float32"),
        ]
    return [
        _lp_case(g, "pad 行的上游梯度不为 0：输出和梯度仍须处处有限（float64）", [2, 4, 1], (4, 3), "float64",
                 pad_upstream="random"),
        _lp_case(g, "只有最后一个位置是真实 token（float32）", [1, 7], (7, 4), "float32"),
        _lp_case(g, "整条样本都是 pad（长度 0）（float64）：仍须有限", [0, 5], (5, 4), "float64"),
        _lp_case(g, "随机长度 B=4，T=9，d=16（float32），pad 行上游梯度不为 0", [9, 3, 6, 1], (9, 16), "float32",
                 pad_upstream="random"),
        _lp_case(g, "随机长度 B=4，T=9，d=16（float64）", list(g.integers(1, 10, size=4)), (9, 16), "float64"),
    ]


# ------------------------------------------------------------ answers

def causal(T, diagonal=1):
    return triu(T, k=diagonal)


def padding(lengths, T, side="right"):
    pos = np.arange(T)[None, :]
    lengths = np.asarray(lengths)[:, None]
    return pos >= lengths if side == "right" else pos < T - lengths


def attention_mask(kp, causal_flag=True, *, axis="key", op="or", diagonal=1):
    B, T = kp.shape
    pad = {"key": kp[:, None, None, :], "query": kp[:, None, :, None],
           "both": kp[:, None, None, :] | kp[:, None, :, None]}[axis]
    if not causal_flag:
        return np.broadcast_to(pad, (B, 1, T, T)).copy()
    c = causal(T, diagonal)
    return np.broadcast_to(pad | c if op == "or" else pad & c, (B, 1, T, T)).copy()


def softmax_masked(s, m, axis=-1, empty="zero"):
    """Masked softmax along `axis` in float64; fully blocked slices give 0, NaN or uniform."""
    z = np.where(m, -np.inf, s)
    blocked = m.all(axis=axis, keepdims=True)
    mx = np.where(blocked, 0.0, np.max(z, axis=axis, keepdims=True))
    e = np.exp(z - mx)
    p = e / np.where(blocked, 1.0, e.sum(axis=axis, keepdims=True))
    if empty == "nan":
        p = np.where(blocked, np.nan, p)
    elif empty == "uniform":
        p = np.where(blocked, 1.0 / s.shape[axis], p)
    return p


def masked_softmax_ref(c):
    s, m = ms_inputs(c)
    p = softmax_masked(s, m)
    g = c["g"]
    return {"p": p, "grad": p * (g - (p * g).sum(-1, keepdims=True))}


def lp_mask(kp, T):
    return causal(T)[None] | kp[:, None, :]


def lp_attention(c, mask_fn=lp_mask, after=False, scale=True):
    """Batched attention weights in float64; the verdict table never looks at pad query rows of the output."""
    q, k, _, kp, _ = lp_inputs(c)
    mask = mask_fn(kp, q.shape[1])
    S = q @ np.swapaxes(k, 1, 2) / (np.sqrt(q.shape[-1]) if scale else 1.0)
    return softmax(S) * ~mask if after else softmax_masked(S, mask)


def leftpad_ref(c):
    q, k, v, kp, gy = lp_inputs(c)
    A = lp_attention(c)
    y = A @ v
    dy = np.where(kp[..., None], 0.0, gy)
    s = 1.0 / np.sqrt(q.shape[-1])
    dA = dy @ np.swapaxes(v, 1, 2)
    dS = A * (dA - (dy * y).sum(-1, keepdims=True))
    return {"y": y, "dq": s * dS @ k, "dk": s * np.swapaxes(dS, 1, 2) @ q, "dv": np.swapaxes(A, 1, 2) @ dy}


def _lp_bug(**kw):
    return lambda c: {"y": lp_attention(c, **kw) @ lp_inputs(c)[2]}


def _side(c):
    return c["side"] or "right"


def _pad(f):
    return lambda c: {"m": f(c["lengths"], c["T"], c)}


def _am(**kw):
    return lambda c: {"m": attention_mask(c["kp"], True if c["causal"] is None else c["causal"], **kw)}


def _am_causal(flag):
    return lambda c: {"m": attention_mask(c["kp"], flag(True if c["causal"] is None else c["causal"], c))}


def _ms(f):
    return lambda c: {"p": f(*ms_inputs(c))}


CASES, ANSWERS = graded({
    "causal_mask": (_causal_cases, {
        "ref": lambda c: {"m": causal(c["T"])},
        "diagonal0": lambda c: {"m": causal(c["T"], 0)},
        "inverted": lambda c: {"m": ~causal(c["T"])},
        "lower": lambda c: {"m": causal(c["T"]).T.copy()},
        "diagonal2": lambda c: {"m": causal(c["T"], 2)},
    }),
    "padding_mask": (_padding_cases, {
        "ref": _pad(lambda n, T, c: padding(n, T, _side(c))),
        "other_side": _pad(lambda n, T, c: padding(n, T, {"left": "right", "right": "left"}[_side(c)])),
        "always_right": _pad(lambda n, T, c: padding(n, T, "right")),
        "default_left": _pad(lambda n, T, c: padding(n, T, c["side"] or "left")),
        "inverted": _pad(lambda n, T, c: ~padding(n, T, _side(c))),
        "off_by_one": _pad(lambda n, T, c: (np.arange(T)[None, :] > np.asarray(n)[:, None]) if _side(c) == "right"
                           else (np.arange(T)[None, :] <= T - np.asarray(n)[:, None])),
    }),
    "attention_mask": (_attention_mask_cases, {
        "ref": _am(),
        "and": _am(op="and"),
        "query_axis": _am(axis="query"),
        "both_axes": _am(axis="both"),
        "inverted": lambda c: {"m": ~_am()(c)["m"]},
        "diagonal0": _am(diagonal=0),
        "causal_flipped": _am_causal(lambda flag, c: not flag),
        "default_not_causal": _am_causal(lambda flag, c: bool(c["causal"])),
        "never_causal": _am_causal(lambda flag, c: False),
        "always_causal": _am_causal(lambda flag, c: True),
    }),
    "masked_softmax": (_masked_softmax_cases, {
        "ref": masked_softmax_ref,
        "after": _ms(lambda s, m: softmax(s) * ~m),
        "unmasked": _ms(lambda s, m: softmax(s)),
        **{f"inverted_{e}": _ms(lambda s, m, e=e: softmax_masked(s, ~m, empty=e)) for e in ("zero", "uniform", "nan")},
        **{f"axis_{e}": _ms(lambda s, m, e=e: softmax_masked(s, m, axis=-2, empty=e)) for e in ("zero", "nan")},
    }),
    "leftpad_safe": (_leftpad_cases, {
        "ref": leftpad_ref,
        "sees_pad": _lp_bug(mask_fn=lambda kp, T: np.broadcast_to(causal(T), (len(kp), T, T))),
        "and": _lp_bug(mask_fn=lambda kp, T: causal(T)[None] & kp[:, None, :]),
        "not_causal": _lp_bug(mask_fn=lambda kp, T: np.broadcast_to(kp[:, None, :], (len(kp), T, T))),
        "after": _lp_bug(after=True),
        "column0": _lp_bug(mask_fn=lambda kp, T: lp_mask(kp, T) & (np.arange(T) != 0)),
        "no_scale": _lp_bug(scale=False),
        "inverted": _lp_bug(mask_fn=lambda kp, T: ~lp_mask(kp, T)),
    }),
})
