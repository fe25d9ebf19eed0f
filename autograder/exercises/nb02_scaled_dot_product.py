"""Notebook 02 (§2) on the grader's side: its cases and its answer key, one exercise next to the other.

Cases: plain data the student's code runs on, made from the run's seed (they travel to the kernel as data).
Answers: float64 references with switches that reproduce the known bugs.
"""
import math

import numpy as np
from w1d1_student.case_inputs import make_f

from .references import naive_softmax, softmax, swap
from .seeding import graded, rng, with_defaults

# ------------------------------------------------------------ cases

def _causal(T, S=None):
    S = T if S is None else S
    return np.triu(np.ones((T, S), dtype=bool), 1 + S - T)


def _random_mask(g, shape, p=0.4, dead_keys=()):
    """A bool mask (True = blocked) leaving every query at least one key; `dead_keys` columns
    are blocked for every query (their dK/dV rows must come back exactly 0)."""
    m = g.random(shape) < p
    for j in dead_keys:
        m[..., j] = True
    S = shape[-1]
    alive = [j for j in range(S) if j not in dead_keys]
    rows = m.reshape(-1, S)
    for r in rows:
        if r.all():
            r[g.choice(alive)] = False
    return rows.reshape(shape)


def _qkv(g, batch, sizes, scale=1.0):
    """Q, K, V of batch shape `batch`; sizes = (T, S, d_k, d_v)."""
    T, S, d_k, d_v = sizes
    return {"Q": g.normal(size=(*batch, T, d_k)) * scale, "K": g.normal(size=(*batch, S, d_k)),
            "V": g.normal(size=(*batch, S, d_v))}


def _large_row(qkv, score=2000.0):
    """Query 0 turned towards key 0 so that its scaled score on key 0 is `score` (exp overflows in that row,
    whatever the seed); the other queries are left as drawn."""
    K0 = qkv["K"][..., :1, :]
    qkv["Q"][..., :1, :] = score * np.sqrt(K0.shape[-1]) * K0 / np.sum(K0 * K0, axis=-1, keepdims=True)
    return qkv


def _pad_mask(lengths, S):
    """(B,1,S): True at key positions j >= length (right padding)."""
    return (np.arange(S)[None, :] >= np.asarray(lengths)[:, None])[:, None, :]


def _forward_cases(seed, hidden, salt):
    g = rng(seed, salt + str(hidden))
    if not hidden:
        return [
            {"stage": "形状：T=S=3, d_k=4, d_v=2，无掩码", **_qkv(g, (), (3, 3, 4, 2)), "mask": None},
            {"stage": "T=S=1：只有一个 key，A=[[1]]，只剩值通路 Y=V", **_qkv(g, (), (1, 1, 3, 2)), "mask": None},
            {"stage": "因果掩码 T=S=4：query 0 只能看 key 0，y_0 = v_0", **_qkv(g, (), (4, 4, 3, 3)),
             "mask": _causal(4)},
            {"stage": "d_k=8 ≠ d_v=3，T=3 ≠ S=5：缩放用 √d_k", **_qkv(g, (), (3, 5, 8, 3)), "mask": None},
            {"stage": "批维 (2,)，T=3 ≠ S=4，因果掩码 (T,S) 广播到批维：转置只交换最后两维（swapaxes，不是 .T）",
             **_qkv(g, (2,), (3, 4, 5, 2)), "mask": _causal(3, 4), "batch": True},
            {"stage": "大分数：query 0 对 key 0 的分数是 2000（exp 会溢出），softmax 要先减去行最大值",
             **_large_row(_qkv(g, (), (3, 4, 4, 2))), "mask": None},
        ]
    return [
        {"stage": "批维 (2,3)，T=4 ≠ S=6，d_k=5，d_v=2，无掩码", **_qkv(g, (2, 3), (4, 6, 5, 2)), "mask": None, "batch": True},
        {"stage": "批维 (2,)，T=S=5，因果掩码 (T,S) 广播到批维", **_qkv(g, (2,), (5, 5, 4, 3)), "mask": _causal(5),
         "batch": True},
        {"stage": "padding 掩码 (B,1,S)：B=3，T=4 ≠ S=6，长度 [6,3,1]", **_qkv(g, (3,), (4, 6, 3, 4)),
         "mask": _pad_mask([6, 3, 1], 6), "batch": True},
        {"stage": "随机掩码 (2,3,T,S)，T=5，S=7，每个 query 至少留一个 key", **_qkv(g, (2, 3), (5, 7, 4, 3)),
         "mask": _random_mask(g, (2, 3, 5, 7), dead_keys=(2,)), "batch": True},
        {"stage": "大分数（Q 放大 30 倍，query 0 对 key 0 的分数是 2000）：softmax 必须数值稳定",
         **_large_row(_qkv(g, (2,), (6, 6, 8, 3), scale=30.0)), "mask": _causal(6), "batch": True},
    ]


def LARGE(g):
    """A hidden case with ~7·10⁴ inputs: a backward derived by hand costs about a forward (well under a second;
    about two written as a softmax Jacobian per query row), numerical differentiation a forward per input (central
    differences, complex step), far past the kernel's time limit per cell, which then costs that check only
    (bench/numerical_backward.py measures each)."""
    case = {"stage": "大规模：批维 (2,)，T=S=768，d_k=d_v=16，无掩码：手推的反向和前向差不多快，数值微分（每个输入一次前向）来不及",
            **_qkv(g, (2,), (768, 768, 16, 16)), "mask": None, "batch": True}
    case["dY"] = g.normal(size=case["V"].shape)
    return case


def _backward_cases(seed, hidden, salt):
    cases = _forward_cases(seed, hidden, salt)
    g = rng(seed, salt + "_dY" + str(hidden))
    for c in cases:
        c["dY"] = g.normal(size=c["V"].shape[:-2] + (c["Q"].shape[-2], c["V"].shape[-1]))
        if c["mask"] is not None:
            full = np.broadcast_to(c["mask"], c["Q"].shape[:-1] + (c["K"].shape[-2],))
            c["dead_keys"] = full.all(axis=-2)  # (..., S): keys no query may see
    if not hidden:
        cases[2]["stage"] = "因果掩码 T=S=4：y_0 = v_0 与 q_0 无关，所以 dQ 的第 0 行为 0"
        cases[1]["stage"] = "T=S=1：只剩值通路，dV = dY，dQ = dK = 0"
        pad = {"stage": "padding：最后两个 key 是 pad，谁也看不到，dK、dV 的这两行必须恰为 0",
               **_qkv(g, (), (3, 5, 4, 2)), "mask": _pad_mask([3], 5)[0]}
        pad["dY"] = g.normal(size=(3, 2))
        pad["dead_keys"] = np.broadcast_to(pad["mask"], (3, 5)).all(axis=-2)
        cases.append(pad)
    else:
        cases.append(LARGE(rng(seed, salt + "_large")))
    return cases


def _numgrad_cases(seed, hidden, salt):
    g = rng(seed, salt + str(hidden))
    if not hidden:
        return [
            {"stage": "一维 x (4,)：f = Σ c·x³ + Σ x_i x_{i+1}", "kind": "cubic", "eps": None,
             "x": g.normal(size=4) * 2, "params": {"c": g.normal(size=4)}},
            {"stage": "二维 x (3,4)：f = Σ C⊙tanh(xW)", "kind": "tanh", "eps": None, "x": g.normal(size=(3, 4)),
             "params": {"W": g.normal(size=(4, 5)), "C": g.normal(size=(3, 5))}},
            {"stage": "传入 eps=1e-2：必须用这个 eps 做中心差分", "kind": "exp", "eps": 1e-2,
             "x": g.normal(size=(2, 3)), "params": {"c": g.normal(size=(2, 3)), "a": 3.0}},
        ]
    n = 2 * 3 * 2
    M = g.normal(size=(n, n))
    return [
        {"stage": "三维 x (2,3,2)：二次型加耦合项", "kind": "quad", "eps": None, "x": g.normal(size=(2, 3, 2)),
         "params": {"M": M + M.T, "b": g.normal(size=n)}},
        {"stage": "大曲率的三次函数 (5,)，x 量级 3", "kind": "cubic", "eps": None, "x": g.normal(size=5) * 3,
         "params": {"c": g.normal(size=5) * 5}},
        {"stage": "eps=1e-3，二维 (2,2)", "kind": "exp", "eps": 1e-3, "x": g.normal(size=(2, 2)),
         "params": {"c": g.normal(size=(2, 2)), "a": 4.0}},
        {"stage": "二维 x (4,3)：tanh", "kind": "tanh", "eps": None, "x": g.normal(size=(4, 3)),
         "params": {"W": g.normal(size=(3, 2)) * 2, "C": g.normal(size=(4, 2))}},
    ]


def _function_cases(seed, hidden, salt):
    cases = _backward_cases(seed, hidden, "attention_backward")  # attention_backward's own cases, dY included
    for c in cases:
        c["dtype"] = "float64"
        c["gradcheck"] = False
    g = rng(seed, salt + str(hidden))
    if not hidden:
        small = {"stage": "gradcheck（float64，T=S=3，因果掩码）", **_qkv(g, (), (3, 3, 2, 2)), "mask": _causal(3),
                 "dtype": "float64", "gradcheck": True}
        small["dY"] = g.normal(size=(3, 2))
        f32 = {"stage": "float32 输入：输出和梯度都保持 float32", **_qkv(g, (2,), (4, 4, 4, 3)), "mask": _causal(4),
               "dtype": "float32", "gradcheck": False}
        f32["dY"] = g.normal(size=(2, 4, 3))
        return [cases[0], cases[2], cases[-1], small, f32]  # the padding case is the last one
    small = {"stage": "gradcheck（float64，批维 (2,)，T=2 ≠ S=3，padding 掩码）", **_qkv(g, (2,), (2, 3, 2, 2)),
             "mask": _pad_mask([3, 2], 3), "dtype": "float64", "gradcheck": True}
    small["dY"] = g.normal(size=(2, 2, 2))
    f32 = {"stage": "float32，批维 (2,2)，随机掩码", **_qkv(g, (2, 2), (3, 5, 4, 2)),
           "mask": _random_mask(g, (2, 2, 3, 5)), "dtype": "float32", "gradcheck": False}
    f32["dY"] = g.normal(size=(2, 2, 3, 2))
    return [cases[0], cases[1], cases[2], cases[3], small, f32, cases[-1]]  # the last: LARGE


def _init_cases(seed, hidden, salt):
    g = rng(seed, salt + str(hidden))
    if not hidden:
        return [
            {"stage": "正文 §2.1：d=512，b=1/√512，输入方差 1", "d": 512, "weight_bound": 1 / np.sqrt(512),
             "input_var": None},
            {"stage": "d=128，b=0.1，输入方差 1", "d": 128, "weight_bound": 0.1, "input_var": None},
            {"stage": "d=256，b=1/16，输入方差 2", "d": 256, "weight_bound": 1 / 16, "input_var": 2.0},
        ]
    cases = [{"stage": "d=64，b=1/8，输入方差 0.5", "d": 64, "weight_bound": 0.125, "input_var": 0.5},
             {"stage": "d=1024，b=0.02，输入方差 1", "d": 1024, "weight_bound": 0.02, "input_var": 1.0}]
    for _ in range(3):
        d = int(g.choice([32, 96, 768, 4096]))
        cases.append({"stage": f"随机：d={d}", "d": d, "weight_bound": float(g.uniform(0.01, 0.3)),
                      "input_var": float(g.uniform(0.2, 4.0))})
    return cases


# ------------------------------------------------------------ answers

FORWARD_RIGHT = {"scale": None, "axis": -1, "mask_mode": "before", "stable": True}


def forward_ref(Q, K, V, mask=None, **bug):
    """Y, A of softmax(s Q Kᵀ + mask) V; `bug` sets what differs from FORWARD_RIGHT: scale (None: 1/√d_k), the softmax
    axis, mask_mode (before: correct; after: zeroed after softmax; inverted: -inf; inverted_finite; zero; none),
    stable=False: the softmax without the row maximum subtracted."""
    scale, axis, mask_mode, stable = with_defaults(bug, FORWARD_RIGHT).values()
    s = 1.0 / math.sqrt(Q.shape[-1]) if scale is None else scale
    S = s * (Q @ swap(K))
    if mask is not None:
        if mask_mode == "before":
            S = np.where(mask, -np.inf, S)
        elif mask_mode == "inverted":
            S = np.where(mask, S, -np.inf)
        elif mask_mode == "inverted_finite":
            S = np.where(mask, S, -1e30)
        elif mask_mode == "zero":
            S = np.where(mask, 0.0, S)
    A = softmax(S, axis=axis) if stable else naive_softmax(S, axis=axis)
    if mask is not None and mask_mode == "after":
        A = np.where(mask, 0.0, A)
    return A @ V, A


def backward_ref(Q, K, V, mask, dY, bug=None):
    """dQ, dK, dV of sum(Y * dY) by the five lines of §2.3; `bug` reproduces one mistake."""
    s = 1.0 / math.sqrt(Q.shape[-1])
    Y, A = forward_ref(Q, K, V, mask)
    if bug == "unmasked":  # backward recomputes softmax without the mask
        Y, A = forward_ref(Q, K, V, None)
    dV = (A @ dY) if bug == "dV_noT" else swap(A) @ dY
    dA = dY @ swap(V)
    if bug == "noD":
        D = 0.0
    elif bug == "D_axis":
        D = (dA * A).sum(axis=-2, keepdims=True)
    elif bug == "D_nokeep":
        D = np.expand_dims((dY * Y).sum(axis=-1), -2)
    else:
        D = (dY * Y).sum(axis=-1, keepdims=True)
    dS = A * (dA - D)
    t = 1.0 if bug == "noscale" else s
    dQ = t * (dS @ K)
    dK = t * (swap(dS) @ Q)
    if bug == "dK_noT":
        dK = s * (dS @ Q)
    elif bug == "swapQK":
        dQ, dK = s * (swap(dS) @ K), s * (dS @ Q)
    elif bug == "dK_s2":
        dK = s * dK
    return {"dQ": dQ, "dK": dK, "dV": dV, "Y": Y}


def autograd_grads(c):
    """dQ, dK, dV of sum(Y * dY) by torch autograd in float64: an independent second reference."""
    import torch

    q, k, v = (torch.tensor(c[n], dtype=torch.float64, requires_grad=True) for n in ("Q", "K", "V"))
    scores = q @ k.transpose(-2, -1) / math.sqrt(c["Q"].shape[-1])
    if c["mask"] is not None:
        scores = scores.masked_fill(torch.as_tensor(np.asarray(c["mask"], dtype=bool)), float("-inf"))
    y = torch.softmax(scores, dim=-1) @ v
    dq, dk, dv = torch.autograd.grad((y * torch.tensor(c["dY"])).sum(), (q, k, v))
    return {"dQ": dq.numpy(), "dK": dk.numpy(), "dV": dv.numpy()}


FD_MAX_ENTRIES = 240


def finite_difference_grads(c, eps=1e-6):
    """Central differences of sum(Y * dY) w.r.t. every entry of Q, K, V (None on large cases)."""
    if sum(np.size(c[n]) for n in ("Q", "K", "V")) > FD_MAX_ENTRIES:
        return None
    grads = {}
    for name in ("Q", "K", "V"):
        x = np.array(c[name], dtype=np.float64)
        g = np.zeros_like(x)
        for idx in np.ndindex(x.shape):
            old = x[idx]
            vals = []
            for sign in (1, -1):
                x[idx] = old + sign * eps
                args = {**c, name: x}
                vals.append(float(np.sum(forward_ref(args["Q"], args["K"], args["V"], c["mask"])[0] * c["dY"])))
            x[idx] = old
            g[idx] = (vals[0] - vals[1]) / (2 * eps)
        grads["d" + name] = g
    return grads


def central(case, *, eps=None, mode="central", restore=True):
    f = make_f(case)
    e = case["eps"] if eps is None else eps
    e = 1e-6 if e is None else e
    x = case["x"].astype(np.float64).copy()
    g = np.zeros_like(x)
    for idx in np.ndindex(*x.shape):
        old = x[idx]
        x[idx] = old + e
        fp = f(x)
        x[idx] = old - e
        fm = f(x)
        if restore:
            x[idx] = old
        f0 = f(x) if restore else None
        if mode == "central":
            g[idx] = (fp - fm) / (2 * e)
        elif mode == "forward":
            g[idx] = (fp - f0) / e
        elif mode == "backward":
            g[idx] = (f0 - fm) / e
        elif mode == "half":
            g[idx] = (fp - fm) / e
    return g


def _fwd(**kw):
    return lambda c: {"Y": forward_ref(c["Q"], c["K"], c["V"], c["mask"], **kw)[0]}


def _fwd_naive(c):
    """The unstable softmax's output, only where it differs from the stable one (large scores): elsewhere the
    case cannot tell the bug, and a near miss must not be blamed on it."""
    naive, stable = _fwd(stable=False)(c)["Y"], _fwd()(c)["Y"]
    return None if np.allclose(naive, stable, rtol=1e-9, atol=1e-12, equal_nan=True) else {"Y": naive}


def _bwd(bug=None):
    return lambda c: backward_ref(c["Q"], c["K"], c["V"], c["mask"], c["dY"], bug)


FORWARD = {
    "fwd": _fwd(),
    "fwd_no_scale": _fwd(scale=1.0),
    "fwd_scale_dk": lambda c: _fwd(scale=1.0 / c["Q"].shape[-1])(c),
    "fwd_scale_dv": lambda c: _fwd(scale=1.0 / math.sqrt(c["V"].shape[-1]))(c),
    "fwd_axis": _fwd(axis=-2),
    "fwd_naive": _fwd_naive,
    **{f"fwd_mask_{name}": _fwd(mask_mode=mode) for name, mode in (
        ("after_softmax", "after"), ("inverted", "inverted"), ("inverted_finite", "inverted_finite"),
        ("zero", "zero"), ("ignored", "none"))},
}
BACKWARD = {"bwd": _bwd(), **{f"bwd_{bug}": _bwd(bug) for bug in (
    "noD", "D_axis", "D_nokeep", "dK_noT", "swapQK", "dV_noT", "noscale", "dK_s2", "unmasked")}}


def _init(fn):
    return lambda c: {"std": np.float64(fn(c["d"], c["weight_bound"], 1.0 if c["input_var"] is None else c["input_var"]))}


CASES, ANSWERS = graded({
    "attention_forward": (_forward_cases, FORWARD),
    "attention_backward": (_backward_cases, {**FORWARD, **BACKWARD, "autograd": autograd_grads,
                                             "finite_differences": finite_difference_grads}),
    "numerical_gradient": (_numgrad_cases, {
        "central": central,
        "forward": lambda c: central(c, mode="forward"),
        "backward": lambda c: central(c, mode="backward"),
        "half": lambda c: central(c, mode="half"),
        "no_restore": lambda c: central(c, restore=False),
        "fixed_eps": lambda c: central(c, eps=1e-6),
    }),
    "attention_function": (_function_cases, {**FORWARD, **BACKWARD}),
    "init_score_std": (_init_cases, {
        # std of q·k/√d_k: Var[q_i] = d·v·b²/3 (same for k_i), Var[score] = Var[q_i]·Var[k_i]
        "init": _init(lambda d, b, v: d * v * b**2 / 3.0),
        "init_var_b2": _init(lambda d, b, v: d * v * b**2),
        "init_var_b2_12": _init(lambda d, b, v: d * v * b**2 / 12),
        "init_variance": _init(lambda d, b, v: (d * v * b**2 / 3) ** 2),
        "init_std_q": _init(lambda d, b, v: math.sqrt(d * v * b**2 / 3)),
        "init_input_std": _init(lambda d, b, v: d * math.sqrt(v) * b**2 / 3),
        "init_unscaled": _init(lambda d, b, v: math.sqrt(d) * d * v * b**2 / 3),
    }),
})
