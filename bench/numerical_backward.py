"""Why notebook 02's large hidden case tells a hand-derived backward from numerical differentiation (printed,
never asserted): on that case's shape, the time of the solution's backward (vectorised, and written as a loop
over the batch and the query rows), of PyTorch's AttentionFunction forward + backward, and of the forwards that
numerical differentiation needs (central differences: 2 per input; complex step: 1 complex forward per input),
against the grading kernel's time limit per cell. A hand-derived backward costs about a forward; numerical
differentiation costs a forward per input, and the case has ~7·10⁴ inputs."""
import math
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from autograder.cli import build_parser  # noqa: E402
from autograder.exercises.nb02_scaled_dot_product import LARGE  # noqa: E402

ROUNDS = 3


def forward(Q, K, V, mask):
    s = 1.0 / np.sqrt(Q.shape[-1])
    S = s * (Q @ np.swapaxes(K, -1, -2))
    if mask is not None:
        S = np.where(mask, -np.inf, S)
    S = S - S.max(axis=-1, keepdims=True).real
    A = np.exp(S)
    A = A / A.sum(axis=-1, keepdims=True)
    return A @ V, A


def backward(Q, K, V, A, Y, dY):
    s = 1.0 / np.sqrt(Q.shape[-1])
    dV = np.swapaxes(A, -1, -2) @ dY
    dS = A * (dY @ np.swapaxes(V, -1, -2) - np.sum(dY * Y, axis=-1, keepdims=True))
    return s * (dS @ K), s * (np.swapaxes(dS, -1, -2) @ Q), dV


def backward_loop(Q, K, V, A, Y, dY):
    """The same formulas, one batch element and one query row at a time."""
    s = 1.0 / np.sqrt(Q.shape[-1])
    dQ, dK, dV = np.zeros_like(Q), np.zeros_like(K), np.zeros_like(V)
    for b in np.ndindex(*Q.shape[:-2]):
        for i in range(Q.shape[-2]):
            a, g = A[b][i], dY[b][i]
            dV[b] += np.outer(a, g)
            ds = a * (V[b] @ g - g @ Y[b][i])
            dQ[b][i] = s * (ds @ K[b])
            dK[b] += s * np.outer(ds, Q[b][i])
    return dQ, dK, dV


def jacobian_rows_variant():
    """The slowest honest style in the mutation tables (tests/variants), as they hold it: the softmax Jacobian
    diag(a) - a aᵀ written out per query row; its own (forward, backward)."""
    from tests.variants.nb02_scaled_dot_product import VARIANTS

    (src,) = [s for s in VARIANTS["attention_backward"]["correct"] if "np.diag(a[i])" in s]
    ns = {}
    exec(src, ns)
    return ns["attention_forward"], ns["attention_backward"]


def best(fn, rounds=ROUNDS):
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def torch_function(Q, K, V, mask, dY):
    import torch

    q, k, v = (torch.tensor(a, requires_grad=True) for a in (Q, K, V))
    dy = torch.tensor(dY)

    def run():
        s = 1.0 / math.sqrt(q.shape[-1])
        with torch.no_grad():
            scores = q @ k.transpose(-2, -1) * s
            if mask is not None:
                scores = scores.masked_fill(torch.tensor(mask), float("-inf"))
            A = torch.softmax(scores, dim=-1)
            y = A @ v
            dA = dy @ v.transpose(-2, -1)
            dS = A * (dA - (dy * y).sum(-1, keepdim=True))
            return s * (dS @ k), s * (dS.transpose(-2, -1) @ q), A.transpose(-2, -1) @ dy

    return run


def main():
    case = LARGE(np.random.default_rng(0))
    Q, K, V, mask, dY = (case[n] for n in ("Q", "K", "V", "mask", "dY"))
    inputs = Q.size + K.size + V.size
    limit = build_parser().parse_args(["grade", "x", "--out", "y"]).timeout  # nbgrader_config.py sets the same
    Y, A = forward(Q, K, V, mask)
    rows_forward, rows_backward = jacobian_rows_variant()
    rows_cache = rows_forward(Q, K, V, mask)[1]
    t_fwd = best(lambda: forward(Q, K, V, mask))
    honest = {
        "手推反向（向量化）": t_fwd + best(lambda: backward(Q, K, V, A, Y, dY)),
        "手推反向（按批、按行循环）": t_fwd + best(lambda: backward_loop(Q, K, V, A, Y, dY), rounds=1),
        "手推反向（每行写出 softmax 的雅可比矩阵）": t_fwd + best(lambda: rows_backward(dY, rows_cache), rounds=1),
        "AttentionFunction 前向 + 手推反向（torch）": best(torch_function(Q, K, V, mask, dY)),
    }
    Qc = Q.astype(complex)
    t_complex = best(lambda: forward(Qc, K, V, mask))
    numeric = {"中心差分（每个输入 2 次前向）": 2 * inputs * t_fwd, "复数步长（每个输入 1 次复数前向）": inputs * t_complex}
    print(f"用例：{case['stage']}；输入 {inputs} 个数；单元格时限 {limit} s；一次前向 {t_fwd * 1e3:.1f} ms")
    for name, t in honest.items():
        print(f"  {name}：{t:.3f} s，时限是它的 {limit / t:.0f} 倍")
    for name, t in numeric.items():
        print(f"  {name}（估计）：{t:.0f} s，是时限的 {t / limit:.0f} 倍")


if __name__ == "__main__":
    main()
