"""Verdicts of notebook 02 (§2): the grader's float64 answers and the realistic bugs they name."""
import numpy as np

from ..engine import MASK_MESSAGES, PASS, compare, fail, fmt, inputs_untouched, known, raised, ran

FORWARD_BUGS = [
    ("缺少缩放：分数 QKᵀ 要乘以 1/√d_k。", known("fwd_no_scale")),
    ("除以了 d_k 而不是 √d_k。", known("fwd_scale_dk")),
    ("缩放用错了维度：应除以 √d_k（Q、K 的最后一维），不是 √d_v（V 的最后一维）。", known("fwd_scale_dv")),
    ("softmax 的方向不对：每个 query 的一行（对 key 那一维，axis=-1）归一化。", known("fwd_axis")),
    (MASK_MESSAGES["after_softmax"], known("fwd_mask_after_softmax")),
    (MASK_MESSAGES["inverted"], known("fwd_mask_inverted")),
    (MASK_MESSAGES["inverted"], known("fwd_mask_inverted_finite")),
    ("被屏蔽的分数填成了 0：0 并不会让 exp 变成 0。要填 -inf（或非常小的数）。", known("fwd_mask_zero")),
    (MASK_MESSAGES["ignored"], known("fwd_mask_ignored")),
]

BATCH_HINT = ("\n提示：这个用例带批维（或 T ≠ S）。x.T 会把所有维度倒过来，只想交换最后两维时要用 "
              "np.swapaxes(x, -1, -2)（torch：x.transpose(-2, -1)）；mask 要能广播到 (...,T,S)。")


def _with_batch_hint(verdict, cases, results):
    """Append the swapaxes hint when the failing stage has batch dims or T ≠ S."""
    if verdict.passed or len(results) != len(cases):
        return verdict
    for case in cases:
        if verdict.message.startswith(f"【{case.get('stage')}】"):
            if case.get("batch") or case["Q"].shape[-2] != case["K"].shape[-2]:
                return fail(verdict.message + BATCH_HINT)
            break
    return verdict


def _show_qkv(c):
    m = "无" if c["mask"] is None else f"形状 {tuple(np.shape(c['mask']))}"
    return (f"Q {tuple(c['Q'].shape)}，K {tuple(c['K'].shape)}，V {tuple(c['V'].shape)}，mask {m}"
            + (f"\nmask={fmt(c['mask'])}" if c["mask"] is not None and np.size(c["mask"]) <= 24 else ""))


def judge_attention_forward(cases, results):
    verdict = compare(cases, results, known("fwd"), ["Y"], diagnoses=FORWARD_BUGS, rtol=1e-6, atol=1e-9,
                      show=_show_qkv)
    verdict = _with_batch_hint(verdict, cases, results)
    return verdict if not verdict.passed else (inputs_untouched(results) or verdict)


# ---------------------------------------------------------------------------------------------
# backward
# ---------------------------------------------------------------------------------------------

BACKWARD_BUGS = [
    ("softmax 的反向少了减去 D：S̄ = A ⊙ (Ā − D)，D_i = Σ_j Ā_ij A_ij = ȳ_i·y_i（每行一个标量）。", known("bwd_noD")),
    ("D 的求和轴不对：D_i 是第 i 行（对 key 那一维，axis=-1）的和，形状 (…,T,1)。", known("bwd_D_axis")),
    ("D 少了 keepdims=True：形状 (…,T) 的 D 会沿最后一维广播，减掉的是 D_l 而不是 D_i。", known("bwd_D_nokeep")),
    ("K̄ 少了转置：K̄ = s·S̄ᵀQ，不是 s·S̄Q（谁乘了谁，梯度就乘谁的转置）。", known("bwd_dK_noT")),
    ("Q̄ 和 K̄ 的转置弄反了：Q̄ = s·S̄K，K̄ = s·S̄ᵀQ。", known("bwd_swapQK")),
    ("V̄ 少了转置：V̄ = AᵀȲ，不是 AȲ。", known("bwd_dV_noT")),
    ("Q̄、K̄ 少了缩放因子 s = 1/√d_k：S = s·QKᵀ，链式法则要把 s 乘回来。", known("bwd_noscale")),
    ("K̄ 多乘了一次 s：cache 里存的 Q 是不是已经乘过 s 了？K̄ = s·S̄ᵀQ 里的 Q 是原始的 Q。", known("bwd_dK_s2")),
    ("反向里重算 softmax 时漏掉了掩码：被屏蔽的位置 A 必须是 0（最好直接把前向的 A 存进 cache）。",
     known("bwd_unmasked")),
]

DEAD_KEY_MSG = ("被屏蔽的位置传回了梯度：所有 query 都看不到的 key，它在 dK、dV 里的那一行必须恰好为 0，"
                "而你的不是（最大绝对值 {:.3g}）。被掩处 A_il = 0，所以 S̄_il = A_il(Ā_il − D_i) = 0。"
                "检查：前向要用 -inf（或足够小、使 exp 恰为 0 的数）填充，反向用前向存下的 A。")


def _dead_key_check(cases, results):
    for case, res in zip(cases, results):
        dead = case.get("dead_keys")
        if dead is None or not dead.any():
            continue
        out = res["out"]
        worst = max(float(np.abs(out[k][dead]).max()) for k in ("dK", "dV"))
        if worst != 0.0:
            return fail(f"【{case['stage']}】" + DEAD_KEY_MSG.format(worst))
    return None


def _forward_first(cases, results, what):
    """Fail early when the student's own forward is already wrong (exceptions are judged later)."""
    ok = [(c, r) for c, r in zip(cases, results) if isinstance(r, dict) and r.get("ok")]
    verdict = compare([c for c, _ in ok], [r for _, r in ok], known("fwd"), ["Y"], diagnoses=FORWARD_BUGS,
                      rtol=1e-6, atol=1e-9, show=_show_qkv)
    if verdict.passed:
        return None
    return fail(f"{what}的前向输出 Y 就不对，先让前向通过：\n" + verdict.message)


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


def judge_attention_backward(cases, results):
    early = _forward_first(cases, results, "attention_backward 的检查用你自己的 attention_forward 产生 cache，它")
    if early:
        return early
    for case, res in zip(cases, results):  # case by case: values, then exact zeros at dead keys
        verdict = compare([case], [res], known("bwd"), ["dV", "dQ", "dK"], diagnoses=BACKWARD_BUGS, rtol=1e-6,
                          atol=1e-9, show=lambda c: _show_qkv(c) + f"\ndY={fmt(c['dY'])}")
        verdict = _with_batch_hint(verdict, [case], [res])
        if not verdict.passed:
            return verdict
        dead = _dead_key_check([case], [res]) or independent_checks(case, res)
        if dead:
            return dead
    return inputs_untouched(results) or PASS


# ---------------------------------------------------------------------------------------------
# numerical_gradient
# ---------------------------------------------------------------------------------------------

NUMGRAD_BUGS = [
    ("用了单侧差分 (f(x+ε) − f(x))/ε：误差是 O(ε)。中心差分 (f(x+ε) − f(x−ε))/(2ε) 的误差是 O(ε²)。", "forward"),
    ("用了单侧差分 (f(x) − f(x−ε))/ε：误差是 O(ε)。中心差分 (f(x+ε) − f(x−ε))/(2ε) 的误差是 O(ε²)。", "backward"),
    ("分母不对：中心差分两点相距 2ε，要除以 2ε，不是 ε。", "half"),
    ("扰动之后没有把 x[idx] 恢复成原值：后面的元素是在被挪动过的点上求的导数。", "no_restore"),
    ("没有用参数 eps：检查传入了 eps={eps}，你的结果像是用固定的 1e-6 算的。", "fixed_eps"),
]


def judge_numerical_gradient(cases, results):
    for case, res in zip(cases, results):
        stage = case["stage"]
        if not ran(res):
            return raised(stage, res)
        out = res["out"]
        if out.get("input_changed"):
            return fail(f"【{stage}】调用之后 x 变了：每次扰动后要把 x[idx] 恢复成原值（或者在副本上扰动）。"
                        "约定：函数返回后 x 必须和调用前一模一样。")
        got, want = np.asarray(out["grad"]), np.asarray(case["_oracle"]["central"])
        if got.shape != want.shape:
            return fail(f"【{stage}】返回的形状不对：期望与 x 相同的 {want.shape}，得到 {got.shape}。")
        if not np.all(np.isfinite(got)) or not np.allclose(got, want, rtol=1e-7, atol=1e-8):
            msg = "数值与中心差分的结果不一致。"
            err_ref = float(np.nanmax(np.abs(got - want))) if np.all(np.isfinite(got)) else np.inf
            best = None
            for message, name in NUMGRAD_BUGS:
                err = float(np.max(np.abs(got - case["_oracle"][name]))) if np.all(np.isfinite(got)) else np.inf
                if err < 0.1 * err_ref and (best is None or err < best[0]):
                    best = (err, message)
            if best is not None:
                msg = best[1].format(eps=case["eps"])
            eps = "1e-6（默认）" if case["eps"] is None else f"{case['eps']:g}"
            return fail(f"【{stage}】{msg}\n输入：x={fmt(case['x'])}，eps={eps}\n期望：{fmt(want)}\n你的：{fmt(got)}")
    return PASS


# ---------------------------------------------------------------------------------------------
# AttentionFunction
# ---------------------------------------------------------------------------------------------

FUNCTION_BUGS = BACKWARD_BUGS + FORWARD_BUGS


def judge_attention_function(cases, results):
    keys = ["Y", "dV", "dQ", "dK"]
    dtypes = {k: (lambda c: c["dtype"]) for k in keys}

    def show(c):
        return _show_qkv(c) + f"，dtype {c['dtype']}"

    for case, res in zip(cases, results):
        out = res.get("out") if isinstance(res, dict) and res.get("ok") else None
        if isinstance(out, dict) and out.get("apply_overridden"):
            return fail(f"【{case['stage']}】AttentionFunction 重写了 apply：这道题要你自己写 forward 和 backward，"
                        "由 torch.autograd.Function 自带的 apply 调用它们。不要重写 apply（检查用的就是自带的 apply）。")
        if isinstance(out, dict) and out.get("own_node") is False:
            return fail(f"【{case['stage']}】输出的 grad_fn 不是 AttentionFunction 自己的反向节点：反向传播没有经过你写的 "
                        "backward。forward 里要直接用输入计算并返回结果（不要返回 autograd 另外记录的张量）。")
        if isinstance(res, dict) and not res.get("ok") and "incorrect number of gradients" in str(res.get("error")):
            return fail(f"【{case['stage']}】backward 要为 forward 的每个输入各返回一个梯度：q、k、v、mask 共 4 个，"
                        "mask 对应 None，即 return dq, dk, dv, None。\n" + str(res.get("error")))
        err = str(res.get("error", "")) if isinstance(res, dict) else ""
        if not res.get("ok") and ("scalar type" in err or "dtype" in err):
            return fail(f"【{case['stage']}】dtype 混了：输入是 {case['dtype']}，计算要全程保持这个 dtype。"
                        "别新建默认 float64 / float32 的张量（例如加法掩码），用 masked_fill，"
                        "或者 torch.zeros(..., dtype=scores.dtype)。\n" + err)
        tol = (1e-6, 1e-9) if case["dtype"] == "float64" else (1e-4, 1e-5)
        v = compare([case], [res], known("bwd"), keys, diagnoses=FUNCTION_BUGS, rtol=tol[0], atol=tol[1],
                    dtypes=dtypes, show=show)
        if not v.passed:
            return _with_batch_hint(v, [case], [res])
        dead = _dead_key_check([case], [res]) if case["dtype"] == "float64" else None
        if dead:
            return dead
    for case, res in zip(cases, results):
        if case.get("gradcheck") and not res["out"].get("gradcheck"):
            return fail(f"【{case['stage']}】数值对得上，但 torch.autograd.gradcheck 没有通过。"
                        "检查 backward 返回的梯度形状、dtype，以及是否对 ctx 里保存的张量做了原地修改。")
    return PASS


# ---------------------------------------------------------------------------------------------
# init_score_std
# ---------------------------------------------------------------------------------------------

INIT_BUGS = [
    ("U(−b, b) 的方差是 b²/3，不是 b²（nn.Linear 默认 b = 1/√d 时方差是 1/(3d)，不是 1/d）。", known("init_var_b2")),
    ("U(−b, b) 的方差是 (2b)²/12 = b²/3，不是 b²/12。", known("init_var_b2_12")),
    ("返回的是方差，不是标准差：Var[score] = Var[q_i]·Var[k_i]，标准差要开根号。", known("init_variance")),
    ("算到了 q_i 的标准差 √Var[q_i] 就停了：分数是 d_k 个乘积 q_i k_i 之和再除以 √d_k，标准差 = Var[q_i]。",
     known("init_std_q")),
    ("input_var 是输入每维的方差，不是标准差：Var[q_i] = d·input_var·b²/3。", known("init_input_std")),
    ("忘了除以 √d_k：q·k 的标准差是 √d_k·Var[q_i]，缩放之后 d_k 消掉。", known("init_unscaled")),
]


def judge_init_score_std(cases, results):
    def show(c):
        v = 1.0 if c["input_var"] is None else c["input_var"]
        return f"d={c['d']}，weight_bound={c['weight_bound']:.6g}，input_var={v:g}"

    verdict = compare(cases, results, known("init"), ["std"], diagnoses=INIT_BUGS, rtol=1e-9, atol=1e-12, show=show)
    if not verdict.passed:
        return verdict
    for case, res in zip(cases, results):
        if not res["out"].get("is_number"):
            return fail(f"【{case['stage']}】请返回一个 Python float（例如 float(...)），不要返回数组或张量。")
    return verdict


JUDGES = {
    "attention_forward": judge_attention_forward,
    "attention_backward": judge_attention_backward,
    "numerical_gradient": judge_numerical_gradient,
    "attention_function": judge_attention_function,
    "init_score_std": judge_init_score_std,
}
