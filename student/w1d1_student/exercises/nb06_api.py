"""Exercises of notebook 06 (§A): sdpa_attention, decode_step, to_torch_mha, torch_mha_forward.

Every call of `F.scaled_dot_product_attention` while the student's function runs is recorded by a
torch function mode (`torch_calls.watching`: an alias, functools.partial or a default argument is
seen too), so the checks know that it was called and with which flags.
Modules are built here and their weights SET from the case; nothing is read back from the
student's objects except what their torch module computes and holds.

Verdicts: SDPA, KV-cache decoding, nn.MultiheadAttention — tables for the engine.

A buggy reference may leave NaN in rows where its mask blocks every key (torch gives 0 or NaN there,
depending on the kernel): the engine ignores those positions when naming the bug.
"""
import inspect
from contextlib import contextmanager

import numpy as np
import torch
from torch import nn

from ..driver import Driver, described, dtype_name, is_tensor, items, lookup, to_numpy, type_name
from ..engine import Output, VerdictTable, fail, fmt, known, shown_only_public
from ..torch_calls import watching

NOTEBOOK = "06_api"


# sdpa_attention ──────────────────────────────────────────────────────────────

_DT = {"float32": torch.float32, "float64": torch.float64}


def _arg(args, kwargs, name, pos, default):
    if name in kwargs:
        return kwargs[name]
    return args[pos] if len(args) > pos else default


def _make_sdpa_calls(watching):
    @contextmanager
    def sdpa_calls():
        """Record every call of F.scaled_dot_product_attention, however the student's code reached it."""
        calls = []

        def seen(name, args, kwargs):
            mask = _arg(args, kwargs, "attn_mask", 3, None)
            p = _arg(args, kwargs, "dropout_p", 4, 0.0)
            calls.append({"is_causal": bool(to_numpy(_arg(args, kwargs, "is_causal", 5, False))),
                          "dropout_p": float(to_numpy(p)), "has_mask": mask is not None,
                          "mask_dtype": dtype_name(mask) if mask is not None else ""})

        with watching(("scaled_dot_product_attention",), seen):
            yield calls

    return sdpa_calls


sdpa_calls = _make_sdpa_calls(watching)


def _summary(calls):
    return {"sdpa_calls": len(calls),
            "max_dropout_p": max((c["dropout_p"] for c in calls), default=0.0),
            "any_is_causal": any(c["is_causal"] for c in calls),
            "causal_and_mask": any(c["is_causal"] and c["has_mask"] for c in calls)}


def _tensor(a, dtype):
    return torch.tensor(np.asarray(a), dtype=dtype)


def _call_sdpa(ns, case):
    fn = lookup(ns, "sdpa_attention")
    dt = _DT[case["dtype"]]
    q, k, v = (_tensor(case[n], dt) for n in ("q", "k", "v"))
    inputs = [q, k, v]
    kwargs = {}
    if case["mask"] is not None:
        kwargs["mask"] = torch.tensor(case["mask"])
        inputs.append(kwargs["mask"])
    for name in ("is_causal", "dropout_p", "training"):
        if case[name] is not None:
            kwargs[name] = case[name]
    before = [t.clone() for t in inputs]
    with torch.random.fork_rng(devices=[]), sdpa_calls() as calls:
        torch.manual_seed(case["torch_seed"])
        y = fn(q, k, v, **kwargs)
    return {"y": to_numpy(y), "y_dtype": dtype_name(y), "y_is_tensor": is_tensor(y),
            "input_changed": any(not torch.equal(a, b) for a, b in zip(inputs, before)), **_summary(calls)}


def _mask_text(mask):
    if mask is None:
        return "mask=None"
    rows = mask.reshape(-1, mask.shape[-1])[:3].astype(int)
    return f"mask 形状 {mask.shape}（1 = 屏蔽），前几行 {np.array2string(rows, separator=',').replace(chr(10), '')}"


FLIP = ("SDPA 的布尔 attn_mask 里 True 表示“参与注意力”，和课程约定（True = 屏蔽）正好相反："
        "传进去之前要取反（~mask）。")


FLOAT_MASK = ("把布尔掩码转成了 0/1 的浮点数：浮点 attn_mask 是“加到分数上”的，加 1 什么也屏蔽不了。"
              "要么传布尔的 ~mask，要么用 0 / -inf 的加法掩码。")


SDPA_DIAGNOSES = [
    (FLIP, known("flip_tril")),
    (FLIP, known("flip_or")),
    ("同时给了 mask 和 is_causal=True 时只用了 mask，丢掉了因果部分：要把两者合成一个 attn_mask"
     "（屏蔽 = mask 或 j > i）。", known("mask_only")),
    ("同时给了 mask 和 is_causal=True 时只做了因果，丢掉了 mask：要把两者合成一个 attn_mask。", known("causal_only")),
    (FLOAT_MASK, known("float_mask")),
    (FLOAT_MASK, known("float_mask_inverted")),
    ("因果掩码的方向反了：课程约定里要屏蔽的是 key 下标 > query 下标（triu(diagonal=1)），"
     "SDPA 要的“允许”矩阵是 tril。", known("causal_lower")),
    ("因果掩码把对角线也屏蔽了：应是 triu(diagonal=1)（或允许矩阵 tril(diagonal=0)），"
     "每个位置要能看见自己。", known("causal_diagonal0")),
    ("缩放不对：SDPA 默认已经除以 √d_k，不要自己再缩放一次（也不要传 scale）。", known("scale_dk")),
]


def _at(case, message, shown=None):
    return fail(f"【{case['stage']}】{message}", shown=shown)


SDPA_MISSING = ("没有调用 F.scaled_dot_product_attention：这道题要用 PyTorch 的 SDPA 完成注意力，"
                "不要手写 softmax(QKᵀ/√d_k)V。")


def _returns_fresh_tensor(case, out):
    if not out.get("y_is_tensor", True):
        return _at(case, "应返回 torch.Tensor。")
    if out.get("input_changed"):
        return _at(case, "你的函数原地修改了输入（例如对掩码用了 logical_not_ / 对张量用了 += ）。函数不能修改输入。")
    return None


def _calls_sdpa(case, out):
    return _at(case, SDPA_MISSING) if out.get("sdpa_calls", 0) == 0 else _returns_fresh_tensor(case, out)


def _sdpa_flags(case, out):
    bad = _calls_sdpa(case, out)
    if bad:
        return bad
    if out.get("causal_and_mask"):
        return _at(case, "同时把 attn_mask 和 is_causal=True 传给了 SDPA：文档规定两者不能同时给。"
                         "数学后端会直接报错，CPU 上的 flash 内核碰巧接受并合并——换台机器、换个 dtype 就可能报错。"
                         "要自己把 mask 和因果掩码合成一个 attn_mask（屏蔽 = mask 或 j > i），is_causal 保持 False。")
    if not case["training"] and out.get("max_dropout_p", 0.0) > 0:
        value = shown_only_public(f"={out['max_dropout_p']:g}")
        return _at(case, f"training=False 时仍把 dropout_p{value} 传给了 SDPA："
                         "SDPA 不看 train/eval，推理时也会随机丢弃。要写 dropout_p=dropout_p if training else 0.0。")
    return None


TOL = {"float32": (1e-4, 1e-5), "float64": (1e-7, 1e-9)}


def _y(answer="ref", shape_note="", **kw):
    """The tensor `y` a function returns: its shape, the input's dtype, values within the dtype's tolerance."""
    return Output("y", expected=known(answer), dtype=lambda c: c["dtype"], tol=lambda c: TOL[c["dtype"]],
                  name="输出", dtype_note="（应与输入相同）", shape_note=shape_note, **kw)


SDPA_Y = _y()


def _no_values(case, arr):
    """A dropout output is random: the table fixes only its shape and dtype, `_dropout_structure` the rest."""
    return np.zeros(0)


# training=True with V = I: the output is the dropped-out attention weights A (0 or A/(1-p))
DROPOUT_Y = _y("weights", view=_no_values)


def _dropout_structure(case, out):
    if case["kind"] != "dropout_train":
        return None
    p = case["dropout_p"]
    A = np.asarray(case["_oracle"]["weights"])
    got = np.asarray(out["y"], dtype=float)
    if np.allclose(got, A, rtol=1e-5, atol=1e-7):
        return _at(case, f"training=True{shown_only_public(f'、dropout_p={p}')} 时输出和不做 dropout 完全一样："
                         "训练时要把 dropout_p 传给 SDPA（dropout_p=dropout_p if training else 0.0）。")
    kept = np.isclose(got, A / (1 - p), rtol=1e-4, atol=1e-6)
    zero = np.abs(got) <= 1e-7
    if not (kept | zero).all():
        return _at(case, "V 是单位阵时输出就是 dropout 后的注意力权重：每个元素应是 0 或 A/(1-p)。"
                         + shown_only_public(f"这里有 {int((~(kept | zero)).sum())} 个元素两者都不是", "有元素两者都不是")
                         + "（dropout_p 传错了？）。",
                   shown=f"期望（不 dropout 时 / (1-p)）：{fmt(A[0, 0] / (1 - p))}\n你的：{fmt(got[0, 0])}")
    frac = float(zero.mean())
    if abs(frac - p) > 0.15:
        return _at(case, shown_only_public(f"被置 0 的比例是 {frac:.2f}，而 dropout_p={p}（{zero.size} 个元素，允许 ±0.15）。",
                                           "被置 0 的比例与 dropout_p 相差超过 ±0.15。"))
    return None


sdpa_attention = VerdictTable(
    outputs=lambda c: (DROPOUT_Y,) if c["kind"] == "dropout_train" else (SDPA_Y,),
    diagnoses=SDPA_DIAGNOSES,
    show=lambda c: f"q {c['q'].shape}, k {c['k'].shape}, {_mask_text(c['mask'])}, is_causal={bool(c['is_causal'])}",
    hints=[(("is_causal", "attn_mask"), "attn_mask 和 is_causal=True 不能同时传给 F.scaled_dot_product_attention："
            "要自己把因果掩码和 mask 合成一个 attn_mask（屏蔽 = mask 或 j > i），再传 is_causal=False。")],
    flags=_sdpa_flags,
    extras=_dropout_structure,
    untouched=None,   # the flags report a changed input, with the usual culprits
)


# decode_step ─────────────────────────────────────────────────────────────────

def _call_decode(ns, case):
    fn = lookup(ns, "decode_step")
    dt = _DT[case["dtype"]]
    inputs = [_tensor(case[n], dt) for n in ("q_new", "k_cache", "v_cache")]
    before = [t.clone() for t in inputs]
    with sdpa_calls() as calls:
        y = fn(*inputs)
    return {"y": to_numpy(y), "y_dtype": dtype_name(y), "y_is_tensor": is_tensor(y),
            "input_changed": any(not torch.equal(a, b) for a, b in zip(inputs, before)), **_summary(calls)}


def _decode_hint(case, out, message):
    if out.get("any_is_causal") and "is_causal" not in message:
        return "\n提示：你给 SDPA 传了 is_causal=True；L=1 时它只让新 token 看第一个 key。"
    return ""


decode_step = VerdictTable(
    outputs=(_y(shape_note="应为 (B,h,1,d_k)：保留长度为 1 的那一维（不要 squeeze）。"),),
    diagnoses=[
        ("L=1 时 is_causal=True 用的是左上角对齐的下三角，新 token 只能看见第一个 key。"
         "一步解码里新 token 本来就能看全部缓存：is_causal=False（或不传掩码）。", known("first_key")),
        ("少看了最后一个缓存的 key：缓存里已经包含新 token 自己的 k、v，要看全部 S 个。", known("no_last_key")),
        ("新 token 只看了最后一个 key：它应该看缓存里的全部 key。", known("last_key")),
        ("缩放不对：SDPA 默认已经除以 √d_k。", known("scale_dk")),
        ("缩放不对：SDPA 默认已经除以 √d_k。", known("no_scale")),
    ],
    show=lambda c: f"q_new {c['q_new'].shape}, k_cache {c['k_cache'].shape}",
    flags=_calls_sdpa,
    hint=_decode_hint,
    untouched=None,
)


# to_torch_mha ────────────────────────────────────────────────────────────────

_PROJ = ("W_q", "W_k", "W_v", "W_o")


def _param(module, name):
    p = getattr(module, name, None)
    return None if p is None else to_numpy(p)


_OUT_PROJ = (nn.modules.linear.NonDynamicallyQuantizableLinear, nn.Linear)


def _call_to_torch(ns, case):
    cls = lookup(ns, "MultiHeadAttention")
    convert = lookup(ns, "to_torch_mha")
    mha = cls(case["d_model"], case["n_heads"], bias=case["bias"])
    with torch.no_grad():
        for name in _PROJ:
            layer = getattr(mha, name)
            layer.weight.copy_(_tensor(case[name], layer.weight.dtype))
            if case["bias"]:
                layer.bias.copy_(_tensor(case[name + "_bias"], layer.bias.dtype))
    tm = convert(mha)
    if type(tm) is not nn.MultiheadAttention or not any(type(tm.out_proj) is t for t in _OUT_PROJ):
        raise TypeError(f"to_torch_mha 应返回 nn.MultiheadAttention（它本身，不是子类），得到 {type_name(tm)}")
    if not is_tensor(tm.in_proj_weight):
        raise TypeError("返回的 nn.MultiheadAttention 没有合并的 in_proj_weight（不要给 kdim/vdim）")
    weights = {"in_proj_weight": _param(tm, "in_proj_weight"), "in_proj_bias": _param(tm, "in_proj_bias"),
               "out_proj_weight": _param(tm.out_proj, "weight"), "out_proj_bias": _param(tm.out_proj, "bias")}
    x = _tensor(case["x"], tm.in_proj_weight.dtype)
    y, _ = items(tm(x, x, x, need_weights=False), 2, "nn.MultiheadAttention 应返回 (y, weights)")
    return {"y": to_numpy(y), "batch_first": tm.batch_first is True,
            "num_heads": tm.num_heads if type(tm.num_heads) is int else -1, **weights}


def _module_flags(case, out):
    if not out["batch_first"]:
        return _at(case, "没有设 batch_first=True：nn.MultiheadAttention 默认输入是 (T, B, d)，"
                         "直接喂 (B, T, d) 不报错，却把 batch 当成了序列。")
    if out["num_heads"] != case["n_heads"]:
        return _at(case, f"头数不对：期望 num_heads={case['n_heads']}（mha.n_heads）"
                         + shown_only_public(f"，得到 {out['num_heads']}") + "。")
    return None


LAYOUTS = [(f"in_proj_weight 的布局不对（你的是 {order} 顺序{'、每块转置' if tr else ''}）："
            "它是 [W_q; W_k; W_v] 竖着拼成的 (3d, d)，顺序 q、k、v，每块就是 nn.Linear 的 weight"
            "（形状 (out, in)，不要转置）。", known(f"layout_{order}_{tr}"))
           for order in ("qkv", "kqv", "qvk", "vqk", "kvq", "vkq") for tr in (False, True) if (order, tr) != ("qkv", False)]


WEIGHT_TOL = (1e-5, 1e-6)


def _expected_and_yours(case, want, got):
    return f"期望：{fmt(want)}\n你的：{fmt(got)}"


def _weight(key, expected, fallback, diagnoses=()):
    return Output(key, expected=expected, tol=WEIGHT_TOL, name=f"{key} ", fallback=fallback, diagnoses=diagnoses,
                  render=_expected_and_yours)


IN_PROJ = _weight("in_proj_weight", known("in_proj_weight"), "in_proj_weight 与 W_q、W_k、W_v 不一致。", LAYOUTS)


IN_BIAS = "in_proj_bias 不对{}：它是 [b_q; b_k; b_v] 拼成的长度 3d 的向量。"


IN_PROJ_BIAS = _weight("in_proj_bias", known("in_proj_bias"), IN_BIAS.format(""),
                       [(IN_BIAS.format("（全是 0：偏置没有搬过去）"), lambda c: np.zeros(3 * c["d_model"]))])


OUT_PROJ = _weight("out_proj_weight", lambda c: c["W_o"], "out_proj.weight 没有设成 W_o.weight（输出投影也要搬）。",
                   [("out_proj.weight 是 W_o 的转置：直接拷 W_o.weight，不要转置。", lambda c: c["W_o"].T)])


OUT_PROJ_BIAS = _weight("out_proj_bias", lambda c: c["W_o_bias"], "out_proj.bias 没有设成 W_o.bias。")


TORCH_Y = Output("y", expected=known("y"), tol=(1e-4, 1e-5), name="输出")


def _biases_present(case, out):
    """A module built without biases for a case with biases: its bias parameters are None."""
    for output in (IN_PROJ_BIAS, OUT_PROJ_BIAS):
        if case["bias"] and out.get(output.key) is None:
            return _at(case, output.fallback, shown=f"期望：{fmt(output.want(case))}\n你的：None")
    return None


to_torch_mha = VerdictTable(
    outputs=lambda c: ((IN_PROJ, IN_PROJ_BIAS, OUT_PROJ, OUT_PROJ_BIAS, TORCH_Y) if c["bias"]
                       else (IN_PROJ, OUT_PROJ, TORCH_Y)),
    show=lambda c: f"x {c['x'].shape}, d_model={c['d_model']}, n_heads={c['n_heads']}, bias={c['bias']}",
    hints=[(("copy_",), "搬权重时形状对不上：in_proj_weight 是 (3·d_model, d_model)，"
            "把 W_q、W_k、W_v 的 weight 沿第 0 维拼起来（torch.cat(..., dim=0)）。")],
    flags=lambda case, out: _module_flags(case, out) or _biases_present(case, out),
)


# torch_mha_forward ───────────────────────────────────────────────────────────

_FORWARD = inspect.signature(nn.MultiheadAttention.forward)


class RecordingMHA(nn.MultiheadAttention):
    """nn.MultiheadAttention that remembers how it was called (need_weights, self-attention)."""

    def forward(self, *args, **kwargs):
        bound = _FORWARD.bind(self, *args, **kwargs)
        bound.apply_defaults()
        a = bound.arguments
        self.calls.append({"need_weights": bool(a["need_weights"]),
                           "self_attention": a["query"] is a["key"] is a["value"]})
        return super().forward(*args, **kwargs)


def _call_forward(ns, case):
    fn = lookup(ns, "torch_mha_forward")
    dt = _DT[case["dtype"]]
    d = case["d_model"]
    tm = RecordingMHA(d, case["n_heads"], bias=case["bias"], batch_first=True, dtype=dt)
    tm.calls = []
    with torch.no_grad():
        tm.in_proj_weight.copy_(_tensor(case["in_proj_weight"], dt))
        tm.out_proj.weight.copy_(_tensor(case["out_proj_weight"], dt))
        if case["bias"]:
            tm.in_proj_bias.copy_(_tensor(case["in_proj_bias"], dt))
            tm.out_proj.bias.copy_(_tensor(case["out_proj_bias"], dt))
    x = _tensor(case["x"], dt)
    inputs = [x]
    kwargs = {}
    if case["key_padding"] is not None:
        kwargs["key_padding"] = torch.tensor(case["key_padding"])
        inputs.append(kwargs["key_padding"])
    if case["causal"] is not None:
        kwargs["causal"] = case["causal"]
    before = [t.clone() for t in inputs]
    y = fn(tm, x, **kwargs)
    if issubclass(type(y), (tuple, list)):
        raise TypeError(f"torch_mha_forward 应只返回 y，得到{described(y)}："
                        "nn.MultiheadAttention 返回 (y, weights)，要取出 y")
    return {"y": to_numpy(y), "y_dtype": dtype_name(y), "y_is_tensor": is_tensor(y),
            "input_changed": any(not torch.equal(a, b) for a, b in zip(inputs, before)),
            "mha_calls": len(tm.calls), "need_weights": any(c["need_weights"] for c in tm.calls),
            "self_attention": all(c["self_attention"] for c in tm.calls)}


def _forward_flags(case, out):
    if out.get("mha_calls", 0) == 0:
        return _at(case, "没有调用传进来的 torch_mha：用它做自注意力 torch_mha(x, x, x, ...)。")
    return _returns_fresh_tensor(case, out)


def _self_attention_hint(case, out, message):
    return "" if out.get("self_attention", True) else "\n提示：自注意力要把同一个 x 传三次：torch_mha(x, x, x, ...)。"


def _need_weights(case, out):
    if out.get("need_weights"):
        return _at(case, "结果对了，但调用时 need_weights 仍是默认的 True：它会额外算出（并对头平均）"
                         "注意力权重，还会挡住融合的快速路径。题目只要 y：传 need_weights=False。")
    return None


torch_mha_forward = VerdictTable(
    outputs=(_y(),),
    diagnoses=[
        ("key_padding_mask 的约定弄反了：nn.MultiheadAttention 的 key_padding_mask 里 True = 忽略这个 key，"
         "和课程约定一样，直接传 key_padding，不要取反。", known("padding_inverted")),
        ("没有把 key_padding 传给 key_padding_mask。", known("padding_ignored")),
        ("causal=True 时没有加因果掩码：nn.MultiheadAttention 的 is_causal 只是提示，真正起作用的是 attn_mask，"
         "要传 attn_mask=triu(ones(T,T), diagonal=1)（True = 不允许）。", known("causal_ignored")),
        ("因果掩码用了 SDPA 的约定（tril，True = 允许）：nn.MultiheadAttention 的布尔 attn_mask 里 True = 不允许，"
         "要用 triu(diagonal=1)。", known("causal_tril")),
        ("因果掩码把对角线也屏蔽了：应是 triu(diagonal=1)，不是 diagonal=0。", known("causal_diagonal0")),
        ("把 x 当成了 (T, B, d)：传进来的模块已经是 batch_first=True，不要再转置。", known("transposed_x")),
    ],
    show=lambda c: (f"x {c['x'].shape}, n_heads={c['n_heads']}, key_padding="
                    f"{'None' if c['key_padding'] is None else c['key_padding'].astype(int).tolist()}, "
                    f"causal={bool(c['causal'])}"),
    hints=[(("is_causal", "attn_mask"), "nn.MultiheadAttention 的 is_causal 只是提示：不给 attn_mask 只给 is_causal=True 会报错。"
            "要自己构造 attn_mask = triu(ones(T,T), diagonal=1)（True = 不允许）。"),
           (("只返回 y",), "need_weights 默认是 True，模块返回 (y, weights)：传 need_weights=False，并只返回 y。")],
    flags=_forward_flags,
    hint=_self_attention_hint,
    extras=_need_weights,
    untouched=None,
)


# grade_id -> (driver: how to run the student's code on one case, verdict table: how to read its outputs)
EXERCISES = {
    "sdpa_attention": (Driver(("sdpa_attention",), _call_sdpa), sdpa_attention),
    "decode_step": (Driver(("decode_step",), _call_decode), decode_step),
    "to_torch_mha": (Driver(("to_torch_mha",), _call_to_torch), to_torch_mha),
    "torch_mha_forward": (Driver(("torch_mha_forward",), _call_forward), torch_mha_forward),
}
