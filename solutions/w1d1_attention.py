"""Week 1 Day 1 参考实现：自注意力、缩放点积注意力（含手推反向）、掩码、多头注意力、复杂度、API。

课程正文 §B 所说的 code/w1d1_attention.py。先自己写，再对照。

    python w1d1_attention.py --selftest     # 跑自检（§B 的全部要求），任何一项失败则退出码非 0

约定（与 EXERCISES.md 一致）：
- 行向量：序列 (T, d)，批量 (B, T, d)，分头 (B, h, T, d_k)。
- 课程自己的函数里，布尔掩码 True = 屏蔽（masked_fill 的约定）；只有 §A 的函数与别的约定互转。
- 分数除以 sqrt(d_k)，d_k 是每个头的 query/key 宽度。
- 不原地修改任何输入；torch 函数保持输入的 dtype 和 device。
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd.function import once_differentiable

# =====================================================================================
# §1 自注意力（numpy）
# =====================================================================================


def softmax(x, axis=-1):
    """数值稳定的 softmax：先减去最大值，exp 不会上溢。"""
    x = np.asarray(x, dtype=float)
    z = x - np.max(x, axis=axis, keepdims=True)
    e = np.exp(z)
    return e / np.sum(e, axis=axis, keepdims=True)


def self_attention(X, W_q, W_k, W_v):
    """单头自注意力。X (T,d)；返回 (Y, A)，A (T,T) 每行和为 1，Y = A V。"""
    Q, K, V = X @ W_q, X @ W_k, X @ W_v
    S = Q @ K.T / np.sqrt(Q.shape[-1])  # 除以 sqrt(d_k)
    A = softmax(S, axis=-1)  # 每行对 key 归一化
    return A @ V, A


def self_argmax_rate(S):
    """每行最大值落在对角线上的行所占比例（并列时算作在对角线上）。"""
    S = np.asarray(S)
    return float(np.mean(np.diagonal(S) >= S.max(axis=1)))


def asymmetry(S):
    """‖S − Sᵀ‖_F / ‖S‖_F：0 表示完全对称。"""
    S = np.asarray(S)
    return float(np.linalg.norm(S - S.T) / np.linalg.norm(S))


# =====================================================================================
# §2 缩放点积注意力：前向、手推反向、数值微分、初始化尺度
# =====================================================================================


def _np_sum_to(g, shape):
    """把广播出来的梯度按广播规则求和回 shape（输入的批维比输出少或为 1 时用）。"""
    while g.ndim > len(shape):
        g = g.sum(axis=0)
    for ax, n in enumerate(shape):
        if n == 1 and g.shape[ax] != 1:
            g = g.sum(axis=ax, keepdims=True)
    return g


def attention_forward(Q, K, V, mask=None):
    """Q (...,T,d_k)、K (...,S,d_k)、V (...,S,d_v)；mask 为 True 的位置屏蔽。返回 (Y, cache)。"""
    s = 1.0 / np.sqrt(Q.shape[-1])
    S = s * (Q @ np.swapaxes(K, -1, -2))  # (...,T,S)
    if mask is not None:
        S = np.where(mask, -np.inf, S)  # 在 softmax 之前屏蔽，exp(-inf) = 0
    A = softmax(S, axis=-1)
    Y = A @ V
    return Y, (Q, K, V, A, Y, s)


def attention_backward(dY, cache):
    """§2.3 的五行反向。返回 (dQ, dK, dV)，是 sum(Y * dY) 对 Q、K、V 的梯度。"""
    Q, K, V, A, Y, s = cache
    dV = np.swapaxes(A, -1, -2) @ dY  # V̄ = Aᵀ Ȳ
    dA = dY @ np.swapaxes(V, -1, -2)  # Ā = Ȳ Vᵀ
    D = np.sum(dY * Y, axis=-1, keepdims=True)  # D_i = ȳ_i·y_i（= Σ_j Ā_ij A_ij）
    dS = A * (dA - D)  # S̄ = A ⊙ (Ā − D)；被掩处 A = 0，梯度恰为 0
    dQ = s * (dS @ K)  # Q̄ = s S̄ K
    dK = s * (np.swapaxes(dS, -1, -2) @ Q)  # K̄ = s S̄ᵀ Q
    return _np_sum_to(dQ, Q.shape), _np_sum_to(dK, K.shape), _np_sum_to(dV, V.shape)


def numerical_gradient(f, x, eps=1e-6):
    """中心差分：(f(x+εe) − f(x−εe)) / 2ε，逐元素。x 原地扰动，但每次都恢复原值。"""
    grad = np.zeros(x.shape, dtype=float)
    for idx in np.ndindex(*x.shape):
        old = x[idx]
        try:
            x[idx] = old + eps
            f_plus = float(f(x))
            x[idx] = old - eps
            f_minus = float(f(x))
        finally:
            x[idx] = old  # 无论 f 是否抛错都恢复
        grad[idx] = (f_plus - f_minus) / (2 * eps)
    return grad


def init_score_std(d, weight_bound, input_var=1.0):
    """初始化时 q·k/sqrt(d_k) 的标准差（§2.1 细节二）。

    W 的元素 ~ U(-b, b)，方差 b²/3；q_i 是 d 项之和：Var[q_i] = d · input_var · b²/3，k_i 相同。
    q·k 是 d_k 项独立乘积之和：Var[q·k] = d_k · Var[q_i] · Var[k_i]，除以 d_k 后 d_k 消掉，
    所以标准差 = Var[q_i]，与头数无关。d=512、b=1/sqrt(512) 时为 1/3。
    """
    var_q = d * input_var * weight_bound**2 / 3.0
    return float(math.sqrt(var_q * var_q))


# =====================================================================================
# §2 手写 autograd.Function（torch）
# =====================================================================================


def _sum_to(g, shape):
    """torch 版：把广播出来的梯度求和回输入的形状。"""
    while g.dim() > len(shape):
        g = g.sum(0)
    for ax, n in enumerate(shape):
        if n == 1 and g.shape[ax] != 1:
            g = g.sum(ax, keepdim=True)
    return g


class AttentionFunction(torch.autograd.Function):
    """y = softmax(q kᵀ/sqrt(d_k) + 掩码) v，backward 按 §2.3 的公式手写。"""

    @staticmethod
    def forward(ctx, q, k, v, mask=None):
        s = 1.0 / math.sqrt(q.shape[-1])
        scores = (q @ k.transpose(-2, -1)) * s
        if mask is not None:
            scores = scores.masked_fill(mask.to(scores.device), float("-inf"))
        A = torch.softmax(scores, dim=-1)
        y = A @ v
        ctx.save_for_backward(q, k, v, A, y)
        ctx.scale = s
        return y

    @staticmethod
    @once_differentiable  # 反向里用的 A 不在计算图上，不支持二阶导，明确报错而不是悄悄算错
    def backward(ctx, dy):
        q, k, v, A, y = ctx.saved_tensors
        s = ctx.scale
        dv = A.transpose(-2, -1) @ dy  # V̄ = Aᵀ Ȳ
        dA = dy @ v.transpose(-2, -1)  # Ā = Ȳ Vᵀ
        D = (dy * y).sum(-1, keepdim=True)  # D_i = ȳ_i·y_i
        dS = A * (dA - D)  # softmax 反向；被掩处恰为 0
        dq = s * (dS @ k)
        dk = s * (dS.transpose(-2, -1) @ q)
        return _sum_to(dq, q.shape), _sum_to(dk, k.shape), _sum_to(dv, v.shape), None


def naive_attention(q, k, v, mask=None):
    """教科书写法（§4.3 的代码）：-inf 填充后 softmax。整行被掩时会出 NaN，用来对照和复现 §3.4。"""
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


# =====================================================================================
# §3 掩码
# =====================================================================================


def causal_mask(T):
    """(T,T) 布尔，严格上三角为 True（key 在 query 之后 = 未来 = 屏蔽）。注意 diagonal=1。"""
    return torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)


def padding_mask(lengths, T, side="right"):
    """(B,T) 布尔，pad 位置为 True。side="left" 时 pad 在前（批量生成用左补齐）。"""
    lengths = torch.as_tensor(lengths)
    pos = torch.arange(T, device=lengths.device)
    if side == "right":
        return pos[None, :] >= lengths[:, None]
    if side == "left":
        return pos[None, :] < (T - lengths)[:, None]
    raise ValueError(f"side 只能是 'right' 或 'left'，收到 {side!r}")


def attention_mask(key_padding, causal=True):
    """(B,1,T,T) 布尔：key 是 pad，或（causal 时）key 下标 > query 下标，就屏蔽（逻辑或）。"""
    B, T = key_padding.shape
    m = key_padding[:, None, None, :]  # 按 key 屏蔽：广播到每一行（每个 query）
    if causal:
        m = m | causal_mask(T).to(key_padding.device)
    return m.expand(B, 1, T, T).contiguous()


def masked_softmax(scores, mask):
    """带掩码的 softmax。被屏蔽处恰为 0；整行被屏蔽时给全 0（不是 NaN），梯度也有限。

    做法：先用有限的 finfo(dtype).min 填充（§3.4 修法一，不会出现 0/0），
    再把被屏蔽处置 0：有可看 key 的行里这些值本来就下溢为 0，整行被屏蔽的行由均匀变成全 0。
    """
    mask = mask.to(scores.device)
    filled = scores.masked_fill(mask, torch.finfo(scores.dtype).min)
    return torch.softmax(filled, dim=-1).masked_fill(mask, 0.0)


def safe_causal_attention(q, k, v, key_padding):
    """因果 + padding 掩码的注意力，左补齐时输出和梯度处处有限（§3.4 修法二）。

    让每个 query 总能看到自己：pad query 只看自己这一个 key，不再整行被掩；
    真实 query 的对角线本来就可看（自己不是 pad、也不是未来），所以结果与参考实现相同。
    """
    T = q.shape[-2]
    mask = key_padding[:, None, :] | causal_mask(T).to(key_padding.device)  # (B,T,T)
    mask = mask & ~torch.eye(T, dtype=torch.bool, device=mask.device)  # 放开对角线
    if q.dim() == 4:  # 也接受 (B,h,T,d_k)
        mask = mask[:, None]
    return naive_attention(q, k, v, mask)


# =====================================================================================
# §4 多头注意力
# =====================================================================================


def split_heads(x, n_heads):
    """(B,T,d) → (B,h,T,d/h)；第 i 个头 = 特征 i*d_k:(i+1)*d_k。"""
    B, T, d = x.shape
    assert d % n_heads == 0, "d_model 必须能被 n_heads 整除"
    return x.reshape(B, T, n_heads, d // n_heads).transpose(1, 2)


def merge_heads(x):
    """(B,h,T,d_k) → (B,T,h*d_k)。必须先 transpose 再合并；reshape 对不连续张量会自动复制。"""
    B, h, T, dk = x.shape
    return x.transpose(1, 2).reshape(B, T, h * dk)


class MultiHeadAttention(nn.Module):
    """手写多头自注意力（不用 nn.MultiheadAttention，也不用 SDPA）。参数量 4d² + 4d，与头数无关。"""

    def __init__(self, d_model, n_heads, bias=True):
        super().__init__()
        assert d_model % n_heads == 0, "d_model 必须能被 n_heads 整除"
        self.d_model = d_model
        self.n_heads = n_heads
        # h 个头的投影横向拼成一个 d×d 矩阵，一次矩阵乘算完所有头
        self.W_q = nn.Linear(d_model, d_model, bias=bias)
        self.W_k = nn.Linear(d_model, d_model, bias=bias)
        self.W_v = nn.Linear(d_model, d_model, bias=bias)
        self.W_o = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, mask=None, need_weights=False):
        """x (B,T,d)；mask 布尔 (T,T)、(B,1,T,T) 或 (B,h,T,T)，True = 屏蔽。"""
        h = self.n_heads
        q = split_heads(self.W_q(x), h)  # (B,h,T,d_k)
        k = split_heads(self.W_k(x), h)
        v = split_heads(self.W_v(x), h)
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B,h,T,T)，除以 sqrt(d_k)
        if mask is None:
            attn = torch.softmax(scores, dim=-1)
        else:
            if mask.dim() == 3:  # (B,T,T) 也接受：补上头维
                mask = mask[:, None]
            attn = masked_softmax(scores, mask)  # (T,T)/(B,1,T,T)/(B,h,T,T) 都能广播
        y = self.W_o(merge_heads(attn @ v))  # 拼回 (B,T,d) 再做输出投影
        return (y, attn) if need_weights else y


def mha_property_errors(mha_cls, d_model=16, n_heads=4):
    """§B 第 3 题的五个检查，量成数：对任何满足上面约定的类返回五项误差，正确的类每项都 ≈ 0。
    row_sum / masked：因果掩码下的行和与被屏蔽的权重；single_head：h=1 与亲手算的单头；
    equivariance：无掩码时 f(PX) − P f(X)；sdpa：与同样的投影经 SDPA（掩码约定取反）的结果。"""
    g = torch.Generator().manual_seed(0)
    B, T = 2, 6
    x = torch.randn(B, T, d_model, generator=g, dtype=torch.float64)
    causal = causal_mask(T)
    mha, one = mha_cls(d_model, n_heads).double(), mha_cls(d_model, 1).double()
    perm = torch.arange(T).flip(0)  # 一个真正打乱位置的置换
    with torch.no_grad():
        y, attn = mha(x, causal, need_weights=True)
        q, k, v = one.W_q(x), one.W_k(x), one.W_v(x)
        by_hand = one.W_o(torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d_model), dim=-1) @ v)
        heads = [split_heads(lin(x), n_heads) for lin in (mha.W_q, mha.W_k, mha.W_v)]
        reference = mha.W_o(merge_heads(F.scaled_dot_product_attention(*heads, attn_mask=~causal)))  # SDPA：True = 参与
        return {"row_sum": _max_err(attn.sum(-1), torch.ones(())),
                "masked": float(attn.masked_select(causal.expand_as(attn)).abs().max()),
                "single_head": _max_err(one(x), by_hand),
                "equivariance": _max_err(mha(x[:, perm]), mha(x)[:, perm]),
                "sdpa": _max_err(y, reference)}


# =====================================================================================
# §5 复杂度
# =====================================================================================


def mha_flops(T, d):
    """一层 MHA、一个序列：投影 8Td²（Q、K、V、O 各 2Td²）+ 注意力 4T²d（QKᵀ、AV 各 2T²d）。"""
    return 8 * T * d**2 + 4 * T**2 * d


def attention_flop_share(T, d):
    """T² 项的占比 = 4T²d / (8Td² + 4T²d) = T / (T + 2d)；T = 2d 时恰为一半。"""
    return 4 * T**2 * d / mha_flops(T, d)


def attn_matrix_bytes(B, h, T, bytes_per_element=2, n_layers=1):
    """存下的注意力矩阵 A (B,h,T,T) 的字节数（反向要用 A，见 §2.3）。"""
    return B * h * T * T * bytes_per_element * n_layers


def generation_flops(T, d, kv_cache):
    """逐 token 生成 T 个 token、一层的 FLOPs 总和（t 从 1 到 T）。

    无缓存：第 t 步重算长度 t 的前缀，8td² + 4t²d；有 KV 缓存：只算新 token，8d² + 4td。
    用 Σt = T(T+1)/2、Σt² = T(T+1)(2T+1)/6 求和（整数运算，没有舍入）。
    """
    sum_t = T * (T + 1) // 2
    sum_t2 = T * (T + 1) * (2 * T + 1) // 6
    if kv_cache:
        return 8 * d**2 * T + 4 * d * sum_t
    return 8 * d**2 * sum_t + 4 * d * sum_t2


# =====================================================================================
# §A API：SDPA、KV Cache 解码、nn.MultiheadAttention
# =====================================================================================


def sdpa_attention(q, k, v, mask=None, is_causal=False, dropout_p=0.0, training=False):
    """用 F.scaled_dot_product_attention 做注意力；mask 用课程约定（True = 屏蔽）。

    - SDPA 的布尔 attn_mask 里 True = 参与，所以要取反；
    - attn_mask 与 is_causal=True 不能同时给，要自己合成一个（因果用 SDPA 的左上角对齐 tril）；
    - SDPA 不看 train/eval，dropout 只在 training 时打开。
    """
    p = dropout_p if training else 0.0
    if mask is None:
        return F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=is_causal)
    allowed = ~mask.to(q.device)
    if is_causal:
        L, S = q.shape[-2], k.shape[-2]
        allowed = allowed & torch.ones(L, S, dtype=torch.bool, device=q.device).tril()
    return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, dropout_p=p)


def decode_step(q_new, k_cache, v_cache):
    """带 KV 缓存的一步解码：新 token 能看所有缓存的 key，所以 is_causal=False。

    （L=1 时 is_causal=True 用左上角对齐的下三角，只让它看第一个 key，是错的。）
    """
    return F.scaled_dot_product_attention(q_new, k_cache, v_cache, is_causal=False)


def to_torch_mha(mha):
    """把手写 MultiHeadAttention 的权重搬进 nn.MultiheadAttention(batch_first=True)。

    nn.MultiheadAttention 把 Q/K/V 投影竖着拼成 in_proj_weight (3d, d)，顺序 q、k、v；
    头的切法（第 i 个头 = 特征 i*d_k:(i+1)*d_k）与 split_heads 一致。
    """
    W = mha.W_q.weight
    has_bias = mha.W_q.bias is not None
    t = nn.MultiheadAttention(mha.d_model, mha.n_heads, bias=has_bias, batch_first=True,
                              device=W.device, dtype=W.dtype)
    with torch.no_grad():
        t.in_proj_weight.copy_(torch.cat([mha.W_q.weight, mha.W_k.weight, mha.W_v.weight], dim=0))
        t.out_proj.weight.copy_(mha.W_o.weight)
        if has_bias:
            t.in_proj_bias.copy_(torch.cat([mha.W_q.bias, mha.W_k.bias, mha.W_v.bias], dim=0))
            t.out_proj.bias.copy_(mha.W_o.bias)
    return t


def torch_mha_forward(torch_mha, x, key_padding=None, causal=False):
    """用 nn.MultiheadAttention 做自注意力：同一个 x 传三次；不要权重（need_weights=False）。

    它的布尔约定和课程一样（True = 屏蔽）：key_padding_mask (B,T)、attn_mask (T,T)。
    is_causal 在这里只是提示，真正起作用的是 attn_mask，所以因果掩码要自己给。
    """
    attn_mask = causal_mask(x.shape[1]).to(x.device) if causal else None
    y, _ = torch_mha(x, x, x, key_padding_mask=key_padding, attn_mask=attn_mask,
                     need_weights=False)
    return y


# =====================================================================================
# 自检（§B）：python w1d1_attention.py --selftest
# =====================================================================================


def _max_err(a, b):
    a = torch.as_tensor(a, dtype=torch.float64)
    b = torch.as_tensor(b, dtype=torch.float64)
    return float((a - b).abs().max())


def _rel_err(a, b):
    """max|a−b| / max|b|：与数值微分比较时用。"""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-300))


def _check_masks():
    kp = padding_mask([5, 3], 5)  # 右补齐：第 2 个样本后两个是 pad
    got = attention_mask(kp, causal=True)
    want = torch.zeros(2, 1, 5, 5, dtype=torch.bool)
    for b in range(2):
        for i in range(5):
            for j in range(5):
                want[b, 0, i, j] = bool(kp[b, j]) or j > i  # 逐元素按定义：pad 或 未来
    bad = int((got != want).sum())
    return bad == 0, f"与逐元素定义不一致的元素数 {bad}（共 {want.numel()}）"


def _mha_batch(seed=0, B=2, T=6, d=16, h=4, bias=True):
    torch.manual_seed(seed)
    mha = MultiHeadAttention(d, h, bias=bias).double()
    x = torch.randn(B, T, d, dtype=torch.float64)
    return mha, x


def _check_rows_sum():
    mha, x = _mha_batch()
    mask = attention_mask(padding_mask([6, 4], 6), causal=True)  # 每行至少能看位置 0
    with torch.no_grad():
        _, attn = mha(x, mask, need_weights=True)
    err = float((attn.sum(-1) - 1).abs().max())
    return err < 1e-12, f"因果∪padding 掩码下 max|行和 − 1| = {err:.1e}"


def _check_blocked_zero():
    mha, x = _mha_batch()
    mask = attention_mask(padding_mask([6, 4], 6), causal=True)
    with torch.no_grad():
        _, attn = mha(x, mask, need_weights=True)
    blocked = attn.masked_select(mask.expand_as(attn))
    worst = float(blocked.abs().max())
    return worst == 0.0, f"{blocked.numel()} 个被屏蔽权重的 max|A| = {worst}"


def _check_one_head():
    mha, x = _mha_batch(h=1, bias=False)
    with torch.no_grad():
        y = mha(x)
    Wq, Wk, Wv, Wo = (m.weight.detach().numpy().T for m in (mha.W_q, mha.W_k, mha.W_v, mha.W_o))
    ref = np.stack([self_attention(xb, Wq, Wk, Wv)[0] @ Wo for xb in x.numpy()])
    err = _max_err(y, ref)
    return err < 1e-12, f"与 numpy 单头 self_attention 逐元素最大误差 {err:.1e}（float64）"


def _check_permutation():
    mha, x = _mha_batch()
    perm = torch.randperm(x.shape[1], generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        err = _max_err(mha(x[:, perm]), mha(x)[:, perm])
        cm = causal_mask(x.shape[1])
        err_causal = _max_err(mha(x[:, perm], cm), mha(x, cm)[:, perm])
    ok = err < 1e-12 and err_causal > 1e-3
    return ok, f"无掩码 max|f(PX) − P f(X)| = {err:.1e}；加因果掩码后 {err_causal:.2f}（等变被打破）"


def _check_sdpa():
    torch.manual_seed(2)
    B, h, T, dk = 2, 3, 6, 8
    q, k, v = (torch.randn(B, h, T, dk, dtype=torch.float64) for _ in range(3))
    kp = padding_mask([6, 4], T)
    mask = attention_mask(kp, causal=True)
    ref = masked_softmax(q @ k.transpose(-2, -1) / math.sqrt(dk), mask) @ v
    err = _max_err(sdpa_attention(q, k, v, mask), ref)
    err_merge = _max_err(sdpa_attention(q, k, v, kp[:, None, None, :], is_causal=True), ref)
    wrong = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # 忘了取反：看的正是该屏蔽的
    err_wrong = float(torch.nan_to_num((wrong - ref).abs(), nan=float("inf")).max())
    ok = err < 1e-12 and err_merge < 1e-12 and err_wrong > 1e-2
    return ok, (f"取反后最大误差 {err:.1e}，padding + is_causal 合成 {err_merge:.1e}；"
                f"忘记取反误差 {err_wrong:.2g}")


def _check_gradcheck():
    torch.manual_seed(3)
    f64 = {"dtype": torch.float64, "requires_grad": True}
    q, k, v = (torch.randn(2, 2, 5, 4, **f64) for _ in range(3))
    ok1 = torch.autograd.gradcheck(AttentionFunction.apply, (q, k, v, causal_mask(5)))
    q2, k2, v2 = torch.randn(2, 3, 4, **f64), torch.randn(2, 6, 4, **f64), torch.randn(2, 6, 3, **f64)
    kp = padding_mask([6, 4], 6)[:, None, :]  # T=3 ≠ S=6，按 key 屏蔽
    ok2 = torch.autograd.gradcheck(AttentionFunction.apply, (q2, k2, v2, kp))
    # 与 autograd 对照
    dy = torch.randn(2, 2, 5, 4, dtype=torch.float64)
    g_hand = torch.autograd.grad(AttentionFunction.apply(q, k, v, causal_mask(5)), (q, k, v), dy)
    g_auto = torch.autograd.grad(naive_attention(q, k, v, causal_mask(5)), (q, k, v), dy)
    err = max(_max_err(a, b) for a, b in zip(g_hand, g_auto))
    ok = ok1 and ok2 and err < 1e-12
    return ok, f"gradcheck（因果 T=S；padding T≠S）{'通过' if ok1 and ok2 else '失败'}；与 autograd 最大误差 {err:.1e}"


def _leftpad_batch(seed=4, d=4):
    torch.manual_seed(seed)
    T = 5
    kp = padding_mask([3, 5], T, side="left")  # 样本 0：pad pad A B C
    q, k, v = (torch.randn(2, T, d, dtype=torch.float64) for _ in range(3))
    mask = attention_mask(kp, causal=True)[:, 0]  # (B,T,T)
    return q, k, v, kp, mask


def _check_leftpad_fixes():
    q, k, v, kp, mask = _leftpad_batch()
    visible = (~mask[0]).sum(-1).tolist()
    y_inf = naive_attention(q, k, v, mask)
    nan_rows = int(torch.isnan(y_inf).any(-1).sum())
    real = ~kp  # 真实 query 位置
    ref = y_inf[real]  # 参考：真实位置上 -inf 写法是对的
    # 修法一：有限填充 finfo.min（pad 行退化成均匀，不是 NaN）
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    A1 = scores.masked_fill(mask, torch.finfo(q.dtype).min).softmax(-1)
    y1 = A1 @ v
    err1 = _max_err(y1[real], ref)
    # 修法二：让 pad query 看见自己
    vv = v.clone().requires_grad_(True)
    y2 = safe_causal_attention(q, k, vv, kp)
    y2.backward(torch.randn_like(y2) * real[..., None])
    err2 = _max_err(y2.detach()[real], ref)
    finite = bool(torch.isfinite(y1).all() and torch.isfinite(y2).all() and torch.isfinite(vv.grad).all())
    ok = visible == [0, 0, 1, 2, 3] and nan_rows == 2 and finite and err1 < 1e-12 and err2 < 1e-12
    return ok, (f"可看 key 数 {visible}，-inf 时 {nan_rows} 行 NaN；修法一 finfo.min 误差 {err1:.1e}"
                f"（pad 行均匀 {A1[0, 0, 0].item():.1f}），修法二看见自己 误差 {err2:.1e}，输出与梯度全有限")


def _check_nan_into_dv():
    q, k, v, kp, mask = _leftpad_batch()
    v = v.clone().requires_grad_(True)
    y = naive_attention(q, k, v, mask)
    dy = torch.randn_like(y).masked_fill(kp[..., None], 0.0)  # 损失只在真实位置：pad 行 Ȳ = 0
    y.backward(dy)
    nan_rows = int(torch.isnan(v.grad[0]).any(-1).sum())
    v2 = v.detach().clone().requires_grad_(True)
    safe_causal_attention(q, k, v2, kp).backward(dy)
    fixed = int(torch.isnan(v2.grad).any(-1).sum())
    ok = nan_rows == 5 and fixed == 0
    return ok, f"pad 行 Ȳ 置 0 后 V̄ 有 {nan_rows}/5 行是 NaN（NaN × 0 = NaN）；修好后 {fixed} 行"


def _check_numpy_backward():
    rng = np.random.default_rng(5)
    T, dk, dv = 5, 4, 3
    Q, K, V = rng.normal(size=(T, dk)), rng.normal(size=(T, dk)), rng.normal(size=(T, dv))
    dY = rng.normal(size=(T, dv))
    mask = np.triu(np.ones((T, T), dtype=bool), 1)
    Y, cache = attention_forward(Q, K, V, mask)
    dQ, dK, dV = attention_backward(dY, cache)
    rel = []
    for i, X in enumerate((Q, K, V)):
        args = [Q, K, V]

        def f(Z, i=i, args=args):
            args = list(args)
            args[i] = Z
            return np.sum(attention_forward(*args, mask)[0] * dY)

        rel.append(_rel_err((dQ, dK, dV)[i], numerical_gradient(f, X.copy())))
    A = cache[3]
    D_err = float(np.abs((dY * Y).sum(-1) - ((dY @ V.T) * A).sum(-1)).max())
    dS_masked = float(np.abs((A * ((dY @ V.T) - (dY * Y).sum(-1, keepdims=True)))[mask]).max())
    ok = max(rel) < 1e-6 and D_err < 1e-12 and dS_masked == 0.0
    return ok, (f"numpy 反向 vs 数值微分 相对误差 Q̄ {rel[0]:.1e} K̄ {rel[1]:.1e} V̄ {rel[2]:.1e}；"
                f"D_i = ȳ_i·y_i 误差 {D_err:.1e}；被掩 S̄ = {dS_masked}")


def _check_torch_mha():
    errs = []
    for bias in (True, False):
        mha, x = _mha_batch(seed=6, bias=bias)
        kp = padding_mask([6, 4], 6)
        t = to_torch_mha(mha)
        with torch.no_grad():
            errs.append(_max_err(torch_mha_forward(t, x), mha(x)))
            errs.append(_max_err(torch_mha_forward(t, x, kp, causal=True),
                                 mha(x, attention_mask(kp, causal=True))))
    err = max(errs)
    return err < 1e-10, f"to_torch_mha + torch_mha_forward 与手写 MHA（有/无 bias、有/无掩码）最大误差 {err:.1e}"


def _check_decode():
    torch.manual_seed(7)
    B, h, S, dk = 2, 2, 7, 8
    q, k, v = (torch.randn(B, h, S, dk, dtype=torch.float64) for _ in range(3))
    full = naive_attention(q, k, v, causal_mask(S))
    err = _max_err(decode_step(q[:, :, -1:], k, v), full[:, :, -1:])
    wrong = F.scaled_dot_product_attention(q[:, :, -1:], k, v, is_causal=True)  # 只看第一个 key
    err_wrong = _max_err(wrong, full[:, :, -1:])
    return err < 1e-12 and err_wrong > 1e-2, (f"decode_step 与完整因果注意力最后一行误差 {err:.1e}；"
                                              f"L=1 时误用 is_causal=True 误差 {err_wrong:.2f}")


def _check_init_std():
    torch.manual_seed(8)
    d, h, T = 512, 8, 128
    x = torch.randn(T, d)
    with torch.no_grad():
        mha = MultiHeadAttention(d, h, bias=False)  # nn.Linear 默认 U(-1/sqrt(d), 1/sqrt(d))
        q, k = split_heads(mha.W_q(x)[None], h), split_heads(mha.W_k(x)[None], h)
        measured = float((q @ k.transpose(-2, -1) / math.sqrt(d // h)).std())
    pred = init_score_std(d, 1 / math.sqrt(d))
    ok = abs(pred - 1 / 3) < 1e-12 and abs(measured - pred) < 0.02
    return ok, f"init_score_std = {pred:.3f}，实测（d=512，8 头，T=128）{measured:.3f}"


def _check_tables():
    shares = [attention_flop_share(T, d) for d, T in
              [(768, 512), (768, 1536), (768, 8192), (4096, 2048), (4096, 8192), (4096, 32768)]]
    share_txt = "/".join(f"{100 * s:.1f}" for s in shares)
    gib = 2**30
    mem = [(attn_matrix_bytes(8, 12, 1024) / gib, attn_matrix_bytes(8, 12, 1024, n_layers=12) / gib),
           (attn_matrix_bytes(8, 12, 4096) / gib, attn_matrix_bytes(8, 12, 4096, n_layers=12) / gib),
           (attn_matrix_bytes(1, 32, 32768) / gib, attn_matrix_bytes(1, 32, 32768, n_layers=32) / gib)]
    mem_txt = "，".join(f"{a:.2f}/{b:.1f}" if b < 1000 else f"{a:.2f}/{b:.0f}" for a, b in mem)
    ok = (share_txt == "25.0/50.0/84.2/20.0/50.0/80.0"
          and mem_txt == "0.19/2.2，3.00/36.0，64.00/2048"
          and generation_flops(4, 8, False) == sum(mha_flops(t, 8) for t in range(1, 5)))
    return ok, f"T² 项占比 {share_txt} %；注意力矩阵 每层/全部层 GiB {mem_txt}"


class _MergeWithoutTranspose(MultiHeadAttention):
    """§A.5 的隐蔽错误（只给自检用）：合并多头时漏了 transpose。"""

    def forward(self, x, mask=None, need_weights=False):
        B, T, d = x.shape
        q, k, v = (split_heads(lin(x), self.n_heads) for lin in (self.W_q, self.W_k, self.W_v))
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        attn = torch.softmax(scores if mask is None else scores.masked_fill(mask, float("-inf")), dim=-1)
        y = self.W_o((attn @ v).reshape(B, T, d))
        return (y, attn) if need_weights else y


def _check_own_checks():
    good = mha_property_errors(MultiHeadAttention)
    bad = mha_property_errors(_MergeWithoutTranspose)
    ok = max(good.values()) < 1e-12 and min(bad["equivariance"], bad["sdpa"]) > 1e-3 and bad["single_head"] < 1e-12
    return ok, (f"正确的类五项最大 {max(good.values()):.1e}；漏 transpose 的类：置换等变 {bad['equivariance']:.2f}、"
                f"SDPA 对拍 {bad['sdpa']:.2f}，h=1 对照 {bad['single_head']:.1e}（看不见：§A.5 检查法的盲区）")


_SELFTEST = [
    ("掩码合并：因果 ∪ padding", _check_masks),
    ("注意力权重每行和为 1", _check_rows_sum),
    ("被屏蔽位置的权重恰为 0", _check_blocked_zero),
    ("h=1 的多头与单头逐元素相等", _check_one_head),
    ("无掩码时置换等变", _check_permutation),
    ("与 F.scaled_dot_product_attention 对拍（布尔约定取反）", _check_sdpa),
    ("手写 autograd.Function 通过 gradcheck（float64）", _check_gradcheck),
    ("左补齐 + 因果掩码：-inf 出 NaN，两种修法", _check_leftpad_fixes),
    ("PyTorch 复现 NaN 流进 V̄ 的每一行", _check_nan_into_dv),
    ("§2.3 五行反向（numpy）vs 数值微分", _check_numpy_backward),
    ("to_torch_mha：nn.MultiheadAttention 与手写 MHA 一致", _check_torch_mha),
    ("KV 缓存一步解码（is_causal=False）", _check_decode),
    ("初始化时分数的标准差（§2.1）", _check_init_std),
    ("§5.1 FLOPs 占比与 §5.2 显存表", _check_tables),
    ("自己写的五个检查（mha_property_errors）：正确的类 ≈ 0，漏 transpose 的类被看见", _check_own_checks),
]


def selftest():
    """逐项运行自检，打印编号、描述和实测数字；返回失败项数。"""
    failures = 0
    for i, (desc, check) in enumerate(_SELFTEST, 1):
        try:
            ok, detail = check()
        except Exception as exc:  # noqa: BLE001  一项出错不影响其余各项
            ok, detail = False, f"异常 {type(exc).__name__}: {exc}"
        failures += not ok
        print(f"{i:2d}. [{'通过' if ok else '失败'}] {desc}：{detail}", flush=True)
    n = len(_SELFTEST)
    print(f"自检结束：{n - failures}/{n} 项通过" + ("" if failures == 0 else f"，{failures} 项失败"))
    return failures


if __name__ == "__main__":
    import sys

    if "--selftest" in sys.argv[1:]:
        sys.exit(1 if selftest() else 0)
    print("用法：python w1d1_attention.py --selftest")
