"""Cases of notebook 03: plain data the student's code runs on (grader side; travels to the kernel as data)."""
import numpy as np

from .seeding import rng


def _left_pad(lengths, T):
    pos = np.arange(T)
    return pos[None, :] < (T - np.asarray(lengths))[:, None]


def _right_pad(lengths, T):
    pos = np.arange(T)
    return pos[None, :] >= np.asarray(lengths)[:, None]


def _causal_cases(seed, hidden):
    if not hidden:
        return [
            {"stage": "T=1：唯一的 query 必须能看到自己", "T": 1},
            {"stage": "T=2：只屏蔽右上角一个位置", "T": 2},
            {"stage": "T=4：严格上三角", "T": 4},
        ]
    g = rng(seed, "causal_mask")
    return [{"stage": f"T={T}", "T": int(T)} for T in (3, 7, int(g.integers(10, 20)), 33)]


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


CASES = {
    "causal_mask": _causal_cases,
    "padding_mask": _padding_cases,
    "attention_mask": _attention_mask_cases,
    "masked_softmax": _masked_softmax_cases,
    "leftpad_safe": _leftpad_cases,
}
