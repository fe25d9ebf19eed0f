"""Exercises of notebook 02 (§2): attention_forward, attention_backward, numerical_gradient,
attention_function, init_score_std.

Only inputs and the grader-chosen test functions `f` of numerical_gradient live here; the
references are on the grader side (autograder/exercises/).

Both backward exercises are hand-written by the formulas of §2.3: `torch_calls.AutogradUse` watches for
autograd being reached for the whole of each case, from before the student's forward until the outputs are
plain data, so that whatever runs meanwhile (the student's functions, hooks and callbacks autograd's engine
runs, finalizers) runs watched; the driver reads returned values by their exact type only (driver.py), so no
method of a returned object runs at all. The result carries what the watch saw under "autograd", by part
("forward": the student's forward filling what the backward uses; "backward": the rest), judged in the
grader process. attention_function's driver runs autograd itself (torch.autograd.grad on the class's output,
gradcheck): that is the grader's own, the class's backward and every hook in it the student's (AutogradUse).
A thread other than the kernel's alive or started during a case is reported too (the modes see one
thread), and torch.fx's code run on the checking thread (an autograd-made graph traced at cell time) as autograd.

Verdicts: tables for the engine's one loop, with the checks only these exercises have.
"""
import functools

import numpy as np

from ..case_inputs import make_f
from ..driver import Driver, dtype_name, is_tensor, items, lookup, to_numpy, type_name
from ..engine import MASK_MESSAGES, Named, Output, VerdictTable, bug_table, compare, fail, fmt, known, shown_only_public
from ..torch_calls import AutogradUse, threads_started

NOTEBOOK = "02_scaled_dot_product"


# attention_forward ───────────────────────────────────────────────────────────

def _args(case):
    mask = None if case["mask"] is None else case["mask"].copy()
    return case["Q"].copy(), case["K"].copy(), case["V"].copy(), mask


def _changed(args, case):
    names = ("Q", "K", "V", "mask")
    return any(a is not None and not np.array_equal(a, case[n]) for a, n in zip(args, names))


FORWARD_RETURNS = "attention_forward 应返回 (Y, cache) 两个值"


def _call_forward(ns, case):
    fn = lookup(ns, "attention_forward")
    args = _args(case)
    Y, _ = items(fn(*args), 2, FORWARD_RETURNS)
    return {"Y": to_numpy(Y), "input_changed": _changed(args, case)}


FORWARD_BUGS = [
    ("缺少缩放：分数 QKᵀ 要乘以 1/√d_k。", known("fwd_no_scale")),
    ("除以了 d_k 而不是 √d_k。", known("fwd_scale_dk")),
    ("缩放用错了维度：应除以 √d_k（Q、K 的最后一维），不是 √d_v（V 的最后一维）。", known("fwd_scale_dv")),
    ("softmax 的方向不对：每个 query 的一行（对 key 那一维，axis=-1）归一化。", known("fwd_axis")),
    ("softmax 数值不稳定：exp 之前没有减去每行的最大值。分数上千时 exp 溢出成 inf，这一行得到 inf/inf = NaN；"
     "先减去 S.max(axis=-1, keepdims=True)（平移不变性，结果不变）。", known("fwd_naive")),
    (MASK_MESSAGES["after_softmax"], known("fwd_mask_after_softmax")),
    (MASK_MESSAGES["inverted"], known("fwd_mask_inverted")),
    (MASK_MESSAGES["inverted"], known("fwd_mask_inverted_finite")),
    ("被屏蔽的分数填成了 0：0 并不会让 exp 变成 0。要填 -inf（或非常小的数）。", known("fwd_mask_zero")),
    (MASK_MESSAGES["ignored"], known("fwd_mask_ignored")),
]


BATCH_HINT = ("\n提示：这个用例带批维（或 T ≠ S）。x.T 会把所有维度倒过来，只想交换最后两维时要用 "
              "np.swapaxes(x, -1, -2)（torch：x.transpose(-2, -1)）；mask 要能广播到 (...,T,S)。")


def batch_hint(case, out, message):
    """The swapaxes hint, on a failing case with batch dims or T ≠ S."""
    return BATCH_HINT if case.get("batch") or case["Q"].shape[-2] != case["K"].shape[-2] else ""


TRANSPOSE_ERROR = ("这个用例带批维，你的代码在这里报错了：多半是用了 .T。.T 只对二维数组是转置，有批维时它把所有维度倒过来"
                   "（(B,S,d) 变成 (d,S,B)）。只交换最后两维要用 np.swapaxes(x, -1, -2)（torch：x.transpose(-2, -1) 或 x.mT）。")


MASK_INDEX_ERROR = ("这个用例的 mask 要广播到 (...,T,S)：S[mask] = -inf 这样的布尔下标要求 mask 和 S 形状完全相同。"
                    "用 np.where(mask, -np.inf, S)（torch：S.masked_fill(mask, float('-inf'))），它们会自动广播。")


SHAPE_ERRORS = ("matmul", "could not be broadcast", "must match the size", "cannot be multiplied", "Expected size")


INDEX_ERRORS = ("boolean index did not match", "too many indices")


def batch_error(case, res):
    """A shape error on a case with batch dims: the .T that reverses every axis (or a mask used as an index)."""
    err = str(res.get("error", "")) if isinstance(res, dict) else ""
    if np.ndim(case["Q"]) <= 2:
        return None
    for needles, message in ((INDEX_ERRORS, MASK_INDEX_ERROR), (SHAPE_ERRORS, TRANSPOSE_ERROR)):
        if any(n in err for n in needles):
            return fail(f"【{case['stage']}】{message}\n报错：{err}")
    return None


def _show_qkv(c):
    m = "无" if c["mask"] is None else f"形状 {tuple(np.shape(c['mask']))}"
    return (f"Q {tuple(c['Q'].shape)}，K {tuple(c['K'].shape)}，V {tuple(c['V'].shape)}，mask {m}"
            + (f"\nmask={fmt(c['mask'])}" if c["mask"] is not None and np.size(c["mask"]) <= 24 else ""))


ATTENTION_FORWARD = VerdictTable((Output("Y", answer="fwd", tol=(1e-6, 1e-9)),), diagnoses=FORWARD_BUGS,
                             show=_show_qkv, hint=batch_hint, error=batch_error)


# attention_backward ──────────────────────────────────────────────────────────

def _make_by_hand(AutogradUse, threads_started):
    """`run_by_hand(run, graph)`: a driver that calls `run(ns, case, use)` with one AutogradUse `use` on for the
    whole case (graph: see AutogradUse) inside the check for threads, and adds what they saw to the result. When
    the student's code raised after reaching autograd, what it reached is the result. The closure holds
    its own references to the watch, so rebinding this module's names does not switch it off."""

    def report(use, flags):
        return {"autograd": use.report(), "used_threads": bool(flags.get("used_threads"))}

    def by_hand(run, graph):
        def call(ns, case):
            use, flags = AutogradUse(graph=graph), {}
            try:
                with threads_started(flags), use:
                    out = run(ns, case, use)
            except Exception:
                seen = report(use, flags)
                if seen["used_threads"] or any(any(kinds.values()) for kinds in seen["autograd"].values()):
                    return seen  # the use of autograd is the verdict, whatever failed after it
                raise
            return {**out, **report(use, flags)}

        return call

    return by_hand


run_by_hand = _make_by_hand(AutogradUse, threads_started)


def _run_backward(ns, case, use):
    fwd = lookup(ns, "attention_forward")
    bwd = lookup(ns, "attention_backward")
    args = _args(case)
    with use.forward():
        out = fwd(*args)
    Y, cache = items(out, 2, FORWARD_RETURNS)
    dY = case["dY"].copy()
    dQ, dK, dV = items(bwd(dY, cache), 3, "attention_backward 应返回 (dQ, dK, dV) 三个值")
    return {"Y": to_numpy(Y), "dQ": to_numpy(dQ), "dK": to_numpy(dK), "dV": to_numpy(dV),
            "input_changed": _changed(args, case) or not np.array_equal(dY, case["dY"])}


BACKWARD_BUGS = bug_table("""
bwd_noD       softmax 的反向少了减去 D：S̄ = A ⊙ (Ā − D)，D_i = Σ_j Ā_ij A_ij = ȳ_i·y_i（每行一个标量）。
bwd_D_axis    D 的求和轴不对：D_i 是第 i 行（对 key 那一维，axis=-1）的和，形状 (…,T,1)。
bwd_D_nokeep  D 少了 keepdims=True：形状 (…,T) 的 D 会沿最后一维广播，减掉的是 D_l 而不是 D_i。
bwd_dK_noT    K̄ 少了转置：K̄ = s·S̄ᵀQ，不是 s·S̄Q（谁乘了谁，梯度就乘谁的转置）。
bwd_swapQK    Q̄ 和 K̄ 的转置弄反了：Q̄ = s·S̄K，K̄ = s·S̄ᵀQ。
bwd_dV_noT    V̄ 少了转置：V̄ = AᵀȲ，不是 AȲ。
bwd_noscale   Q̄、K̄ 少了缩放因子 s = 1/√d_k：S = s·QKᵀ，链式法则要把 s 乘回来。
bwd_dK_s2     K̄ 多乘了一次 s：cache 里存的 Q 是不是已经乘过 s 了？K̄ = s·S̄ᵀQ 里的 Q 是原始的 Q。
bwd_unmasked  反向里重算 softmax 时漏掉了掩码：被屏蔽的位置 A 必须是 0（最好直接把前向的 A 存进 cache）。
""")


DEAD_KEY_MSG = ("被屏蔽的位置传回了梯度：所有 query 都看不到的 key，它在 dK、dV 里的那一行必须恰好为 0，"
                "而你的不是{}。被掩处 A_il = 0，所以 S̄_il = A_il(Ā_il − D_i) = 0。"
                "检查：前向要用 -inf（或足够小、使 exp 恰为 0 的数）填充，反向用前向存下的 A。")


def dead_keys_get_no_gradient(case, out):
    dead = case.get("dead_keys")
    if dead is None or not dead.any():
        return None
    worst = max(float(np.abs(out[k][dead]).max()) for k in ("dK", "dV"))
    return fail(f"【{case['stage']}】" + DEAD_KEY_MSG.format(shown_only_public(f"（最大绝对值 {worst:.3g}）"))) if worst != 0.0 else None


def forward_first(cases, results):
    """Fail early when the student's own forward is already wrong (exceptions are judged later)."""
    ok = [(c, r) for c, r in zip(cases, results) if isinstance(r, dict) and r.get("ok")]
    verdict = compare([c for c, _ in ok], [r for _, r in ok], known("fwd"), ["Y"], diagnoses=FORWARD_BUGS,
                      rtol=1e-6, atol=1e-9, show=_show_qkv)
    if verdict.passed:
        return None
    return fail("attention_backward 的检查用你自己的 attention_forward 产生 cache，它的前向输出 Y 就不对，"
                "先让前向通过：\n" + verdict.message)


BY_HAND_MSG = ("反向传播必须按 §2.3 的公式手写：{where}里用到了 autograd（{what}）。"
               "不要在里面调用 torch.autograd.grad、torch.autograd.backward、.backward()、torch.func 的变换（vjp、grad、jacrev、jacfwd），"
               "也不要重建前向让 autograd 求导：用 §2.3 的方框公式直接算出 dQ、dK、dV。本题计 0 分。")


THREADS_MSG = ("本题的计算在别的线程里运行了（或检查时还有你启动的线程活着）："
               "检查只看得见调用它的那个线程，看不到别的线程里是否用了 autograd。请直接计算，不要用 threading / ThreadPoolExecutor；"
               "答案单元格里开的线程要在检查之前结束（join）。库留下的线程也算，例如 tqdm 进度条的监控线程"
               "（用进度条之前先写 tqdm.tqdm.monitor_interval = 0）。本题计 0 分。")


def _what(seen):
    """What the kernel saw of autograd, in the watch's own words ("" when nothing)."""
    parts = []
    if seen.get("calls"):
        parts.append("调用了 " + ("、".join(n for n in seen["calls"] if n in AutogradUse.WORDS) or "autograd"))
    if seen.get("engine"):
        parts.append("autograd 的引擎在里面跑了一遍反向传播")
    if seen.get("graph"):
        parts.append("建了计算图：torch 运算的结果带 grad_fn")
    return "；".join(parts)


def by_hand_gate(forward, backward):
    """The gate of a hand-written backward: autograd reached while `backward` ran (or called while `forward`
    filled what it uses), or work moved to another thread, costs the exercise (the driver's observations)."""

    def gate(cases, results):
        outs = [res["out"] for res in results if isinstance(res, dict) and res.get("ok")]
        for out in outs:
            seen = out.get("autograd") or {}
            for part, where in (("backward", backward), ("forward", forward)):
                what = _what(seen.get(part) or {})
                if what:
                    return fail(BY_HAND_MSG.format(where=where, what=what))
        if any(out.get("used_threads") for out in outs):
            return fail(THREADS_MSG)
        return None

    return gate


backward_by_hand = by_hand_gate("attention_forward（为 attention_backward 准备 cache 时）", "attention_backward ")


INDEPENDENT = (("autograd", "torch.autograd（float64）", 1e-6, 1e-9), ("finite_differences", "数值微分（中心差分）", 1e-4, 1e-6))


def independent_checks(case, res):
    """The student's gradients against autograd and (on small cases) finite differences."""
    for name, label, rtol, atol in INDEPENDENT:
        ref = case["_oracle"][name]
        if ref is None:
            continue
        for key in ("dQ", "dK", "dV"):
            got = np.asarray(res["out"][key])
            want = np.asarray(ref[key])
            if got.shape != want.shape or not np.allclose(got, want, rtol=rtol, atol=atol):
                return fail(f"【{case['stage']}】`{key}` 与 {label} 的结果不一致。\n期望：{fmt(want)}\n你的：{fmt(got)}")
    return None


ATTENTION_BACKWARD = VerdictTable(
    tuple(Output(k, answer="bwd", tol=(1e-6, 1e-9)) for k in ("dV", "dQ", "dK")), diagnoses=BACKWARD_BUGS,
    show=lambda c: _show_qkv(c) + f"\ndY={fmt(c['dY'])}", hint=batch_hint, error=batch_error,
    gate=lambda cases, results: backward_by_hand(cases, results) or forward_first(cases, results),
    extras=lambda case, out: dead_keys_get_no_gradient(case, out) or independent_checks(case, {"out": out}))


# numerical_gradient ──────────────────────────────────────────────────────────

def _call_numgrad(ns, case):
    fn = lookup(ns, "numerical_gradient")
    f = make_f(case)
    x = case["x"].copy()
    out = fn(f, x) if case["eps"] is None else fn(f, x, eps=case["eps"])
    changed = not np.array_equal(x, case["x"])
    return {"grad": to_numpy(out), "input_changed": changed,
            "input_rounded": changed and np.shape(x) == case["x"].shape and bool(np.allclose(x, case["x"], rtol=1e-12, atol=0))}


NUMGRAD_BUGS = [
    ("用了单侧差分 (f(x+ε) − f(x))/ε：误差是 O(ε)。中心差分 (f(x+ε) − f(x−ε))/(2ε) 的误差是 O(ε²)。", "forward"),
    ("用了单侧差分 (f(x) − f(x−ε))/ε：误差是 O(ε)。中心差分 (f(x+ε) − f(x−ε))/(2ε) 的误差是 O(ε²)。", "backward"),
    ("分母不对：中心差分两点相距 2ε，要除以 2ε，不是 ε。", "half"),
    ("扰动之后没有把 x[idx] 恢复成原值：后面的元素是在被挪动过的点上求的导数。", "no_restore"),
    ("没有用参数 eps：检查传入了 eps={eps}，你的结果像是用固定的 1e-6 算的。", "fixed_eps"),
]


def closest_difference_bug(case, out, outputs, diagnoses, key):
    """The known difference formula much closer to the student's result than the central one is."""
    got, want = np.asarray(out["grad"]), np.asarray(case["_oracle"]["central"])
    if not np.all(np.isfinite(got)):
        return None
    err_ref, best = float(np.max(np.abs(got - want))), None
    for message, name in NUMGRAD_BUGS:
        err = float(np.max(np.abs(got - case["_oracle"][name])))
        if err < 0.1 * err_ref and (best is None or err < best[0]):
            best = (err, message, name)
    return Named.of([(best[2], best[1].format(eps=case["eps"]))]) if best else None


def restored_input(case, out):
    if out.get("input_rounded"):
        return fail(f"【{case['stage']}】调用之后 x 和原来只差浮点舍入：x[idx] += eps 再减回去不一定回到原值。"
                    "先保存 old = x[idx]，用完后 x[idx] = old（或者在副本上扰动）。约定：函数返回后 x 必须和调用前一模一样。")
    if out.get("input_changed"):
        return fail(f"【{case['stage']}】调用之后 x 变了：每次扰动后要把 x[idx] 恢复成原值（或者在副本上扰动）。"
                    "约定：函数返回后 x 必须和调用前一模一样。")
    return None


def _numgrad_render(case, want, got):
    eps = "1e-6（默认）" if case["eps"] is None else f"{case['eps']:g}"
    return f"输入：x={fmt(case['x'])}，eps={eps}\n期望：{fmt(want)}\n你的：{fmt(got)}"


NUMERICAL_GRADIENT = VerdictTable(
    (Output("grad", expected=known("central"), tol=(1e-7, 1e-8), name="返回值",
            shape_note="应与 x 的形状相同。", fallback="数值与中心差分的结果不一致。", render=_numgrad_render,
            namer=closest_difference_bug),),
    flags=restored_input, untouched=None)


# attention_function ──────────────────────────────────────────────────────────

def _run_function(ns, case, use):
    """Calls torch's own Function.apply on the class (an overridden `apply` is not used) and reports whether
    the output's grad_fn is the class's own node, so the backward that runs is the student's. The class's
    forward runs as the "forward" part of the watch `use`; torch.autograd.grad and gradcheck are the grader's
    own (`use.graders()`), the backward and whatever the engine runs in them the student's (module docstring)."""
    import torch

    cls = lookup(ns, "AttentionFunction")
    if not (issubclass(type(cls), type) and issubclass(cls, torch.autograd.Function)):
        raise TypeError(f"AttentionFunction 应是继承 torch.autograd.Function 的类，得到 {type_name(cls)}")
    base_apply = torch.autograd.Function.__dict__["apply"].__func__
    if getattr(cls.apply, "__func__", None) is not base_apply:
        return {"apply_overridden": True}
    plain = functools.partial(base_apply, cls)  # torch's own apply: the class's forward and backward run
    nodes = []

    def apply(*args):
        with use.forward():
            y = plain(*args)
        if not is_tensor(y):
            raise TypeError(f"AttentionFunction.forward 应返回一个 torch.Tensor，得到 {type_name(y)}")
        nodes.append(use.allow(y))
        return y

    dt = {"float64": torch.float64, "float32": torch.float32}[case["dtype"]]
    q, k, v = (torch.tensor(case[n], dtype=dt, requires_grad=True) for n in ("Q", "K", "V"))
    mask = None if case["mask"] is None else torch.tensor(case["mask"], dtype=torch.bool)
    y = apply(q, k, v, mask)
    if getattr(type(nodes[0]), "_forward_cls", None) is not cls:
        return {"apply_overridden": False, "own_node": False}
    dy = torch.tensor(case["dY"], dtype=dt)
    with use.graders():
        dq, dk, dv = torch.autograd.grad(y, (q, k, v), dy)
    out = {"Y": to_numpy(y), "dQ": to_numpy(dq), "dK": to_numpy(dk), "dV": to_numpy(dv),
           "Y_dtype": dtype_name(y), "dQ_dtype": dtype_name(dq), "dK_dtype": dtype_name(dk),
           "dV_dtype": dtype_name(dv), "apply_overridden": False, "own_node": True}
    if case["gradcheck"]:
        inputs = tuple(t.detach().clone().requires_grad_(True) for t in (q, k, v)) + (mask,)
        with use.graders():
            ok = torch.autograd.gradcheck(apply, inputs, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=False)
        out["gradcheck"] = bool(ok)
    return out


FUNCTION_BUGS = BACKWARD_BUGS + FORWARD_BUGS


def own_autograd_node(case, out):
    if out.get("apply_overridden"):
        return fail(f"【{case['stage']}】AttentionFunction 重写了 apply：这道题要你自己写 forward 和 backward，"
                    "由 torch.autograd.Function 自带的 apply 调用它们。不要重写 apply（检查用的就是自带的 apply）。")
    if out.get("own_node") is False:
        return fail(f"【{case['stage']}】输出的 grad_fn 不是 AttentionFunction 自己的反向节点：反向传播没有经过你写的 "
                    "backward。forward 里要直接用输入计算并返回结果（不要返回 autograd 另外记录的张量）。")
    return None


def function_error(case, res):
    err = str(res.get("error", "")) if isinstance(res, dict) else ""
    if "incorrect number of gradients" in err:
        return fail(f"【{case['stage']}】backward 要为 forward 的每个输入各返回一个梯度：q、k、v、mask 共 4 个，"
                    "mask 对应 None，即 return dq, dk, dv, None。\n" + err)
    if "scalar type" in err or "dtype" in err:
        return fail(f"【{case['stage']}】dtype 混了：输入是 {case['dtype']}，计算要全程保持这个 dtype。"
                    "别新建默认 float64 / float32 的张量（例如加法掩码），用 masked_fill，"
                    "或者 torch.zeros(..., dtype=scores.dtype)。\n" + err)
    return None


def function_extras(case, out):
    if case["dtype"] == "float64":
        dead = dead_keys_get_no_gradient(case, out)
        if dead:
            return dead
    if case.get("gradcheck") and not out.get("gradcheck"):
        return fail(f"【{case['stage']}】数值对得上，但 torch.autograd.gradcheck 没有通过。"
                    "检查 backward 返回的梯度形状、dtype，以及是否对 ctx 里保存的张量做了原地修改。")
    return None


def _function_tol(case):
    return (1e-6, 1e-9) if case["dtype"] == "float64" else (1e-4, 1e-5)


ATTENTION_FUNCTION = VerdictTable(
    tuple(Output(k, answer="bwd", dtype=lambda c: c["dtype"], tol=_function_tol) for k in ("Y", "dV", "dQ", "dK")),
    diagnoses=FUNCTION_BUGS, show=lambda c: _show_qkv(c) + f"，dtype {c['dtype']}", hint=batch_hint,
    flags=own_autograd_node, error=lambda case, res: function_error(case, res) or batch_error(case, res),
    extras=function_extras, untouched=None,
    gate=by_hand_gate("AttentionFunction.forward ", "AttentionFunction.backward "))


# init_score_std ──────────────────────────────────────────────────────────────

def _call_init(ns, case):
    fn = lookup(ns, "init_score_std")
    if case["input_var"] is None:
        out = fn(case["d"], case["weight_bound"])
    else:
        out = fn(case["d"], case["weight_bound"], case["input_var"])
    std = to_numpy(out)
    return {"std": std, "is_number": std.shape == () and std.dtype.kind != "b" and type_name(out) not in ("Tensor", "Parameter")}


INIT_BUGS = bug_table("""
init_var_b2     U(−b, b) 的方差是 b²/3，不是 b²（nn.Linear 默认 b = 1/√d 时方差是 1/(3d)，不是 1/d）。
init_var_b2_12  U(−b, b) 的方差是 (2b)²/12 = b²/3，不是 b²/12。
init_variance   返回的是方差，不是标准差：Var[score] = Var[q_i]·Var[k_i]，标准差要开根号。
init_std_q      算到了 q_i 的标准差 √Var[q_i] 就停了：分数是 d_k 个乘积 q_i k_i 之和再除以 √d_k，标准差 = Var[q_i]。
init_input_std  input_var 是输入每维的方差，不是标准差：Var[q_i] = d·input_var·b²/3。
init_unscaled   忘了除以 √d_k：q·k 的标准差是 √d_k·Var[q_i]，缩放之后 d_k 消掉。
""")


def _init_show(c):
    v = 1.0 if c["input_var"] is None else c["input_var"]
    return f"d={c['d']}，weight_bound={c['weight_bound']:.6g}，input_var={v:g}"


def a_python_float(case, out):
    if not out.get("is_number"):
        return fail(f"【{case['stage']}】请返回一个 Python float（例如 float(...)），不要返回数组或张量。")
    return None


INIT_SCORE_STD = VerdictTable((Output("std", answer="init", tol=(1e-9, 1e-12)),), diagnoses=INIT_BUGS, show=_init_show,
                          extras=a_python_float, untouched=None)


# grade_id -> (driver: how to run the student's code on one case, verdict table: how to read its outputs)
EXERCISES = {
    "attention_forward": (Driver(("attention_forward",), _call_forward), ATTENTION_FORWARD),
    "attention_backward": (Driver(("attention_backward",), run_by_hand(_run_backward, graph=True)), ATTENTION_BACKWARD),
    "numerical_gradient": (Driver(("numerical_gradient",), _call_numgrad), NUMERICAL_GRADIENT),
    "attention_function": (Driver(("AttentionFunction",), run_by_hand(_run_function, graph=False)), ATTENTION_FUNCTION),
    "init_score_std": (Driver(("init_score_std",), _call_init), INIT_SCORE_STD),
}
