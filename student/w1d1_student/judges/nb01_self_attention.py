"""Verdicts of notebook 01 (§1): tables for the engine's staged loop."""
from ..engine import Exercise, Output, fmt, known

SOFTMAX = Exercise(
    (Output("y", tol=(1e-6, 1e-10)),),
    diagnoses=[
        ("softmax 数值不稳定：exp 之前先减去该轴上的最大值（平移不变性），否则大输入会溢出成 inf/NaN。", known("naive")),
        ("减去了全局最大值而不是沿 axis 的最大值：x.max() 不带 axis 时是整个数组的最大值，"
         "比它小得多的行（或切片）exp 之后全部下溢成 0，得到 0/0 = NaN。要写 np.max(x, axis=axis, keepdims=True)。",
         known("global_max")),
        ("归一化的轴不对：应该沿参数 axis 指定的那一维求和（默认最后一维）。", known("wrong_axis")),
        ("忘了归一化：exp 之后要除以该轴上的和。", known("no_norm")),
        ("除以了全部元素的和，而不是沿 axis 的和（sum 时要指定 axis 并 keepdims=True）。", known("global_sum")),
    ],
    show=lambda c: f"x={fmt(c['x'])}, axis={c['axis']}",
    hints=[(("could not be broadcast",), "形状广播不了：沿 axis 求的 max、sum 要带 keepdims=True"
            "（np.max(x, axis=axis, keepdims=True)），结果保留长度为 1 的那一维，才能和 x 逐元素相减、相除。")])

SELF_ATTENTION = Exercise(
    (Output("A", tol=(1e-6, 1e-9)), Output("Y", tol=(1e-6, 1e-9))),
    diagnoses=[
        ("缺少缩放：分数要除以 √d_k。", known("no_scale")),
        ("缩放用错了维度：应除以 √d_k（W_q 的列数），不是 √d（输入维度）。", known("scale_d")),
        ("softmax 的方向不对：每一行（对 key 那一维）归一化，即 axis=-1。", known("axis0")),
        ("除以了 d_k 而不是 √d_k。", known("scale_dk")),
    ],
    show=lambda c: f"T={c['X'].shape[0]}, d={c['X'].shape[1]}, d_k={c['W_q'].shape[1]}, d_v={c['W_v'].shape[1]}")

SCORE_DIAGNOSTICS = Exercise(
    (Output("rate", tol=(1e-6, 1e-9)), Output("asym", tol=(1e-6, 1e-9))),
    diagnoses=[
        ("self_argmax_rate 看错了方向：要看每一行（每个 query）的最大值是否在对角线上，即 argmax(axis=1)。",
         known("argmax_axis0")),
        ("self_argmax_rate 应返回比例（0 到 1 之间），不是个数。", known("count")),
        ("asymmetry 忘了除以 ‖S‖_F：要的是相对值 ‖S−Sᵀ‖_F / ‖S‖_F。", known("unnormalised")),
        ("asymmetry 用了别的范数：应当是 Frobenius 范数（所有元素平方和开根号）。", known("max_norm")),
    ],
    show=lambda c: f"S={fmt(c['S'])}", untouched=None)

JUDGES = {
    "softmax": SOFTMAX,
    "self_attention": SELF_ATTENTION,
    "score_diagnostics": SCORE_DIAGNOSTICS,
}
