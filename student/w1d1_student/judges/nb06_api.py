"""Verdicts of notebook 06 (§A): SDPA, KV-cache decoding, nn.MultiheadAttention.

The grader's references are float64 numpy, computed from the case alone. A buggy reference may leave NaN in
rows where its mask blocks every key (torch gives 0 or NaN there, depending on the kernel): those
rows are ignored when naming the bug.
"""
import numpy as np

from ..engine import PASS, fail, fmt, known, raised, ran

TOL = {"float32": (1e-4, 1e-5), "float64": (1e-7, 1e-9)}


# ------------------------------------------------------------------ helpers


def _match(got, bug, rtol, atol):
    got, bug = np.asarray(got, dtype=float), np.asarray(bug, dtype=float)
    if got.shape != bug.shape:
        return False
    fin = np.isfinite(bug)
    if not fin.any() or not np.isfinite(got[fin]).all():
        return False
    return bool(np.allclose(got[fin], bug[fin], rtol=max(rtol, 1e-5), atol=max(atol, 1e-6)))


def _name_bug(case, got, diagnoses, rtol, atol):
    named = []
    for message, buggy in diagnoses:
        try:
            bug = buggy(case)
        except Exception:
            continue
        if bug is not None and _match(got, bug, rtol, atol) and message not in named:
            named.append(message)
    return "\n或者：".join(named) if named else None


def _compare(stage, key, got, want, case, diagnoses, rtol, atol, show):
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return fail(f"【{stage}】`{key}` 的形状不对：期望 {tuple(want.shape)}，得到 {tuple(got.shape)}。\n输入：{show(case)}")
    if np.isfinite(got).all() and np.allclose(got, want, rtol=rtol, atol=atol):
        return None
    msg = _name_bug(case, got, diagnoses, rtol, atol)
    if msg is None:
        msg = "结果里出现了 NaN 或 inf。" if not np.isfinite(got).all() else f"`{key}` 的数值与参考答案不一致。"
    return fail(f"【{stage}】{msg}\n输入：{show(case)}\n期望的 `{key}`：{fmt(want)}\n你的 `{key}`：{fmt(got)}")


def _common_flags(stage, out, case, want_shape=None):
    if not out.get("y_is_tensor", True):
        return fail(f"【{stage}】应返回 torch.Tensor。")
    if out.get("input_changed"):
        return fail(f"【{stage}】你的函数原地修改了输入（例如对掩码用了 logical_not_ / 对张量用了 += ）。函数不能修改输入。")
    if want_shape is not None and tuple(np.shape(out["y"])) != tuple(want_shape):
        return fail(f"【{stage}】输出形状不对：期望 {tuple(want_shape)}，得到 {tuple(np.shape(out['y']))}。")
    if "dtype" in case and out.get("y_dtype") != case["dtype"]:
        return fail(f"【{stage}】输出的 dtype 应与输入相同：期望 {case['dtype']}，得到 {out.get('y_dtype')}。")
    return None


SDPA_MISSING = ("没有调用 F.scaled_dot_product_attention：这道题要用 PyTorch 的 SDPA 完成注意力，"
                "不要手写 softmax(QKᵀ/√d_k)V。")


# ------------------------------------------------------------------ sdpa_attention


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


def _dropout_structure(stage, case, got):
    p = case["dropout_p"]
    A = np.asarray(case["_oracle"]["weights"])
    got = np.asarray(got, dtype=float)
    if got.shape != A.shape:
        return fail(f"【{stage}】输出形状不对：期望 {A.shape}，得到 {got.shape}。")
    if np.allclose(got, A, rtol=1e-5, atol=1e-7):
        return fail(f"【{stage}】training=True、dropout_p={p} 时输出和不做 dropout 完全一样："
                    "训练时要把 dropout_p 传给 SDPA（dropout_p=dropout_p if training else 0.0）。")
    kept = np.isclose(got, A / (1 - p), rtol=1e-4, atol=1e-6)
    zero = np.abs(got) <= 1e-7
    if not (kept | zero).all():
        return fail(f"【{stage}】V 是单位阵时输出就是 dropout 后的注意力权重：每个元素应是 0 或 A/(1-p)。"
                    f"这里有 {int((~(kept | zero)).sum())} 个元素两者都不是（dropout_p 传错了？）。\n"
                    f"期望（不 dropout 时 / (1-p)）：{fmt(A[0, 0] / (1 - p))}\n你的：{fmt(got[0, 0])}")
    frac = float(zero.mean())
    if abs(frac - p) > 0.15:
        return fail(f"【{stage}】被置 0 的比例是 {frac:.2f}，而 dropout_p={p}（{zero.size} 个元素，允许 ±0.15）。")
    return None


def judge_sdpa_attention(cases, results):
    diagnoses = SDPA_DIAGNOSES
    hints = [(("is_causal", "attn_mask"), "attn_mask 和 is_causal=True 不能同时传给 F.scaled_dot_product_attention："
              "要自己把因果掩码和 mask 合成一个 attn_mask（屏蔽 = mask 或 j > i），再传 is_causal=False。")]
    for i, (case, res) in enumerate(zip(cases, results)):
        stage = case.get("stage", f"用例 {i + 1}")
        if not ran(res):
            return raised(stage, res, hints)
        out = res["out"]
        if out.get("sdpa_calls", 0) == 0:
            return fail(f"【{stage}】{SDPA_MISSING}")
        bad = _common_flags(stage, out, case)
        if bad:
            return bad
        if out.get("causal_and_mask"):
            return fail(f"【{stage}】同时把 attn_mask 和 is_causal=True 传给了 SDPA：文档规定两者不能同时给。"
                        "数学后端会直接报错，CPU 上的 flash 内核碰巧接受并合并——换台机器、换个 dtype 就可能报错。"
                        "要自己把 mask 和因果掩码合成一个 attn_mask（屏蔽 = mask 或 j > i），is_causal 保持 False。")
        if not case["training"] and out.get("max_dropout_p", 0.0) > 0:
            return fail(f"【{stage}】training=False 时仍把 dropout_p={out['max_dropout_p']:g} 传给了 SDPA："
                        "SDPA 不看 train/eval，推理时也会随机丢弃。要写 dropout_p=dropout_p if training else 0.0。")
        rtol, atol = TOL[case["dtype"]]
        show = lambda c: (f"q {c['q'].shape}, k {c['k'].shape}, {_mask_text(c['mask'])}, "  # noqa: E731
                          f"is_causal={bool(c['is_causal'])}")
        if case["kind"] == "dropout_train":
            bad = _dropout_structure(stage, case, out["y"])
        else:
            bad = _compare(stage, "y", out["y"], case["_oracle"]["ref"], case, diagnoses, rtol, atol, show)
        if bad:
            return bad
    return PASS


# ------------------------------------------------------------------ decode_step


def judge_decode_step(cases, results):
    diagnoses = [
        ("L=1 时 is_causal=True 用的是左上角对齐的下三角，新 token 只能看见第一个 key。"
         "一步解码里新 token 本来就能看全部缓存：is_causal=False（或不传掩码）。", known("first_key")),
        ("少看了最后一个缓存的 key：缓存里已经包含新 token 自己的 k、v，要看全部 S 个。", known("no_last_key")),
        ("新 token 只看了最后一个 key：它应该看缓存里的全部 key。", known("last_key")),
        ("缩放不对：SDPA 默认已经除以 √d_k。", known("scale_dk")),
        ("缩放不对：SDPA 默认已经除以 √d_k。", known("no_scale")),
    ]
    for i, (case, res) in enumerate(zip(cases, results)):
        stage = case.get("stage", f"用例 {i + 1}")
        if not ran(res):
            return raised(stage, res)
        out = res["out"]
        if out.get("sdpa_calls", 0) == 0:
            return fail(f"【{stage}】{SDPA_MISSING}")
        want = np.asarray(case["_oracle"]["ref"])
        if np.shape(out["y"]) != want.shape:
            return fail(f"【{stage}】输出形状应为 (B,h,1,d_k) = {want.shape}，得到 {tuple(np.shape(out['y']))}："
                        "保留长度为 1 的那一维（不要 squeeze）。")
        bad = _common_flags(stage, out, case)
        if bad:
            return bad
        rtol, atol = TOL[case["dtype"]]
        show = lambda c: f"q_new {c['q_new'].shape}, k_cache {c['k_cache'].shape}"  # noqa: E731
        bad = _compare(stage, "y", out["y"], want, case, diagnoses, rtol, atol, show)
        if bad:
            if out.get("any_is_causal") and "is_causal" not in bad.message:
                bad = fail(bad.message + "\n提示：你给 SDPA 传了 is_causal=True；L=1 时它只让新 token 看第一个 key。")
            return bad
    return PASS


# ------------------------------------------------------------------ nn.MultiheadAttention


def judge_to_torch_mha(cases, results):
    for i, (case, res) in enumerate(zip(cases, results)):
        stage = case.get("stage", f"用例 {i + 1}")
        if not ran(res):
            return raised(stage, res, [(("copy_",), "搬权重时形状对不上：in_proj_weight 是 (3·d_model, d_model)，"
                                        "把 W_q、W_k、W_v 的 weight 沿第 0 维拼起来（torch.cat(..., dim=0)）。")])
        out = res["out"]
        h = case["n_heads"]
        if not out["batch_first"]:
            return fail(f"【{stage}】没有设 batch_first=True：nn.MultiheadAttention 默认输入是 (T, B, d)，"
                        "直接喂 (B, T, d) 不报错，却把 batch 当成了序列。")
        if out["num_heads"] != h:
            return fail(f"【{stage}】头数不对：期望 num_heads={h}（mha.n_heads），得到 {out['num_heads']}。")
        want_in = np.asarray(case["_oracle"]["in_proj_weight"])
        got_in = np.asarray(out["in_proj_weight"])
        if got_in.shape != want_in.shape or not np.allclose(got_in, want_in, rtol=1e-5, atol=1e-6):
            msg = "in_proj_weight 与 W_q、W_k、W_v 不一致。"
            for order in ("qkv", "kqv", "qvk", "vqk", "kvq", "vkq"):
                for tr in (False, True):
                    if (order, tr) != ("qkv", False) and got_in.shape == want_in.shape and np.allclose(
                            got_in, case["_oracle"][f"layout_{order}_{tr}"], rtol=1e-5, atol=1e-6):
                        msg = (f"in_proj_weight 的布局不对（你的是 {order} 顺序{'、每块转置' if tr else ''}）："
                               "它是 [W_q; W_k; W_v] 竖着拼成的 (3d, d)，顺序 q、k、v，每块就是 nn.Linear 的 weight"
                               "（形状 (out, in)，不要转置）。")
            return fail(f"【{stage}】{msg}\n期望：{fmt(want_in)}\n你的：{fmt(got_in)}")
        if case["bias"]:
            want_b = np.asarray(case["_oracle"]["in_proj_bias"])
            got_b = out.get("in_proj_bias")
            if got_b is None or not np.allclose(got_b, want_b, rtol=1e-5, atol=1e-6):
                zero = got_b is not None and np.allclose(got_b, 0)
                return fail(f"【{stage}】in_proj_bias 不对{'（全是 0：偏置没有搬过去）' if zero else ''}："
                            "它是 [b_q; b_k; b_v] 拼成的长度 3d 的向量。\n"
                            f"期望：{fmt(want_b)}\n你的：{fmt(got_b) if got_b is not None else None}")
        got_o = np.asarray(out["out_proj_weight"])
        if not np.allclose(got_o, case["W_o"], rtol=1e-5, atol=1e-6):
            msg = ("out_proj.weight 是 W_o 的转置：直接拷 W_o.weight，不要转置。"
                   if np.allclose(got_o, case["W_o"].T, rtol=1e-5, atol=1e-6)
                   else "out_proj.weight 没有设成 W_o.weight（输出投影也要搬）。")
            return fail(f"【{stage}】{msg}\n期望：{fmt(case['W_o'])}\n你的：{fmt(got_o)}")
        if case["bias"]:
            got_ob = out.get("out_proj_bias")
            if got_ob is None or not np.allclose(got_ob, case["W_o_bias"], rtol=1e-5, atol=1e-6):
                return fail(f"【{stage}】out_proj.bias 没有设成 W_o.bias。\n期望：{fmt(case['W_o_bias'])}\n"
                            f"你的：{fmt(got_ob) if got_ob is not None else None}")
        bad = _compare(stage, "y", out["y"], case["_oracle"]["y"], case, [], 1e-4, 1e-5,
                       lambda c: f"x {c['x'].shape}, d_model={c['d_model']}, n_heads={c['n_heads']}, bias={c['bias']}")
        if bad:
            return bad
    return PASS


def judge_torch_mha_forward(cases, results):
    diagnoses = [
        ("key_padding_mask 的约定弄反了：nn.MultiheadAttention 的 key_padding_mask 里 True = 忽略这个 key，"
         "和课程约定一样，直接传 key_padding，不要取反。", known("padding_inverted")),
        ("没有把 key_padding 传给 key_padding_mask。", known("padding_ignored")),
        ("causal=True 时没有加因果掩码：nn.MultiheadAttention 的 is_causal 只是提示，真正起作用的是 attn_mask，"
         "要传 attn_mask=triu(ones(T,T), diagonal=1)（True = 不允许）。", known("causal_ignored")),
        ("因果掩码用了 SDPA 的约定（tril，True = 允许）：nn.MultiheadAttention 的布尔 attn_mask 里 True = 不允许，"
         "要用 triu(diagonal=1)。", known("causal_tril")),
        ("因果掩码把对角线也屏蔽了：应是 triu(diagonal=1)，不是 diagonal=0。", known("causal_diagonal0")),
        ("把 x 当成了 (T, B, d)：传进来的模块已经是 batch_first=True，不要再转置。", known("transposed_x")),
    ]
    hints = [(("is_causal", "attn_mask"), "nn.MultiheadAttention 的 is_causal 只是提示：不给 attn_mask 只给 is_causal=True 会报错。"
              "要自己构造 attn_mask = triu(ones(T,T), diagonal=1)（True = 不允许）。"),
             (("只返回 y",), "need_weights 默认是 True，模块返回 (y, weights)：传 need_weights=False，并只返回 y。")]
    for i, (case, res) in enumerate(zip(cases, results)):
        stage = case.get("stage", f"用例 {i + 1}")
        if not ran(res):
            return raised(stage, res, hints)
        out = res["out"]
        if out.get("mha_calls", 0) == 0:
            return fail(f"【{stage}】没有调用传进来的 torch_mha：用它做自注意力 torch_mha(x, x, x, ...)。")
        bad = _common_flags(stage, out, case)
        if bad:
            return bad
        rtol, atol = TOL[case["dtype"]]
        show = lambda c: (f"x {c['x'].shape}, n_heads={c['n_heads']}, key_padding="  # noqa: E731
                          f"{'None' if c['key_padding'] is None else c['key_padding'].astype(int).tolist()}, "
                          f"causal={bool(c['causal'])}")
        bad = _compare(stage, "y", out["y"], case["_oracle"]["ref"], case, diagnoses, rtol, atol, show)
        if bad:
            if not out.get("self_attention", True):
                bad = fail(bad.message + "\n提示：自注意力要把同一个 x 传三次：torch_mha(x, x, x, ...)。")
            return bad
        if out.get("need_weights"):
            return fail(f"【{stage}】结果对了，但调用时 need_weights 仍是默认的 True：它会额外算出（并对头平均）"
                        "注意力权重，还会挡住融合的快速路径。题目只要 y：传 need_weights=False。")
    return PASS


JUDGES = {
    "sdpa_attention": judge_sdpa_attention,
    "decode_step": judge_decode_step,
    "to_torch_mha": judge_to_torch_mha,
    "torch_mha_forward": judge_torch_mha_forward,
}
