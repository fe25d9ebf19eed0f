"""参考实现 solutions/w1d1_attention.py 的测试：自检子进程 + 逐函数与独立计算对照。"""

import importlib.util
import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

REPO = Path(__file__).resolve().parents[1]
MODULE_PATH = REPO / "solutions" / "w1d1_attention.py"
if str(MODULE_PATH.parent) not in sys.path:
    sys.path.insert(0, str(MODULE_PATH.parent))

import w1d1_attention as ref

F64 = torch.float64


# ------------------------------------------------------------------------------------
# 独立的对照实现（只用 torch 基本运算，不调用被测模块）
# ------------------------------------------------------------------------------------


def oracle_attention(q, k, v, mask=None):
    """逐 query 显式计算的注意力（True = 屏蔽）；每行至少有一个可看 key。"""
    scores = torch.einsum("...td,...sd->...ts", q, k) / math.sqrt(q.shape[-1])
    if mask is not None:
        mask = torch.broadcast_to(mask, scores.shape)
        scores = torch.where(mask, torch.full_like(scores, -torch.inf), scores)
    weights = torch.exp(scores - scores.max(-1, keepdim=True).values)
    weights = weights / weights.sum(-1, keepdim=True)
    return torch.einsum("...ts,...sd->...td", weights, v)


def oracle_mha(mha, x, mask=None):
    """逐头循环的多头注意力，直接用 mha 的 nn.Linear 权重。"""
    h, d = mha.n_heads, mha.d_model
    dk = d // h
    q, k, v = mha.W_q(x), mha.W_k(x), mha.W_v(x)
    heads = []
    for i in range(h):
        sl = slice(i * dk, (i + 1) * dk)
        m = None
        if mask is not None:
            m = mask if mask.dim() == 2 else mask[:, i if mask.shape[1] > 1 else 0]
        heads.append(oracle_attention(q[..., sl], k[..., sl], v[..., sl], m))
    return mha.W_o(torch.cat(heads, dim=-1))


def leftpad_case(seed=0, d=4):
    g = torch.Generator().manual_seed(seed)
    kp = torch.tensor([[True, True, False, False, False], [False] * 5])
    q, k, v = (torch.randn(2, 5, d, generator=g, dtype=F64) for _ in range(3))
    mask = kp[:, None, :] | torch.triu(torch.ones(5, 5, dtype=torch.bool), 1)
    return q, k, v, kp, mask


# ------------------------------------------------------------------------------------
# 自检
# ------------------------------------------------------------------------------------

SELFTEST_KEYWORDS = {
    1: ["因果", "padding"],
    2: ["和为 1"],
    3: ["恰为 0"],
    4: ["h=1", "单头"],
    5: ["置换等变"],
    6: ["scaled_dot_product_attention", "取反"],
    7: ["gradcheck", "float64"],
    8: ["NaN", "finfo", "[0, 0, 1, 2, 3]"],
    9: ["NaN", "5/5"],
    15: ["mha_property_errors", "h=1", "盲区"],
}


def test_selftest_runs_and_prints_every_item():
    proc = subprocess.run([sys.executable, str(MODULE_PATH), "--selftest"], capture_output=True,
                          text=True, timeout=300, cwd=REPO, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    for i, words in SELFTEST_KEYWORDS.items():
        hits = [ln for ln in lines if re.match(rf"^\s*{i}\. \[通过\] ", ln)]
        assert len(hits) == 1, f"第 {i} 项没有打印或没有通过：\n{proc.stdout}"
        for w in words:
            assert w in hits[0], f"第 {i} 项缺少 {w!r}：{hits[0]}"
        assert re.search(r"\d", hits[0].split("：", 1)[1]), f"第 {i} 项没有实测数字"
    n = len(ref._SELFTEST)
    assert re.search(rf"{n}/{n} 项通过", lines[-1])


def test_selftest_reports_failure(monkeypatch, capsys):
    def broken():
        raise RuntimeError("boom")

    items = [*ref._SELFTEST, ("故意失败", lambda: (False, "x")), ("故意出错", broken)]
    monkeypatch.setattr(ref, "_SELFTEST", items)
    assert ref.selftest() == 2
    out = capsys.readouterr().out
    assert "[失败] 故意失败" in out
    assert "RuntimeError" in out
    assert "2 项失败" in out


def test_import_has_no_side_effects():
    code = "import w1d1_attention"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=MODULE_PATH.parent, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""


# ------------------------------------------------------------------------------------
# §1 numpy
# ------------------------------------------------------------------------------------


def test_softmax_matches_definition_and_is_stable():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 4, 5))
    for axis in (-1, 0, 1):
        e = np.exp(x)
        np.testing.assert_allclose(ref.softmax(x, axis=axis), e / e.sum(axis=axis, keepdims=True),
                                   rtol=1e-12)
    big = np.array([[1e4, -1e4, 0.0], [1e4, 1e4, -1e4]])
    p = ref.softmax(big)
    assert np.isfinite(p).all()
    np.testing.assert_allclose(p, [[1, 0, 0], [0.5, 0.5, 0]], atol=1e-12)
    np.testing.assert_allclose(ref.softmax(x + 1000.0), ref.softmax(x), rtol=1e-12)


def test_self_attention_against_torch():
    rng = np.random.default_rng(1)
    T, d, dk, dv = 6, 8, 3, 5
    X, Wq, Wk, Wv = (rng.normal(size=s) for s in [(T, d), (d, dk), (d, dk), (d, dv)])
    X0 = X.copy()
    Y, A = ref.self_attention(X, Wq, Wk, Wv)
    t = [torch.from_numpy(a) for a in (X, Wq, Wk, Wv)]
    scores = (t[0] @ t[1]) @ (t[0] @ t[2]).T / math.sqrt(dk)
    A_t = torch.softmax(scores, -1)
    np.testing.assert_allclose(A, A_t.numpy(), rtol=1e-10)
    np.testing.assert_allclose(Y, (A_t @ (t[0] @ t[3])).numpy(), rtol=1e-10)
    assert Y.shape == (T, dv) and A.shape == (T, T)
    np.testing.assert_allclose(A.sum(-1), 1.0, atol=1e-12)
    np.testing.assert_array_equal(X, X0)


def test_score_diagnostics():
    S = np.array([[5.0, 1, 0, 0], [0, 3, 1, 0], [9, 0, 2, 0], [0, 0, 7, 1]])
    assert ref.self_argmax_rate(S) == pytest.approx(0.5)
    assert ref.self_argmax_rate(np.eye(5) * 3 + 1) == pytest.approx(1.0)
    assert ref.asymmetry(np.array([[1.0, 2], [2, 5]])) == pytest.approx(0.0)
    assert ref.asymmetry(np.array([[0.0, 1], [0, 0]])) == pytest.approx(math.sqrt(2))
    rng = np.random.default_rng(2)
    M = rng.normal(size=(7, 7))
    assert ref.asymmetry(M) == pytest.approx(np.linalg.norm(M - M.T) / np.linalg.norm(M))
    X = rng.normal(size=(20, 16))
    assert ref.self_argmax_rate(X @ X.T) == pytest.approx(1.0)  # 不投影：全都最看自己


# ------------------------------------------------------------------------------------
# §2 前向、反向、数值微分
# ------------------------------------------------------------------------------------


def _autograd_grads(Q, K, V, mask, dY):
    q, k, v = (torch.tensor(a, requires_grad=True) for a in (Q, K, V))
    m = None if mask is None else torch.from_numpy(np.asarray(mask))
    y = oracle_attention(q, k, v, m)
    y.backward(torch.from_numpy(dY))
    return y.detach().numpy(), q.grad.numpy(), k.grad.numpy(), v.grad.numpy()


@pytest.mark.parametrize("case", ["causal", "batched_T_ne_S", "broadcast_K"])
def test_attention_forward_backward_against_autograd(case):
    rng = np.random.default_rng(3)
    if case == "causal":
        Q, K, V = rng.normal(size=(5, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 3))
        mask = np.triu(np.ones((5, 5), dtype=bool), 1)
    elif case == "batched_T_ne_S":
        Q, K, V = (rng.normal(size=(2, 3, 4, 5)), rng.normal(size=(2, 3, 6, 5)),
                   rng.normal(size=(2, 3, 6, 2)))
        mask = np.zeros((2, 1, 1, 6), dtype=bool)
        mask[0, ..., 4:] = True
    else:
        Q, K, V = rng.normal(size=(2, 3, 4, 5)), rng.normal(size=(1, 1, 6, 5)), rng.normal(size=(6, 2))
        mask = None
    orig = [a.copy() for a in (Q, K, V)]
    Y, cache = ref.attention_forward(Q, K, V, mask)
    dY = rng.normal(size=Y.shape)
    dQ, dK, dV = ref.attention_backward(dY, cache)
    Y_t, gq, gk, gv = _autograd_grads(Q, K, V, mask, dY)
    np.testing.assert_allclose(Y, Y_t, rtol=1e-10, atol=1e-12)
    for got, want in ((dQ, gq), (dK, gk), (dV, gv)):
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    for a, b in zip((Q, K, V), orig):
        np.testing.assert_array_equal(a, b)
    if case == "batched_T_ne_S":  # 被所有 query 屏蔽的 key：梯度恰为 0
        assert np.all(dK[0, :, 4:] == 0.0) and np.all(dV[0, :, 4:] == 0.0)
        assert np.abs(dK[1, :, 4:]).min() > 0


def test_attention_backward_against_numerical_gradient():
    rng = np.random.default_rng(4)
    Q, K, V = rng.normal(size=(4, 3)), rng.normal(size=(4, 3)), rng.normal(size=(4, 2))
    mask = np.triu(np.ones((4, 4), dtype=bool), 1)
    Y, cache = ref.attention_forward(Q, K, V, mask)
    dY = rng.normal(size=Y.shape)
    grads = ref.attention_backward(dY, cache)
    for i, X in enumerate((Q, K, V)):
        def f(Z, i=i):
            args = [Q, K, V]
            args[i] = Z
            return np.sum(ref.attention_forward(*args, mask)[0] * dY)

        num = ref.numerical_gradient(f, X.copy())
        np.testing.assert_allclose(grads[i], num, atol=1e-7)


def test_numerical_gradient_central_differences_and_restores_x():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(3, 4))
    x0 = x.copy()
    g = ref.numerical_gradient(lambda z: np.sum(z**3), x)
    assert g.shape == x.shape
    np.testing.assert_array_equal(x, x0)
    np.testing.assert_allclose(g, 3 * x0**2, atol=1e-7)  # 前向差分误差约 3|x|ε，过不了
    g_big = ref.numerical_gradient(lambda z: np.sum(z**3), x, eps=1e-2)
    np.testing.assert_allclose(g_big, 3 * x0**2 + 1e-4, atol=1e-9)  # 中心差分恰好多 ε²
    x3 = rng.normal(size=(2, 2, 2))
    np.testing.assert_allclose(ref.numerical_gradient(lambda z: np.sin(z).sum(), x3), np.cos(x3),
                               atol=1e-8)


def test_numerical_gradient_restores_x_when_f_raises():
    x = np.ones(3)

    def f(z):
        if z[1] != 1.0:
            raise ValueError
        return z.sum()

    with pytest.raises(ValueError):
        ref.numerical_gradient(f, x)
    np.testing.assert_array_equal(x, np.ones(3))


def test_init_score_std_closed_form():
    assert ref.init_score_std(512, 1 / math.sqrt(512)) == pytest.approx(1 / 3, rel=1e-12)
    assert ref.init_score_std(768, 1 / math.sqrt(768)) == pytest.approx(1 / 3, rel=1e-12)
    assert ref.init_score_std(512, 1 / math.sqrt(512), input_var=4.0) == pytest.approx(4 / 3)
    assert ref.init_score_std(64, 0.3, input_var=2.0) == pytest.approx(64 * 2 * 0.09 / 3)
    assert isinstance(ref.init_score_std(8, 0.5), float)


def test_init_score_std_monte_carlo():
    rng = np.random.default_rng(6)
    d, dk, b, var, T = 64, 16, 0.3, 2.0, 64
    samples = []
    for _ in range(20):
        X = rng.normal(scale=math.sqrt(var), size=(T, d))
        Wq, Wk = rng.uniform(-b, b, size=(d, dk)), rng.uniform(-b, b, size=(d, dk))
        samples.append(((X @ Wq) @ (X @ Wk).T / math.sqrt(dk)).ravel())
    measured = np.concatenate(samples).std()
    assert measured == pytest.approx(ref.init_score_std(d, b, var), rel=0.05)


# ------------------------------------------------------------------------------------
# §2 autograd.Function
# ------------------------------------------------------------------------------------


def test_attention_function_gradcheck():
    g = torch.Generator().manual_seed(7)

    def r(*s):
        return torch.randn(*s, generator=g, dtype=F64, requires_grad=True)

    causal = torch.triu(torch.ones(4, 4, dtype=torch.bool), 1)
    assert torch.autograd.gradcheck(ref.AttentionFunction.apply, (r(2, 4, 3), r(2, 4, 3), r(2, 4, 5), causal))
    pad = torch.tensor([False, False, True, False, True, True])  # 广播到 (...,T,S)
    assert torch.autograd.gradcheck(ref.AttentionFunction.apply, (r(2, 2, 3, 4), r(2, 2, 6, 4), r(2, 2, 6, 2), pad))
    assert torch.autograd.gradcheck(ref.AttentionFunction.apply, (r(3, 4), r(5, 4), r(5, 2), None))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_attention_function_matches_autograd(dtype):
    g = torch.Generator().manual_seed(8)
    q, k, v = (torch.randn(2, 3, 5, 4, generator=g, dtype=dtype) for _ in range(3))
    mask = torch.zeros(2, 1, 5, 5, dtype=torch.bool)
    mask[0, ..., 3:] = True  # 样本 0 的 key 3、4 是 pad
    inputs = [t.clone().requires_grad_(True) for t in (q, k, v)]
    y = ref.AttentionFunction.apply(*inputs, mask)
    assert y.dtype == dtype
    dy = torch.randn(y.shape, generator=g, dtype=dtype)
    grads = torch.autograd.grad(y, inputs, dy)
    ref_inputs = [t.clone().requires_grad_(True) for t in (q, k, v)]
    y_o = oracle_attention(*ref_inputs, mask)
    grads_o = torch.autograd.grad(y_o, ref_inputs, dy)
    tol = {"rtol": 1e-4, "atol": 1e-5} if dtype == torch.float32 else {"rtol": 1e-10, "atol": 1e-12}
    torch.testing.assert_close(y, y_o, **tol)
    for a, b in zip(grads, grads_o):
        torch.testing.assert_close(a, b, **tol)
    assert torch.all(grads[1][0, :, 3:] == 0) and torch.all(grads[2][0, :, 3:] == 0)
    for t, t0 in zip(inputs, (q, k, v)):
        assert torch.equal(t.detach(), t0)


def test_attention_function_backward_is_handwritten(monkeypatch):
    """梯度必须经过类里手写的 backward，且它返回 (dq, dk, dv, None)。"""
    assert "backward" in ref.AttentionFunction.__dict__
    seen = []
    original = ref.AttentionFunction.backward

    def recording(ctx, dy):
        out = original(ctx, dy)
        seen.append(out)
        return out

    monkeypatch.setattr(ref.AttentionFunction, "backward", staticmethod(recording))
    g = torch.Generator().manual_seed(9)
    q, k, v = (torch.randn(3, 4, generator=g, dtype=F64, requires_grad=True) for _ in range(3))
    dq, dk, dv = torch.autograd.grad(ref.AttentionFunction.apply(q, k, v, None), (q, k, v),
                                     torch.ones(3, 4, dtype=F64))
    assert len(seen) == 1 and len(seen[0]) == 4 and seen[0][3] is None
    assert torch.equal(seen[0][0], dq) and torch.equal(seen[0][2], dv) and dk.shape == k.shape


# ------------------------------------------------------------------------------------
# §3 掩码
# ------------------------------------------------------------------------------------


def test_causal_mask():
    m = ref.causal_mask(4)
    assert m.dtype == torch.bool and m.shape == (4, 4)
    want = torch.tensor([[0, 1, 1, 1], [0, 0, 1, 1], [0, 0, 0, 1], [0, 0, 0, 0]], dtype=torch.bool)
    assert torch.equal(m, want)
    assert not ref.causal_mask(1).any()


def test_padding_mask():
    right = ref.padding_mask([3, 1, 4], 4)
    assert right.dtype == torch.bool
    assert torch.equal(right, torch.tensor([[0, 0, 0, 1], [0, 1, 1, 1], [0, 0, 0, 0]], dtype=torch.bool))
    left = ref.padding_mask(torch.tensor([3, 1, 4]), 4, side="left")
    assert torch.equal(left, torch.tensor([[1, 0, 0, 0], [1, 1, 1, 0], [0, 0, 0, 0]], dtype=torch.bool))
    with pytest.raises(ValueError):
        ref.padding_mask([1], 2, side="middle")


@pytest.mark.parametrize("causal", [True, False])
def test_attention_mask(causal):
    kp = torch.tensor([[False, False, True, True], [True, False, False, False]])
    m = ref.attention_mask(kp, causal=causal)
    assert m.shape == (2, 1, 4, 4) and m.dtype == torch.bool
    for b in range(2):
        for i in range(4):
            for j in range(4):
                assert bool(m[b, 0, i, j]) == (bool(kp[b, j]) or (causal and j > i))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_masked_softmax(dtype):
    g = torch.Generator().manual_seed(10)
    scores = torch.randn(2, 3, 4, generator=g, dtype=dtype)
    s0 = scores.clone()
    mask = torch.tensor([[False, True, False, True], [True, True, True, True], [False] * 4])
    p = ref.masked_softmax(scores, mask)
    assert p.dtype == dtype and torch.equal(scores, s0)
    assert torch.isfinite(p).all()
    assert torch.all(p[:, 0][:, [1, 3]] == 0) and torch.all(p[:, 2].sum(-1) > 0.99)
    want = torch.softmax(scores.masked_fill(mask, -torch.inf), -1)
    for row in (0, 2):
        torch.testing.assert_close(p[:, row], want[:, row])
    full = p[:, 1]
    assert torch.all(full == 0) or torch.allclose(full, torch.full_like(full, 0.25))
    s = scores.clone().requires_grad_(True)
    ref.masked_softmax(s, mask).pow(2).sum().backward()
    assert torch.isfinite(s.grad).all()
    assert torch.all(s.grad[:, 0][:, [1, 3]] == 0)


def test_leftpad_nan_is_real_and_safe_attention_fixes_it():
    q, k, v, kp, mask = leftpad_case()
    v_req = v.clone().requires_grad_(True)
    y = ref.naive_attention(q, k, v_req, mask)
    assert torch.isnan(y[0, :2]).all() and torch.isfinite(y[0, 2:]).all() and torch.isfinite(y[1]).all()
    dy = torch.randn_like(y).masked_fill(kp[..., None], 0.0)
    y.backward(dy)
    assert torch.isnan(v_req.grad[0]).any(-1).all()  # NaN × 0 = NaN：V̄ 的每一行

    qs, ks, vs = (t.clone().requires_grad_(True) for t in (q, k, v))
    ys = ref.safe_causal_attention(qs, ks, vs, kp)
    assert torch.isfinite(ys).all()
    ys.backward(torch.randn_like(ys))  # 所有位置（含 pad 行）都有上游梯度
    for t in (qs, ks, vs):
        assert torch.isfinite(t.grad).all()
    real = ~kp
    torch.testing.assert_close(ys.detach()[real], oracle_attention(q, k, v, mask)[real])
    for t, t0 in zip((qs, ks, vs), (q, k, v)):
        assert torch.equal(t.detach(), t0)


def test_safe_causal_attention_float32_right_padding():
    g = torch.Generator().manual_seed(11)
    q, k, v = (torch.randn(2, 6, 8, generator=g) for _ in range(3))
    kp = ref.padding_mask([6, 3], 6)
    y = ref.safe_causal_attention(q, k, v, kp)
    assert y.dtype == torch.float32 and torch.isfinite(y).all()
    mask = kp[:, None, :] | torch.triu(torch.ones(6, 6, dtype=torch.bool), 1)
    torch.testing.assert_close(y[~kp], oracle_attention(q, k, v, mask)[~kp])


# ------------------------------------------------------------------------------------
# §4 多头
# ------------------------------------------------------------------------------------


def test_split_merge_heads():
    x = torch.arange(2 * 3 * 12, dtype=F64).reshape(2, 3, 12)
    s = ref.split_heads(x, 4)
    assert s.shape == (2, 4, 3, 3)
    for i in range(4):
        assert torch.equal(s[:, i], x[..., 3 * i:3 * (i + 1)])
    assert torch.equal(ref.merge_heads(s), x)
    xt = torch.randn(3, 2, 12).transpose(0, 1)  # 不连续输入
    assert not xt.is_contiguous()
    assert torch.equal(ref.merge_heads(ref.split_heads(xt, 3)), xt)
    h = torch.randn(2, 5, 4, 3).transpose(1, 2)  # (B,h,T,dk) 不连续
    assert torch.equal(ref.merge_heads(h), torch.cat([h[:, i] for i in range(4)], dim=-1))


@pytest.mark.parametrize("bias", [True, False])
def test_mha_contract(bias):
    d, h = 16, 4
    mha = ref.MultiHeadAttention(d, h, bias=bias)
    assert mha.d_model == d and mha.n_heads == h
    for name in ("W_q", "W_k", "W_v", "W_o"):
        lin = getattr(mha, name)
        assert isinstance(lin, nn.Linear) and lin.in_features == d and lin.out_features == d
        assert (lin.bias is not None) == bias
    n = sum(p.numel() for p in mha.parameters())
    assert n == (4 * d * d + 4 * d if bias else 4 * d * d)
    names = {f"{w}.weight" for w in ("W_q", "W_k", "W_v", "W_o")}
    if bias:
        names |= {f"{w}.bias" for w in ("W_q", "W_k", "W_v", "W_o")}
    assert {name for name, _ in mha.named_parameters()} == names


def _mha_masks(B, h, T):
    g = torch.Generator().manual_seed(12)
    tt = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
    b1 = ref.attention_mask(ref.padding_mask([T, T - 2], T), causal=True)
    bh = torch.rand(B, h, T, T, generator=g) > 0.6
    bh[..., 0] = False  # 每行至少能看 key 0
    return {"none": None, "TT": tt, "B1TT": b1, "BhTT": bh}


@pytest.mark.parametrize("kind", ["none", "TT", "B1TT", "BhTT"])
def test_mha_forward_against_per_head_loop(kind):
    torch.manual_seed(13)
    B, T, d, h = 2, 5, 12, 3
    mha = ref.MultiHeadAttention(d, h).double()
    x = torch.randn(B, T, d, dtype=F64)
    x0 = x.clone()
    mask = _mha_masks(B, h, T)[kind]
    with torch.no_grad():
        y = mha(x, mask)
        y2, attn = mha(x, mask, need_weights=True)
        want = oracle_mha(mha, x, mask)
    assert y.shape == (B, T, d) and attn.shape == (B, h, T, T)
    torch.testing.assert_close(y, want, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(y2, y)
    torch.testing.assert_close(attn.sum(-1), torch.ones(B, h, T, dtype=F64))
    if mask is not None:
        assert torch.all(attn[torch.broadcast_to(mask, attn.shape)] == 0)
    assert torch.equal(x, x0)


def test_mha_float32_and_is_handwritten(monkeypatch):
    def forbidden(*a, **kw):
        raise AssertionError("不许调用 SDPA / nn.MultiheadAttention")

    monkeypatch.setattr(F, "scaled_dot_product_attention", forbidden)
    monkeypatch.setattr(F, "multi_head_attention_forward", forbidden)
    torch.manual_seed(14)
    mha = ref.MultiHeadAttention(8, 2)
    x = torch.randn(3, 4, 8)
    y = mha(x, ref.causal_mask(4))
    assert y.dtype == torch.float32
    torch.testing.assert_close(y, oracle_mha(mha, x, ref.causal_mask(4)), rtol=1e-5, atol=1e-6)
    assert not any(isinstance(m, nn.MultiheadAttention) for m in mha.modules())


def test_mha_one_head_equals_single_head_and_permutation():
    torch.manual_seed(15)
    mha = ref.MultiHeadAttention(6, 1, bias=False).double()
    x = torch.randn(2, 5, 6, dtype=F64)
    with torch.no_grad():
        y = mha(x)
        W = [m.weight.numpy().T for m in (mha.W_q, mha.W_k, mha.W_v, mha.W_o)]
        for b in range(2):
            np.testing.assert_allclose(y[b].numpy(), ref.self_attention(x[b].numpy(), *W[:3])[0] @ W[3],
                                       rtol=1e-12, atol=1e-14)
        perm = torch.tensor([3, 0, 4, 1, 2])
        torch.testing.assert_close(mha(x[:, perm]), y[:, perm], rtol=1e-12, atol=1e-14)


# ------------------------------------------------------------------------------------
# §5 复杂度：正文的表
# ------------------------------------------------------------------------------------


def test_mha_property_errors_passes_the_graded_check():
    """The reference's own checks (§B item 3) are a correct answer to mha_selfcheck: public and hidden."""
    from tests.test_mutations import verdicts

    # a copy under a name of its own: while checks run, the course's module `w1d1_attention` stands for the grader's stub
    spec = importlib.util.spec_from_file_location("reference_copy", MODULE_PATH)
    copy = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(copy)
    ns = {"__name__": "__main__", "mha_property_errors": copy.mha_property_errors}
    assert all(v.passed for v in verdicts("", "mha_selfcheck", ns=ns))


def test_mha_flops_and_share_table():
    T, d = 512, 768
    assert ref.mha_flops(T, d) == 3 * 2 * T * d * d + 2 * T * T * d + 2 * T * T * d + 2 * T * d * d
    assert isinstance(ref.mha_flops(T, d), int)
    table = [(768, 512, "25.0"), (768, 1536, "50.0"), (768, 8192, "84.2"),
             (4096, 2048, "20.0"), (4096, 8192, "50.0"), (4096, 32768, "80.0")]
    for d, T, pct in table:
        assert f"{100 * ref.attention_flop_share(T, d):.1f}" == pct
    assert ref.attention_flop_share(2 * 100, 100) == pytest.approx(0.5)
    assert 0 < ref.attention_flop_share(1, 4096) < 0.001


def test_attn_memory_table():
    gib = 2**30
    rows = [((8, 12, 1024), 12, "0.19", "2.2"), ((8, 12, 4096), 12, "3.00", "36.0"),
            ((1, 32, 32768), 32, "64.00", "2048")]
    for args, layers, per_layer, total in rows:
        assert f"{ref.attn_matrix_bytes(*args) / gib:.2f}" == per_layer
        t = ref.attn_matrix_bytes(*args, n_layers=layers) / gib
        assert (f"{t:.0f}" if "." not in total else f"{t:.1f}") == total
    assert ref.attn_matrix_bytes(1, 32, 32768, 2, 32) == 2048 * gib
    assert ref.attn_matrix_bytes(2, 3, 5, bytes_per_element=4) == 2 * 3 * 25 * 4
    assert isinstance(ref.attn_matrix_bytes(1, 1, 3), int)


@pytest.mark.parametrize(("T", "d"), [(1, 8), (7, 16), (100, 64)])
def test_generation_flops(T, d):
    no_cache = sum(8 * t * d**2 + 4 * t**2 * d for t in range(1, T + 1))
    cache = sum(8 * d**2 + 4 * t * d for t in range(1, T + 1))
    assert ref.generation_flops(T, d, kv_cache=False) == no_cache
    assert ref.generation_flops(T, d, kv_cache=True) == cache
    assert isinstance(ref.generation_flops(T, d, True), int)


# ------------------------------------------------------------------------------------
# §A API
# ------------------------------------------------------------------------------------


def _qkv(seed, *shape, dtype=F64):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(*shape, generator=g, dtype=dtype) for _ in range(3))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_sdpa_attention_masks(dtype):
    q, k, v = _qkv(16, 2, 3, 5, 4, dtype=dtype)
    kp = ref.padding_mask([5, 3], 5)
    full = ref.attention_mask(kp, causal=True)
    y = ref.sdpa_attention(q, k, v, full)
    assert y.dtype == dtype
    torch.testing.assert_close(y, oracle_attention(q, k, v, full))
    torch.testing.assert_close(ref.sdpa_attention(q, k, v, kp[:, None, None, :], is_causal=True),
                               oracle_attention(q, k, v, full))
    causal = ref.causal_mask(5)
    torch.testing.assert_close(ref.sdpa_attention(q, k, v, is_causal=True), oracle_attention(q, k, v, causal))
    torch.testing.assert_close(ref.sdpa_attention(q, k, v), oracle_attention(q, k, v))


def test_sdpa_attention_calls_sdpa_and_dropout_only_in_training(monkeypatch):
    calls = []
    real = F.scaled_dot_product_attention

    def spy(*a, **kw):
        calls.append(kw)
        return real(*a, **kw)

    monkeypatch.setattr(F, "scaled_dot_product_attention", spy)
    q, k, v = _qkv(17, 1, 2, 6, 4)
    y_eval = ref.sdpa_attention(q, k, v, dropout_p=0.5, training=False)
    torch.testing.assert_close(y_eval, oracle_attention(q, k, v))
    assert calls and calls[-1].get("dropout_p", 0.0) == 0.0
    torch.manual_seed(0)
    y_train = ref.sdpa_attention(q, k, v, dropout_p=0.5, training=True)
    assert calls[-1].get("dropout_p") == 0.5
    assert not torch.allclose(y_train, y_eval)


def test_decode_step():
    q, k, v = _qkv(18, 2, 2, 7, 4)
    y = ref.decode_step(q[:, :, -1:], k, v)
    assert y.shape == (2, 2, 1, 4)
    torch.testing.assert_close(y, oracle_attention(q, k, v, ref.causal_mask(7))[:, :, -1:])
    y3 = ref.decode_step(q[:, :, 3:4], k[:, :, :4], v[:, :, :4])
    torch.testing.assert_close(y3, oracle_attention(q, k, v, ref.causal_mask(7))[:, :, 3:4])


@pytest.mark.parametrize(("d", "h", "bias"), [(12, 3, True), (12, 3, False), (8, 8, True), (6, 1, False)])
def test_to_torch_mha(d, h, bias):
    torch.manual_seed(19)
    mha = ref.MultiHeadAttention(d, h, bias=bias).double()
    t = ref.to_torch_mha(mha)
    assert isinstance(t, nn.MultiheadAttention) and t.batch_first
    assert t.num_heads == h and t.embed_dim == d
    torch.testing.assert_close(t.in_proj_weight[d:2 * d], mha.W_k.weight)
    x = torch.randn(2, 5, d, dtype=F64)
    kp = ref.padding_mask([5, 3], 5)
    with torch.no_grad():
        y = ref.torch_mha_forward(t, x)
        assert isinstance(y, torch.Tensor) and y.shape == x.shape
        torch.testing.assert_close(y, mha(x))
        torch.testing.assert_close(ref.torch_mha_forward(t, x, kp), mha(x, kp[:, None, None, :]))
        torch.testing.assert_close(ref.torch_mha_forward(t, x, causal=True), mha(x, ref.causal_mask(5)))
        torch.testing.assert_close(ref.torch_mha_forward(t, x, kp, causal=True),
                                   mha(x, ref.attention_mask(kp, causal=True)))


@pytest.mark.parametrize("kv_cache", [False, True])
def test_generation_cost_in_closed_form_is_the_sum_over_the_steps(kv_cache):
    """nb05's answer key sums each generation step's cost in closed form: the very integers a loop over the
    steps gives, for every range its mistakes use."""
    from autograder.exercises.nb05_complexity import ANSWERS, generation

    def step(t, d):
        return 8 * d**2 + 4 * t * d if kv_cache else 8 * t * d**2 + 4 * t**2 * d

    for T in range(1, 60):
        for d in (1, 7, 64, 12289):
            for steps in (range(1, T + 1), range(0, T), range(1, T)):
                assert generation(T, d, kv_cache, steps) == sum(step(t, d) for t in steps)
            if kv_cache:
                case = {"T": T, "d": d, "kv_cache": True}
                bugs = ANSWERS["generation_flops"]
                assert bugs["gen_cache_projection"](case) == sum(8 * t * d**2 + 4 * t * d for t in range(1, T + 1))
                assert bugs["gen_cache_queries"](case) == sum(8 * d**2 + 4 * t**2 * d for t in range(1, T + 1))
