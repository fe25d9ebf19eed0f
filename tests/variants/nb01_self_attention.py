"""Variants of notebook 01's answers."""
from tests.variants import decorated, with_solutions

# self-contained answers (each cell defines what it uses): the honest student of tests/grading_class.py
SOFTMAX = '''
import numpy as np
def softmax(x, axis=-1):
    z = x - np.max(x, axis=axis, keepdims=True)
    e = np.exp(z)
    return e / np.sum(e, axis=axis, keepdims=True)
'''

SELF_ATTENTION = '''
import numpy as np
def softmax(x, axis=-1):
    z = x - np.max(x, axis=axis, keepdims=True)
    e = np.exp(z)
    return e / np.sum(e, axis=axis, keepdims=True)

def self_attention(X, W_q, W_k, W_v):
    Q, K, V = X @ W_q, X @ W_k, X @ W_v
    A = softmax(Q @ K.T / np.sqrt(W_q.shape[1]), axis=-1)
    return A @ V, A
'''

DIAG = '''
import numpy as np
def self_argmax_rate(S):
    return float(np.mean(np.argmax(S, axis=1) == np.arange(S.shape[0])))

def asymmetry(S):
    return float(np.linalg.norm(S - S.T) / np.linalg.norm(S))
'''

# every way Python binds `softmax` at module level: each passes the checks, and the grader's answer
# check and check() at home (w1d1_student.cell_scope.defined_names) count it as defined in the cell
_BODY = "    z = np.exp(x - np.max(x, axis=axis, keepdims=True))\n    return z / np.sum(z, axis=axis, keepdims=True)\n"
BINDING_STYLES = [
    # walrus at module level (inside an expression statement)
    "import numpy as np\n(softmax := lambda x, axis=-1: np.exp(x - np.max(x, axis=axis, keepdims=True))\n"
    "    / np.sum(np.exp(x - np.max(x, axis=axis, keepdims=True)), axis=axis, keepdims=True))\n",
    # inside `if True:`
    "import numpy as np\nif True:\n  def softmax(x, axis=-1):\n" + _BODY.replace("    ", "      "),
    # inside a with block
    "import contextlib\nimport numpy as np\nwith contextlib.suppress(ImportError):\n  def softmax(x, axis=-1):\n"
    + _BODY.replace("    ", "      "),
    # try / except
    "import numpy as np\ntry:\n  from scipy.special import softmax as _fast\nexcept ImportError:\n  _fast = None\n"
    "def softmax(x, axis=-1):\n" + _BODY,
    # for-loop binding
    "import numpy as np\ndef _stable(x, axis=-1):\n" + _BODY + "for softmax in [_stable]:\n    pass\n",
    # `global` in a function that the cell calls
    "import numpy as np\ndef _install():\n    global softmax\n    def softmax(x, axis=-1):\n"
    + _BODY.replace("    ", "        ") + "_install()\n",
    # walrus inside a comprehension (binds in the cell's namespace)
    "import numpy as np\ndef _stable(x, axis=-1):\n" + _BODY + "_ = [softmax := f for f in [_stable]]\n",
]

VARIANTS = with_solutions({
    "softmax": {
        "correct": [
            # a docstring that talks about the grader (red team, issue 12: it was taken for a reference)
            '''
"""Stable softmax; written for the autograder and w1d1_student checks."""
import numpy as np
def softmax(x, axis=-1):
    """Note for the autograder: subtract the max first."""
    if x.size == 0:
        raise ValueError("empty input (the autograder never sends one)")
    z = np.exp(x - x.max(axis=axis, keepdims=True))
    return z / z.sum(axis=axis, keepdims=True)
''',
            # log-sum-exp style
            '''
import numpy as np
def softmax(x, axis=-1):
    m = x.max(axis=axis, keepdims=True)
    lse = m + np.log(np.exp(x - m).sum(axis=axis, keepdims=True))
    return np.exp(x - lse)
''',
            # moveaxis + explicit loop over rows
            '''
import numpy as np
def softmax(x, axis=-1):
    x = np.ascontiguousarray(np.moveaxis(np.asarray(x, dtype=float), axis, -1))
    out = np.zeros(x.shape)
    flat_in, flat_out = x.reshape(-1, x.shape[-1]), out.reshape(-1, x.shape[-1])
    for i, row in enumerate(flat_in):
        e = np.exp(row - row.max())
        flat_out[i] = e / e.sum()
    return np.moveaxis(out, -1, axis)
''',
            # torch inside, numpy out
            '''
import numpy as np, torch
def softmax(x, axis=-1):
    return torch.softmax(torch.from_numpy(np.asarray(x, dtype=np.float64)), dim=axis).numpy()
''',
        ] + BINDING_STYLES,
        "buggy": [
            ('''
import numpy as np
def softmax(x, axis=-1):
    e = np.exp(x)
    return e / e.sum(axis=axis, keepdims=True)
''', "数值不稳定"),
            ('''
import numpy as np
def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)
''', "轴不对"),
            ('''
import numpy as np
def softmax(x, axis=-1):
    e = np.exp(x - x.max())
    return e / e.sum()
''', "全部元素的和"),
            ('''
import numpy as np
def softmax(x, axis=-1):
    x -= x.max(axis=axis, keepdims=True)
    np.exp(x, out=x)
    x /= x.sum(axis=axis, keepdims=True)
    return x
''', "修改了输入"),
        ],
    },
    "self_attention": {
        "correct": [
            '''
import numpy as np
def self_attention(X, W_q, W_k, W_v):
    Q, K, V = X @ W_q, X @ W_k, X @ W_v
    S = np.einsum("id,jd->ij", Q, K) / np.sqrt(Q.shape[-1])
    S = S - S.max(axis=1, keepdims=True)
    A = np.exp(S) / np.exp(S).sum(axis=1, keepdims=True)
    return np.einsum("ij,jv->iv", A, V), A
''',
            '''
import math
import torch
def self_attention(X, W_q, W_k, W_v):
    X, W_q, W_k, W_v = (torch.as_tensor(a, dtype=torch.float64) for a in (X, W_q, W_k, W_v))
    Q, K, V = X @ W_q, X @ W_k, X @ W_v
    A = torch.softmax(Q @ K.T / math.sqrt(W_k.shape[1]), dim=-1)
    return (A @ V).numpy(), A.numpy()
''',
        ],
        "buggy": [
            (SELF_ATTENTION.replace(" / np.sqrt(W_q.shape[1])", ""), "缺少缩放"),
            (SELF_ATTENTION.replace("np.sqrt(W_q.shape[1])", "np.sqrt(X.shape[1])"), "√d_k"),
            (SELF_ATTENTION.replace("axis=-1)\n    return", "axis=0)\n    return"), "方向不对"),
            (SELF_ATTENTION.replace("np.sqrt(W_q.shape[1])", "W_q.shape[1]"), "除以了 d_k"),
            (SELF_ATTENTION.replace("return A @ V, A", "return A @ (X @ W_k), A"), ""),
            # returns the pair in the wrong order
            (SELF_ATTENTION.replace("return A @ V, A", "return A, A @ V"), ""),
            # scores transposed: keys as rows (K Q^T), the row/column roles swapped
            (SELF_ATTENTION.replace("Q @ K.T", "K @ Q.T"), ""),
        ],
    },
    "score_diagnostics": {
        "correct": [
            '''
import numpy as np
def self_argmax_rate(S):
    hits = sum(1 for i, row in enumerate(S) if int(np.argmax(row)) == i)
    return hits / len(S)

def asymmetry(S):
    return np.sqrt(((S - S.T) ** 2).sum()) / np.sqrt((S ** 2).sum())
''',
            '''
import torch
def self_argmax_rate(S):
    S = torch.as_tensor(S)
    return (S.argmax(dim=-1) == torch.arange(S.shape[0])).double().mean().item()

def asymmetry(S):
    S = torch.as_tensor(S)
    return (torch.linalg.matrix_norm(S - S.T) / torch.linalg.matrix_norm(S)).item()
''',
            # diagonal compared with the row maximum; antisymmetric part
            '''
import numpy as np
def self_argmax_rate(S):
    return float((np.diag(S) == S.max(axis=1)).mean())

def asymmetry(S):
    return float(2 * np.linalg.norm((S - S.T) / 2) / np.linalg.norm(S))
''',
        ],
        "buggy": [
            (DIAG.replace("axis=1", "axis=0"), "方向"),
            # spectral norm instead of Frobenius
            (DIAG.replace("np.linalg.norm(S - S.T) / np.linalg.norm(S)",
                          "np.linalg.norm(S - S.T, 2) / np.linalg.norm(S, 2)"), ""),
            (DIAG.replace("float(np.mean(", "float(np.sum("), "比例"),
            (DIAG.replace(" / np.linalg.norm(S))", ")"), "忘了除以"),
        ],
    },
})

# decorators and methods named like builtins: correct styles (issue 11)
VARIANTS["softmax"]["correct"] += [
    decorated(SOFTMAX, "softmax"),
    decorated(SOFTMAX, "softmax", "@torch.no_grad()"),
    '''
import functools
import numpy as np


@functools.lru_cache(maxsize=None)
def _keep(axis):
    return axis


_exp = np.vectorize(np.exp, otypes=[float])


def softmax(x, axis=-1):
    z = x - np.max(x, axis=_keep(axis), keepdims=True)
    e = _exp(z)
    return e / np.sum(e, axis=axis, keepdims=True)
''',
]
VARIANTS["self_attention"]["correct"] += [
    "import re\nimport torch\n_PAT = re.compile('x')\n_net = torch.nn.Linear(2, 2).eval()\n_fast = torch.compile\n"
    + SELF_ATTENTION,
    decorated(SELF_ATTENTION, "self_attention", "@torch.no_grad()"),
]
# a split answer cell, as intake joins it: helper in the first half, softmax in the second (issue 11, B7)
VARIANTS["softmax"]["correct"].append('''import numpy as np


def _shifted(x, axis):
    return x - np.max(x, axis=axis, keepdims=True)


def softmax(x, axis=-1):
    e = np.exp(_shifted(x, axis))
    return e / np.sum(e, axis=axis, keepdims=True)
''')

# issue 21 §3: the bugs the prompt warns about fail the PUBLIC check (rows of unequal maxima, keepdims)
VARIANTS["softmax"]["buggy"] += [
    # the global maximum (no axis): fine while every row has about the same maximum
    (SOFTMAX.replace("np.max(x, axis=axis, keepdims=True)", "np.max(x)"), "全局最大值"),
    (SOFTMAX.replace("np.max(x, axis=axis, keepdims=True)", "x.max()"), "全局最大值"),
    (SOFTMAX.replace("np.max(x, axis=axis, keepdims=True)", "np.max(x, axis=axis)"), "keepdims=True"),
    (SOFTMAX.replace("np.sum(e, axis=axis, keepdims=True)", "np.sum(e, axis=axis)"), "keepdims=True"),
]
VARIANTS["softmax"]["correct"] += [
    # the maximum put back with expand_dims instead of keepdims
    '''
import numpy as np
def softmax(x, axis=-1):
    m = np.expand_dims(np.max(x, axis=axis), axis)
    e = np.exp(x - m)
    return e / np.expand_dims(e.sum(axis=axis), axis)
''',
    # torch's logsumexp, float32 input kept float32
    '''
import numpy as np, torch
def softmax(x, axis=-1):
    t = torch.as_tensor(x)
    return torch.exp(t - torch.logsumexp(t, dim=axis, keepdim=True)).numpy()
''',
]
VARIANTS["softmax"]["warned"] = ["数值不稳定", "轴不对", "全部元素的和", "修改了输入", "全局最大值", "keepdims=True"]

# one bug, one exercise: self_attention is judged with the name `softmax` meaning torch's softmax, so its
# own points do not depend on exercise 1 (w1d1_student/exercises/nb01_self_attention.py)
_ATTENTION_ONLY = SELF_ATTENTION[SELF_ATTENTION.index("def self_attention"):]
VARIANTS["self_attention"]["correct"] += [
    # softmax with the global-max bug (exercise 1 loses its points), self_attention right
    SOFTMAX.replace("np.max(x, axis=axis, keepdims=True)", "np.max(x)") + "\n" + _ATTENTION_ONLY,
    # softmax not done yet (the release stub), self_attention right
    "import numpy as np\ndef softmax(x, axis=-1):\n    raise NotImplementedError()\n\n" + _ATTENTION_ONLY,
    # a softmax of the student's own signature: the check runs it as written
    SOFTMAX.replace("def softmax(x, axis=-1):", "def softmax(x, dim=-1):").replace("axis=axis", "axis=dim")
    + "\n" + _ATTENTION_ONLY.replace("axis=-1)", "dim=-1)"),
    # a softmax that returns a torch tensor, unwrapped by self_attention with .numpy()
    '''
import numpy as np, torch
def softmax(x, axis=-1):
    return torch.softmax(torch.as_tensor(x), dim=axis)

def self_attention(X, W_q, W_k, W_v):
    Q, K, V = X @ W_q, X @ W_k, X @ W_v
    A = softmax(Q @ np.swapaxes(K, -1, -2) / np.sqrt(K.shape[-1])).numpy()
    return A @ V, A
''',
    # transposes written other ways, softmax called positionally
    SOFTMAX + "\n" + _ATTENTION_ONLY.replace("Q @ K.T", "Q @ K.transpose()").replace("axis=-1)", "-1)"),
    SOFTMAX + "\n" + _ATTENTION_ONLY.replace("Q @ K.T", "np.matmul(Q, K.mT)"),
]
VARIANTS["self_attention"]["warned"] = ["缺少缩放", "√d_k", "方向不对"]
VARIANTS["score_diagnostics"]["warned"] = ["方向", "比例", "忘了除以"]
VARIANTS["self_attention"]["buggy"] += [
    # red team (issue 21): exercise 1 unanswered and self_attention's own shape error: the error named is
    # self_attention's (ValueError), not the stub's NotImplementedError
    ("import numpy as np\ndef softmax(x, axis=-1):\n    raise NotImplementedError()\n\n"
     + _ATTENTION_ONLY.replace("return A @ V, A", "return A @ V.T, A"), "ValueError"),
]

# attributes of the student's own objects set, a module's function reached by a literal name (issue 36: the static
# check treats assignments to what an import holds, and names computed at run time, as reaching the grader)
VARIANTS["softmax"]["correct"].append('''import numpy as np


def softmax(x, axis=-1):
    e = getattr(np, "exp")(x - np.max(x, axis=axis, keepdims=True))
    e /= e.sum(axis=axis, keepdims=True)
    out = e.ravel()
    out.shape = e.shape
    return out
''')
# red team round 6 (H1): a variable named like a frame's attribute holds no frame
VARIANTS["softmax"]["correct"] += [SOFTMAX + "\nf_back = None\n"]
# red team round 8 (A): the function bound to its name by assignment (hidden check 0/1 before)
SOFTMAX_BOUND_BY_ASSIGNMENT = SOFTMAX.replace("def softmax(", "def stable_softmax(") + "\n\nsoftmax = stable_softmax\n"
VARIANTS["softmax"]["correct"] += [SOFTMAX_BOUND_BY_ASSIGNMENT]
