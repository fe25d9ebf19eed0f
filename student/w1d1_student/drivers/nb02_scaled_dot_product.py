"""Drivers of notebook 02 (§2): attention_forward, attention_backward, numerical_gradient,
attention_function, init_score_std.

Only inputs and the grader-chosen test functions `f` of numerical_gradient live here; the
references are on the judge side.

Both backward exercises are hand-written by the formulas of §2.3: while the student's backward runs
(and, for calls only, the forward that fills its cache), `torch_calls.AutogradUse` watches for autograd
being reached, and the result carries what it saw under "autograd" (judged in the grader process).
attention_backward is called by the driver; AttentionFunction.backward is called by autograd's engine,
so the watch starts in a pre-hook of the output's node and stops in its post-hook, on the thread the
engine runs the node on, around the student's backward only (the driver's own torch.autograd.grad and
gradcheck are outside it). Work moved to a Python thread is reported too (the modes see one thread).
"""
import functools

import numpy as np

from ..case_inputs import make_f
from ..driver import Driver, dtype_name, lookup, to_numpy
from .nb04_multihead import _threads_started
from .torch_calls import AutogradUse


def _args(case):
    mask = None if case["mask"] is None else case["mask"].copy()
    return case["Q"].copy(), case["K"].copy(), case["V"].copy(), mask


def _changed(args, case):
    names = ("Q", "K", "V", "mask")
    return any(a is not None and not np.array_equal(a, case[n]) for a, n in zip(args, names))


def _call_forward(ns, case):
    fn = lookup(ns, "attention_forward")
    args = _args(case)
    out = fn(*args)
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise TypeError(f"attention_forward 应返回 (Y, cache) 两个值，得到 {type(out).__name__}")
    return {"Y": to_numpy(out[0]), "input_changed": _changed(args, case)}


def _watched(use, fn, *args):
    use.start()
    try:
        return fn(*args)
    finally:
        use.stop()


def _make_by_hand(AutogradUse, threads_started):
    """`by_hand(run)`: a driver that calls `run(ns, case, forward, backward)` with two fresh watches (the
    forward's sees calls only) inside the check for started threads, and adds what they saw to the result.
    When the student's code raised after reaching autograd, what it reached is the result. The closure
    holds its own references to the watch, so rebinding this module's names does not switch it off."""

    def report(forward, backward, flags):
        return {"autograd": {"forward": forward.report(), "backward": backward.report()},
                "used_threads": bool(flags.get("used_threads"))}

    def by_hand(run):
        def call(ns, case):
            forward, backward, flags = AutogradUse(graph=False), AutogradUse(), {}
            try:
                with threads_started(flags):
                    out = run(ns, case, forward, backward)
            except Exception:
                seen = report(forward, backward, flags)
                if seen["used_threads"] or any(any(kinds.values()) for kinds in seen["autograd"].values()):
                    return seen  # the use of autograd is the verdict, whatever failed after it
                raise
            return {**out, **report(forward, backward, flags)}

        return call

    return by_hand


by_hand = _make_by_hand(AutogradUse, _threads_started)


def _run_backward(ns, case, forward, backward):
    fwd = lookup(ns, "attention_forward")
    bwd = lookup(ns, "attention_backward")
    args = _args(case)
    out = _watched(forward, fwd, *args)
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise TypeError(f"attention_forward 应返回 (Y, cache) 两个值，得到 {type(out).__name__}")
    Y, cache = out
    dY = case["dY"].copy()
    grads = _watched(backward, bwd, dY, cache)
    if not isinstance(grads, (tuple, list)) or len(grads) != 3:
        raise TypeError(f"attention_backward 应返回 (dQ, dK, dV) 三个值，得到 {type(grads).__name__}")
    res = {"Y": to_numpy(Y), "dQ": to_numpy(grads[0]), "dK": to_numpy(grads[1]), "dV": to_numpy(grads[2]),
           "input_changed": _changed(args, case) or not np.array_equal(dY, case["dY"])}
    return res


def _call_numgrad(ns, case):
    fn = lookup(ns, "numerical_gradient")
    f = make_f(case)
    x = case["x"].copy()
    out = fn(f, x) if case["eps"] is None else fn(f, x, eps=case["eps"])
    changed = not np.array_equal(x, case["x"])
    return {"grad": to_numpy(out), "input_changed": changed,
            "input_rounded": changed and np.shape(x) == case["x"].shape and bool(np.allclose(x, case["x"], rtol=1e-12, atol=0))}


def _watching_backward(use):
    """`hook(y)`: the class's backward, when autograd's engine runs y's node, runs watched by `use`."""

    def pre(grad_outputs):
        use.start()

    def post(grad_inputs, grad_outputs):
        use.stop()

    def hook(y):
        node = getattr(y, "grad_fn", None)
        if node is not None:
            node.register_prehook(pre)
            node.register_hook(post)
        return y

    return hook


def _run_function(ns, case, forward, backward):
    """Calls torch's own Function.apply on the class (an overridden `apply` is not used) and reports
    whether the output's grad_fn is the class's own node, so the backward that runs is the student's;
    the class's forward runs watched by `forward`, its backward by `backward` (module docstring)."""
    import torch

    hook = _watching_backward(backward)
    cls = lookup(ns, "AttentionFunction")
    if not (isinstance(cls, type) and issubclass(cls, torch.autograd.Function)):
        raise TypeError(f"AttentionFunction 应继承 torch.autograd.Function，得到 {cls!r}")
    base_apply = torch.autograd.Function.__dict__["apply"].__func__
    if getattr(cls.apply, "__func__", None) is not base_apply:
        return {"apply_overridden": True}
    plain = functools.partial(base_apply, cls)  # torch's own apply: the class's forward and backward run

    def apply(*args):
        return hook(_watched(forward, plain, *args))

    dt = {"float64": torch.float64, "float32": torch.float32}[case["dtype"]]
    q, k, v = (torch.tensor(case[n], dtype=dt, requires_grad=True) for n in ("Q", "K", "V"))
    mask = None if case["mask"] is None else torch.tensor(case["mask"], dtype=torch.bool)
    y = apply(q, k, v, mask)
    if getattr(type(y.grad_fn), "_forward_cls", None) is not cls:
        return {"apply_overridden": False, "own_node": False}
    dy = torch.tensor(case["dY"], dtype=dt)
    dq, dk, dv = torch.autograd.grad(y, (q, k, v), dy)
    out = {"Y": to_numpy(y), "dQ": to_numpy(dq), "dK": to_numpy(dk), "dV": to_numpy(dv),
           "Y_dtype": dtype_name(y), "dQ_dtype": dtype_name(dq), "dK_dtype": dtype_name(dk),
           "dV_dtype": dtype_name(dv), "apply_overridden": False, "own_node": True}
    if case["gradcheck"]:
        inputs = tuple(t.detach().clone().requires_grad_(True) for t in (q, k, v)) + (mask,)
        ok = torch.autograd.gradcheck(apply, inputs, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=False)
        out["gradcheck"] = bool(ok)
    return out


def _call_init(ns, case):
    fn = lookup(ns, "init_score_std")
    if case["input_var"] is None:
        out = fn(case["d"], case["weight_bound"])
    else:
        out = fn(case["d"], case["weight_bound"], case["input_var"])
    is_number = isinstance(out, (int, float, np.floating, np.integer)) and not isinstance(out, bool)
    is_number = is_number or (isinstance(out, np.ndarray) and out.shape == () and out.dtype.kind in "iuf")
    return {"std": to_numpy(out), "is_number": is_number}


DRIVERS = {
    "attention_forward": Driver(("attention_forward",), _call_forward),
    "attention_backward": Driver(("attention_backward",), by_hand(_run_backward)),
    "numerical_gradient": Driver(("numerical_gradient",), _call_numgrad),
    "attention_function": Driver(("AttentionFunction",), by_hand(_run_function)),
    "init_score_std": Driver(("init_score_std",), _call_init),
}
