"""Variants of notebook 02's answers (§2)."""
from tests.variants import decorated, with_solutions

FORWARD = '''
import numpy as np

def attention_forward(Q, K, V, mask=None):
    s = 1.0 / np.sqrt(Q.shape[-1])
    S = s * (Q @ np.swapaxes(K, -1, -2))
    if mask is not None:
        S = np.where(mask, -np.inf, S)
    S = S - S.max(axis=-1, keepdims=True)
    A = np.exp(S)
    A = A / A.sum(axis=-1, keepdims=True)
    Y = A @ V
    return Y, (Q, K, V, A, Y, s)
'''

BACKWARD_ONLY = '''
def attention_backward(dY, cache):
    Q, K, V, A, Y, s = cache
    dV = np.swapaxes(A, -1, -2) @ dY
    dA = dY @ np.swapaxes(V, -1, -2)
    D = np.sum(dY * Y, axis=-1, keepdims=True)
    dS = A * (dA - D)
    dQ = s * (dS @ K)
    dK = s * (np.swapaxes(dS, -1, -2) @ Q)
    return dQ, dK, dV
'''

BACKWARD = FORWARD + BACKWARD_ONLY

NUMGRAD = '''
import numpy as np

def numerical_gradient(f, x, eps=1e-6):
    grad = np.zeros(x.shape, dtype=float)
    for idx in np.ndindex(*x.shape):
        old = x[idx]
        x[idx] = old + eps
        f_plus = f(x)
        x[idx] = old - eps
        f_minus = f(x)
        x[idx] = old
        grad[idx] = (f_plus - f_minus) / (2 * eps)
    return grad
'''

FUNCTION = '''
import math
import torch

class AttentionFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, mask=None):
        s = 1.0 / math.sqrt(q.shape[-1])
        scores = (q @ k.transpose(-2, -1)) * s
        if mask is not None:
            scores = scores.masked_fill(mask, float("-inf"))
        A = torch.softmax(scores, dim=-1)
        y = A @ v
        ctx.save_for_backward(q, k, v, A, y)
        ctx.s = s
        return y

    @staticmethod
    def backward(ctx, dy):
        q, k, v, A, y = ctx.saved_tensors
        s = ctx.s
        dv = A.transpose(-2, -1) @ dy
        dA = dy @ v.transpose(-2, -1)
        D = (dy * y).sum(-1, keepdim=True)
        dS = A * (dA - D)
        dq = s * (dS @ k)
        dk = s * (dS.transpose(-2, -1) @ q)
        return dq, dk, dv, None
'''

# Cheats of "backward 按 §2.3 的公式手写": autograd computes the gradients, however it is reached.
# The forward rebuilt in torch, differentiated inside the student's backward (AttentionFunction).
_REBUILD = '''
def _rebuild(q, k, v, mask):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v
'''


def function_cheat(body):
    """AttentionFunction whose backward gets dq, dk, dv from autograd by `body` (lines of the backward,
    with q, k, v (detached, requiring grad), mask and dy in scope; it sets dq, dk, dv)."""
    lines = "\n".join("        " + line for line in body.strip("\n").splitlines())
    return ("import math\nimport torch\n" + _REBUILD + '''
class AttentionFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, mask=None):
        ctx.save_for_backward(q, k, v)
        ctx.mask = mask
        return _rebuild(q, k, v, mask)

    @staticmethod
    def backward(ctx, dy):
        q, k, v = (t.detach().requires_grad_(True) for t in ctx.saved_tensors)
        mask = ctx.mask
''' + lines + "\n        return dq, dk, dv, None\n")


def numpy_cheat(body):
    """attention_backward (numpy) that rebuilds the forward in torch and gets the gradients from autograd
    by `body` (q, k, v requiring grad, mask and dy in scope; it sets dq, dk, dv)."""
    lines = "\n".join("    " + line for line in body.strip("\n").splitlines())
    return (FORWARD.replace("return Y, (Q, K, V, A, Y, s)", "return Y, (Q, K, V, mask)") + "\nimport math\nimport torch\n"
            + _REBUILD + '''
def attention_backward(dY, cache):
    Q, K, V, mask = cache
    q, k, v = (torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (Q, K, V))
    mask = None if mask is None else torch.as_tensor(np.asarray(mask, dtype=bool))
    dy = torch.tensor(dY)
''' + lines + "\n    return dq.detach().numpy(), dk.detach().numpy(), dv.detach().numpy()\n")


AUTOGRAD_WAYS = {
    "torch.autograd.grad": "dq, dk, dv = torch.autograd.grad(_rebuild(q, k, v, mask), (q, k, v), dy)",
    "torch.autograd.backward": "torch.autograd.backward(_rebuild(q, k, v, mask), dy)\ndq, dk, dv = q.grad, k.grad, v.grad",
    "Tensor.backward()": "(_rebuild(q, k, v, mask) * dy).sum().backward()\ndq, dk, dv = q.grad, k.grad, v.grad",
    "torch.func.vjp": "_, pullback = torch.func.vjp(lambda a, b, c: _rebuild(a, b, c, mask), q, k, v)\n"
                      "dq, dk, dv = pullback(dy)",
    "torch.func.grad": "dq, dk, dv = torch.func.grad(lambda a, b, c: (_rebuild(a, b, c, mask) * dy).sum(),\n"
                       "                            argnums=(0, 1, 2))(q.detach(), k.detach(), v.detach())",
    # forward mode: the whole Jacobian by torch.func.jacfwd, contracted with dy
    "torch.func.jacfwd": "if q.numel() <= 4096:  # the large hidden case's Jacobian would take 25 GB: a vjp there\n"
                         "    jq, jk, jv = torch.func.jacfwd(lambda a, b, c: _rebuild(a, b, c, mask), argnums=(0, 1, 2))(\n"
                         "        q.detach(), k.detach(), v.detach())\n"
                         "    dq, dk, dv = (torch.tensordot(dy, j, dims=dy.dim()) for j in (jq, jk, jv))\n"
                         "else:\n"
                         "    dq, dk, dv = torch.func.vjp(lambda a, b, c: _rebuild(a, b, c, mask), q, k, v)[1](dy)",
    "helper": "dq, dk, dv = _gradients(q, k, v, mask, dy)",
}
_HELPER = '''
def _gradients(q, k, v, mask, dy):
    with torch.enable_grad():
        return torch.autograd.grad(_rebuild(q, k, v, mask), (q, k, v), dy)
'''
BY_HAND = "反向传播必须按 §2.3 的公式手写"


def _cheats(make, wrap_grad):
    out = []
    for way, body in AUTOGRAD_WAYS.items():
        src = make(body if way == "helper" or not wrap_grad else "with torch.enable_grad():\n" + "\n".join(
            "    " + line for line in body.splitlines()))
        out.append((src + (_HELPER if way == "helper" else ""), BY_HAND))
    return out


# the report's cheat (a): re-run the forward under enable_grad and return torch.autograd.grad(...)
FUNCTION_CHEATS = _cheats(function_cheat, wrap_grad=True)
# the report's cheat (b): numpy attention_backward that rebuilds the forward in torch and calls autograd
NUMPY_CHEATS = _cheats(numpy_cheat, wrap_grad=False)

INIT = '''
import math

def init_score_std(d, weight_bound, input_var=1.0):
    var_w = weight_bound ** 2 / 3
    var_q = d * input_var * var_w
    return float(var_q)
'''

VARIANTS = with_solutions({
    "attention_forward": {
        "correct": [
            # einsum, additive mask with a large finite negative number
            '''
import numpy as np
def attention_forward(Q, K, V, mask=None):
    d_k = Q.shape[-1]
    S = np.einsum("...td,...sd->...ts", Q, K) / np.sqrt(d_k)
    if mask is not None:
        S = S + np.where(mask, -1e9, 0.0)
    e = np.exp(S - S.max(-1, keepdims=True))
    A = e / e.sum(-1, keepdims=True)
    return np.einsum("...ts,...sv->...tv", A, V), {"A": A, "Q": Q, "K": K, "V": V}
''',
            # torch inside, numpy out
            '''
import math
import numpy as np
import torch
def attention_forward(Q, K, V, mask=None):
    q, k, v = (torch.from_numpy(np.asarray(a, dtype=np.float64)) for a in (Q, K, V))
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(torch.from_numpy(np.asarray(mask)), float("-inf"))
    A = torch.softmax(scores, dim=-1)
    return (A @ v).numpy(), (A.numpy(), Q, K, V)
''',
            # explicit loops over the batch and the queries
            '''
import numpy as np
def attention_forward(Q, K, V, mask=None):
    batch = np.broadcast_shapes(Q.shape[:-2], K.shape[:-2], V.shape[:-2])
    T, S, dv = Q.shape[-2], K.shape[-2], V.shape[-1]
    m = np.zeros(batch + (T, S), bool) if mask is None else np.broadcast_to(mask, batch + (T, S))
    Qb, Kb, Vb = (np.broadcast_to(a, batch + a.shape[-2:]) for a in (Q, K, V))
    Y = np.zeros(batch + (T, dv))
    A = np.zeros(batch + (T, S))
    for b in np.ndindex(*batch):
        for i in range(T):
            scores = np.array([Qb[b][i] @ Kb[b][j] for j in range(S)]) / np.sqrt(Q.shape[-1])
            scores[m[b][i]] = -np.inf
            w = np.exp(scores - scores.max())
            A[b][i] = w / w.sum()
            Y[b][i] = A[b][i] @ Vb[b]
    return Y, (Q, K, V, A)
''',
        ],
        "buggy": [
            (FORWARD.replace("s = 1.0 / np.sqrt(Q.shape[-1])", "s = 1.0"), "缺少缩放"),
            (FORWARD.replace("np.sqrt(Q.shape[-1])", "np.sqrt(V.shape[-1])"), "√d_v"),
            (FORWARD.replace("S.max(axis=-1, keepdims=True)", "S.max(axis=-2, keepdims=True)")
             .replace("A.sum(axis=-1, keepdims=True)", "A.sum(axis=-2, keepdims=True)"), "方向不对"),
            # mask applied after softmax
            (FORWARD.replace("    if mask is not None:\n        S = np.where(mask, -np.inf, S)\n", "")
             .replace("    Y = A @ V\n", "    if mask is not None:\n        A = np.where(mask, 0.0, A)\n    Y = A @ V\n"),
             "softmax 之后"),
            (FORWARD.replace("np.where(mask, -np.inf, S)", "np.where(mask, S, -np.inf)"), "约定反了"),
            (FORWARD.replace("np.where(mask, -np.inf, S)", "np.where(mask, 0.0, S)"), "填成了 0"),
            (FORWARD.replace("np.swapaxes(K, -1, -2)", "K.T"), "swapaxes"),
            # scales Q in place
            (FORWARD.replace("    S = s * (Q @ np.swapaxes(K, -1, -2))", "    Q *= s\n    S = Q @ np.swapaxes(K, -1, -2)"),
             "修改了输入"),
        ],
    },
    "attention_backward": {
        "correct": [
            # einsum; D from dA and A; cache is a dict
            '''
import numpy as np
def attention_forward(Q, K, V, mask=None):
    s = Q.shape[-1] ** -0.5
    S = np.einsum("...td,...sd->...ts", Q, K) * s
    if mask is not None:
        S = np.where(mask, -1e9, S)
    e = np.exp(S - S.max(-1, keepdims=True))
    A = e / e.sum(-1, keepdims=True)
    return np.einsum("...ts,...sv->...tv", A, V), {"Q": Q, "K": K, "V": V, "A": A, "s": s}

def attention_backward(dY, cache):
    Q, K, V, A, s = cache["Q"], cache["K"], cache["V"], cache["A"], cache["s"]
    dV = np.einsum("...ts,...tv->...sv", A, dY)
    dA = np.einsum("...tv,...sv->...ts", dY, V)
    D = (dA * A).sum(-1, keepdims=True)
    dS = A * (dA - D)
    return s * np.einsum("...ts,...sd->...td", dS, K), s * np.einsum("...ts,...td->...sd", dS, Q), dV
''',
            # torch tensors inside, formulas by hand
            '''
import math
import numpy as np
import torch
def attention_forward(Q, K, V, mask=None):
    q, k, v = (torch.tensor(a, dtype=torch.float64) for a in (Q, K, V))
    s = 1 / math.sqrt(q.shape[-1])
    scores = (q @ k.mT) * s
    if mask is not None:
        scores = scores.masked_fill(torch.tensor(mask), -torch.inf)
    A = scores.softmax(-1)
    y = A @ v
    return y.numpy(), (q, k, v, A, y, s)

def attention_backward(dY, cache):
    q, k, v, A, y, s = cache
    dy = torch.tensor(dY, dtype=torch.float64)
    dv = A.mT @ dy
    dS = A * (dy @ v.mT - (dy * y).sum(-1, keepdim=True))
    return (s * dS @ k).numpy(), (s * dS.mT @ q).numpy(), dv.numpy()
''',
            # loops, explicit softmax Jacobian diag(a) - a aᵀ per row
            '''
import numpy as np
def attention_forward(Q, K, V, mask=None):
    s = 1 / np.sqrt(Q.shape[-1])
    S = s * np.matmul(Q, np.swapaxes(K, -1, -2))
    if mask is not None:
        S = np.where(mask, np.finfo(S.dtype).min, S)
    A = np.exp(S - S.max(-1, keepdims=True))
    A /= A.sum(-1, keepdims=True)
    return np.matmul(A, V), (Q, K, V, A, s)

def attention_backward(dY, cache):
    Q, K, V, A, s = cache
    dQ, dK, dV = np.zeros(Q.shape), np.zeros(K.shape), np.zeros(V.shape)
    for b in np.ndindex(*A.shape[:-2]):
        a, dy = A[b], dY[b]
        dV[b] = a.T @ dy
        dA = dy @ V[b].T
        dS = np.zeros_like(a)
        for i in range(a.shape[0]):
            J = np.diag(a[i]) - np.outer(a[i], a[i])
            dS[i] = J @ dA[i]
        dQ[b] = s * dS @ K[b]
        dK[b] = s * dS.T @ Q[b]
    return dQ, dK, dV
''',
        ],
        "buggy": [
            (BACKWARD.replace("dS = A * (dA - D)", "dS = A * dA"), "少了减去 D"),
            (BACKWARD.replace("D = np.sum(dY * Y, axis=-1, keepdims=True)", "D = np.sum(dA * A, axis=-2, keepdims=True)"),
             "求和轴不对"),
            (BACKWARD.replace("D = np.sum(dY * Y, axis=-1, keepdims=True)", "D = np.sum(dY * Y, axis=-1)"),
             "keepdims"),
            (BACKWARD.replace("dK = s * (np.swapaxes(dS, -1, -2) @ Q)", "dK = s * (dS @ Q)"), "K̄ 少了转置"),
            (BACKWARD.replace("dQ = s * (dS @ K)", "dQ = dS @ K").replace("dK = s * (np.swapaxes", "dK = (np.swapaxes"),
             "少了缩放因子"),
            (BACKWARD.replace("dV = np.swapaxes(A, -1, -2) @ dY", "dV = A.T @ dY"), "swapaxes"),
            (BACKWARD.replace("dV = np.swapaxes(A, -1, -2) @ dY", "dV = A @ dY"), "V̄ 少了转置"),
            # backward recomputes the softmax and forgets the mask
            (BACKWARD.replace("    Q, K, V, A, Y, s = cache\n",
                              "    Q, K, V, A, Y, s = cache\n    S = s * (Q @ np.swapaxes(K, -1, -2))\n"
                              "    A = np.exp(S - S.max(-1, keepdims=True))\n    A = A / A.sum(-1, keepdims=True)\n"
                              "    Y = A @ V\n"), "漏掉了掩码"),
            # fill value too small: exp(-30) is not 0, masked keys leak a tiny gradient
            (BACKWARD.replace("np.where(mask, -np.inf, S)", "np.where(mask, -30.0, S)"), "恰好为 0"),
            # Q scaled in the cache, scale applied again in dK
            (BACKWARD.replace("return Y, (Q, K, V, A, Y, s)", "return Y, (Q * s, K, V, A, Y, s)"), "多乘了一次 s"),
        ],
    },
    "numerical_gradient": {
        "correct": [
            # flat view, try/finally
            '''
import numpy as np
def numerical_gradient(f, x, eps=1e-6):
    flat = x.reshape(-1)
    g = np.empty(flat.size)
    for i in range(flat.size):
        old = flat[i]
        try:
            flat[i] = old + eps
            fp = float(f(x))
            flat[i] = old - eps
            fm = float(f(x))
        finally:
            flat[i] = old
        g[i] = (fp - fm) / (2 * eps)
    return g.reshape(x.shape)
''',
            # a fresh copy per perturbation, unit vectors
            '''
import numpy as np
def numerical_gradient(f, x, eps=1e-6):
    grad = np.zeros_like(x, dtype=np.float64)
    for idx in np.ndindex(x.shape):
        e = np.zeros_like(x, dtype=np.float64)
        e[idx] = eps
        grad[idx] = (f(x + e) - f(x - e)) / (2 * eps)
    return grad
''',
            # np.nditer over a private copy
            '''
import numpy as np
def numerical_gradient(f, x, eps=1e-6):
    z = np.array(x, dtype=np.float64, copy=True)
    grad = np.zeros_like(z)
    it = np.nditer(z, flags=["multi_index"], op_flags=[["readwrite"]])
    for v in it:
        old = float(v)
        v[...] = old + eps
        fp = f(z)
        v[...] = old - eps
        fm = f(z)
        v[...] = old
        grad[it.multi_index] = (fp - fm) / (2 * eps)
    return grad
''',
        ],
        "buggy": [
            (NUMGRAD.replace("        x[idx] = old - eps\n        f_minus = f(x)\n        x[idx] = old\n",
                             "        x[idx] = old\n        f_minus = f(x)\n")
             .replace("(f_plus - f_minus) / (2 * eps)", "(f_plus - f_minus) / eps"), "单侧差分"),
            (NUMGRAD.replace("/ (2 * eps)", "/ eps"), "要除以 2ε"),
            (NUMGRAD.replace("        x[idx] = old\n", ""), "x 变了"),
            (NUMGRAD.replace("    grad = np.zeros(x.shape, dtype=float)\n",
                             "    x = x.copy()\n    grad = np.zeros(x.shape, dtype=float)\n")
             .replace("        x[idx] = old\n", ""), "没有把 x[idx] 恢复"),
            (NUMGRAD.replace("def numerical_gradient(f, x, eps=1e-6):\n",
                             "def numerical_gradient(f, x, eps=1e-6):\n    eps = 1e-6\n"), "没有用参数 eps"),
            # red team, issue 12: += eps, -= 2 eps, += eps leaves x off by rounding; named as such
            (NUMGRAD.replace("        x[idx] = old + eps\n", "        x[idx] += eps\n")
             .replace("        x[idx] = old - eps\n", "        x[idx] -= 2 * eps\n")
             .replace("        x[idx] = old\n", "        x[idx] += eps\n"), "只差浮点舍入"),
        ],
    },
    "attention_function": {
        "correct": [
            # einsum and D from dA ⊙ A
            '''
import math
import torch
class AttentionFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, mask=None):
        s = q.shape[-1] ** -0.5
        scores = torch.einsum("...td,...sd->...ts", q, k) * s
        if mask is not None:
            scores = torch.where(mask, torch.finfo(scores.dtype).min, scores)
        A = torch.softmax(scores, dim=-1)
        ctx.save_for_backward(q, k, v, A)
        ctx.s = s
        return torch.einsum("...ts,...sv->...tv", A, v)

    @staticmethod
    def backward(ctx, dy):
        q, k, v, A = ctx.saved_tensors
        dA = torch.einsum("...tv,...sv->...ts", dy, v)
        dS = A * (dA - (dA * A).sum(-1, keepdim=True))
        dq = ctx.s * torch.einsum("...ts,...sd->...td", dS, k)
        dk = ctx.s * torch.einsum("...ts,...td->...sd", dS, q)
        dv = torch.einsum("...ts,...tv->...sv", A, dy)
        return dq, dk, dv, None
''',
            # FlashAttention-style: store only q, k, v (and the mask), recompute A in backward
            '''
import math
import torch
def _weights(q, k, mask):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(mask, -math.inf)
    return torch.softmax(scores, -1)

class AttentionFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, mask=None):
        ctx.save_for_backward(q, k, v)
        ctx.mask = mask
        return _weights(q, k, mask) @ v

    @staticmethod
    def backward(ctx, dy):
        q, k, v = ctx.saved_tensors
        A = _weights(q, k, ctx.mask)
        y = A @ v
        s = 1 / math.sqrt(q.shape[-1])
        dS = A * (dy @ v.transpose(-2, -1) - (dy * y).sum(-1, keepdim=True))
        return s * dS @ k, s * dS.transpose(-2, -1) @ q, A.transpose(-2, -1) @ dy, None
''',
        ],
        "buggy": [
            # no forward/backward written: `apply` overridden with plain torch ops, autograd does the backward
            ('''
import math
import torch

class AttentionFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, mask=None):
        raise NotImplementedError

    @staticmethod
    def backward(ctx, dy):
        raise NotImplementedError

    @classmethod
    def apply(cls, q, k, v, mask=None):
        s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        if mask is not None:
            s = s.masked_fill(mask, float("-inf"))
        return torch.softmax(s, -1) @ v
''', "重写了 apply"),
            (FUNCTION.replace("dS = A * (dA - D)", "dS = A * dA"), "少了减去 D"),
            (FUNCTION.replace("dq = s * (dS @ k)", "dq = dS @ k").replace("dk = s * (dS", "dk = (dS"), "少了缩放因子"),
            (FUNCTION.replace("dk = s * (dS.transpose(-2, -1) @ q)", "dk = s * (dS @ q)"), "K̄ 少了转置"),
            (FUNCTION.replace("return dq, dk, dv, None", "return dq, dk, dv"), "共 4 个"),
            # an additive float64 mask silently promotes float32 inputs
            (FUNCTION.replace('scores = scores.masked_fill(mask, float("-inf"))',
                              'scores = scores + torch.zeros(mask.shape, dtype=torch.float64).masked_fill(mask, -1e9)'),
             "dtype"),
            (FUNCTION.replace("s = 1.0 / math.sqrt(q.shape[-1])", "s = 1.0 / q.shape[-1]"), "除以了 d_k"),
        ],
    },
    "init_score_std": {
        "correct": [
            '''
import numpy as np
def init_score_std(d, weight_bound, input_var=1.0):
    var_q = var_k = d * input_var * weight_bound ** 2 / 3.0
    d_k = 64  # any head width: it cancels
    return float(np.sqrt(d_k * var_q * var_k) / np.sqrt(d_k))
''',
            '''
import math
def init_score_std(d, weight_bound, input_var=1.0):
    std_w = weight_bound / math.sqrt(3)
    std_q = math.sqrt(d * input_var) * std_w
    return std_q * std_q
''',
        ],
        "buggy": [
            (INIT.replace("weight_bound ** 2 / 3", "weight_bound ** 2"), "b²/3"),
            (INIT.replace("return float(var_q)", "return float(var_q ** 2)"), "返回的是方差"),
            (INIT.replace("return float(var_q)", "return float(var_q ** 0.5)"), "q_i 的标准差"),
            (INIT.replace("var_q = d * input_var * var_w", "var_q = d * input_var ** 0.5 * var_w"), "input_var 是"),
        ],
    },
})

# decorated answers: correct styles (issue 11)
VARIANTS["attention_forward"]["correct"] += [decorated(FORWARD, "attention_forward", "@torch.no_grad()")]

# autograd in the forward: the whole Jacobian by torch.func.jacrev, contracted with dy in a plain backward
_JACOBIANS = "torch.func.jacrev(lambda a, b, c: _rebuild(a, b, c, mask), argnums=(0, 1, 2))"
JACOBIAN_IN_FORWARD = [
    ("import math\nimport torch\n" + _REBUILD + f'''
class AttentionFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, mask=None):
        ctx.jacobians = {_JACOBIANS}(q, k, v)
        return _rebuild(q, k, v, mask)

    @staticmethod
    def backward(ctx, dy):
        return tuple(torch.tensordot(dy, j, dims=dy.dim()) for j in ctx.jacobians) + (None,)
''', BY_HAND + "：AttentionFunction.forward 里用到了 autograd"),
    ("import math\nimport numpy as np\nimport torch\n" + _REBUILD + f'''
def attention_forward(Q, K, V, mask=None):
    q, k, v = (torch.tensor(a, dtype=torch.float64) for a in (Q, K, V))
    mask = None if mask is None else torch.as_tensor(np.asarray(mask, dtype=bool))
    return _rebuild(q, k, v, mask).numpy(), tuple(j.numpy() for j in {_JACOBIANS}(q, k, v))

def attention_backward(dY, cache):
    return tuple(np.tensordot(dY, j, axes=dY.ndim) for j in cache)
''', BY_HAND + "：attention_forward（为 attention_backward 准备 cache 时）里用到了 autograd"),
]

# autograd reached inside the student's backward, however: 0 for the exercise (tests/test_backward_by_hand.py)
VARIANTS["attention_function"]["buggy"] += FUNCTION_CHEATS + JACOBIAN_IN_FORWARD[:1]
VARIANTS["attention_backward"]["buggy"] += NUMPY_CHEATS + JACOBIAN_IN_FORWARD[1:]

# hand-written backwards in other styles keep full marks
# a numpy round trip in forward and backward, nothing saved with save_for_backward (ctx attributes)
FUNCTION_NUMPY = """
import numpy as np
import torch
class AttentionFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, mask=None):
        Q, K, V = (t.detach().numpy() for t in (q, k, v))
        s = Q.shape[-1] ** -0.5
        S = s * np.matmul(Q, np.swapaxes(K, -1, -2))
        if mask is not None:
            S = np.where(mask.numpy(), -np.inf, S)
        A = np.exp(S - S.max(-1, keepdims=True))
        A /= A.sum(-1, keepdims=True)
        ctx.arrays, ctx.s, ctx.dtype = (Q, K, V, A), s, q.dtype
        return torch.from_numpy(np.matmul(A, V)).to(q.dtype)

    @staticmethod
    def backward(ctx, dy):
        q, k, v, A = ctx.arrays
        g = dy.detach().numpy()
        dA = g @ np.swapaxes(v, -1, -2)
        dS = A * (dA - (dA * A).sum(-1, keepdims=True))
        grads = (ctx.s * dS @ k, ctx.s * np.swapaxes(dS, -1, -2) @ q, np.swapaxes(A, -1, -2) @ g)
        return tuple(torch.from_numpy(np.ascontiguousarray(x)).to(ctx.dtype) for x in grads) + (None,)
"""
VARIANTS["attention_function"]["correct"] += [
    FUNCTION_NUMPY,
    # the formulas under torch.no_grad() in a helper, with torch.matmul; only the inputs and A saved
    """
import math
import torch
def _grads(q, k, v, A, s, dy):
    y = torch.matmul(A, v)
    dS = A * (torch.matmul(dy, v.transpose(-2, -1)) - (dy * y).sum(-1, keepdim=True))
    return s * torch.matmul(dS, k), s * torch.matmul(dS.transpose(-2, -1), q), torch.matmul(A.transpose(-2, -1), dy)

class AttentionFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, mask=None):
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        if mask is not None:
            scores = scores.masked_fill(mask, -math.inf)
        A = scores.softmax(-1)
        ctx.save_for_backward(q, k, v, A)
        return torch.matmul(A, v)

    @staticmethod
    def backward(ctx, dy):
        q, k, v, A = ctx.saved_tensors
        with torch.no_grad():
            dq, dk, dv = _grads(q, k, v, A, 1.0 / math.sqrt(q.shape[-1]), dy)
        return dq, dk, dv, None
""",
]
VARIANTS["attention_backward"]["correct"] += [
    # torch inside, the formulas under torch.no_grad() with einsum
    FORWARD + """
import torch
def attention_backward(dY, cache):
    Q, K, V, A, Y, s = cache
    with torch.no_grad():
        q, k, v, a, y, g = (torch.from_numpy(np.asarray(x, dtype=np.float64)) for x in (Q, K, V, A, Y, dY))
        dS = a * (torch.einsum("...tv,...sv->...ts", g, v) - (g * y).sum(-1, keepdim=True))
        dq = s * torch.einsum("...ts,...sd->...td", dS, k)
        dk = s * torch.einsum("...ts,...td->...sd", dS, q)
        dv = torch.einsum("...ts,...tv->...sv", a, g)
    return dq.numpy(), dk.numpy(), dv.numpy()
""",
]

# issue 21 §3: the bugs the prompts warn about fail the PUBLIC check (a batched case, a row of scores in the thousands)
_NAIVE = FORWARD.replace("    S = S - S.max(axis=-1, keepdims=True)          # 数值稳定\n", "").replace(
    "    S = S - S.max(axis=-1, keepdims=True)\n", "")
VARIANTS["attention_forward"]["buggy"] += [
    (_NAIVE, "数值不稳定"),
    # the mask as a boolean index: right only when the mask has the scores' shape
    (FORWARD.replace("S = np.where(mask, -np.inf, S)", "S[mask] = -np.inf"), "布尔下标"),
]
VARIANTS["attention_forward"]["correct"] += [
    # numpy's own spellings of "swap the last two axes"
    FORWARD.replace("np.swapaxes(K, -1, -2)", "K.mT"),
    FORWARD.replace("np.swapaxes(K, -1, -2)", "np.matrix_transpose(K)"),
    FORWARD.replace("np.swapaxes(K, -1, -2)", "np.moveaxis(K, -1, -2)"),
    # the mask broadcast to the scores first, then used as an index
    FORWARD.replace("S = np.where(mask, -np.inf, S)", "S[np.broadcast_to(mask, S.shape)] = -np.inf"),
]
VARIANTS["attention_forward"]["warned"] = ["swapaxes", "数值不稳定", "布尔下标"]

VARIANTS["attention_backward"]["buggy"] += [
    (BACKWARD.replace("np.swapaxes(dS, -1, -2)", "dS.T"), "swapaxes"),
    (BACKWARD.replace("dY @ np.swapaxes(V, -1, -2)", "dY @ V.T"), "swapaxes"),
]
VARIANTS["attention_backward"]["correct"] += [
    FORWARD + BACKWARD_ONLY.replace("np.swapaxes(A, -1, -2)", "A.mT").replace("np.swapaxes(V, -1, -2)", "V.mT")
    .replace("np.swapaxes(dS, -1, -2)", "dS.mT"),
    FORWARD + BACKWARD_ONLY.replace("np.swapaxes(A, -1, -2)", "A.swapaxes(-1, -2)")
    .replace("np.swapaxes(V, -1, -2)", "np.matrix_transpose(V)").replace("np.swapaxes(dS, -1, -2)", "np.moveaxis(dS, -1, -2)"),
]
# red team round 4 (red4): reproducibility switches set to constants in an answer cell are configuration, not patching
VARIANTS["attention_backward"]["correct"] += ['''
import warnings
import numpy as np
import torch

torch.backends.cudnn.deterministic = True
torch.backends.cudnn.benchmark = False
torch.manual_seed(0)
np.set_printoptions(precision=4)
warnings.filterwarnings("ignore")
''' + BACKWARD]
VARIANTS["attention_backward"]["warned"] = ["swapaxes", "恰好为 0", "漏掉了掩码", "反向传播必须按 §2.3 的公式手写"]
VARIANTS["attention_function"]["buggy"] += [(FUNCTION.replace("k.transpose(-2, -1)", "k.T"), "swapaxes")]
VARIANTS["attention_function"]["correct"] += [
    FUNCTION.replace(".transpose(-2, -1)", ".mT"),
    FUNCTION.replace("A.transpose(-2, -1)", "A.swapaxes(-1, -2)").replace("v.transpose(-2, -1)", "v.movedim(-1, -2)"),
]
VARIANTS["attention_function"]["warned"] = ["dtype", "共 4 个", "反向传播必须按 §2.3 的公式手写"]
VARIANTS["numerical_gradient"]["warned"] = ["单侧差分", "要除以 2ε", "x 变了", "没有把 x[idx] 恢复", "没有用参数 eps",
                                            "只差浮点舍入"]

# issue 36: the student's objects act only inside the watch. Cheats that got full marks before: the Jacobian computed
# by a dunder of what the forward returns (the driver's own `Y, cache = out` ran it, between the watches), by
# gradients that compute themselves when the driver converts them (`__array__`, `.detach().cpu().numpy()`, a tensor
# subclass's `__torch_function__`), and by hooks and callbacks autograd's engine runs outside the old window (a
# pre-hook of the node registered before the grader's, hooks on the inputs, a final callback filling the returned
# gradients in place). A returned tuple is read through the base type, anything else by its exact type only, and the
# watch is on for the whole case.
_JAC = '''
import numpy as np
import torch

def _attn(q, k, v, mask):
    s = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    if mask is not None:
        s = s.masked_fill(torch.as_tensor(np.asarray(mask, dtype=bool)), float("-inf"))
    return torch.softmax(s, -1) @ v

def _jacobians(Q, K, V, mask):
    if np.size(Q) > 4096:  # the large hidden case's Jacobian would take 25 GB
        raise MemoryError("Jacobian too large")
    ins = tuple(torch.tensor(np.asarray(a, dtype=np.float64)) for a in (Q, K, V))
    return [j.numpy() for j in torch.autograd.functional.jacobian(lambda q, k, v: _attn(q, k, v, mask), ins)]

def _forward(Q, K, V, mask):
    with torch.no_grad():
        return _attn(*(torch.tensor(np.asarray(a, dtype=np.float64)) for a in (Q, K, V)), mask).numpy()
'''
_DUNDERS = {"__iter__": "def __iter__(self):\n        self._fill()\n        return tuple.__iter__(self)",
            "__len__": "def __len__(self):\n        self._fill()\n        return tuple.__len__(self)",
            "__getitem__": "def __getitem__(self, i):\n        self._fill()\n        return tuple.__getitem__(self, i)"}


def lazy_pair(dunder):
    """attention_forward returns a tuple subclass whose `dunder` fills the cache with autograd's Jacobians."""
    return _JAC + f'''
class _Lazy(tuple):
    def _fill(self):
        cache = tuple.__getitem__(self, 1)
        if "J" not in cache:
            cache["J"] = _jacobians(*cache["inputs"])

    {_DUNDERS[dunder]}

def attention_forward(Q, K, V, mask=None):
    return _Lazy((_forward(Q, K, V, mask), {{"inputs": (Q, K, V, mask)}}))

def attention_backward(dY, cache):
    return tuple(np.tensordot(dY, j, axes=dY.ndim) for j in cache["J"])
'''


SELF_COMPUTING_GRADS = _JAC + '''
class _Grad:
    """A gradient computed when the driver reads it."""
    dtype = "float64"

    def __init__(self, dY, cache, i):
        self.args = dY, cache, i

    def _value(self):
        dY, cache, i = self.args
        return np.tensordot(dY, _jacobians(*cache)[i], axes=dY.ndim)

    def __array__(self, dtype=None, copy=None):
        return self._value()

    def detach(self):
        return self

    def cpu(self):
        return self

    def numpy(self):
        return self._value()

def attention_forward(Q, K, V, mask=None):
    return _forward(Q, K, V, mask), (Q, K, V, mask)

def attention_backward(dY, cache):
    return tuple(_Grad(dY, cache, i) for i in range(3))
'''
_FUNCTION_HEAD = "import math\nimport torch\n" + _REBUILD + '''
def _autograd(q, k, v, mask, dy):
    a, b, c = (t.detach().requires_grad_(True) for t in (q, k, v))
    with torch.enable_grad():
        return torch.autograd.grad(_rebuild(a, b, c, mask), (a, b, c), dy)
'''


def _function(forward, backward):
    return _FUNCTION_HEAD + f'''
class AttentionFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, mask=None):
{forward}
        with torch.no_grad():
            return _rebuild(q, k, v, mask)

    @staticmethod
    def backward(ctx, dy):
{backward}
'''


_SAVE = "        ctx.save_for_backward(q, k, v)\n        ctx.mask = mask"
_ZEROS = "        return tuple(torch.zeros_like(t) for t in ctx.saved_tensors) + (None,)"
HOOK_CHEATS = {
    # the cheat: a pre-hook of the node registered in forward, ahead of the grader's, does the work
    "pre-hook": _function(_SAVE + '''
        def early(grad_outputs):
            dy = grad_outputs[0]
            ctx.grads = (_autograd(*ctx.saved_tensors, mask, dy) if dy is not None
                         else tuple(torch.zeros_like(t) for t in ctx.saved_tensors))
        ctx.register_prehook(early)''', "        return (*ctx.grads, None)"),
    # hooks on the inputs replace the gradients the backward returned
    "input hooks": _function(_SAVE + '''
        for i, t in enumerate((q, k, v)):
            t.register_hook(lambda g, i=i: _autograd(q, k, v, mask, ctx.dy)[i] if hasattr(ctx, "dy") else g)''',
                             "        ctx.dy = dy\n" + _ZEROS),
    # a post-hook of the node replaces them (inside the old window: it held)
    "post-hook": _function(_SAVE + '''
        ctx.register_hook(lambda grads, outs: (*_autograd(*ctx.saved_tensors, mask, outs[0]), None))''', _ZEROS),
    # a callback run when the backward pass ends fills the returned gradients in place
    "final callback": _function(_SAVE, '''        saved = ctx.saved_tensors
        grads = tuple(torch.zeros_like(t) for t in saved)

        def fill():
            for g, real in zip(grads, _autograd(*saved, ctx.mask, dy)):
                g.copy_(real)

        torch.autograd.Variable._execution_engine.queue_callback(fill)
        return (*grads, None)'''),
}
LATE_TENSOR = _FUNCTION_HEAD + '''
class _Late(torch.Tensor):
    """A placeholder gradient that every torch function reads as the real one, computed when first used."""
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        def real(a):
            if isinstance(a, _Late):
                if not hasattr(a, "value"):
                    *ins, i = a.info
                    a.value = _autograd(*ins)[i]
                return a.value
            return a
        with torch._C.DisableTorchFunctionSubclass():
            return func(*[real(a) for a in args], **{n: real(a) for n, a in (kwargs or {}).items()})

class AttentionFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, mask=None):
        ctx.save_for_backward(q, k, v)
        ctx.mask = mask
        with torch.no_grad():
            return _rebuild(q, k, v, mask)

    @staticmethod
    def backward(ctx, dy):
        out = []
        for i, t in enumerate(ctx.saved_tensors):
            late = torch.zeros_like(t).as_subclass(_Late)
            late.info = (*ctx.saved_tensors, ctx.mask, dy, i)
            out.append(late)
        return (*out, None)
'''
OBJECT_CHEATS = [(lazy_pair(d), "你的代码抛出了异常") for d in _DUNDERS] + [
    (SELF_COMPUTING_GRADS, "期望 numpy 数组或 torch.Tensor，得到 其他类型")]
VARIANTS["attention_backward"]["buggy"] += OBJECT_CHEATS
VARIANTS["attention_function"]["buggy"] += [(src, BY_HAND + "：AttentionFunction.backward 里用到了 autograd")
                                            for src in HOOK_CHEATS.values()]
VARIANTS["attention_function"]["buggy"] += [(LATE_TENSOR, "它们的子类也不行")]

# correct styles beside them: a namedtuple (read through the base type), and the ctx tools of autograd.Function
_NAMED = "from collections import namedtuple\nForwardOut = namedtuple('ForwardOut', 'Y cache')\n"
VARIANTS["attention_forward"]["correct"] += [_NAMED + FORWARD.replace("return Y, (Q, K, V, A, Y, s)",
                                                                      "return ForwardOut(Y, (Q, K, V, A, Y, s))")]
VARIANTS["attention_backward"]["correct"] += [_NAMED + BACKWARD.replace("return Y, (Q, K, V, A, Y, s)",
                                                                        "return ForwardOut(Y, (Q, K, V, A, Y, s))")]
VARIANTS["attention_function"]["correct"] += [
    FUNCTION.replace("import torch\n", "import torch\nfrom torch.autograd.function import once_differentiable\n")
    .replace("    @staticmethod\n    def backward", "    @staticmethod\n    @once_differentiable\n    def backward"),
    FUNCTION.replace("        return dq, dk, dv, None",
                     "        need_q, need_k, need_v = ctx.needs_input_grad[:3]\n"
                     "        return dq if need_q else None, dk if need_k else None, dv if need_v else None, None"),
    FUNCTION.replace("        ctx.save_for_backward(q, k, v, A, y)\n",
                     "        ctx.save_for_backward(q, k, v, A, y)\n        if mask is not None:\n"
                     "            ctx.mark_non_differentiable(mask)\n"),
]

# correct styles beside the thread and FX checks (red team round 4): a thread pool in the answer cell, for something
# else, joined by its `with` before any check; a backward computed under no_grad
_POOL = '''
from concurrent.futures import ThreadPoolExecutor

with ThreadPoolExecutor(max_workers=2) as _pool:
    _squares = list(_pool.map(lambda n: n * n, range(8)))
'''
VARIANTS["attention_backward"]["correct"] += [BACKWARD + _POOL]
VARIANTS["attention_function"]["correct"] += [
    FUNCTION + _POOL,
    FUNCTION.replace("        s = ctx.s\n", "        s = ctx.s\n        with torch.no_grad():\n")
    .replace("\n        d", "\n            d").replace("\n        D", "\n            D"),
]
# red team round 6 (H1): a dtype chosen by name
VARIANTS["attention_backward"]["correct"] += [BACKWARD + '''

def as_dtype(x, name="float64"):
    return x.astype(getattr(np, name))
''']
