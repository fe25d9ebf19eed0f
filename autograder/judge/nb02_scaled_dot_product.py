"""Answers of notebook 02 (§2): float64 references with switches that reproduce the known bugs."""
import math

import numpy as np
from w1d1_student.drivers.nb02_scaled_dot_product import make_f

from .references import naive_softmax, softmax, swap


def forward_ref(Q, K, V, mask=None, *, scale=None, axis=-1, mask_mode="before", stable=True):
    """Y, A of softmax(s Q Kᵀ + mask) V. mask_mode reproduces mask bugs:
    before (correct), after (zeroed after softmax), inverted (-inf), inverted_finite, zero, none;
    stable=False: the softmax without the row maximum subtracted."""
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


ORACLES = {
    "attention_forward": FORWARD,
    "attention_backward": {**FORWARD, **BACKWARD, "autograd": autograd_grads, "finite_differences": finite_difference_grads},
    "numerical_gradient": {
        "central": central,
        "forward": lambda c: central(c, mode="forward"),
        "backward": lambda c: central(c, mode="backward"),
        "half": lambda c: central(c, mode="half"),
        "no_restore": lambda c: central(c, restore=False),
        "fixed_eps": lambda c: central(c, eps=1e-6),
    },
    "attention_function": {**FORWARD, **BACKWARD},
    "init_score_std": {
        # std of q·k/√d_k: Var[q_i] = d·v·b²/3 (same for k_i), Var[score] = Var[q_i]·Var[k_i]
        "init": _init(lambda d, b, v: d * v * b**2 / 3.0),
        "init_var_b2": _init(lambda d, b, v: d * v * b**2),
        "init_var_b2_12": _init(lambda d, b, v: d * v * b**2 / 12),
        "init_variance": _init(lambda d, b, v: (d * v * b**2 / 3) ** 2),
        "init_std_q": _init(lambda d, b, v: math.sqrt(d * v * b**2 / 3)),
        "init_input_std": _init(lambda d, b, v: d * math.sqrt(v) * b**2 / 3),
        "init_unscaled": _init(lambda d, b, v: math.sqrt(d) * d * v * b**2 / 3),
    },
}
