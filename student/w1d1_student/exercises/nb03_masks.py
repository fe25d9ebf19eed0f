"""Exercises of notebook 03 (§3): causal_mask, padding_mask, attention_mask, masked_softmax, leftpad_safe.

Cases are plain data; `run` builds the torch inputs, calls the student's function on copies and
sends back numpy outputs, dtype names and flags. No reference implementation lives here.

Verdicts: masks, masked softmax, and the left-padding NaN trap.

Tables for the engine's one loop (errors first, then the bugs consistent with every case). A
mismatch shows the smallest slice that differs: a mask as a grid of · (kept) and ✗ (blocked), a
tensor as its first differing sample.
"""
import numpy as np

from ..case_inputs import ms_inputs
from ..driver import Driver, dtype_name, is_tensor, lookup, to_numpy
from ..engine import Output, VerdictTable, close, fail, fmt, known, raised, shown_only_public

NOTEBOOK = "03_masks"
WORDS = ("dq", "dk", "dv")  # what a result names besides types and dtypes (driver.py)


# causal_mask ─────────────────────────────────────────────────────────────────

def _mask_out(m):
    return {"m": to_numpy(m), "m_dtype": dtype_name(m), "m_is_tensor": is_tensor(m)}


def _call_causal(ns, case):
    return _mask_out(lookup(ns, "causal_mask")(case["T"]))


INVERTED = "约定反了：本课程的布尔掩码 True = 屏蔽；你按 True = 允许（SDPA 的约定，§A.3）处理了。"


DIAG0 = ("对角线也被屏蔽了：triu 要写 diagonal=1（严格上三角）。diagonal=0 把每个 query 自己也屏蔽掉，"
         "第一行整行被掩，softmax 得到 NaN（§3.4、§A.4）。")


INPUT_CHANGED = "你的函数修改了输入（张量或 lengths）。函数不能原地修改输入：别用 masked_fill_ 之类带下划线的原地操作改参数，先 clone。"


DTYPE_HINT = "掩码要用 dtype=torch.bool：masked_fill 和本课程的约定都要求布尔掩码，True = 屏蔽。"


OVERFLOW_HINT = ("填充值超出了分数 dtype 的表示范围（例如在 fp16 里用 -1e9，或把 float64 的 finfo.min 用在 float32 上）。"
                 "用 torch.finfo(scores.dtype).min，它总是和分数同一个 dtype。")


def _overflow(case, res):
    """The student's error, with a hint when the fill value overflowed the scores' dtype."""
    if isinstance(res, dict) and "overflow" in str(res.get("error", "")):
        return fail(f"{raised(case['stage'], res).message}\n提示：{OVERFLOW_HINT}")
    return None


NOT_TENSOR = "应返回 torch.Tensor（torch 练习），你返回的不是张量。"


def _tensor(case, out):
    """A torch tensor (checked after every case's values: a numpy mask with right values says so)."""
    return None if out.get("m_is_tensor") else fail(f"【{case['stage']}】{NOT_TENSOR}")


def first_bad(got, want, lead, rtol=0.0, atol=0.0):
    """Index over the first `lead` dims of the first sub-array where `got` and `want` differ."""
    for idx in np.ndindex(*got.shape[:lead]):
        if not close(got[idx], want[idx], rtol, atol):
            return idx
    return ()


def _where(idx, names):
    parts = [f"{n}={i}" for n, i in zip(names, idx)]
    return f"（显示 {', '.join(parts)} 这一片）" if parts else ""


def grid(m):
    """A bool mask as rows of · (kept) and ✗ (blocked), as in the course text."""
    m = np.atleast_2d(np.asarray(m, dtype=bool))
    return ["[ " + " ".join("✗" if x else "·" for x in row) + " ]" for row in m]


def side_by_side(want, got, axes="行 = query，列 = key"):
    w, g = grid(want), grid(got)
    width = max(len(s) for s in w + ["期望"])
    lines = [f"  {'期望'.ljust(width - 2)}    你的"]
    lines += [f"  {a.ljust(width)}  {b}" for a, b in zip(w, g)]
    return "\n".join(lines) + f"\n  （✗ = True = 屏蔽，· = 保留；{axes}）"


def _mask_grid(show, names=(), axes="行 = query，列 = key"):
    """The render of a wrong mask: the inputs, then expected and got side by side (first differing slice)."""
    def render(case, want, got):
        idx = first_bad(got, want, max(want.ndim - 2, 0))
        return f"输入：{show(case)}{_where(idx, names)}\n{side_by_side(want[idx], got[idx], axes)}"
    return render


def mask_exercise(diagnoses, show, names=(), shape_note="", axes="行 = query，列 = key"):
    mask = Output("m", dtype="bool", tol=(0.0, 0.0), name="掩码", shape_note=shape_note, dtype_note=DTYPE_HINT,
                  fallback="掩码与参考答案不一致。", render=_mask_grid(show, names, axes))
    return VerdictTable((mask,), diagnoses=diagnoses, error=_overflow, after=_tensor, untouched=INPUT_CHANGED,
                    narrow=True, errors_first=True)


causal_mask = mask_exercise([
    (DIAG0, known("diagonal0")),
    (INVERTED + " 因果掩码的 True 应在严格上三角（未来的 key）。", known("inverted")),
    ("方向反了：应屏蔽 key 下标 > query 下标（未来，严格上三角），你屏蔽的是过去（下三角）。", known("lower")),
    ("少屏蔽了一条对角线：diagonal=2 只屏蔽了「后天」，紧挨着的下一个 token 仍然可见（答案泄露）。", known("diagonal2")),
], show=lambda c: f"T={c['T']}")


# padding_mask ────────────────────────────────────────────────────────────────

def _torch():
    import torch

    return torch


def _call_padding(ns, case):
    torch = _torch()
    fn = lookup(ns, "padding_mask")
    if case["as"] == "tensor":
        lengths = torch.tensor(case["lengths"], dtype=torch.int64)
        before = lengths.clone()
    else:
        lengths = [int(n) for n in case["lengths"]]
        before = list(lengths)
    out = fn(lengths, case["T"]) if case["side"] is None else fn(lengths, case["T"], side=case["side"])
    changed = (not torch.equal(lengths, before)) if case["as"] == "tensor" else lengths != before
    return {**_mask_out(out), "input_changed": bool(changed)}


def _padding_show(c):
    return (f"lengths={[int(n) for n in c['lengths']]}（{'1 维 tensor' if c['as'] == 'tensor' else 'list'}）, "
            f"T={c['T']}, side={c['side']!r}")


padding_mask = mask_exercise([
    ("左右弄反了：side='right'（默认）时 pad 在后面，side='left' 时 pad 在前面（批量生成用左补齐）。",
     known("other_side")),
    ("没有处理 side='left'：左补齐时 pad 在前面，位置 t 是 pad 当且仅当 t < T − length。", known("always_right")),
    ("默认值不对：不写 side 时应是右补齐 side='right'。", known("default_left")),
    ("约定反了：True 应标出 pad 位置（= 屏蔽），你把真实 token 标成了 True。", known("inverted")),
    ("差一错误：右补齐时从下标 length 开始（含）是 pad，即 pos >= length；左补齐时 pos < T − length。",
     known("off_by_one")),
], show=_padding_show, shape_note="应是 (B, T)：每个样本一行。", axes="行 = 样本，列 = 位置")


# attention_mask ──────────────────────────────────────────────────────────────

def _call_attention_mask(ns, case):
    torch = _torch()
    fn = lookup(ns, "attention_mask")
    kp = torch.from_numpy(case["kp"].copy())
    out = fn(kp) if case["causal"] is None else fn(kp, causal=case["causal"])
    changed = not np.array_equal(kp.numpy(), case["kp"])
    return {**_mask_out(out), "input_changed": bool(changed)}


QUERY_AXIS = ("padding 屏蔽在了 query 那一维（行）：应屏蔽 key 那一维（列）——pad 不能被任何 query 看到；"
              "pad 自己作为 query 的输出留给损失的 ignore_index 去丢掉（§3.2）。")


attention_mask = mask_exercise([
    ("用了逻辑与（&）：因果掩码和 padding 掩码要用逻辑或（|）合并——任何一个说「屏蔽」就屏蔽。", known("and")),
    (QUERY_AXIS, known("query_axis")),
    ("query 那一维也屏蔽了：只需要屏蔽 key 那一维（列）。把 pad 行也整行屏蔽，正是 §3.4 的整行被掩 → NaN。",
     known("both_axes")),
    (INVERTED, known("inverted")),
    (DIAG0, known("diagonal0")),
    ("causal 参数用反了：causal=True（默认）时并上因果掩码，causal=False 时只按 key 屏蔽 pad。",
     known("causal_flipped")),
    ("不写 causal 时没有加因果掩码：默认值应为 True。", known("default_not_causal")),
    ("causal=True 时没有加因果掩码。", known("never_causal")),
    ("causal=False 时仍然加了因果掩码。", known("always_causal")),
], show=lambda c: f"causal={c['causal']}, key_padding（行 = 样本，✗ = pad）：\n" + "\n".join(grid(c["kp"])),
   names=("样本 b", "头"), shape_note="应是 (B, 1, T, T)：中间的 1 是留给头那一维的广播维。")


# masked_softmax ──────────────────────────────────────────────────────────────

_DTYPES = {"float32": "float32", "float64": "float64"}


def _call_masked_softmax(ns, case):
    torch = _torch()
    fn = lookup(ns, "masked_softmax")
    dtype = getattr(torch, _DTYPES[case["dtype"]])
    leaf = torch.tensor(case["scores"], dtype=dtype, requires_grad=True)
    scores = leaf.clone()  # non-leaf: an in-place edit is allowed by autograd and detected below
    mask = torch.from_numpy(case["mask"].copy())
    p = fn(scores, mask)
    changed = (not torch.equal(scores.detach(), leaf.detach())) or not np.array_equal(mask.numpy(), case["mask"])
    out = {"p": to_numpy(p), "p_dtype": dtype_name(p), "input_changed": bool(changed)}
    if is_tensor(p) and p.requires_grad and tuple(p.shape) == case["g"].shape:
        (p * torch.tensor(case["g"], dtype=p.dtype)).sum().backward()
    grad = leaf.grad
    out["grad_missing"] = grad is None
    out["grad"] = np.zeros(case["scores"].shape) if grad is None else to_numpy(grad)
    return out


def _tol(c):
    return (1e-4, 1e-6) if c["dtype"] == "float32" else (1e-7, 1e-10)


def _kept_rows(c, arr):
    """Only the rows that keep at least one key: what the contract fixes exactly."""
    _, m = ms_inputs(c)
    return np.asarray(arr)[~m.all(-1)]


AFTER = ("在 softmax 之后才屏蔽：softmax 已经把被屏蔽位置的 exp 算进了分母，置 0 之后每行的和不再是 1，"
         "而且未来/pad 的分数仍通过分母影响结果（§3.1）。先屏蔽分数，再做 softmax。")


AXIS = "归一化的维度不对：softmax 沿最后一维（key）做，dim=-1。"


def _want_got(name, want, got, where="", note=""):
    return (f"期望的 {name}{where}{note}：\n{fmt(want, max_items=80)}\n"
            f"你的 {name}：\n{fmt(got, max_items=80)}")


def _ms_show(c):
    s, _ = ms_inputs(c)
    m = np.asarray(c["mask"])
    mtxt = "\n" + "\n".join(grid(m)) if m.ndim <= 2 else f"（形状 {m.shape}）"
    return f"scores.shape={s.shape}, dtype={c['dtype']}, mask.shape={m.shape} {mtxt}"


def _shown(c, got, want):
    """Reference with the student's own values in fully blocked rows (checked separately)."""
    _, m = ms_inputs(c)
    return np.where(m.all(-1, keepdims=True), got, want)


def _ms_render(name, scale=1):
    """Expected vs got of `name` on its first differing (b, h) slice; fully blocked rows as the student's."""
    def render(c, want, got):
        rtol, atol = _tol(c)
        shown = _shown(c, got, want)
        idx = first_bad(got, shown, got.ndim - 2, rtol * scale, atol * scale)
        return f"输入：{_ms_show(c)}\n{_want_got(name, shown[idx], got[idx], _where(idx, ('b', 'h')))}"
    return render


GRAD_MISSING = "梯度没有传回输入：是不是用了 .detach()、.numpy()、torch.no_grad() 或新建了张量？结果要能反向传播。"


FULL_ROW_NAN = ("整行被屏蔽的行出现了 NaN：用 -inf 填充（或先乘掩码再除以行和）时，整行被屏蔽就是 0/0 = NaN（§3.4）。"
                "用有限的 torch.finfo(dtype).min 填充（masked_fill），或者单独把整行被屏蔽的行置 0。")


GRAD_NAN = ("前向结果有限，但梯度里有 NaN：NaN 只是在前向被「擦掉」了（nan_to_num / where），反向仍要经过 0/0 的那一步，"
            "而 NaN × 0 = NaN。让 NaN 根本不出现：用 masked_fill 填有限的 torch.finfo(dtype).min，不要在分数上加 -inf。")


def _grad_tol(c):
    return tuple(10 * t for t in _tol(c))


_MS_GRAD = Output("grad", tol=_grad_tol, view=_kept_rows,
                  fallback="前向对了，但 scores 的梯度不对（上游梯度为给定的随机张量）：是不是用了原地操作，"
                           "或把一部分结果 detach 了？",
                  render=_ms_render("scores.grad", scale=10))


def _ms_rows(c, out):
    """Blocked entries exactly 0, fully blocked rows finite and all 0 or uniform, then the gradient."""
    stage = f"【{c['stage']}】"
    got = np.asarray(out["p"])
    _, m = ms_inputs(c)
    rows = ~m.all(-1)
    leaked = got[m & rows[..., None]]
    if leaked.size and np.any(leaked != 0):
        return fail(f"{stage}被屏蔽的位置不是恰好 0{shown_only_public(f'（最大 {np.max(np.abs(leaked)):.3g}）')}：填充值不够负，"
                    "例如 exp(-100) 在 float64 里不是 0。用 torch.finfo(dtype).min 或 -inf 填充。", shown=f"输入：{_ms_show(c)}")
    full = got[~rows]
    if full.size and not np.all(np.isfinite(full)):
        return fail(f"{stage}{FULL_ROW_NAN}", shown=f"输入：{_ms_show(c)}\n你在整行被屏蔽的行上的输出：\n{fmt(full)}")
    for row in full:
        if not (np.all(np.abs(row) <= 1e-12) or np.allclose(row, 1.0 / row.size, rtol=1e-4, atol=1e-6)):
            return fail(f"{stage}整行被屏蔽的行既不是全 0 也不是均匀分布{shown_only_public(f'：{fmt(row)}')}。"
                        "常见原因：把 -1e9 这样的有限值「加」到分数上——float64 里分数之间的差被保留下来，整行被屏蔽时"
                        "等于没屏蔽。用 masked_fill「替换」成同一个值（或把整行置 0）。", shown=f"输入：{_ms_show(c)}")
    if out.get("grad_missing"):
        return fail(f"{stage}{GRAD_MISSING}")
    grad = np.asarray(out["grad"])
    if not np.all(np.isfinite(grad)):
        return fail(f"{stage}{GRAD_NAN}", shown=f"输入：{_ms_show(c)}\n你的 scores.grad：\n{fmt(grad, max_items=80)}")
    return _MS_GRAD.check(c["stage"], c, out, masked_softmax, ())


masked_softmax = VerdictTable(
    (Output("p", tol=_tol, view=_kept_rows, name="输出", same_as="scores", dtype=lambda c: c["dtype"], nan_matches=True,
            fallback="有可看 key 的行与参考答案不一致。", render=_ms_render("p")),),
    diagnoses=[
        (AFTER, known("after")),
        ("没有用到 mask：结果就是普通的 softmax。", known("unmasked")),
        (INVERTED, known("inverted_zero")), (INVERTED, known("inverted_uniform")), (INVERTED, known("inverted_nan")),
        (AXIS, known("axis_zero")), (AXIS, known("axis_nan")),
    ],
    error=_overflow, extras=_ms_rows, untouched=INPUT_CHANGED, narrow=True, errors_first=True)


# leftpad_safe ────────────────────────────────────────────────────────────────

def _call_leftpad(ns, case):
    torch = _torch()
    fn = lookup(ns, "safe_causal_attention")
    dtype = getattr(torch, _DTYPES[case["dtype"]])
    leaves = [torch.tensor(case[n], dtype=dtype, requires_grad=True) for n in ("q", "k", "v")]
    args = [t.clone() for t in leaves]
    kp = torch.from_numpy(case["kp"].copy())
    y = fn(*args, kp)
    changed = any(not torch.equal(a.detach(), t.detach()) for a, t in zip(args, leaves))
    changed = changed or not np.array_equal(kp.numpy(), case["kp"])
    out = {"y": to_numpy(y), "y_dtype": dtype_name(y), "input_changed": bool(changed)}
    if is_tensor(y) and y.requires_grad and tuple(y.shape) == case["gy"].shape:
        y.backward(torch.tensor(case["gy"], dtype=y.dtype))
    missing = []
    for name, t in zip(("dq", "dk", "dv"), leaves):
        if t.grad is None:
            missing.append(name)
            out[name] = np.zeros(case[name[1]].shape)
        else:
            out[name] = to_numpy(t.grad)
    out["grad_missing"] = missing
    return out


LP_SEES_PAD = ("真实 query 看到了 pad key：padding 要屏蔽 key 那一维（列），不是 query 那一维（行）——也别把它漏掉。"
               "真实 token 的输出里不能混进 pad 的内容。")


LP_COL0 = ("为了避免整行被掩放开了第 0 列：左补齐时位置 0 是 pad，真实 query 也就看到了它。只放开对角线"
           "（pad query 看自己），或用有限的 finfo.min 填充。")


def _real_rows(c, y):
    return np.asarray(y)[~c["kp"]]


def _lp_show(c, b=None):
    kp = c["kp"] if b is None else c["kp"][b:b + 1]
    who = "" if b is None else f"（样本 b={b}）"
    return f"d={c['q'].shape[-1]}, dtype={c['dtype']}, key_padding{who}（✗ = pad）：" + " ".join(grid(kp))


def _lp_render(c, want, y):
    """Expected vs got on the first differing sample; pad query rows shown as the student's own."""
    shown = np.where(c["kp"][..., None], y, want)
    (b,) = first_bad(y, shown, 1, *_tol(c))
    return (f"输入：{_lp_show(c, b)}\n"
            + _want_got("y", shown[b], y[b], f"（样本 b={b}）", "（pad 行不检查，按你的值显示）"))


LP_NAN = ("输出里有 NaN/inf（在 pad 行）：左补齐 + 因果掩码时，pad query 能看的 key 全是 pad，整行被屏蔽，"
          "-inf 填充给出 0/0 = NaN（§3.4）。三种修法：有限填充 torch.finfo(dtype).min；让 pad query 能看到自己"
          "（放开对角线）；或单独处理整行被掩的行。")


LP_GRAD_NAN = ("输出有限，但梯度里有 NaN：pad 行的 NaN 只是在前向被擦掉了，反向 V̄ = Aᵀ Ȳ 里 pad 行的 A 仍是 NaN，"
               "即使 Ȳ 在那里是 0，NaN × 0 = NaN，于是 V̄ 的每一行都被污染（§3.4）。要让 NaN 根本不出现：有限填充或放开对角线。")


def _lp_grad(name):
    """A gradient compared on every row (pad rows included) when pad rows get no upstream gradient."""
    def render(c, want, got):
        (b,) = first_bad(got, want, 1, *_grad_tol(c))
        return f"输入：{_lp_show(c, b)}\n" + _want_got(name, want[b], got[b], f"（样本 b={b}）")
    return Output(name, tol=_grad_tol, render=render,
                  fallback=f"输出对了，但 {name} 不对。pad 行的上游梯度为 0 时，梯度应与参考实现完全相同，"
                           "pad key 不该收到任何梯度。")


_LP_GRADS = tuple(_lp_grad(name) for name in ("dv", "dk", "dq"))


def _lp_gradients(c, out):
    """Finite output, gradients present and finite; exactly the reference's when pad rows get no upstream."""
    stage = f"【{c['stage']}】"
    y = np.asarray(out["y"])
    if not np.all(np.isfinite(y)):
        (b,) = first_bad(y, np.nan_to_num(y), 1)
        return fail(f"{stage}{LP_NAN}", shown=f"输入：{_lp_show(c, b)}\n你的 y[{b}]：\n{fmt(y[b], max_items=80)}",
                    where="出错的输出：y")
    if out.get("grad_missing"):
        return fail(f"{stage}{GRAD_MISSING}（缺少 {','.join(out['grad_missing'])}）")
    for name in ("dv", "dk", "dq"):
        g = np.asarray(out[name])
        if not np.all(np.isfinite(g)):
            (b,) = first_bad(g, np.nan_to_num(g), 1)
            return fail(f"{stage}{LP_GRAD_NAN}", where=f"出错的输出：{name}",
                        shown=f"输入：{_lp_show(c, b)}\n你的 {name}[{b}]：\n{fmt(g[b], max_items=80)}")
    if c["pad_upstream"] == "zero":
        for grad in _LP_GRADS:
            verdict = grad.check(c["stage"], c, out, leftpad_safe, ())
            if verdict:
                return verdict
    return None


leftpad_safe = VerdictTable(
    (Output("y", tol=_tol, view=_real_rows, name="输出", dtype=lambda c: c["dtype"], same_as="q", nan_matches=True,
            fallback="真实位置上的输出与参考答案不一致。", render=_lp_render),),
    diagnoses=[
        (LP_SEES_PAD, known("sees_pad")),
        ("用了逻辑与（&）：因果和 padding 要用逻辑或（|）合并。", known("and")),
        ("忘了因果掩码：真实 query 看到了未来的 token。", known("not_causal")),
        ("在 softmax 之后才屏蔽：每行不再归一化，被屏蔽的分数仍留在分母里（§3.1）。先屏蔽分数再 softmax。", known("after")),
        (LP_COL0, known("column0")),
        ("缺少缩放：分数要除以 √d。", known("no_scale")),
        (INVERTED, known("inverted")),
    ],
    error=_overflow, extras=_lp_gradients, untouched=INPUT_CHANGED, narrow=True, errors_first=True)


# grade_id -> (driver: how to run the student's code on one case, verdict table: how to read its outputs)
EXERCISES = {
    "causal_mask": (Driver(("causal_mask",), _call_causal), causal_mask),
    "padding_mask": (Driver(("padding_mask",), _call_padding), padding_mask),
    "attention_mask": (Driver(("attention_mask",), _call_attention_mask), attention_mask),
    "masked_softmax": (Driver(("masked_softmax",), _call_masked_softmax), masked_softmax),
    "leftpad_safe": (Driver(("safe_causal_attention",), _call_leftpad), leftpad_safe),
}
