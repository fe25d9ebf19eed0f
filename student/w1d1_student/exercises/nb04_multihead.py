"""Exercises of notebook 04 (§4): split_merge_heads, mha, mha_selfcheck.

Cases are plain data; `run` builds the torch inputs (float32 or float64), SETS the module's four
projections from the case arrays, calls the student's code and sends back numpy outputs, dtype
names, structure facts and flags. No reference implementation lives here.

Forbidden APIs (`F.scaled_dot_product_attention`, `nn.MultiheadAttention`, their functional forms) are
detected at run time by torch function/dispatch modes (`torch_calls.watching`), which see a call
however it was reached; nothing is patched. The grader also rejects direct uses in the answer's
source (autograder/static/forbidden_calls.py), which no code in the kernel can change. The modes see only
the calling thread, so starting a Python thread is itself reported.

Verdicts: split_merge_heads, mha — tables for the engine's one loop.

mha_selfcheck grades the student's own checks by mutation analysis: each case holds one class (the grader's
source text, a hidden one written afresh for each run, defined here like the student's own class); the student's
`mha_property_errors` measures it, and the verdict reads from the grader's answers whether the class is correct
(every value ≈ 0) or has a known bug (the properties that see it clearly non-zero, those blind to it ≈ 0).

The float64 reference is built from the case's own weights (the driver SET them in the student's
module); for each realistic bug the grader reproduces its output so a mismatch names the mistake.
"""
import numpy as np

from ..driver import OTHER, Driver, described, dtype_name, is_tensor, items, lookup, to_numpy, type_name
from ..engine import MASK_MESSAGES, Output, VerdictTable, bug_table, fail, fmt, known, shown_only_public
from ..torch_calls import threads_started, watching

NOTEBOOK = "04_multihead"
_PARAMS = tuple(f"W_{n}.{kind}" for n in "qkvo" for kind in ("weight", "bias"))
WORDS = (*_PARAMS, "W_q", "W_k", "W_v", "W_o", "x", "missing")  # what a result names besides types (driver.py)


# split_merge_heads ───────────────────────────────────────────────────────────

def _torch():
    import torch

    return torch


def _tensor(a, dtype):
    torch = _torch()
    return torch.tensor(np.asarray(a), dtype=getattr(torch, dtype))


def _layout(y, layout, dtype):
    """Build a tensor equal to `y` (B,h,T,d_k) with the requested memory layout."""
    if layout == "contiguous":
        return _tensor(y, dtype)
    if layout == "transposed":  # stored as (B,T,h,d_k)
        return _tensor(np.ascontiguousarray(y.transpose(0, 2, 1, 3)), dtype).transpose(1, 2)
    if layout == "last2":  # stored as (B,h,d_k,T)
        return _tensor(np.ascontiguousarray(y.transpose(0, 1, 3, 2)), dtype).transpose(-2, -1)
    if layout == "strided":  # every other element of a wider tensor
        wide = np.zeros(y.shape[:-1] + (2 * y.shape[-1],))
        wide[..., ::2] = y
        return _tensor(wide, dtype)[..., ::2]
    raise ValueError(layout)


def _call_split(ns, case):
    if case["kind"] == "split":
        split = lookup(ns, "split_heads")
        merge = lookup(ns, "merge_heads")
        x = _tensor(case["x"], case["dtype"])
        x0 = x.clone()
        s = split(x, case["h"])
        if not is_tensor(s):
            raise TypeError(f"split_heads 应返回 torch.Tensor，得到 {type_name(s)}")
        back = merge(s)
        return {"s": to_numpy(s), "s_dtype": dtype_name(s), "roundtrip": to_numpy(back),
                "roundtrip_dtype": dtype_name(back), "input_changed": not bool((x == x0).all())}
    merge = lookup(ns, "merge_heads")
    y = _layout(case["y"], case["layout"], case["dtype"])
    y0 = y.clone()
    m = merge(y)
    if not is_tensor(m):
        raise TypeError(f"merge_heads 应返回 torch.Tensor，得到 {type_name(m)}")
    return {"m": to_numpy(m), "m_dtype": dtype_name(m), "input_contiguous": bool(y.is_contiguous()),
            "input_changed": not bool((y == y0).all())}


MSG_CONTIGUOUS = ("transpose 之后张量不再连续，view 会报错（§A.5）：先 .contiguous() 再 view，或直接用 reshape "
                  "（不连续时它会自动复制）。")


def recognised_error(case, res):
    """A Chinese hint for a few recognisable exceptions; None otherwise."""
    err = res.get("error", "") if isinstance(res, dict) else ""
    stage = case.get("stage", "")
    if "view size is not compatible" in err or "use .reshape" in err:
        return fail(f"【{stage}】{MSG_CONTIGUOUS}\n你的代码抛出了：{err}")
    if case.get("kind") in ("forward", "backward") and case.get("mask") is not None and (
            "must match the size" in err or "expand" in err or "broadcast" in err or "shape" in err):
        return fail(f"【{stage}】掩码没有正确广播到分数的形状 (B, h, T, T)：(T, T) 的掩码要当成 (1, 1, T, T)，"
                    "(B, 1, T, T) 的对所有头共用，(B, h, T, T) 的原样使用（masked_fill 会自动按尾部对齐广播，"
                    f"不要再给掩码加维度）。\n你的代码抛出了：{err}")
    return None


def _exact(key):
    return Output(key, dtype=lambda c: c["dtype"], tol=(0, 0))


MSG_SPLIT_VIEW = ("拆头方式不对：直接 view(B, h, T, d_k) 会把 (T, d) 这块内存按顺序切成 h 份，每个“头”拿到的是几个"
                  "位置的混合，而不是某一段特征。应先 view(B, T, h, d_k) 把最后一维切成 h 段，再 transpose(1, 2)。")


MSG_SPLIT_INTERLEAVE = ("第 i 个头应是连续的一段特征 x[..., i*d_k:(i+1)*d_k]；你的写法把特征交错分给了各头"
                        "（相当于 view(B, T, d_k, h)）。应为 view(B, T, h, d_k).transpose(1, 2)。")


MSG_MERGE_NO_T = ("合并时漏了 transpose（§A.5 的隐蔽错误）：直接 view/reshape(B, T, d) 形状对了，但把不同位置的头拼进了"
                  "同一行。应先 transpose(1, 2) 回到 (B, T, h, d_k)，再 reshape(B, T, d)（或 .contiguous().view）。")


MSG_MERGE_INTERLEAVE = "合并的维度顺序不对：应 transpose(1, 2) 成 (B, T, h, d_k) 再合并最后两维，让头 0 的特征排在最前面。"


SPLIT_BUGS = [(MSG_SPLIT_VIEW, known("view_roundtrip")), (MSG_SPLIT_VIEW, known("view")),
              (MSG_SPLIT_INTERLEAVE, known("interleave")), (MSG_MERGE_NO_T, known("merge_no_transpose")),
              (MSG_MERGE_INTERLEAVE, known("merge_interleave"))]


MERGE_BUGS = [(MSG_MERGE_NO_T, known("merge_no_transpose")), (MSG_MERGE_INTERLEAVE, known("merge_interleave"))]


def _split_show(c):
    if c["kind"] == "split":
        return f"x.shape={c['x'].shape}, n_heads={c['h']}, d_k={c['x'].shape[2] // c['h']}"
    return f"y.shape={c['y'].shape}（{c['layout']}），y={fmt(c['y'])}"


SPLIT_MERGE_HEADS = VerdictTable(
    lambda c: (_exact("s"), _exact("roundtrip")) if c["kind"] == "split" else (_exact("m"),),
    diagnoses=lambda c: SPLIT_BUGS if c["kind"] == "split" else MERGE_BUGS,
    show=_split_show, error=recognised_error)


# mha ─────────────────────────────────────────────────────────────────────────

_FORBIDDEN_NAMES = ("scaled_dot_product", "multi_head_attention", "MultiheadAttention")


def _build(ns, case):
    cls = lookup(ns, "MultiHeadAttention")
    return cls(case["d"], case["h"], bias=case["bias"])


def _structure_facts(m):
    """The module's parameter names (one of _PARAMS, else OTHER), parameter count, d_model, n_heads and the
    kinds of its four projections, read by exact type (driver.py)."""
    torch = _torch()
    names, count = [], 0
    for pair in m.named_parameters():
        name, p = items(pair, 2, "named_parameters() 应给出 (名字, 参数) 两个值")
        names.append(name if type(name) is str and name in _PARAMS else OTHER)
        count += p.numel() if is_tensor(p) else 0
    out = {"param_names": sorted(names), "param_count": int(count)}
    for attr in ("d_model", "n_heads"):
        val = getattr(m, attr, None)
        out[attr] = int(val) if type_name(val) in ("int", "int32", "int64") else None
    kinds = {}
    for name in ("W_q", "W_k", "W_v", "W_o"):
        lin = getattr(m, name, None)
        kinds[name] = "missing" if lin is None else "Linear" if issubclass(type(lin), torch.nn.Linear) else type_name(lin)
    out["linear_kinds"] = kinds
    return out


def _set_weights(m, case):
    torch = _torch()
    dtype = getattr(torch, case["dtype"])
    m.to(dtype)
    with torch.no_grad():
        for name in ("q", "k", "v", "o"):
            lin = getattr(m, "W_" + name)
            lin.weight.copy_(_tensor(case["W" + name], case["dtype"]))
            if case["bias"]:
                lin.bias.copy_(_tensor(case["b" + name], case["dtype"]))
    for p in m.parameters():
        p.grad = None
    return dtype


def _mask_tensor(case):
    return None if case["mask"] is None else _tensor(case["mask"], "bool")


def _forward(m, x, mask, need_weights):
    if mask is None and not need_weights:
        return m(x)
    if not need_weights:
        return m(x, mask)
    return m(x, mask, need_weights=True)


def _run_forward(m, case):
    x = _tensor(case["x"], case["dtype"])
    x0 = x.clone()
    mask = _mask_tensor(case)
    y, attn = items(_forward(m, x, mask, True), 2, "need_weights=True 时应返回 (y, attn) 两个值")
    plain = _forward(m, x, mask, False)
    res = {"y": to_numpy(y), "y_dtype": dtype_name(y), "attn": to_numpy(attn), "attn_dtype": dtype_name(attn),
           "plain_is_tuple": issubclass(type(plain), (tuple, list)),
           "input_changed": not bool((x == x0).all())}
    if mask is not None:
        res["mask_changed"] = not np.array_equal(mask.numpy(), case["mask"])
    if not res["plain_is_tuple"]:
        res["y_plain"] = to_numpy(plain)
    return res


def _run_backward(m, case):
    torch = _torch()
    x = _tensor(case["x"], case["dtype"]).requires_grad_(True)
    y = _forward(m, x, _mask_tensor(case), False)
    if not is_tensor(y):
        raise TypeError(f"need_weights=False（默认）时应只返回 y（torch.Tensor），得到 {described(y)}")
    dy = _tensor(case["dy"], case["dtype"])
    with torch.enable_grad():
        y.backward(dy)
    res, missing = {"y": to_numpy(y)}, []
    names = [("W_" + n, "weight") for n in "qkvo"] + ([("W_" + n, "bias") for n in "qkvo"] if case["bias"] else [])
    for mod, kind in names:
        p = getattr(getattr(m, mod), kind)
        key = f"g_{mod}_{kind}"
        if not is_tensor(p) or p.grad is None:
            missing.append(f"{mod}.{kind}")
            res[key] = np.zeros(tuple(p.shape))
        else:
            res[key] = to_numpy(p.grad)
    if x.grad is None:
        missing.append("x")
        res["g_x"] = np.zeros(tuple(x.shape))
    else:
        res["g_x"] = to_numpy(x.grad)
    res["grad_missing"] = missing
    return res


def _run_perm(m, case):
    torch = _torch()
    x = _tensor(case["x"], case["dtype"])
    perm = torch.as_tensor(np.asarray(case["perm"]), dtype=torch.long)
    with torch.no_grad():
        y = m(x)
        yp = m(x[:, perm].contiguous())
    return {"y": to_numpy(y), "y_perm": to_numpy(yp)}


def _make_call_mha(watching):
    """The mha driver, holding its own reference to the detector of forbidden calls."""

    def tripwires():
        flags = {"used_sdpa": False, "used_torch_mha": False}

        def seen(name, args, kwargs):
            if "scaled_dot_product" in name:
                flags["used_sdpa"] = True
            if "multi_head_attention" in name or "MultiheadAttention" in name:
                flags["used_torch_mha"] = True

        return flags, watching(_FORBIDDEN_NAMES, seen, operators=True)

    def call_mha(ns, case):
        torch = _torch()
        flags, detector = tripwires()
        with detector, threads_started(flags):
            try:
                m = _build(ns, case)
                if case["kind"] == "struct":
                    out = _structure_facts(m)
                else:
                    _set_weights(m, case)
                    run = {"forward": _run_forward, "backward": _run_backward, "perm": _run_perm}[case["kind"]]
                    with torch.enable_grad():
                        out = run(m, case)
            except Exception:
                if flags["used_sdpa"] or flags["used_torch_mha"]:
                    return dict(flags)  # the forbidden use is the verdict, whatever failed after it
                raise
        out.update(flags)
        return out

    return call_mha


MHA_DIAGNOSES = [
    (MSG_MERGE_NO_T, known("merge_no_transpose")),
    ("缩放用错了维度：每个头的分数要除以 √d_k（d_k = d_model / n_heads），不是 √d_model。", known("scale_dmodel")),
    ("缺少缩放：分数要除以 √d_k。", known("scale_none")),
    ("除以了 d_k 而不是 √d_k。", known("scale_dk_lin")),
    (MASK_MESSAGES["inverted"], known("mask_inverted")),
    (MASK_MESSAGES["inverted"], known("mask_inverted_finite")),
    (MASK_MESSAGES["after_softmax"], known("mask_after_softmax")),
    ("掩码的行列方向反了：mask[..., i, j] 表示 query i 能否看 key j（行 = query，列 = key），不要转置掩码。",
     known("mask_transposed")),
    (MASK_MESSAGES["ignored"], known("mask_ignored")),
    ("缺少输出投影 W_o：拼接各头之后还要经过 self.W_o。", known("no_wo")),
    ("softmax 的方向不对：应对每个 query 的所有 key 归一化，即最后一维 dim=-1。", known("axis")),
    (MSG_SPLIT_VIEW, known("split_view_merge_no_transpose")),
    (MSG_SPLIT_VIEW, known("split_view")),
    (MSG_SPLIT_INTERLEAVE, known("split_interleave_merge_interleave")),
    (MSG_SPLIT_INTERLEAVE, known("split_interleave")),
]


def _show(c):
    mask = "无" if c.get("mask") is None else f"{c['mask_kind']} 形状 {tuple(np.shape(c['mask']))}"
    return f"B={c['B']}, T={c['T']}, d_model={c['d']}, n_heads={c['h']}, bias={c['bias']}, {c['dtype']}，掩码：{mask}"


MSG_FORBIDDEN_SDPA = ("本题要求手写多头注意力：检测到调用了 F.scaled_dot_product_attention（SDPA）。"
                      "请用矩阵乘、掩码和 softmax 自己实现；SDPA 留到 06_api 再用。本题计 0 分。")


MSG_FORBIDDEN_MHA = ("本题要求手写多头注意力：检测到使用了 nn.MultiheadAttention。请用四个 nn.Linear 和矩阵乘自己实现；"
                     "nn.MultiheadAttention 留到 06_api 再用。本题计 0 分。")


MSG_THREADS = ("本题的计算在别的线程里运行了（或检查时还有你启动的线程活着）："
               "检查只看得见调用它的那个线程，看不到别的线程里调用了什么。请在 forward 里直接计算，不要用 threading / ThreadPoolExecutor；"
               "答案单元格里开的线程要在检查之前结束（join）。库留下的线程也算，例如 tqdm 进度条的监控线程"
               "（用进度条之前先写 tqdm.tqdm.monitor_interval = 0）。本题计 0 分。")


def hand_written(cases, results):
    """SDPA or nn.MultiheadAttention anywhere, or work moved to another thread, costs the exercise."""
    for res in results:
        if isinstance(res, dict) and res.get("ok") and res["out"].get("used_threads"):
            return fail(MSG_THREADS)
    for res in results:
        if isinstance(res, dict) and res.get("ok"):
            if res["out"].get("used_sdpa"):
                return fail(MSG_FORBIDDEN_SDPA)
            if res["out"].get("used_torch_mha"):
                return fail(MSG_FORBIDDEN_MHA)
    return None


def _structure(case, out):
    stage, d, h, bias = case["stage"], case["d"], case["h"], case["bias"]
    kinds = out.get("linear_kinds") or {}
    absent = [n for n in ("W_q", "W_k", "W_v", "W_o") if kinds.get(n) != "Linear"]
    if absent:
        # what the student's code named stays off the first line (the mistake the class report counts)
        return fail(f"【{stage}】{', '.join(absent)} 不是 nn.Linear 属性。"
                    "__init__ 要创建 self.W_q、self.W_k、self.W_v、self.W_o = nn.Linear(d_model, d_model, bias=bias)。"
                    f"\n得到：{kinds}")
    if out.get("d_model") != d or out.get("n_heads") != h:
        return fail(f"【{stage}】要在 __init__ 里保存 self.d_model = {d}、self.n_heads = {h}；"
                    + shown_only_public(f"得到 d_model={out.get('d_model')}, n_heads={out.get('n_heads')}。"))
    want = sorted(f"W_{n}.{k}" for n in "qkvo" for k in (("weight", "bias") if bias else ("weight",)))
    names = list(out.get("param_names") or [])
    if names != want:
        extra = sorted(set(names) - set(want))
        lacking = sorted(set(want) - set(names))
        if any(n.endswith(".bias") for n in extra):
            hint = "bias=False 时四个 nn.Linear 都不应有偏置：把 bias 参数传给 nn.Linear。"
        elif any(n.endswith(".bias") for n in lacking):
            hint = "bias=True 时四个 nn.Linear 都要有偏置：把 bias 参数传给 nn.Linear。"
        else:
            hint = "只能有四个 nn.Linear（W_q、W_k、W_v、W_o）的参数，不要有别的参数。"
        return fail(f"【{stage}】参数名不对：{hint}\n多了 {extra or '无'}，少了 {lacking or '无'}。")
    count = 4 * d * d + (4 * d if bias else 0)
    if out.get("param_count") != count:
        formula = "4d²+4d" if bias else "4d²"
        return fail(f"【{stage}】参数量应为 {formula}{shown_only_public(f' = {count}')}（与头数无关：切分而不是复制），"
                    + shown_only_public(f"得到 {out.get('param_count')}。") + "每个 nn.Linear 都是 (d_model, d_model)。")
    return None


def _weights_per_head(case, out):
    stage, B, T, h = case["stage"], case["B"], case["T"], case["h"]
    attn = np.asarray(out.get("attn"))
    if attn.ndim in (3, 4) and attn.shape != (B, h, T, T) and attn.shape[-2:] == (T, T) and (
            attn.ndim == 3 or attn.shape[1] == 1) and attn.shape[0] == B and h > 1:
        ref = case["_oracle"]["ref"]["attn"]
        averaged = np.allclose(attn.reshape(B, T, T), ref.mean(1), rtol=1e-4, atol=1e-6)
        why = "对头取了平均" if averaged else "只有一个头"
        return fail(f"【{stage}】need_weights=True 时返回的注意力权重{why}" + shown_only_public(f"（形状 {attn.shape}）") + "："
                    f"要返回每个头各自的权重，形状 (B, h, T, T) = {(B, h, T, T)}，不要平均。")
    if out.get("plain_is_tuple"):
        return fail(f"【{stage}】need_weights=False（默认）时只返回 y，不要返回元组。")
    return None


def _gradients_reach_weights(case, out):
    missing = list(out.get("grad_missing") or [])
    if missing:
        return fail(f"【{case['stage']}】梯度没有传到 {', '.join(missing)}：前向里不要用 .detach()、.data、"
                    "torch.no_grad() 或转成 numpy，整个计算都要留在 autograd 图里。")
    return None


def _tol(case):
    return (2e-4, 2e-6) if case["dtype"] == "float32" else (1e-7, 1e-10)


def _forward_extras(case, out):
    stage = case["stage"]
    rtol, atol = _tol(case)
    attn = np.asarray(out["attn"])
    if np.shape(out["y_plain"]) != np.shape(out["y"]) or not np.allclose(out["y_plain"], out["y"], rtol=rtol, atol=atol):
        return fail(f"【{stage}】need_weights=False 与 need_weights=True 得到的 y 不一样。")
    rows = np.abs(attn.sum(-1) - 1).max()
    if rows > (1e-5 if case["dtype"] == "float32" else 1e-12):
        return fail(f"【{stage}】注意力权重每行的和应为 1{shown_only_public(f'，最大偏差 {rows:.2e}')}。")
    if case.get("mask") is not None:
        blocked = np.broadcast_to(case["mask"], attn.shape)
        worst = float(np.abs(attn[blocked]).max()) if blocked.any() else 0.0
        if worst != 0.0:
            return fail(f"【{stage}】被屏蔽位置的权重必须恰好为 0{shown_only_public(f'，得到最大 {worst:.3g}')}。"
                        "把被屏蔽的分数填成 -inf 或 torch.finfo(dtype).min 再做 softmax（不要用 -100 这类不够小的数）。")
    return None


def _not_equivariant(case, out, message):
    if case["kind"] != "perm":
        return ""
    y, yp = np.asarray(out.get("y")), np.asarray(out.get("y_perm"))
    if y.shape == yp.shape and y.ndim >= 2 and not np.allclose(yp, y[:, case["perm"]], rtol=1e-6, atol=1e-8):
        return ("\n提示：没有掩码时多头注意力应当置换等变：打乱输入顺序，输出只应同样被打乱。"
                "你的实现里有依赖位置的东西（比如一直加着因果掩码，或按位置切分）。")
    return ""


DETACHED = ("W_q、W_k 的梯度不对而 W_v、W_o 的对：注意力权重被 detach 了（或在 no_grad 里算的），"
            "梯度到不了分数。返回给调用者的权重可以 detach，参与计算的不可以。")


def _backward_tol(case):
    return (1e-3, 1e-5) if case["dtype"] == "float32" else (1e-7, 1e-10)


_GRAD_KEYS = ["g_W_q_weight", "g_W_k_weight", "g_W_v_weight", "g_W_o_weight"]


def _mha_outputs(case):
    kind = case["kind"]
    if kind == "forward":
        return tuple(Output(k, dtype=lambda c: c["dtype"], tol=_tol) for k in ("attn", "y"))
    if kind == "backward":
        keys = ["y"] + _GRAD_KEYS + ([k.replace("weight", "bias") for k in _GRAD_KEYS] if case["bias"] else []) + ["g_x"]
        return tuple(Output(k, answer="grads", tol=_backward_tol) for k in keys)
    if kind == "perm":
        return tuple(Output(k, answer="perm", tol=_tol) for k in ("y", "y_perm"))
    return ()


MHA = VerdictTable(
    _mha_outputs,
    diagnoses=lambda c: ([(DETACHED, known("grads_detached"))] if c["kind"] == "backward" else []) + MHA_DIAGNOSES,
    show=_show, gate=hand_written, error=recognised_error, hint=_not_equivariant,
    flags=lambda c, out: {"struct": _structure, "forward": _weights_per_head,
                          "backward": _gradients_reach_weights}.get(c["kind"], lambda c, o: None)(c, out),
    extras=lambda c, out: _forward_extras(c, out) if c["kind"] == "forward" else None)


# mha_selfcheck ───────────────────────────────────────────────────────────────

PROPERTIES = ("row_sum", "masked", "single_head", "equivariance", "sdpa")
ZERO, CLEAR = 1e-6, 1e-4  # a correct class: every value ≤ ZERO; a bug: each property that sees it > CLEAR (or NaN)
LIMITS = {ZERO: "1e-6", CLEAR: "1e-4"}


def _class_under_test(source):
    """A case's class, defined afresh from the grader's source text the way the student's own class is: named
    MultiHeadAttention, module __main__, no file behind its code."""
    scope = {"__name__": "__main__"}
    exec(compile(source, "<class under test>", "exec"), scope)
    return scope["MultiHeadAttention"]


def _number(value):
    """(a returned value as a float, its type's name from the vocabulary) by its exact type: a Python or numpy
    number or a one-element floating tensor; (None, name) for anything else."""
    name = dtype_name(value) if is_tensor(value) or type(value) is np.ndarray else type_name(value)
    if type(value) is bool or type_name(value) == OTHER:
        return None, name
    try:
        arr = to_numpy(value)
    except TypeError:
        return None, name
    if arr.size != 1 or arr.dtype.kind != "f" and not isinstance(value, (int, float, np.integer)):
        return None, name
    return float(arr.reshape(())), name


def _call_selfcheck(ns, case):
    check = lookup(ns, "mha_property_errors")
    cls = _class_under_test(case["source"])
    own, bases = dict(vars(cls)), cls.__bases__
    sizes = {} if case["d_model"] is None else {"d_model": case["d_model"], "n_heads": case["n_heads"]}
    torch = _torch()
    with torch.random.fork_rng(devices=[]):  # the classes' initial weights: the case's (public: the same at home)
        torch.manual_seed(case["torch_seed"])
        got = check(cls, **sizes)
    now = vars(cls)
    out = {"returned": _number(got)[1] if type(got) is not dict else "dict",
           "class_changed": bool(cls.__bases__ is not bases or now.keys() != own.keys()
                                 or any(now[k] is not v for k, v in own.items()))}
    for name in PROPERTIES:
        present = type(got) is dict and name in got
        out[name], out[name + "_type"] = _number(got[name]) if present else (None, None)
    return out


SELFCHECK_BUGS = bug_table("""
merge_no_transpose    合并多头时漏了 transpose（(B, h, T, d_k) 直接 reshape 成 (B, T, d)）
split_view            拆头时直接 view(B, h, T, d_k)：每个“头”拿到的是几个位置的混合
split_interleave      拆头时把特征交错分给了各头（第 i 个头应是连续的一段特征）
scale_dmodel          分数除以了 √d_model，而不是每个头的 √d_k
scale_none            分数没有除以 √d_k
scale_dk_lin          分数除以了 d_k，而不是 √d_k
mask_inverted         掩码的约定反了（屏蔽了 False 的位置）
mask_inverted_finite  掩码的约定反了（用有限的 -1e9 填充，屏蔽了 False 的位置）
mask_after_softmax    掩码加在了 softmax 之后
mask_transposed       掩码的行列方向反了（转置了掩码）
mask_ignored          没有用上掩码
no_wo                 缺少输出投影 W_o
axis                  softmax 沿错了轴（dim=-2：对 query 归一化）
""")

# why a property cannot see a bug, where that is a lesson of the course
BLIND = {"single_head": "h = 1 的对照看不出这个错误：只有一个头时，拆头、合并和 √d_k 都与头数无关——这是 §A.5 检查法的盲区，"
                        "要靠 h > 1 的检查（置换等变、与 SDPA 对拍）来抓。"}

MSG_SOURCE = ("被测的类是评分程序给的，没有源文件可读：检查要测量类的行为（建模块、读它的参数算参考、运行、比较输出），"
              "不要靠它的源代码、名字或字节码认出它。")


MSG_BLIND_LOUD = "你的检查把一个错误报在了看不出它的性质上："


def _shown(out, names):
    return "、".join(f"{name} = {out[name]:.3g}" for name in names)


def _returned(case, out):
    stage = case["stage"]
    if out.get("returned") != "dict":
        return fail(f"【{stage}】mha_property_errors 应返回 dict（键 {', '.join(PROPERTIES)}），得到 {out.get('returned')}。")
    missing = [name for name in PROPERTIES if out.get(name + "_type") is None]
    if missing:
        return fail(f"【{stage}】返回的 dict 缺少键 {', '.join(missing)}：五个性质都要测，键为 {', '.join(PROPERTIES)}。")
    odd = [f"{name}（{out[name + '_type']}）" for name in PROPERTIES if out.get(name) is None]
    if odd:
        return fail(f"【{stage}】每个值应是一个数（float，例如 `.item()` 的结果），这几个不是：{', '.join(odd)}。")
    negative = [name for name in PROPERTIES if out[name] < 0]
    if negative:
        return fail(f"【{stage}】误差应当非负（取差的绝对值再取最大）：{', '.join(negative)} 是负数。")
    if out.get("class_changed"):
        return fail(f"【{stage}】你的函数修改了被测的类（给类的属性赋了值、删了属性或换了基类）。"
                    "题目要求只测量、不修改：建好模块后只调用它。")
    return None


def _mutants(case, out):
    """A correct class: every value ≈ 0. A class with a known bug: each property the grader's table says sees it
    is clearly non-zero (NaN counts: an `assert error < 1e-6` fails on it), and each property blind to it by the
    math stays ≤ 1e-4 (one number written under every key cannot do both)."""
    stage, bug = case["stage"], known("ref")(case)["bug"]
    if bug is None:
        flagged = [name for name in PROPERTIES if not out[name] <= ZERO]
        if not flagged:
            return None
        return fail(f"【{stage}】这是一个正确的实现，你的检查却说它有错"
                    f"{shown_only_public('：' + _shown(out, flagged))}（正确的实现每一项都应 ≤ {LIMITS[ZERO]}）。"
                    "看看这一项的参考是不是算错了：形状、头的切分、掩码约定、缩放用的维度。",
                    mistakes=((None, "这是一个正确的实现，你的检查却说它有错"),))
    message, buggy = next((m, b) for m, b in SELFCHECK_BUGS if b.name == bug)
    row = buggy(case)
    missed = [name for name in row["sees"] if out[name] <= CLEAR]
    if missed:
        blind = "".join(f"\n（{name}：{BLIND[name]}）" for name in row["blind"] if name in BLIND)
        return fail(f"【{stage}】你的检查没有发现：{message}。应当发现它的性质：{'、'.join(row['sees'])}；"
                    f"你的 {'、'.join(missed)} 不够明显（应 > {LIMITS[CLEAR]}）{shown_only_public('：' + _shown(out, missed))}。{blind}",
                    mistakes=((bug, f"你的检查没有发现：{message}"),))
    loud = [name for name in row["blind"] if not out[name] <= CLEAR]
    if loud:
        return fail(f"【{stage}】{MSG_BLIND_LOUD}这个类只有一个错误：{message}；数学上 {'、'.join(loud)} 看不出它"
                    f"（在这个类上和在正确的实现上一样 ≈ 0），你的检查却在这几项报了错"
                    f"{shown_only_public('：' + _shown(out, loud))}（应 ≤ {LIMITS[CLEAR]}）。每一项要测它自己的性质。",
                    mistakes=((None, MSG_BLIND_LOUD),))
    return None


def _selfcheck_error(case, res):
    err = res.get("error", "") if isinstance(res, dict) else ""
    if "source code" in err or "built-in class" in err or "could not find class definition" in err:
        return fail(f"【{case['stage']}】{MSG_SOURCE}（你的代码读源代码时出错了）")
    return None


SELFCHECK = VerdictTable((), error=_selfcheck_error, flags=_returned, extras=_mutants, untouched=None)


# grade_id -> (driver: how to run the student's code on one case, verdict table: how to read its outputs)
EXERCISES = {
    "split_merge_heads": (Driver(("split_heads", "merge_heads"), _call_split), SPLIT_MERGE_HEADS),
    "mha": (Driver(("MultiHeadAttention",), _make_call_mha(watching)), MHA),
    "mha_selfcheck": (Driver(("mha_property_errors",), _call_selfcheck), SELFCHECK),
}
