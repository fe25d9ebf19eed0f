"""w1day1_checks.py：第 1 周 Day 1（自注意力与多头注意力）正文的配套脚本，纯 numpy。

用法::

    python w1day1_checks.py          # 跑全部 11 组
    python w1day1_checks.py 4        # 只跑第 4 组
    python w1day1_checks.py 4 9      # 跑第 4、9 组

每一组打印自己的设定（T、d、初始化、度量、种子）和实测数字，并与正文里的数字并排。
随机量都用多个种子（固定为 0, 1, 2, ...，没有挑过），给出中位数和 [最小, 最大]。
与正文不一致的数字，打印实测值和一行原因（"文中数字 … 实测 … 原因：…"）。

必须成立的不变量（置换等变、凸包、被掩位置梯度恰为 0、手推反向与数值微分一致、
左补齐的 NaN、两头误差为 0、FLOPs/参数量/显存公式）任何一项失败，脚本以非零状态退出。

每组是一个函数 ``group1()`` … ``group11()``，返回一个只含 float/int/str/list/dict 的字典，
笔记本和测试可以直接复用；其中 ``"invariants"`` 是该组的不变量 {名字: 是否成立}。
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterable, Sequence

import numpy as np

__all__ = [
    "GROUPS",
    "attention",
    "attention_backward",
    "attention_matrix_gib",
    "build_mha_weights",
    "causal_mask",
    "gradient_error",
    "init_attention_stats",
    "main",
    "mha_flops_formula",
    "mha_flops_from_shapes",
    "mha_param_count",
    "quadratic_flop_share_from_shapes",
    "rank_collapse_curves",
    "rank_collapse_metric",
    "self_attention",
    "sensitivity_matrix",
    "single_head_best_error",
    "softmax",
    "two_head_error",
]

# ---------------------------------------------------------------------------
# 打印与比较
# ---------------------------------------------------------------------------


def _fmt(x: float, digits: int = 3) -> str:
    """把数字写成普通数字串：0.76、2.2e-7、2048；整数原样。"""
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    x = float(x)
    if math.isnan(x):
        return "NaN"
    if x == 0.0:
        return "0"
    if 1e-3 <= abs(x) < 1e5:
        s = f"{x:.{digits}g}"
        return s
    mant, exp = f"{x:.{digits - 1}e}".split("e")
    return f"{mant}e{int(exp)}"


def _pct(x: float) -> str:
    return f"{100 * x:.3g}%"


def _text_tol(text: str) -> float:
    """正文数字 text 最后一位的半个单位（"0.76" → 0.005，"2.1e-2" → 0.0005）。"""
    s = text.strip().rstrip("%")
    mant, _, exp = s.lower().partition("e")
    decimals = len(mant.split(".")[1]) if "." in mant else 0
    e = int(exp) if exp else 0
    return 0.5 * 10.0 ** (e - decimals)


def _verdict(measured: float, text: str, mode: str, lo: float | None, hi: float | None) -> str:
    """返回 "一致"（或 "同为机器精度"、"同一量级"）、"范围内" 或 "不一致"。

    mode: "digits" 按正文打印的位数比较（差不超过最后一位的半个单位）；
    "machine" 两者都 < 1e-13 即算一致（正文写 "机器精度" 时按 0 处理）；
    "order" 相差不到 10 倍即算同一量级。
    """
    m = float(measured)
    scale = 100.0 if text.endswith("%") else 1.0
    t = 0.0 if text == "机器精度" else float(text.rstrip("%")) / scale
    if mode == "machine":
        if abs(m) < 1e-13 and abs(t) < 1e-13:
            return "同为机器精度"
    elif mode == "order":
        if m > 0 and t > 0 and abs(math.log10(m / t)) < 1.0:
            return "同一量级"
    elif abs(m - t) <= _text_tol(text) / scale * (1 + 1e-9):
        return "一致"
    if lo is not None and hi is not None and lo <= t <= hi:
        return "范围内"
    return "不一致"


def show(
    label: str,
    measured: float | str,
    text: str | None = None,
    *,
    lo: float | None = None,
    hi: float | None = None,
    mode: str = "digits",
    reason: str | None = None,
    fmt: Callable[[float], str] = _fmt,
) -> bool:
    """打印一行 "标签：实测 … [范围]" 并与正文数字 text 比较；返回是否一致（无 text 时返回 True）。

    不一致（或正文数字只落在多种子范围内）时按 "文中数字 … 实测 … 原因：…" 打印原因。
    """
    m = measured if isinstance(measured, str) else fmt(measured)
    rng = f" [{fmt(lo)}, {fmt(hi)}]" if lo is not None and hi is not None else ""
    if text is None:
        print(f"  {label}：实测 {m}{rng}")
        return True
    v = _verdict(measured, text, mode, lo, hi) if not isinstance(measured, str) else (
        "一致" if measured == text else "不一致")
    if v in ("一致", "同为机器精度", "同一量级"):
        print(f"  {label}：实测 {m}{rng}（文中 {text}，{v}）")
        return True
    why = reason or "（未说明）"
    if v == "范围内":
        why = f"文中数字落在多种子范围内，差别是抽样波动；{why}"
    print(f"  {label}：文中数字 {text}，实测 {m}{rng}，原因：{why}")
    return False


def _header(n: int, title: str, setup: str) -> None:
    print()
    print(f"== 第 {n} 组：{title} ==")
    print(f"  设定：{setup}")


def _invariant(inv: dict, name: str, ok: bool, detail: str = "") -> None:
    inv[name] = bool(ok)
    mark = "成立" if ok else "不成立 !!!"
    print(f"  [不变量] {name}：{mark}{('（' + detail + '）') if detail else ''}")


def _stats(xs: Iterable[float]) -> dict:
    a = np.asarray(list(xs), dtype=float)
    return {"median": float(np.median(a)), "min": float(a.min()), "max": float(a.max())}


def _show_stats(label: str, st: dict, text: str | None = None, **kw) -> bool:
    return show(label, st["median"], text, lo=st["min"], hi=st["max"], **kw)


# ---------------------------------------------------------------------------
# 基本零件
# ---------------------------------------------------------------------------


def softmax(S: np.ndarray) -> np.ndarray:
    """按最后一维做数值稳定的 softmax（减行最大值）。

    整行都是 -inf 时按 IEEE 规则得到 NaN（-inf - (-inf) = NaN），这正是 §3.4 的现象；
    这里关掉 numpy 的 RuntimeWarning，免得在笔记本里往 stderr 写东西。
    """
    with np.errstate(invalid="ignore"):
        Z = S - S.max(axis=-1, keepdims=True)
        E = np.exp(Z)
        return E / E.sum(axis=-1, keepdims=True)


def causal_mask(T: int) -> np.ndarray:
    """因果掩码，True = 屏蔽（j > i），即严格上三角。"""
    return np.triu(np.ones((T, T), dtype=bool), k=1)


def attention(
    Q: np.ndarray,
    K: np.ndarray,
    V: np.ndarray,
    mask: np.ndarray | None = None,
    fill: float = -np.inf,
) -> tuple[np.ndarray, np.ndarray]:
    """单头缩放点积注意力。mask 为 True 的位置在 softmax 之前填 fill。返回 (Y, A)。"""
    S = Q @ K.T / math.sqrt(Q.shape[-1])
    if mask is not None:
        S = np.where(mask, fill, S)
    A = softmax(S)
    with np.errstate(invalid="ignore"):
        return A @ V, A


def attention_backward(
    Q: np.ndarray,
    K: np.ndarray,
    V: np.ndarray,
    A: np.ndarray,
    Y: np.ndarray,
    dY: np.ndarray,
) -> dict:
    """§2.3 的五行反向。返回 {"dQ","dK","dV","dS","D","dA"}。"""
    s = 1.0 / math.sqrt(Q.shape[-1])
    dV = A.T @ dY
    dA = dY @ V.T
    D = (dY * Y).sum(-1, keepdims=True)  # 每行一个标量，= (dA * A).sum(-1)
    dS = A * (dA - D)
    return {"dQ": s * dS @ K, "dK": s * dS.T @ Q, "dV": dV, "dS": dS, "D": D, "dA": dA}


def self_attention(
    X: np.ndarray, WQ: np.ndarray, WK: np.ndarray, WV: np.ndarray, causal: bool = False
) -> np.ndarray:
    """softmax((X W_Q)(X W_K)^T / sqrt(d_k) [+ 因果掩码]) X W_V。"""
    mask = causal_mask(X.shape[0]) if causal else None
    return attention(X @ WQ, X @ WK, X @ WV, mask)[0]


def gradient_error(f: Callable[[np.ndarray], float], X: np.ndarray, G: np.ndarray, eps: float = 1e-6) -> float:
    """手推梯度 G 与逐元素中心差分的最大相对误差 max|G − 数值| / max|数值|（每个元素两次前向）。"""
    worst = scale = 0.0
    Xp = X.copy()
    for idx in np.ndindex(X.shape):
        old = Xp[idx]
        Xp[idx] = old + eps
        fp = f(Xp)
        Xp[idx] = old - eps
        diff = (fp - f(Xp)) / (2 * eps)
        Xp[idx] = old
        worst, scale = max(worst, abs(G[idx] - diff)), max(scale, abs(diff))
    return float(worst / scale)


def sensitivity_matrix(
    X: np.ndarray,
    WQ: np.ndarray,
    WK: np.ndarray,
    WV: np.ndarray,
    causal: bool,
    eps: float = 1e-6,
) -> np.ndarray:
    """数值微分得到的敏感度矩阵 M[t, s] = ||∂y_t/∂x_s||_F（T×T）。

    对 x_s 的每一维做中心差分，得到雅可比块 ∂y_t/∂x_s（d_v×d），取 Frobenius 范数。
    加因果掩码时，s > t 的块按位等于 0：被掩的 A_ts 恰为 0，扰动 x_s 不改变 y_t 的任何一位。
    """
    T, d = X.shape
    J = np.zeros((T, T, WV.shape[1], d))  # J[t, s, :, k] = ∂y_t/∂x_{s,k}
    Xp = X.copy()
    for s in range(T):
        for k in range(d):
            old = Xp[s, k]
            Xp[s, k] = old + eps
            yp = self_attention(Xp, WQ, WK, WV, causal)
            Xp[s, k] = old - eps
            ym = self_attention(Xp, WQ, WK, WV, causal)
            Xp[s, k] = old
            J[:, s, :, k] = (yp - ym) / (2 * eps)
    return np.sqrt((J**2).sum(axis=(2, 3)))


def _layer_norm(X: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    mu = X.mean(-1, keepdims=True)
    var = X.var(-1, keepdims=True)
    return (X - mu) / np.sqrt(var + eps)


def rank_collapse_metric(X: np.ndarray) -> float:
    """||X - 1 x̄^T||_F / ||X||_F：离 "所有行都相同"（秩 1）有多远。"""
    return float(np.linalg.norm(X - X.mean(0, keepdims=True)) / np.linalg.norm(X))


RANK_VARIANTS = ("pure", "residual", "post_ln", "pre_ln")


def rank_collapse_curves(
    T: int = 32,
    d: int = 64,
    n_layers: int = 12,
    seeds: Iterable[int] = range(20),
    variants: Sequence[str] = ("pure", "residual", "post_ln"),
) -> dict[str, np.ndarray]:
    """堆叠随机单头自注意力层，返回 {变体: 数组 (种子数, n_layers+1)}，第 l 列是第 l 层后的度量。

    设定：X0 ~ N(0,1)^{T×d}；每层重新抽 W_Q, W_K, W_V ~ N(0, 1/d)^{d×d}，d_k = d，缩放 1/sqrt(d)。
    变体：
      "pure"     X ← Attn(X)
      "residual" X ← X + Attn(X)
      "post_ln"  X ← LN(X + Attn(X))      （原始 Transformer 的 Post-LN，LN 无仿射参数）
      "pre_ln"   X ← X + Attn(LN(X))      （GPT-2 式 Pre-LN）
    同一种子下各变体用同一个 X0 和同一串权重。
    """
    for v in variants:
        if v not in RANK_VARIANTS:
            raise ValueError(f"未知变体 {v!r}，可选 {RANK_VARIANTS}")
    seeds = list(seeds)
    out = {v: np.zeros((len(seeds), n_layers + 1)) for v in variants}
    for si, seed in enumerate(seeds):
        rng = np.random.default_rng(seed)
        X0 = rng.normal(size=(T, d))
        Ws = [[rng.normal(0.0, 1.0 / math.sqrt(d), (d, d)) for _ in range(3)] for _ in range(n_layers)]
        for v in variants:
            X = X0
            out[v][si, 0] = rank_collapse_metric(X)
            for layer, (WQ, WK, WV) in enumerate(Ws, start=1):
                if v == "pure":
                    X = self_attention(X, WQ, WK, WV)
                elif v == "residual":
                    X = X + self_attention(X, WQ, WK, WV)
                elif v == "post_ln":
                    X = _layer_norm(X + self_attention(X, WQ, WK, WV))
                else:
                    X = X + self_attention(_layer_norm(X), WQ, WK, WV)
                out[v][si, layer] = rank_collapse_metric(X)
    return out


def _copy_task(X: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """第 8 组的任务：位置 t（t ≥ 2）的目标 = x_{t-1} 的前半维 ‖ x_{t-2} 的后半维。

    返回 (prev1, prev2, target)，都是 (T-2)×d。
    """
    half = X.shape[1] // 2
    prev1, prev2 = X[1:-1], X[:-2]
    return prev1, prev2, np.concatenate([prev1[:, :half], prev2[:, half:]], axis=1)


def single_head_best_error(
    X: np.ndarray, alphas: Sequence[float] | None = None, X_test: np.ndarray | None = None
) -> dict:
    """单头的最优误差（第 8 组）。

    单头的注意力模式取 "位置头" 能给出的最一般形式：每个 query 用同一组权重，把 α 放在
    前一个词、1-α 放在前两个词（把权重放到其它位置只会混进与目标独立的噪声，总体上只会更差）；
    输出是混合后的向量乘一个任意的 d×d 矩阵 W（相当于 W_V W_O 任意），W 用最小二乘求。
    对 α 在网格上取最优。返回样本内相对误差 ||ŶW−Y||/||Y||、最优 α，
    以及（给了 X_test 时）同一 α、W 在新序列上的误差。
    """
    if alphas is None:
        alphas = np.linspace(0.0, 1.0, 101)
    a, b, Y = _copy_task(X)
    best = (np.inf, 0.0, None)
    for al in alphas:
        Z = al * a + (1 - al) * b
        W = np.linalg.lstsq(Z, Y, rcond=None)[0]
        err = float(np.linalg.norm(Z @ W - Y) / np.linalg.norm(Y))
        if err < best[0]:
            best = (err, float(al), W)
    out = {"error": best[0], "alpha": best[1]}
    if X_test is not None:
        a2, b2, Y2 = _copy_task(X_test)
        Z2 = best[1] * a2 + (1 - best[1]) * b2
        out["test_error"] = float(np.linalg.norm(Z2 @ best[2] - Y2) / np.linalg.norm(Y2))
    return out


def two_head_error(X: np.ndarray) -> float:
    """两个 d/2 维的头完成第 8 组的任务：头 1 只看前一个词、取前半维，头 2 只看前两个词、取后半维。

    注意力是 one-hot（τ→0 的硬查表），W_V^(i) 是选取半维的 d×(d/2) 矩阵，W_O = I。
    返回在 t ≥ 2 上的相对误差（应恰为 0）。
    """
    T, d = X.shape
    half = d // 2
    I = np.eye(d)
    A1 = np.zeros((T, T))
    A2 = np.zeros((T, T))
    for t in range(T):
        A1[t, max(t - 1, 0)] = 1.0
        A2[t, max(t - 2, 0)] = 1.0
    WV1, WV2, WO = I[:, :half], I[:, half:], I
    heads = np.concatenate([A1 @ X @ WV1, A2 @ X @ WV2], axis=1)
    Yhat = (heads @ WO)[2:]
    Y = _copy_task(X)[2]
    return float(np.linalg.norm(Yhat - Y) / np.linalg.norm(Y))


def mha_flops_from_shapes(T: int, d: int, h: int) -> int:
    """按一层 MHA 实际做的每个矩阵乘 (m×k)(k×n) 计 2mkn 次浮点运算并求和（单个序列）。"""
    dk = d // h
    matmuls = [(T, d, d)] * 3  # Q、K、V 投影
    matmuls += [(T, dk, T)] * h  # 每个头 Q K^T
    matmuls += [(T, T, dk)] * h  # 每个头 A V
    matmuls += [(T, d, d)]  # W_O
    return sum(2 * m * k * n for m, k, n in matmuls)


def mha_flops_formula(T: int, d: int) -> int:
    """正文 §5.1 的 8 T d^2 + 4 T^2 d。"""
    return 8 * T * d * d + 4 * T * T * d


def quadratic_flop_share_from_shapes(T: int, d: int, h: int = 1) -> float:
    """按形状逐项数：每个头的 QK^T 与 AV（随 T^2 增长的矩阵乘）占一层 MHA 全部 FLOPs 的比例。"""
    dk = d // h
    quadratic = h * (2 * T * dk * T + 2 * T * T * dk)
    return quadratic / mha_flops_from_shapes(T, d, h)


def build_mha_weights(d: int, h: int) -> dict[str, list[np.ndarray] | np.ndarray]:
    """按正文 §4.3 的写法真正建出 h 组每头权重 W^(i) ∈ R^{d×d/h}、偏置，以及 W_O、b_O。"""
    if d % h:
        raise ValueError(f"d={d} 不能被 h={h} 整除")
    dk = d // h
    w = {name: [np.zeros((d, dk)) for _ in range(h)] for name in ("W_Q", "W_K", "W_V")}
    w.update({name: [np.zeros(dk) for _ in range(h)] for name in ("b_Q", "b_K", "b_V")})
    w["W_O"] = np.zeros((d, d))
    w["b_O"] = np.zeros(d)
    return w


def mha_param_count(d: int, h: int) -> int:
    """从 build_mha_weights 建出的数组形状数参数。"""
    total = 0
    for v in build_mha_weights(d, h).values():
        total += sum(a.size for a in v) if isinstance(v, list) else v.size
    return int(total)


def attention_matrix_gib(B: int, h: int, T: int, bytes_per_elem: int = 2) -> float:
    """一层注意力矩阵 A（B×h×T×T）的大小，GiB（bf16 每元素 2 字节）。"""
    return B * h * T * T * bytes_per_elem / 2**30


def init_attention_stats(seed: int, d: int = 512, h: int = 8, T: int = 128, bias: bool = True) -> dict:
    """nn.Linear 默认初始化下的初始注意力统计（第 11 组）。

    W_Q, W_K ~ U(-1/sqrt(d), 1/sqrt(d))^{d×d}，偏置同分布（nn.Linear 默认 bias=True）；
    输入 X ~ N(0,1)^{T×d}。分数 = q·k / sqrt(d/h)，按头切分。
    返回分数标准差（全部头、全部 T×T 个分数）、每行最大权重的均值、每行熵的均值（nat）。
    """
    rng = np.random.default_rng(seed)
    bound = 1.0 / math.sqrt(d)
    WQ, WK = (rng.uniform(-bound, bound, (d, d)) for _ in range(2))
    bQ, bK = (rng.uniform(-bound, bound, d) if bias else np.zeros(d) for _ in range(2))
    X = rng.normal(size=(T, d))
    dk = d // h
    Q = (X @ WQ + bQ).reshape(T, h, dk).transpose(1, 0, 2)
    K = (X @ WK + bK).reshape(T, h, dk).transpose(1, 0, 2)
    S = Q @ K.transpose(0, 2, 1) / math.sqrt(dk)
    A = softmax(S)
    ent = -(A * np.log(A)).sum(-1)
    return {
        "score_std": float(S.std()),
        "max_weight": float(A.max(-1).mean()),
        "entropy": float(ent.mean()),
    }


# ---------------------------------------------------------------------------
# 11 组
# ---------------------------------------------------------------------------


def _group1_diagnostics(S):
    """(自选率, 不对称度)，各是每个种子一个数；S 是叠起来的 (种子, T, T)。"""
    diag = np.einsum("sii->si", S)
    rates = (diag >= S.max(axis=2)).mean(axis=1)            # 对角线就是行最大值的行所占比例
    skew = ((S - np.swapaxes(S, 1, 2)) ** 2).sum(axis=(1, 2))
    return [float(r) for r in rates], [float(a) for a in np.sqrt(skew / (S ** 2).sum(axis=(1, 2)))]


def group1() -> dict:
    """第 1 组：投影打破对称（只看自己、打分矩阵对称）。"""
    T, d, seeds = 20, 64, list(range(20))
    _header(1, "投影打破对称", f"T={T} 个随机词向量 x~N(0,1)^d，d=d_k={d}；投影 W_Q、W_K 独立 ~N(0,1/d)；"
            f"S = Q K^T/sqrt(d_k)；{len(seeds)} 个种子（0–{seeds[-1]}）")
    plain, proj = [], []                   # 每个种子的打分矩阵，叠成 (种子, T, T)
    for seed in seeds:
        rng = np.random.default_rng(seed)
        X = rng.normal(size=(T, d))
        WQ, WK = (rng.normal(0, 1 / math.sqrt(d), (d, d)) for _ in range(2))
        plain.append(X @ X.T / math.sqrt(d))
        proj.append((X @ WQ) @ (X @ WK).T / math.sqrt(d))
    (rate0, asym0), (rate1, asym1) = (_group1_diagnostics(np.stack(S)) for S in (plain, proj))
    r = {"T": T, "d": d, "n_seeds": len(seeds), "self_argmax_no_proj": _stats(rate0),
         "self_argmax_proj": _stats(rate1), "asym_no_proj": _stats(asym0), "asym_proj": _stats(asym1)}
    print("  度量一：把最大权重给自己的词的比例（argmax_j S_ij = i）")
    _show_stats("不投影", r["self_argmax_no_proj"], "100%", fmt=_pct)
    _show_stats("两个独立投影", r["self_argmax_proj"], "0%", fmt=_pct,
                reason=f"投影后对角线不再特殊，自选率是随机水平 1/T={1 / T:.0%}；文中 0% 是一次抽样")
    print("  度量二：不对称度 ||S−S^T||_F/||S||_F")
    _show_stats("不投影", r["asym_no_proj"], "0")
    _show_stats("两个独立投影", r["asym_proj"], "1.36",
                reason=f"随机量；独立投影时约为 sqrt(2(1−1/T))={math.sqrt(2 * (1 - 1 / T)):.2f}"
                "（对角线不进反对称部分），文中是一次抽样")
    r["invariants"] = {}
    return r


def group2() -> dict:
    """第 2 组：置换等变 f(PX) = P f(X)；因果掩码打破它。"""
    T, d, seeds = 10, 16, list(range(20))
    _header(2, "置换等变", f"T={T}，d=d_k=d_v={d}，X~N(0,1)，W_Q、W_K、W_V ~N(0,1/d)，随机置换 P；"
            f"误差 = max|f(PX) − P f(X)|；{len(seeds)} 个种子")
    e0, e1 = [], []
    for seed in seeds:
        rng = np.random.default_rng(seed)
        X = rng.normal(size=(T, d))
        WQ, WK, WV = (rng.normal(0, 1 / math.sqrt(d), (d, d)) for _ in range(3))
        p = rng.permutation(T)
        for causal, errs in ((False, e0), (True, e1)):
            fx = self_attention(X, WQ, WK, WV, causal)
            fpx = self_attention(X[p], WQ, WK, WV, causal)
            errs.append(float(np.abs(fpx - fx[p]).max()))
    r = {"T": T, "d": d, "n_seeds": len(seeds), "error": _stats(e0), "error_causal": _stats(e1)}
    _show_stats("不加掩码", r["error"], "6.7e-16", mode="machine",
                reason="机器精度量级的舍入误差，具体数值取决于 T、d 和求和顺序")
    _show_stats("加因果掩码", r["error_causal"], "2.89",
                reason="文中未给 T、d、初始化；这里 T=10、d=16、最大绝对误差；要点是 O(1) 而不是 1e-16")
    inv: dict = {}
    _invariant(inv, "无掩码时置换等变误差 < 1e-12", r["error"]["max"] < 1e-12,
               f"最大 {_fmt(r['error']['max'])}")
    r["invariants"] = inv
    return r


def group3() -> dict:
    """第 3 组：注意力输出落在 value 的凸包里（逐维 min_j v_jk ≤ y_ik ≤ max_j v_jk）。"""
    T, dv, seeds = 16, 8, list(range(20))
    _header(3, "凸包性质", f"T={T}，d_k=d_v={dv}，Q、K、V ~N(0,1) 且分数放大 3 倍（让权重不那么均匀）；"
            f"无掩码与因果掩码（只对看得到的 key 取 min/max）；{len(seeds)} 个种子；容差 1e-12")
    worst = {False: -np.inf, True: -np.inf}
    for seed in seeds:
        rng = np.random.default_rng(seed)
        Q, K, V = (rng.normal(size=(T, dv)) for _ in range(3))
        for causal in (False, True):
            mask = causal_mask(T) if causal else None
            Y = attention(3 * Q, K, V, mask)[0]
            vis = ~mask if causal else np.ones((T, T), bool)
            lo = np.where(vis[:, :, None], V[None], np.inf).min(1)
            hi = np.where(vis[:, :, None], V[None], -np.inf).max(1)
            over = max(float((lo - Y).max()), float((Y - hi).max()))
            worst[causal] = max(worst[causal], over)
    r = {"T": T, "d_v": dv, "n_seeds": len(seeds),
         "max_violation": float(max(worst[False], 0.0)),
         "max_violation_causal": float(max(worst[True], 0.0))}
    show("越出凸包的最大量（无掩码）", r["max_violation"])
    show("越出凸包的最大量（因果掩码）", r["max_violation_causal"])
    inv: dict = {}
    _invariant(inv, "凸包性质成立（越界 ≤ 1e-12）",
               r["max_violation"] <= 1e-12 and r["max_violation_causal"] <= 1e-12)
    r["invariants"] = inv
    return r


_G4_TEXT = {
    "pure": ["0.98", "0.76", "2.1e-2", "2.2e-7", "4.1e-16", "机器精度", "机器精度"],
    "residual": ["0.98", "0.97", "0.95", "0.90", "0.83", "0.47", "0.18"],
    "post_ln": ["0.98", "0.97", "0.95", "0.91", "0.84", "0.38", "0.10"],
}
_G4_LAYERS = [0, 1, 2, 3, 4, 8, 12]


def group4() -> dict:
    """第 4 组：秩坍缩。纯注意力 / 加残差 / 残差 + LN（Post-LN），外加 Pre-LN 作对照。"""
    T, d, seeds = 32, 64, list(range(20))
    _header(4, "秩坍缩", f"T={T}，d=d_k=d_v={d}，X0~N(0,1)，每层重新抽 W_Q、W_K、W_V ~N(0,1/d)；"
            f"度量 ||X−1x̄^T||_F/||X||_F；{len(seeds)} 个种子的中位数 [最小, 最大]；"
            "残差 + LN 指 Post-LN：X←LN(X+Attn(X))（LN 无仿射参数）。正文没写这些设定，这里是我们的选择")
    curves = rank_collapse_curves(T, d, 12, seeds, RANK_VARIANTS)
    names = {"pure": "纯注意力", "residual": "加残差", "post_ln": "残差 + LN", "pre_ln": "（对照）Pre-LN"}
    r: dict = {"T": T, "d": d, "n_seeds": len(seeds), "layers": list(_G4_LAYERS)}
    for v in RANK_VARIANTS:
        C = curves[v][:, _G4_LAYERS]
        r[v] = {"median": np.median(C, 0).tolist(), "min": C.min(0).tolist(), "max": C.max(0).tolist()}
        print(f"  {names[v]}：")
        for i, layer in enumerate(_G4_LAYERS):
            st = {k: r[v][k][i] for k in ("median", "min", "max")}
            text = _G4_TEXT.get(v, [None] * 7)[i]
            mode = "machine" if text == "机器精度" or (text is not None and float(text) < 1e-13) else "digits"
            _show_stats(f"  第 {layer:2d} 层", st, text, mode=mode,
                        reason="随机量；文中 T、d、初始化、LN 位置都没给，表依赖这些设定")
    print("  说明：纯注意力下偏差每层大致平方（2e-2 → 2e-7 → 机器精度），是双指数坍缩；"
          "残差把它变成慢衰减。Pre-LN 的残差流不归一化，12 层后保留得更多。")
    r["invariants"] = {}
    return r


def _loss_in(name: str, mats: dict, dY: np.ndarray, mask: np.ndarray) -> Callable[[np.ndarray], float]:
    """L = Σ Ȳ⊙attention(Q,K,V)，作为 mats[name]（"dQ"/"dK"/"dV" 对应的 Q/K/V）的函数。"""
    def loss(M: np.ndarray) -> float:
        args = {**mats, name: M}
        return float((attention(args["dQ"], args["dK"], args["dV"], mask)[0] * dY).sum())
    return loss


def group5(seeds: Iterable[int] = range(5)) -> dict:
    """第 5 组：手推反向 vs 数值微分（带因果掩码）。"""
    T, dk, eps, seeds = 6, 4, 1e-6, list(seeds)
    _header(5, "注意力反向：手推 vs 数值微分", f"T={T}，d_k=d_v={dk}，Q、K、V、上游梯度 Ȳ ~N(0,1)，float64，"
            f"因果掩码填 -inf；损失 L=Σ Ȳ⊙Y；逐元素中心差分 eps={eps:g}；"
            f"相对误差 = max|手推−数值|/max|数值|；{len(seeds)} 个种子")
    errs: dict[str, list[float]] = {"dQ": [], "dK": [], "dV": []}
    d_err, masked_max = [], []
    mask = causal_mask(T)
    for seed in seeds:
        rng = np.random.default_rng(seed)
        Q, K, V, dY = (rng.normal(size=(T, dk)) for _ in range(4))
        Y, A = attention(Q, K, V, mask)
        g = attention_backward(Q, K, V, A, Y, dY)
        mats = {"dQ": Q, "dK": K, "dV": V}
        for name, M in mats.items():
            errs[name].append(gradient_error(_loss_in(name, mats, dY, mask), M, g[name], eps))
        d_err.append(float(np.abs((g["dA"] * A).sum(-1, keepdims=True) - g["D"]).max()))
        masked_max.append(float(np.abs(g["dS"][mask]).max()))
    r = {"T": T, "d_k": dk, "eps": eps, "n_seeds": len(seeds),
         "rel_err_dQ": _stats(errs["dQ"]), "rel_err_dK": _stats(errs["dK"]), "rel_err_dV": _stats(errs["dV"]),
         "D_identity_err": _stats(d_err), "masked_dS_max": float(max(masked_max))}
    why = "数值微分的截断与舍入误差，大小取决于 eps、T、d_k 和数据；要点是远小于 1e-6"
    for name, text in (("dQ", "1.1e-9"), ("dK", "1.7e-9"), ("dV", "2.4e-10")):
        _show_stats(f"{name} 最大相对误差", r[f"rel_err_{name}"], text, mode="order", reason=why)
    _show_stats("D_i=Σ_j dA_ij A_ij 与 ȳ_i·y_i 之差", r["D_identity_err"], "8.9e-16", mode="machine",
                reason="机器精度量级的舍入误差")
    show("被掩位置 dS 的最大绝对值", r["masked_dS_max"], "0")
    inv: dict = {}
    worst = max(r[k]["max"] for k in ("rel_err_dQ", "rel_err_dK", "rel_err_dV"))
    _invariant(inv, "手推反向与数值微分相对误差 < 1e-6", worst < 1e-6, f"最大 {_fmt(worst)}")
    _invariant(inv, "D_i 恒等式误差 < 1e-12", r["D_identity_err"]["max"] < 1e-12)
    _invariant(inv, "被掩位置 dS 恰为 0", r["masked_dS_max"] == 0.0)
    r["invariants"] = inv
    return r


def group6() -> dict:
    """第 6 组：因果掩码的梯度隔离（数值微分的敏感度矩阵）。"""
    T, d, eps, seeds = 6, 8, 1e-6, list(range(5))
    _header(6, "因果掩码的梯度隔离", f"T={T}，d=d_k=d_v={d}，X~N(0,1)，W_Q、W_K、W_V ~N(0,1/d)；"
            f"敏感度 M[t,s]=||∂y_t/∂x_s||_F（中心差分 eps={eps:g}）；未来 = s>t；{len(seeds)} 个种子")
    fut0, fut1, past1 = [], [], []
    upper = causal_mask(T)
    example = None
    for seed in seeds:
        rng = np.random.default_rng(seed)
        X = rng.normal(size=(T, d))
        WQ, WK, WV = (rng.normal(0, 1 / math.sqrt(d), (d, d)) for _ in range(3))
        M0 = sensitivity_matrix(X, WQ, WK, WV, causal=False, eps=eps)
        M1 = sensitivity_matrix(X, WQ, WK, WV, causal=True, eps=eps)
        fut0.append(float(M0[upper].max()))
        fut1.append(float(M1[upper].max()))
        past1.append(float(M1[~upper].min()))
        if example is None:
            example = M1
    r = {"T": T, "d": d, "n_seeds": len(seeds), "future_max_no_mask": _stats(fut0),
         "future_max_causal": float(max(fut1)), "past_min_causal": _stats(past1),
         "example_causal": np.round(example, 3).tolist()}
    _show_stats("不加掩码：未来位置的最大敏感度", r["future_max_no_mask"], "1.1",
                reason="取决于未给的 T、d、初始化和范数（这里是雅可比块的 Frobenius 范数）；要点是 O(1)")
    show("加因果掩码：未来位置的最大敏感度", r["future_max_causal"], "0")
    _show_stats("加因果掩码：过去/当前位置的最小敏感度（不为 0，说明不是整体失效）", r["past_min_causal"])
    print("  种子 0 加掩码的敏感度矩阵（行 t，列 s）：")
    for row in example:
        print("    " + " ".join(f"{v:6.3f}" for v in row))
    inv: dict = {}
    _invariant(inv, "加掩码后未来敏感度恰为 0", r["future_max_causal"] == 0.0)
    r["invariants"] = inv
    return r


def group7() -> dict:
    """第 7 组：左补齐 + 因果掩码的整行被掩，-inf 出 NaN 并污染 dV。"""
    T, dv, seed = 5, 4, 0
    pad = np.array([True, True, False, False, False])
    _header(7, "左补齐的 NaN", f"T={T}，左补 2 个 pad；掩码 = 因果 ∪ key padding（True=屏蔽）；"
            f"Q、K、V、Ȳ ~N(0,1)，d={dv}，种子 {seed}；pad 行的 Ȳ 置 0")
    rng = np.random.default_rng(seed)
    Q, K, V, dY = (rng.normal(size=(T, dv)) for _ in range(4))
    dY[pad] = 0.0
    mask = causal_mask(T) | pad[None, :]
    counts = (~mask).sum(1).astype(int).tolist()
    Ai = attention(Q, K, V, mask, fill=-np.inf)[1]
    Af = attention(Q, K, V, mask, fill=-1e9)[1]
    nan_rows_inf = [int(i) for i in np.where(np.isnan(Ai).any(1))[0]]
    nan_rows_fin = [int(i) for i in np.where(np.isnan(Af).any(1))[0]]
    uniform_rows = [int(i) for i in range(T) if np.allclose(Af[i], 1.0 / T, rtol=0, atol=1e-15)]
    with np.errstate(invalid="ignore"):
        dV_inf = Ai.T @ dY
    dV_fin = Af.T @ dY
    dv_nan_rows = int(np.isnan(dV_inf).any(1).sum())
    r = {"T": T, "unmasked_counts": counts, "nan_rows_neg_inf": nan_rows_inf, "nan_rows_neg_1e9": nan_rows_fin,
         "uniform_rows_neg_1e9": uniform_rows, "dV_nan_rows_neg_inf": dv_nan_rows,
         "dV_nan_rows_neg_1e9": int(np.isnan(dV_fin).any(1).sum())}
    show("每行未被屏蔽的 key 数", str(counts), "[0, 0, 1, 2, 3]")
    show("用 -inf：出现 NaN 的行", str(nan_rows_inf), "[0, 1]")
    show("用 -1e9：出现 NaN 的行", str(nan_rows_fin), "[]")
    show("用 -1e9：退化成均匀分布（每个 1/5）的行", str(uniform_rows), "[0, 1]")
    show("用 -inf：dV=A^T Ȳ 中含 NaN 的行数（pad 行 Ȳ=0，NaN×0=NaN）", dv_nan_rows, "5")
    show("用 -1e9：dV 中含 NaN 的行数", r["dV_nan_rows_neg_1e9"], "0")
    inv: dict = {}
    _invariant(inv, "未屏蔽 key 数恰为 [0, 0, 1, 2, 3]", counts == [0, 0, 1, 2, 3])
    _invariant(inv, "-inf 时 dV 每一行都含 NaN", dv_nan_rows == T)
    r["invariants"] = inv
    return r


def group8() -> dict:
    """第 8 组：单头 vs 多头的表达力。"""
    T, d, seeds, T_big = 256, 8, list(range(10)), 20000
    alphas = np.linspace(0.0, 1.0, 101)
    _header(8, "单头 vs 多头的表达力",
            f"X~N(0,1)^{{T×d}}，T={T}，d={d}；目标 = 前一个词的前 {d // 2} 维 ‖ 前两个词的后 {d // 2} 维（t≥2）；"
            f"单头：每个 query 用同一组权重 α·(前一个词)+(1−α)·(前两个词)，α 在 {len(alphas)} 点网格上取最优，"
            f"W=W_V W_O 任意 d×d 用最小二乘；两头：各 {d // 2} 维；{len(seeds)} 个种子；"
            "误差 = ||Ŷ−Y||_F/||Y||_F")
    ins, test, al, two = [], [], [], []
    for seed in seeds:
        rng = np.random.default_rng(seed)
        X, X_test = rng.normal(size=(T, d)), rng.normal(size=(T, d))
        res = single_head_best_error(X, alphas, X_test)
        ins.append(res["error"])
        test.append(res["test_error"])
        al.append(res["alpha"])
        two.append(two_head_error(X))
    big = single_head_best_error(np.random.default_rng(1000).normal(size=(T_big, d)), np.linspace(0, 1, 11))
    r = {"T": T, "d": d, "n_seeds": len(seeds), "single_head_in_sample": _stats(ins),
         "single_head_held_out": _stats(test), "best_alpha": _stats(al), "single_head_large_T": big["error"],
         "population": 1 / math.sqrt(2), "two_heads": _stats(two)}
    _show_stats("单头（样本内最优）", r["single_head_in_sample"], "0.690",
                reason=f"样本内最小二乘会过拟合，期望约 (1/√2)·sqrt(1−d/n)="
                f"{math.sqrt(0.5 * (1 - d / (T - 2))):.3f}（n={T - 2}），再挑 α 还会低一点；依赖文中没给的 T、d；"
                "总体值是 1/√2=0.707")
    _show_stats("单头（同一 α、W 用在新序列上）", r["single_head_held_out"])
    show(f"单头（T={T_big}，接近总体）", r["single_head_large_T"], "0.707")
    _show_stats("样本内选出的最优 α", r["best_alpha"])
    print("  说明：总体上对任意 α，最优线性映射下的误差都恰为 1/√2（每维残差方差之和恒为 d/2），"
          "所以“放弃一个位置”与平均混合一样差；样本内挑出的 α 只是在追噪声。")
    _show_stats("两头", r["two_heads"], "0", mode="digits")
    inv: dict = {}
    _invariant(inv, "两头误差 < 1e-10", r["two_heads"]["max"] < 1e-10)
    r["invariants"] = inv
    return r


_G9_SHARES = [(768, 512, "25.0"), (768, 1536, "50.0"), (768, 8192, "84.2"),
              (4096, 2048, "20.0"), (4096, 8192, "50.0"), (4096, 32768, "80.0")]


def group9() -> dict:
    """第 9 组：FLOPs 与参数量。"""
    _header(9, "FLOPs 与参数量", "一层 MHA、一个序列，乘加计 2 次浮点运算；FLOPs 按每个矩阵乘的形状 2mkn 逐项相加，"
            "与公式 8Td^2+4T^2d 对比；参数量从真正建出的每头权重数组形状数")
    inv: dict = {}
    cases = [(T, d, h) for T, d, _ in _G9_SHARES for h in (1, 12, 32) if d % h == 0]
    cases += [(7, 12, 3), (1, 64, 4)]
    flops_ok = all(mha_flops_from_shapes(T, d, h) == mha_flops_formula(T, d) for T, d, h in cases)
    shares = []
    print("  d      T      注意力（T^2 项）占比")
    for d, T, text in _G9_SHARES:
        got = f"{100 * quadratic_flop_share_from_shapes(T, d):.1f}"
        shares.append({"d": d, "T": T, "share_pct": got, "text": text})
        show(f"d={d:<5d} T={T:<6d}", got + "%", text + "%")
    cross = [d for d in (64, 768, 4096) if 8 * (2 * d) * d * d == 4 * (2 * d) ** 2 * d]
    print("  两项相等：8Td^2 = 4T^2d ⇔ T = 2d（d=64、768、4096 逐一代入成立）")
    params = {h: mha_param_count(768, h) for h in (1, 2, 3, 4, 6, 8, 12, 16)}
    expect = 4 * 768**2 + 4 * 768
    show("d=768 时各 h 的参数量", ", ".join(f"h={h}:{p}" for h, p in params.items()))
    show("4d^2+4d", expect)
    small = {(d, h): mha_param_count(d, h) for d, h in ((64, 1), (64, 8), (512, 8), (4096, 32))}
    r = {"flops_cases": len(cases), "shares": shares, "crossover_ds": cross,
         "params_d768": {str(h): p for h, p in params.items()}, "params_formula_d768": expect,
         "params_other": {f"d={d},h={h}": p for (d, h), p in small.items()}}
    _invariant(inv, "逐项相加的 FLOPs 恰等于 8Td^2+4T^2d", flops_ok, f"{len(cases)} 组 (T,d,h)")
    _invariant(inv, "占比表与正文逐位相同", all(s["share_pct"] == s["text"] for s in shares))
    _invariant(inv, "T=2d 时两项相等", cross == [64, 768, 4096])
    _invariant(inv, "参数量恒为 4d^2+4d，与 h 无关",
               all(p == expect for p in params.values())
               and all(p == 4 * d * d + 4 * d for (d, _), p in small.items()))
    r["invariants"] = inv
    return r


_G10_CASES = [
    ("GPT-2 small，B=8，h=12，T=1024", 8, 12, 1024, 12, "0.19", "2.2"),
    ("同上，T=4096", 8, 12, 4096, 12, "3.00", "36.0"),
    ("7B 级，B=1，h=32，T=32768（32 层）", 1, 32, 32768, 32, "64.00", "2048"),
]


def _gib_str(x: float, text: str) -> str:
    """按正文那一格的小数位数格式化。"""
    decimals = len(text.split(".")[1]) if "." in text else 0
    return f"{x:.{decimals}f}"


def group10() -> dict:
    """第 10 组：注意力矩阵的显存（bf16）。"""
    _header(10, "注意力矩阵显存（bf16）", "A 的形状 B×h×T×T，每元素 2 字节，1 GiB = 2^30 字节；"
            "按正文每格的小数位数打印，括号里是精确值")
    rows, inv = [], {}
    for label, B, h, T, L, t_layer, t_all in _G10_CASES:
        per = attention_matrix_gib(B, h, T)
        tot = per * L
        s_per, s_all = _gib_str(per, t_layer), _gib_str(tot, t_all)
        rows.append({"label": label, "per_layer_gib": per, "all_layers_gib": tot,
                     "per_layer_str": s_per, "all_layers_str": s_all, "layers": L})
        show(f"{label} 每层（精确 {per:g}）", s_per + " GiB", t_layer + " GiB")
        show(f"{label} 全部层（精确 {tot:g}）", s_all + " GiB", t_all + " GiB")
    print("  注：2.25 GiB 按 Python 的四舍六入五成双印成 2.2；T 翻 4 倍，这一项翻 16 倍。")
    exact = (rows[0]["per_layer_gib"] == 0.1875 and rows[0]["all_layers_gib"] == 2.25
             and rows[1]["per_layer_gib"] == 3.0 and rows[1]["all_layers_gib"] == 36.0
             and rows[2]["per_layer_gib"] == 64.0 and rows[2]["all_layers_gib"] == 2048.0)
    _invariant(inv, "显存公式 B·h·T^2·2 字节的精确值", exact)
    _invariant(inv, "打印值与正文逐位相同",
               [(x["per_layer_str"], x["all_layers_str"]) for x in rows]
               == [(c[5], c[6]) for c in _G10_CASES])
    return {"rows": rows, "invariants": inv}


def group11() -> dict:
    """第 11 组：刚初始化时注意力近似均匀。"""
    d, h, T, seeds = 512, 8, 128, list(range(20))
    _header(11, "初始注意力近似均匀", f"d={d}，{h} 头（d_k={d // h}），T={T}；W_Q、W_K 与偏置 ~U(−1/sqrt(d), 1/sqrt(d))"
            f"（nn.Linear 默认）；X~N(0,1)；分数 = q·k/sqrt(d_k)；{len(seeds)} 个种子；"
            "最大权重、熵对全部头、全部行取平均")
    stats = [init_attention_stats(s, d, h, T) for s in seeds]
    r = {"d": d, "h": h, "T": T, "n_seeds": len(seeds),
         "score_std": _stats(x["score_std"] for x in stats),
         "max_weight": _stats(x["max_weight"] for x in stats),
         "entropy": _stats(x["entropy"] for x in stats),
         "uniform_weight": 1.0 / T, "max_entropy": math.log(T)}
    theory = (1 / 3) * (1 + 1 / d)  # Var[q] = 1/3 + 1/(3d)（偏置），分数标准差 = Var[q]
    _show_stats(f"分数标准差（理论 1/3；含偏置 (1/3)(1+1/d)={theory:.4f}）", r["score_std"], "0.333",
                fmt=lambda x: f"{x:.4f}",
                reason="每个种子只有 128×512 个输入，方差估计有约 ±0.5% 的抖动；"
                "含偏置的理论值是 0.3340，与 1/3 之差小于抖动，文中 0.333 与两者都相容")
    _show_stats("每行最大权重的均值", r["max_weight"], "0.018", fmt=lambda x: f"{x:.4f}",
                reason="随机量，依赖样本与权重抽样")
    show("均匀分布的权重 1/T", r["uniform_weight"], "0.008", fmt=lambda x: f"{x:.4f}",
         reason="1/128=0.0078，文中四舍五入")
    _show_stats("每行熵的均值（nat）", r["entropy"], "4.797", fmt=lambda x: f"{x:.4f}",
                reason="随机量；理论近似 ln T − σ²/2 = "
                f"{math.log(T) - (1 / 9) / 2:.3f}（σ=1/3）")
    show("熵上限 ln T", r["max_entropy"], "4.852", fmt=lambda x: f"{x:.4f}")
    r["invariants"] = {}
    return r


GROUPS: dict[int, Callable[[], dict]] = {
    1: group1, 2: group2, 3: group3, 4: group4, 5: group5, 6: group6,
    7: group7, 8: group8, 9: group9, 10: group10, 11: group11,
}


def main(argv: Sequence[str] | None = None) -> int:
    """命令行入口。argv 为组号列表（空 = 全部）。返回退出码：0 全部不变量成立，1 有不变量失败，2 参数错误。"""
    argv = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("-h", "--help") for a in argv):
        print(__doc__)
        return 0
    selected: list[int] = []
    for a in argv:
        for tok in a.replace(",", " ").split():
            if not tok.isdigit() or int(tok) not in GROUPS:
                print(f"未知的组号：{tok!r}。可选 1–{len(GROUPS)}，例如：python w1day1_checks.py 4 9",
                      file=sys.stderr)
                return 2
            selected.append(int(tok))
    selected = selected or list(GROUPS)
    failed = []
    for n in dict.fromkeys(selected):
        res = GROUPS[n]()
        failed += [f"第 {n} 组：{k}" for k, ok in res.get("invariants", {}).items() if not ok]
    print()
    if failed:
        print("以下不变量不成立：")
        for f in failed:
            print("  - " + f)
        return 1
    print(f"完成：第 {', '.join(map(str, dict.fromkeys(selected)))} 组，所有必须成立的不变量都成立。")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
