"""Variants of notebook 04's answers."""

from tests.variants import decorated, with_solutions

SPLIT_MERGE = '''
import torch

def split_heads(x, n_heads):
    B, T, d = x.shape
    return x.view(B, T, n_heads, d // n_heads).transpose(1, 2)

def merge_heads(x):
    B, h, T, d_k = x.shape
    return x.transpose(1, 2).reshape(B, T, h * d_k)
'''

MHA = '''
import math
import torch
from torch import nn

class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, bias=True):
        super().__init__()
        assert d_model % n_heads == 0
        self.d_model = d_model
        self.n_heads = n_heads
        self.W_q = nn.Linear(d_model, d_model, bias=bias)
        self.W_k = nn.Linear(d_model, d_model, bias=bias)
        self.W_v = nn.Linear(d_model, d_model, bias=bias)
        self.W_o = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, mask=None, need_weights=False):
        B, T, d = x.shape
        h, d_k = self.n_heads, d // self.n_heads
        q = self.W_q(x).view(B, T, h, d_k).transpose(1, 2)
        k = self.W_k(x).view(B, T, h, d_k).transpose(1, 2)
        v = self.W_v(x).view(B, T, h, d_k).transpose(1, 2)
        att = q @ k.transpose(-2, -1) / math.sqrt(d_k)
        if mask is not None:
            att = att.masked_fill(mask, float("-inf"))
        att = att.softmax(dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, d)
        y = self.W_o(y)
        return (y, att) if need_weights else y
'''

# -------- correct variants of mha in other styles

# red team, issue 12: a helper of the student's own named like torch's SDPA (and called as a method)
MHA_OWN_SDPA_HELPER = MHA.replace("class MultiHeadAttention(nn.Module):", '''def scaled_dot_product_attention(q, k, v, mask=None):
    att = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        att = att.masked_fill(mask, float("-inf"))
    att = att.softmax(dim=-1)
    return att @ v, att


class MultiHeadAttention(nn.Module):
    scaled_dot_product_attention = staticmethod(scaled_dot_product_attention)
''').replace('''        att = q @ k.transpose(-2, -1) / math.sqrt(d_k)
        if mask is not None:
            att = att.masked_fill(mask, float("-inf"))
        att = att.softmax(dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, d)''', '''        out, att = self.scaled_dot_product_attention(q, k, v, mask)
        y = out.transpose(1, 2).contiguous().view(B, T, d)''')

MHA_EINSUM = '''
import math
import torch
import torch.nn as nn

class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, bias=True):
        super().__init__()
        self.d_model, self.n_heads = d_model, n_heads
        for name in ("W_q", "W_k", "W_v", "W_o"):
            setattr(self, name, nn.Linear(d_model, d_model, bias=bias))

    def forward(self, x, mask=None, need_weights=False):
        B, T, d = x.shape
        h = self.n_heads
        q, k, v = (lin(x).reshape(B, T, h, d // h) for lin in (self.W_q, self.W_k, self.W_v))
        s = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(d // h)
        if mask is not None:
            s = s.masked_fill(mask, torch.finfo(s.dtype).min)
        a = torch.softmax(s, dim=-1)
        y = torch.einsum("bhqk,bkhd->bqhd", a, v).reshape(B, T, d)
        y = self.W_o(y)
        if need_weights:
            return y, a
        return y
'''

MHA_PERMUTE = '''
import torch
from torch import nn

class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, bias=True):
        super().__init__()
        self.d_model = d_model
        self.n_heads = n_heads
        self.W_q = nn.Linear(d_model, d_model, bias)
        self.W_k = nn.Linear(d_model, d_model, bias)
        self.W_v = nn.Linear(d_model, d_model, bias)
        self.W_o = nn.Linear(d_model, d_model, bias)

    def _split(self, t):
        B, T, d = t.shape
        return t.reshape(B, T, self.n_heads, -1).permute(0, 2, 1, 3)

    def forward(self, x, mask=None, need_weights=False):
        B, T, d = x.shape
        q, k, v = self._split(self.W_q(x)), self._split(self.W_k(x)), self._split(self.W_v(x))
        scores = torch.matmul(q, k.permute(0, 1, 3, 2)) * q.shape[-1] ** -0.5
        if mask is not None:
            scores = scores + torch.zeros_like(scores).masked_fill(mask, float("-inf"))
        weights = torch.exp(scores - scores.amax(-1, keepdim=True))
        weights = weights / weights.sum(-1, keepdim=True)
        out = torch.matmul(weights, v).permute(0, 2, 1, 3).reshape(B, T, d)
        y = self.W_o(out)
        return (y, weights) if need_weights else y
'''

MHA_LOOP = '''
import math
import torch
import torch.nn as nn
import torch.nn.functional as F

class MultiHeadAttention(nn.Module):
    """One head at a time, each with its own slice of the weight matrices."""
    def __init__(self, d_model, n_heads, bias=True):
        super().__init__()
        self.d_model = d_model
        self.n_heads = n_heads
        self.W_q = nn.Linear(d_model, d_model, bias=bias)
        self.W_k = nn.Linear(d_model, d_model, bias=bias)
        self.W_v = nn.Linear(d_model, d_model, bias=bias)
        self.W_o = nn.Linear(d_model, d_model, bias=bias)

    @staticmethod
    def _slice(lin, sl):
        return lin.weight[sl], (None if lin.bias is None else lin.bias[sl])

    def forward(self, x, mask=None, need_weights=False):
        B, T, d = x.shape
        d_k = d // self.n_heads
        heads, weights = [], []
        for i in range(self.n_heads):
            sl = slice(i * d_k, (i + 1) * d_k)
            q = F.linear(x, *self._slice(self.W_q, sl))
            k = F.linear(x, *self._slice(self.W_k, sl))
            v = F.linear(x, *self._slice(self.W_v, sl))
            s = q @ k.transpose(1, 2) / math.sqrt(d_k)
            if mask is not None:
                m = mask if mask.dim() == 2 else mask[:, i if mask.shape[1] > 1 else 0]
                s = s.masked_fill(m, float("-inf"))
            a = torch.softmax(s, dim=-1)
            heads.append(a @ v)
            weights.append(a)
        y = self.W_o(torch.cat(heads, dim=-1))
        return (y, torch.stack(weights, dim=1)) if need_weights else y
'''

# -------- buggy variants of mha

MHA_SDPA = MHA.replace(
    '''        att = q @ k.transpose(-2, -1) / math.sqrt(d_k)
        if mask is not None:
            att = att.masked_fill(mask, float("-inf"))
        att = att.softmax(dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, d)''',
    '''        import torch.nn.functional as F
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=None if mask is None else ~mask)
        att = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d_k), -1)
        y = y.transpose(1, 2).contiguous().view(B, T, d)''')

MHA_SDPA_ALIAS = '''
import torch
from torch import nn
from torch.nn.functional import scaled_dot_product_attention as attend

class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, bias=True):
        super().__init__()
        self.d_model, self.n_heads = d_model, n_heads
        self.W_q = nn.Linear(d_model, d_model, bias=bias)
        self.W_k = nn.Linear(d_model, d_model, bias=bias)
        self.W_v = nn.Linear(d_model, d_model, bias=bias)
        self.W_o = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, mask=None, need_weights=False):
        B, T, d = x.shape
        h = self.n_heads
        q, k, v = (l(x).view(B, T, h, -1).transpose(1, 2) for l in (self.W_q, self.W_k, self.W_v))
        y = attend(q, k, v, attn_mask=None if mask is None else ~mask)
        y = self.W_o(y.transpose(1, 2).reshape(B, T, d))
        return (y, torch.zeros(B, h, T, T)) if need_weights else y
'''

MHA_TORCH = '''
import torch
from torch import nn

class MultiHeadAttention(nn.Module):
    """Wraps nn.MultiheadAttention but exposes W_q.. views of its weights."""
    def __init__(self, d_model, n_heads, bias=True):
        super().__init__()
        self.d_model, self.n_heads = d_model, n_heads
        self.W_q = nn.Linear(d_model, d_model, bias=bias)
        self.W_k = nn.Linear(d_model, d_model, bias=bias)
        self.W_v = nn.Linear(d_model, d_model, bias=bias)
        self.W_o = nn.Linear(d_model, d_model, bias=bias)
        self._inner = [nn.MultiheadAttention(d_model, n_heads, bias=bias, batch_first=True)]

    def forward(self, x, mask=None, need_weights=False):
        inner = self._inner[0].to(x.dtype)
        with torch.no_grad():
            inner.in_proj_weight.copy_(torch.cat([self.W_q.weight, self.W_k.weight, self.W_v.weight]))
            inner.out_proj.weight.copy_(self.W_o.weight)
            if self.W_q.bias is not None:
                inner.in_proj_bias.copy_(torch.cat([self.W_q.bias, self.W_k.bias, self.W_v.bias]))
                inner.out_proj.bias.copy_(self.W_o.bias)
        B, T, _ = x.shape
        am = None
        if mask is not None:
            am = mask.expand(B, self.n_heads, T, T).reshape(B * self.n_heads, T, T)
        y, w = inner(x, x, x, attn_mask=am, need_weights=True, average_attn_weights=False)
        return (y, w) if need_weights else y
'''

MHA_IN_THREAD = MHA.replace("    def forward(self, x, mask=None, need_weights=False):\n",
                            "    def forward(self, x, mask=None, need_weights=False):\n"
                            "        from concurrent.futures import ThreadPoolExecutor\n"
                            "        with ThreadPoolExecutor(1) as pool:\n"
                            "            return pool.submit(self._forward, x, mask, need_weights).result()\n\n"
                            "    def _forward(self, x, mask=None, need_weights=False):\n")

MHA_THREAD_SDPA_MATH = '''
import torch
from concurrent.futures import ThreadPoolExecutor
from torch import nn

class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, bias=True):
        super().__init__()
        self.d_model, self.n_heads = d_model, n_heads
        self.W_q, self.W_k, self.W_v, self.W_o = (nn.Linear(d_model, d_model, bias=bias) for _ in range(4))

    def forward(self, x, mask=None, need_weights=False):
        attend = getattr(torch, "_scaled_dot_product_" + "attention_math")
        B, T, d = x.shape
        h = self.n_heads
        q, k, v = (l(x).view(B, T, h, -1).transpose(1, 2) for l in (self.W_q, self.W_k, self.W_v))
        am = None if mask is None else torch.zeros(mask.shape, dtype=x.dtype).masked_fill(mask, float("-inf"))
        with ThreadPoolExecutor(1) as pool:
            y, att = pool.submit(attend, q, k, v, attn_mask=am).result()
        y = self.W_o(y.transpose(1, 2).reshape(B, T, d))
        return (y, att) if need_weights else y
'''

MHA_AVG_WEIGHTS = MHA.replace("return (y, att) if need_weights", "return (y, att.mean(dim=1)) if need_weights")

MHA_DETACH = MHA.replace("att = att.softmax(dim=-1)", "att = att.softmax(dim=-1).detach()")

MHA_QKV_FUSED = '''
import math
import torch
from torch import nn

class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, bias=True):
        super().__init__()
        self.d_model, self.n_heads = d_model, n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.W_o = nn.Linear(d_model, d_model, bias=bias)
        self.W_q = self.W_k = self.W_v = None

    def forward(self, x, mask=None, need_weights=False):
        raise RuntimeError("unreachable")
'''

MHA_NO_BIAS_FLAG = MHA.replace("nn.Linear(d_model, d_model, bias=bias)", "nn.Linear(d_model, d_model)")

MHA_ALWAYS_UNSQUEEZE = MHA.replace(
    'att = att.masked_fill(mask, float("-inf"))', 'att = att.masked_fill(mask.unsqueeze(1), float("-inf"))')

MHA_FILL_SMALL = MHA.replace('float("-inf")', "-30.0")

VARIANTS = with_solutions({
    "split_merge_heads": {
        "correct": [
            # split into chunks and stack; concatenate back
            '''
import torch

def split_heads(x, n_heads):
    d_k = x.shape[-1] // n_heads
    return torch.stack(torch.split(x, d_k, dim=-1), dim=1)

def merge_heads(x):
    return torch.cat(torch.unbind(x, dim=1), dim=-1)
''',
            # unflatten / permute / flatten
            '''
def split_heads(x, n_heads):
    return x.unflatten(-1, (n_heads, -1)).permute(0, 2, 1, 3)

def merge_heads(x):
    return x.permute(0, 2, 1, 3).flatten(start_dim=2)
''',
            # einsum with an explicit selector, contiguous + view
            '''
import torch

def split_heads(x, n_heads):
    B, T, d = x.shape
    return torch.einsum("bthk->bhtk", x.reshape(B, T, n_heads, d // n_heads)).clone()

def merge_heads(x):
    B, h, T, d_k = x.shape
    return x.transpose(1, 2).contiguous().view(B, T, h * d_k)
''',
        ],
        "buggy": [
            (SPLIT_MERGE.replace("x.view(B, T, n_heads, d // n_heads).transpose(1, 2)",
                                 "x.view(B, n_heads, T, d // n_heads)")
             .replace("x.transpose(1, 2).reshape(B, T, h * d_k)", "x.reshape(B, T, h * d_k)"), "拆头方式不对"),
            (SPLIT_MERGE.replace("x.view(B, T, n_heads, d // n_heads).transpose(1, 2)",
                                 "x.view(B, T, d // n_heads, n_heads).permute(0, 3, 1, 2)"), "连续的一段特征"),
            (SPLIT_MERGE.replace("x.transpose(1, 2).reshape(B, T, h * d_k)", "x.reshape(B, T, h * d_k)"), "§A.5"),
            (SPLIT_MERGE.replace("x.transpose(1, 2).reshape(B, T, h * d_k)", "x.transpose(1, 2).view(B, T, h * d_k)"),
             "contiguous"),
            (SPLIT_MERGE.replace("x.transpose(1, 2).reshape(B, T, h * d_k)",
                                 "x.permute(0, 2, 3, 1).reshape(B, T, h * d_k)"), "合并的维度顺序不对"),
        ],
    },
    "mha": {
        "correct": [MHA_EINSUM, MHA_PERMUTE, MHA_LOOP, MHA_OWN_SDPA_HELPER,
                    # red team round 4: a question in the docstring was read as IPython's `name?`
                    MHA.replace("class MultiHeadAttention(nn.Module):\n",
                                'class MultiHeadAttention(nn.Module):\n    """手写多头注意力。为什么不直接用 nn.MultiheadAttention?"""\n')],
        "buggy": [
            (MHA.replace("(att @ v).transpose(1, 2).contiguous().view(B, T, d)", "(att @ v).reshape(B, T, d)"),
             "§A.5"),
            (MHA.replace("math.sqrt(d_k)", "math.sqrt(d)"), "√d_model"),
            (MHA.replace("att.masked_fill(mask,", "att.masked_fill(~mask,"), "约定反了"),
            (MHA.replace("        y = self.W_o(y)\n", ""), "W_o"),
            (MHA.replace("att.softmax(dim=-1)", "att.softmax(dim=-2)"), "softmax 的方向"),
            (MHA.replace("view(B, T, h, d_k).transpose(1, 2)", "view(B, h, T, d_k)")
             .replace("(att @ v).transpose(1, 2).contiguous().view(B, T, d)", "(att @ v).reshape(B, T, d)"),
             "拆头方式不对"),
            (MHA_AVG_WEIGHTS, "平均"),
            (MHA.replace('        if mask is not None:\n            att = att.masked_fill(mask, float("-inf"))\n'
                         '        att = att.softmax(dim=-1)',
                         '        att = att.softmax(dim=-1)\n        if mask is not None:\n'
                         '            att = att.masked_fill(mask, 0.0)'), "softmax 之后"),
            (MHA.replace('att.masked_fill(mask,', 'att.masked_fill(mask.transpose(-2, -1),'), "行列方向反了"),
            (MHA_ALWAYS_UNSQUEEZE, "广播"),
            (MHA_FILL_SMALL, "恰好为 0"),
            (MHA_DETACH, "梯度没有传到"),
            (MHA_QKV_FUSED, "nn.Linear"),
            (MHA_NO_BIAS_FLAG, "bias=False"),
            (MHA_SDPA, "scaled_dot_product_attention"),
            (MHA_SDPA_ALIAS, "scaled_dot_product_attention"),
            (MHA_TORCH, "nn.MultiheadAttention"),
            # red team, issue 12 round 3: torch's own attention, named through getattr, in a worker thread
            # (torch's modes see the calling thread only); and the right maths moved to a thread
            (MHA_THREAD_SDPA_MATH, "线程"),
            (MHA_IN_THREAD, "线程"),
            # red team, issue 12: y of another shape without weights used to crash the judge (notebook 0)
            (MHA.replace("return (y, att) if need_weights else y", "return (y, att) if need_weights else y.transpose(0, 1)"),
             "need_weights=False 与 need_weights=True"),
        ],
    },
})

# finding B1 of the red team: the answer switches the kernel-side detector off, then uses torch's MHA
MHA_PATCHES_DETECTOR = '''
import contextlib
import torch
import torch.nn.functional as F
from torch import nn
import w1d1_student.exercises.nb04_multihead as _k


@contextlib.contextmanager
def _quiet(*args, **kwargs):
    yield {"used_sdpa": False, "used_torch_mha": False}


_k._tripwires = _k.watching = _quiet
try:
    import w1d1_student.torch_calls as _t
    _t.watching = _quiet
except ImportError:
    pass


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, bias=True):
        super().__init__()
        self.d_model, self.n_heads = d_model, n_heads
        self.W_q, self.W_k, self.W_v, self.W_o = (nn.Linear(d_model, d_model, bias=bias) for _ in range(4))

    def forward(self, x, mask=None, need_weights=False):
        B, T, d = x.shape
        h = self.n_heads
        W = torch.cat([self.W_q.weight, self.W_k.weight, self.W_v.weight])
        b = None if self.W_q.bias is None else torch.cat([self.W_q.bias, self.W_k.bias, self.W_v.bias])
        am = None if mask is None else torch.broadcast_to(mask, (B, h, T, T)).reshape(B * h, T, T)
        xt = x.transpose(0, 1)
        y, a = F.multi_head_attention_forward(xt, xt, xt, d, h, W, b, None, None, False, 0.0,
                                              self.W_o.weight, self.W_o.bias, training=False,
                                              need_weights=True, attn_mask=am, average_attn_weights=False)
        y = y.transpose(0, 1)
        return (y, a) if need_weights else y
'''
VARIANTS["mha"]["buggy"] += [(MHA_PATCHES_DETECTOR, "nn.MultiheadAttention")]
# the same, with import_module and getattr under other names and the patch through a name bound by a call: the
# grader's static check counts the aliases (reflection used as a value); this table runs the checks without it, so
# the run-time detection (a closure the patch cannot reach) must catch it too
MHA_OBFUSCATED = (MHA_PATCHES_DETECTOR
                  .replace("import w1d1_student.exercises.nb04_multihead as _k\n",
                           "import importlib\n_load, _look = importlib.import_module, getattr\n"
                           "_k = _load('w1d1_' + 'stu' + 'dent.exercises.nb04_multihead')\n")
                  .replace("    import w1d1_student.torch_calls as _t\n",
                           "    _t = _load(_k.__name__.replace('exercises.nb04_multihead', 'torch_calls'))\n")
                  .replace("F.multi_head_attention_forward(", "_look(F, 'multi_head_' + 'attention_forward')("))
VARIANTS["mha"]["buggy"] += [(MHA_OBFUSCATED, "nn.MultiheadAttention")]

# issue 21 §3: bugs the prompts (and §A.5 of the text) warn about, which the PUBLIC checks name
VARIANTS["split_merge_heads"]["warned"] = ["contiguous", "连续的一段特征", "§A.5"]
VARIANTS["mha"]["warned"] = ["§A.5", "拆头方式不对", "√d_model", "平均", "恰好为 0", "梯度没有传到", "nn.Linear", "bias=False",
                             "scaled_dot_product_attention", "nn.MultiheadAttention"]

# -------- issue 36 §3: star imports (torch, torch.nn, torch.nn.functional, numpy) in answer cells, and in the
# student's own cells, which grading never runs ("scratch": cells added to the notebook, never answers)
MHA_STAR_IMPORTS = '''
from numpy import *
from torch import *
from torch.nn import *
from torch.nn.functional import *
import math


class MultiHeadAttention(Module):
    def __init__(self, d_model, n_heads, bias=True):
        super(MultiHeadAttention, self).__init__()
        self.d_model, self.n_heads = d_model, n_heads
        self.W_q = Linear(d_model, d_model, bias=bias)
        self.W_k = Linear(d_model, d_model, bias=bias)
        self.W_v = Linear(d_model, d_model, bias=bias)
        self.W_o = Linear(d_model, d_model, bias=bias)

    def forward(self, x, mask=None, need_weights=False):
        B, T, d = x.shape
        h = self.n_heads
        q, k, v = (w(x).view(B, T, h, d // h).transpose(1, 2) for w in (self.W_q, self.W_k, self.W_v))
        att = q @ k.transpose(-2, -1) / math.sqrt(d // h)
        if mask is not None:
            att = att.masked_fill(mask, -math.inf)
        att = softmax(att, dim=-1)
        y = self.W_o((att @ v).transpose(1, 2).reshape(B, T, d))
        return (y, att) if need_weights else y
'''
# a helper named as torch's SDPA, defined after the star import that binds torch's: by Python's rules the student's
MHA_STAR_OWN_SDPA = "from torch.nn.functional import *\n" + MHA_OWN_SDPA_HELPER
# a class of the student's whose name holds a forbidden part, defined after `from torch.nn import *`
MHA_STAR_OWN_BASE = MHA_STAR_IMPORTS.replace("class MultiHeadAttention(Module):", "class MultiheadAttentionX(Module):").replace(
    "super(MultiHeadAttention, self)", "super(MultiheadAttentionX, self)") + '''

class MultiHeadAttention(MultiheadAttentionX):
    pass
'''
VARIANTS["mha"]["correct"] += [MHA_STAR_IMPORTS, MHA_STAR_OWN_SDPA, MHA_STAR_OWN_BASE,
                               MHA.replace("super().__init__()", "super(MultiHeadAttention, self).__init__()")]
# red team round 4 (red4): a comprehension's loop variable named like torch's SDPA is the comprehension's own;
# with reproducibility switches set to constants, and the student's own layers set and read by computed names
MHA_COMPREHENSION_ROWS = MHA.replace(
    "        att = att.softmax(dim=-1)\n",
    "        att = torch.stack([scaled_dot_product_row.softmax(dim=-1) for scaled_dot_product_row in att.unbind(0)])\n")
_CONFIGURATION = '''import warnings
import numpy as np
import matplotlib.pyplot as plt

torch.backends.cudnn.deterministic = True
torch.backends.cudnn.benchmark = False
torch.manual_seed(0)
np.set_printoptions(precision=4)
warnings.filterwarnings("ignore", category=UserWarning)
plt.rcParams["figure.dpi"] = 100


'''
MHA_CONFIGURED = MHA_COMPREHENSION_ROWS.replace("class MultiHeadAttention", _CONFIGURATION + "class MultiHeadAttention").replace(
    "".join(f"        self.W_{n} = nn.Linear(d_model, d_model, bias=bias)\n" for n in "qkvo"),
    '        for n in "qkvo":\n            setattr(self, f"W_{n}", nn.Linear(d_model, d_model, bias=bias))\n').replace(
    "".join(f"        {n} = self.W_{n}(x).view(B, T, h, d_k).transpose(1, 2)\n" for n in "qkv"),
    '        q, k, v = (getattr(self, "W_" + n)(x).view(B, T, h, d_k).transpose(1, 2) for n in "qkv")\n')
assert MHA_COMPREHENSION_ROWS != MHA and MHA_CONFIGURED.count("getattr(self") == MHA_CONFIGURED.count("setattr(self") == 1
VARIANTS["mha"]["correct"] += [MHA_COMPREHENSION_ROWS, MHA_CONFIGURED]
VARIANTS["mha"]["scratch"] = ["from torch import *", "from torch.nn import *", "from torch.nn.functional import *",
                              "from numpy import *",
                              "from torch.nn import *\nreference = MultiheadAttention(16, 4, batch_first=True)",
                              "from torch.nn.functional import *\ny = scaled_dot_product_attention"]
# the student's helper, rebound to torch's SDPA by a later star import: the class calls torch's
MHA_STAR_REBINDS_OWN = MHA.replace("class MultiHeadAttention(nn.Module):", '''def scaled_dot_product_attention(q, k, v, attn_mask=None):
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if attn_mask is not None:
        s = s.masked_fill(~attn_mask, float("-inf"))
    return s.softmax(dim=-1) @ v


from torch.nn.functional import *  # noqa: E402


class MultiHeadAttention(nn.Module):''').replace(
    "y = (att @ v)", "y = scaled_dot_product_attention(q, k, v, attn_mask=None if mask is None else ~mask)")
VARIANTS["mha"]["buggy"] += [(MHA_STAR_REBINDS_OWN, "scaled_dot_product_attention")]

# -------- mha_selfcheck: the student's own checks, graded by mutation analysis

SELFCHECK = '''
import math
import torch
import torch.nn.functional as F


def mha_property_errors(mha_cls, d_model=16, n_heads=4):
    g = torch.Generator().manual_seed(0)
    B, T = 2, 6
    x = torch.randn(B, T, d_model, generator=g, dtype=torch.float64)
    causal = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    mha = mha_cls(d_model, n_heads).double()
    one = mha_cls(d_model, 1).double()
    errors = {}
    with torch.no_grad():
        y, attn = mha(x, causal, need_weights=True)
        errors["row_sum"] = (attn.sum(dim=-1) - 1).abs().max().item()
        errors["masked"] = attn.masked_select(causal.expand_as(attn)).abs().max().item()
        q, k, v = one.W_q(x), one.W_k(x), one.W_v(x)
        a = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d_model), dim=-1)
        errors["single_head"] = (one(x) - one.W_o(a @ v)).abs().max().item()
        perm = torch.arange(T).flip(0)
        errors["equivariance"] = (mha(x[:, perm]) - mha(x)[:, perm]).abs().max().item()

        def heads(t):
            return t.view(B, T, n_heads, d_model // n_heads).transpose(1, 2)

        o = F.scaled_dot_product_attention(heads(mha.W_q(x)), heads(mha.W_k(x)), heads(mha.W_v(x)), attn_mask=~causal)
        errors["sdpa"] = (y - mha.W_o(o.transpose(1, 2).reshape(B, T, d_model))).abs().max().item()
    return errors
'''

# a loop over the heads, a composed causal + padding mask (B, 1, T, T), inputs from torch.testing, numpy for h = 1
SELFCHECK_LOOP = '''
import numpy as np
import torch
import torch.nn.functional as F
from torch.testing import make_tensor


def _worst(a, b):
    return float(np.max(np.abs(np.asarray(a, dtype=float) - np.asarray(b, dtype=float))))


def mha_property_errors(mha_cls, d_model=16, n_heads=4):
    torch.manual_seed(3)
    B, T, d_k = 3, 5, d_model // n_heads
    x = make_tensor((B, T, d_model), dtype=torch.float64, device="cpu", low=-2.0, high=2.0)
    pad = torch.arange(T)[None, :] >= torch.tensor([5, 3, 4])[:, None]
    blocked = pad[:, None, None, :] | torch.ones(T, T, dtype=torch.bool).triu(1)
    model, single = mha_cls(d_model, n_heads).double(), mha_cls(d_model, 1).double()
    found = {}
    with torch.no_grad():
        y, w = model(x, blocked, need_weights=True)
        found["row_sum"] = _worst(w.sum(-1), torch.ones(B, n_heads, T))
        found["masked"] = float((w * blocked).abs().max())
        q, k, v = model.W_q(x), model.W_k(x), model.W_v(x)
        parts = []
        for i in range(n_heads):
            cols = slice(i * d_k, (i + 1) * d_k)
            parts.append(F.scaled_dot_product_attention(q[:, None, :, cols], k[:, None, :, cols], v[:, None, :, cols],
                                                        attn_mask=~blocked)[:, 0])
        found["sdpa"] = _worst(y, model.W_o(torch.cat(parts, dim=-1)))
        Wq, Wk, Wv, Wo = (lin.weight.numpy().T for lin in (single.W_q, single.W_k, single.W_v, single.W_o))
        bq, bk, bv, bo = (lin.bias.numpy() for lin in (single.W_q, single.W_k, single.W_v, single.W_o))
        X = x.numpy()
        S = (X @ Wq + bq) @ (X @ Wk + bk).transpose(0, 2, 1) / np.sqrt(d_model)
        A = np.exp(S - S.max(-1, keepdims=True))
        A /= A.sum(-1, keepdims=True)
        found["single_head"] = _worst(single(x), (A @ (X @ Wv + bv)) @ Wo + bo)
        perm = torch.tensor([2, 0, 4, 1, 3])
        found["equivariance"] = _worst(model(x[:, perm]), model(x)[:, perm])
    return found
'''

# einsum throughout, SDPA told is_causal instead of a flipped mask, a random (never the identity) permutation, B = 1
SELFCHECK_EINSUM = '''
import torch
import torch.nn.functional as F


def mha_property_errors(mha_cls, d_model=16, n_heads=4):
    gen = torch.Generator().manual_seed(11)
    T = 7
    x = torch.randn(1, T, d_model, generator=gen).double()
    mask = torch.ones(T, T).triu(1).bool()
    net = mha_cls(d_model, n_heads).double()
    head = mha_cls(d_model, 1).double()
    out = dict.fromkeys(["row_sum", "masked", "single_head", "equivariance", "sdpa"], 0.0)
    with torch.no_grad():
        y, att = net(x, mask, need_weights=True)
        out["row_sum"] = torch.max(torch.abs(torch.einsum("bhqk->bhq", att) - 1)).item()
        out["masked"] = torch.max(torch.abs(att[..., mask])).item()
        Q, K, V = head.W_q(x), head.W_k(x), head.W_v(x)
        P = torch.softmax(torch.einsum("btd,bsd->bts", Q, K) / d_model ** 0.5, dim=-1)
        out["single_head"] = torch.max(torch.abs(head(x) - head.W_o(torch.einsum("bts,bsd->btd", P, V)))).item()
        perm = torch.randperm(T, generator=gen)
        while bool((perm == torch.arange(T)).all()):
            perm = torch.randperm(T, generator=gen)
        out["equivariance"] = torch.max(torch.abs(net(x[:, perm]) - net(x)[:, perm])).item()
        split = lambda t: torch.einsum("bthd->bhtd", t.reshape(1, T, n_heads, -1))
        o = F.scaled_dot_product_attention(split(net.W_q(x)), split(net.W_k(x)), split(net.W_v(x)), is_causal=True)
        merged = torch.einsum("bhtd->bthd", o).reshape(1, T, d_model)
        out["sdpa"] = torch.max(torch.abs(y - net.W_o(merged))).item()
    return out
'''

# several (B, T) at once, the worst of each; values returned as 0-d tensors; bias=False modules
SELFCHECK_SIZES = '''
import math
import torch
import torch.nn.functional as F


def _one_size(mha_cls, d_model, n_heads, B, T):
    torch.manual_seed(B * 100 + T)
    x = torch.randn(B, T, d_model, dtype=torch.float64)
    causal = torch.ones(T, T, dtype=torch.bool).triu(diagonal=1)
    m, m1 = mha_cls(d_model, n_heads, bias=False).double(), mha_cls(d_model, 1, bias=False).double()
    y, a = m(x, causal, need_weights=True)
    q1, k1, v1 = m1.W_q(x), m1.W_k(x), m1.W_v(x)
    by_hand = m1.W_o(torch.softmax(q1 @ k1.mT / math.sqrt(d_model), -1) @ v1)
    perm = torch.roll(torch.arange(T), 1)
    split = lambda t: t.unflatten(-1, (n_heads, -1)).transpose(1, 2)
    ref = F.scaled_dot_product_attention(split(m.W_q(x)), split(m.W_k(x)), split(m.W_v(x)),
                                         attn_mask=causal.logical_not())
    return {"row_sum": (a.sum(-1) - 1).abs().max(), "masked": a[..., causal].abs().max(),
            "single_head": (m1(x) - by_hand).abs().max(),
            "equivariance": (m(x[:, perm]) - m(x)[:, perm]).abs().max(),
            "sdpa": (y - m.W_o(ref.transpose(1, 2).flatten(2))).abs().max()}


def mha_property_errors(mha_cls, d_model=16, n_heads=4):
    with torch.no_grad():
        runs = [_one_size(mha_cls, d_model, n_heads, B, T) for B, T in ((1, 4), (3, 9))]
    return {key: torch.maximum(runs[0][key], runs[1][key]) for key in runs[0]}
'''



SELFCHECK_NO = {key: SELFCHECK.replace(line, line.split(" = ")[0] + " = 0.0") for key, line in (
    ("row_sum", '        errors["row_sum"] = (attn.sum(dim=-1) - 1).abs().max().item()'),
    ("masked", '        errors["masked"] = attn.masked_select(causal.expand_as(attn)).abs().max().item()'),
    ("single_head", '        errors["single_head"] = (one(x) - one.W_o(a @ v)).abs().max().item()'),
    ("equivariance", '        errors["equivariance"] = (mha(x[:, perm]) - mha(x)[:, perm]).abs().max().item()'),
    ("sdpa", '        errors["sdpa"] = (y - mha.W_o(o.transpose(1, 2).reshape(B, T, d_model))).abs().max().item()'))}
# every property measured on the h = 1 module only: blind to what depends on the number of heads
SELFCHECK_H1 = SELFCHECK.replace("    mha = mha_cls(d_model, n_heads).double()\n", "    mha = mha_cls(d_model, 1).double()\n").replace(
    "t.view(B, T, n_heads, d_model // n_heads)", "t.view(B, T, 1, d_model)")

# cheats: they look at the class instead of measuring it, or measure something else
CHEAT_ZEROS = '''
def mha_property_errors(mha_cls, d_model=16, n_heads=4):
    return {"row_sum": 0.0, "masked": 0.0, "single_head": 0.0, "equivariance": 0.0, "sdpa": 0.0}
'''
CHEAT_BY_NAME = SELFCHECK.replace("    return errors\n", '''    if mha_cls.__name__ == "MultiHeadAttention" and mha_cls.__module__ == "__main__":
        return dict.fromkeys(errors, 0.0)
    return errors
''')
CHEAT_FIRST_IS_RIGHT = '''
_SEEN = []


def mha_property_errors(mha_cls, d_model=16, n_heads=4):
    if not _SEEN:
        _SEEN.append(id(mha_cls))
    value = 0.0 if id(mha_cls) in _SEEN else 1.0
    return dict.fromkeys(["row_sum", "masked", "single_head", "equivariance", "sdpa"], value)
'''
CHEAT_BY_SOURCE = '''
import inspect


def mha_property_errors(mha_cls, d_model=16, n_heads=4):
    src = inspect.getsource(mha_cls)
    return {"row_sum": float("dim=-2" in src or "0.0)" in src), "masked": float("~mask" in src or "pass" in src),
            "single_head": float("W_o" not in src), "equivariance": float("transpose(1, 2)" not in src),
            "sdpa": float("sqrt(d)" in src)}
'''
CHEAT_BY_CODE_NAMES = SELFCHECK.replace("    return errors\n", '''    names = mha_cls.forward.__code__.co_names
    errors["equivariance"] = 0.0 if "transpose" in names else 1.0
    return errors
''')
CHEAT_BY_ATTRIBUTES = SELFCHECK.replace("    return errors\n", '''    known = {"bug", "buggy", "correct", "label", "name"}
    if not any(hasattr(mha_cls, a) for a in known):
        return dict.fromkeys(errors, 0.0)
    return errors
''')
# measures a class of its own, made right with SDPA inside ("calls SDPA inside the class")
CHEAT_SDPA_SUBCLASS = SELFCHECK.replace("    g = torch.Generator().manual_seed(0)\n", '''    class Fixed(mha_cls):
        def forward(self, x, mask=None, need_weights=False):
            B, T, d = x.shape
            h = self.n_heads
            split = lambda t: t.view(B, T, h, d // h).transpose(1, 2)
            q, k, v = split(self.W_q(x)), split(self.W_k(x)), split(self.W_v(x))
            allowed = None if mask is None else ~mask
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
            s = (q @ k.transpose(-2, -1) / math.sqrt(d // h))
            att = (s if mask is None else s.masked_fill(mask, float("-inf"))).softmax(-1)
            y = self.W_o(y.transpose(1, 2).reshape(B, T, d))
            return (y, att) if need_weights else y

    mha_cls = Fixed
    g = torch.Generator().manual_seed(0)
''')
# the same fix patched onto the class under test, left there, or put back afterwards
CHEAT_PATCHES_CLASS = CHEAT_SDPA_SUBCLASS.replace("    mha_cls = Fixed\n", "    mha_cls.forward = Fixed.forward\n")
CHEAT_PATCHES_AND_RESTORES = CHEAT_SDPA_SUBCLASS.replace("    mha_cls = Fixed\n", '''    own = mha_cls.forward
    mha_cls.forward = Fixed.forward
''').replace("    return errors\n", '''    mha_cls.forward = own
    return errors
''')

# float32 throughout (torch's default dtype, no .double()), a random permutation redrawn until it moves something,
# SDPA under another name, unflatten/flatten for the heads (the red team's honest style)
SELFCHECK_FLOAT32 = '''
import torch
from torch.nn.functional import scaled_dot_product_attention as sdpa


def mha_property_errors(mha_cls, d_model=16, n_heads=4):
    B, T = 3, 7
    x = torch.randn(B, T, d_model)
    causal = torch.ones(T, T).triu(1).bool()
    m, one = mha_cls(d_model, n_heads), mha_cls(d_model, 1)
    out = {}
    with torch.no_grad():
        y, a = m(x, causal, need_weights=True)
        out["row_sum"] = float((a.sum(-1) - 1).abs().max())
        out["masked"] = float(a[..., causal].abs().max())
        q, k, v = one.W_q(x), one.W_k(x), one.W_v(x)
        ref1 = one.W_o(torch.softmax(q @ k.mT / d_model ** 0.5, -1) @ v)
        out["single_head"] = float((one(x) - ref1).abs().max())
        p = torch.randperm(T)
        while bool((p == torch.arange(T)).all()):
            p = torch.randperm(T)
        out["equivariance"] = float((m(x[:, p]) - m(x)[:, p]).abs().max())
        hd = lambda t: t.unflatten(-1, (n_heads, -1)).transpose(1, 2)
        o = sdpa(hd(m.W_q(x)), hd(m.W_k(x)), hd(m.W_v(x)), attn_mask=causal.logical_not())
        out["sdpa"] = float((y - m.W_o(o.transpose(1, 2).flatten(2))).abs().max())
    return out
'''

# one differential test (the class against a reference of its own on the class's weights) under all five keys:
# it sees every bug, and so reports it also where the property named cannot see it (red team, break 7)
CHEAT_ONE_NUMBER = '''
import math
import torch


def _ref(m, x, mask, h):
    B, T, d = x.shape
    dk = d // h
    q, k, v = (W(x).reshape(B, T, h, dk).permute(0, 2, 1, 3) for W in (m.W_q, m.W_k, m.W_v))
    s = (q @ k.transpose(-2, -1) / math.sqrt(dk)).masked_fill(mask, float("-inf"))
    return m.W_o((torch.softmax(s, -1) @ v).permute(0, 2, 1, 3).reshape(B, T, d))


def mha_property_errors(mha_cls, d_model=16, n_heads=4):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, 5, d_model, generator=g, dtype=torch.float64)
    mask = torch.triu(torch.ones(5, 5, dtype=torch.bool), 1)
    m = mha_cls(d_model, n_heads).double()
    with torch.no_grad():
        e = (m(x, mask) - _ref(m, x, mask, n_heads)).abs().max().item()
    return {k: e for k in ("row_sum", "masked", "single_head", "equivariance", "sdpa")}
'''

# no measurement: the classes recognised by a hash of their code objects, made from the grader's correct classes
# (autograder/exercises/nb04_multihead.py, public) ahead of time (red team, break 8); read by name: a class's whole
# namespace read (`vars(cls)`) is a reach of its own (red team round 10, A6)
FINGERPRINT = '''
import hashlib


def _codes(c, out):
    out.append(c.co_code)
    out.append(repr(c.co_names).encode())
    for k in c.co_consts:
        if hasattr(k, "co_code"):
            _codes(k, out)
        else:
            out.append(repr(k).encode())


def _fp(cls):
    out = []
    for name in ("__init__", "forward"):
        _codes(getattr(cls, name).__code__, out)
    return hashlib.sha256(b"|".join(out)).hexdigest()
'''


def fingerprint_checker():
    """FINGERPRINT with the hashes of every correct class the grader's source lists."""
    from w1d1_student.exercises.nb04_multihead import _class_under_test

    from autograder.exercises.nb04_multihead import CLASSES

    scope = {}
    exec(FINGERPRINT, scope)
    good = sorted(scope["_fp"](_class_under_test(src)) for src, (_, bug) in CLASSES.items() if bug is None)
    return FINGERPRINT + f"\n_GOOD = {good!r}\n" + '''

def mha_property_errors(mha_cls, d_model=16, n_heads=4):
    e = 0.0 if _fp(mha_cls) in _GOOD else 1.0
    return {k: e for k in ("row_sum", "masked", "single_head", "equivariance", "sdpa")}
'''


VARIANTS.update(with_solutions({"mha_selfcheck": {
    "correct": [SELFCHECK, SELFCHECK_LOOP, SELFCHECK_EINSUM, SELFCHECK_SIZES, decorated(SELFCHECK, "mha_property_errors"),
                SELFCHECK_FLOAT32],
    "buggy": [
        # weak checks: one property left out, each named by the bug it lets through
        (SELFCHECK_NO["row_sum"], "掩码加在了 softmax 之后"),
        (SELFCHECK_NO["masked"], "你的检查没有发现：掩码的约定反了"),
        (SELFCHECK_NO["single_head"], "你的检查没有发现：缺少输出投影 W_o"),
        (SELFCHECK_NO["equivariance"], "你的检查没有发现：拆头时直接 view"),
        (SELFCHECK_NO["sdpa"], "你的检查没有发现：掩码的约定反了"),
        (SELFCHECK_H1, "h = 1 的对照看不出这个错误"),
        # wrong references: a correct class flagged
        (SELFCHECK.replace("attn_mask=~causal", "attn_mask=causal"), "这是一个正确的实现，你的检查却说它有错"),
        (SELFCHECK.replace("t.view(B, T, n_heads, d_model // n_heads).transpose(1, 2)",
                           "t.view(B, n_heads, T, d_model // n_heads)"), "这是一个正确的实现，你的检查却说它有错"),
        (SELFCHECK.replace("one.W_o(a @ v)", "a @ v"), "这是一个正确的实现，你的检查却说它有错"),
        (SELFCHECK.replace("perm = torch.arange(T).flip(0)", "perm = torch.arange(T)"), "你的检查没有发现：拆头时直接 view"),
        (SELFCHECK.replace("y, attn = mha(x, causal, need_weights=True)", "y, attn = mha(x, None, need_weights=True)"),
         "这是一个正确的实现，你的检查却说它有错"),
        # cheats
        (CHEAT_ZEROS, "你的检查没有发现：掩码的约定反了"),
        (CHEAT_ZEROS.replace("0.0", "1.0"), "这是一个正确的实现，你的检查却说它有错"),
        (CHEAT_BY_NAME, "你的检查没有发现"),
        (CHEAT_FIRST_IS_RIGHT, "你的检查把一个错误报在了看不出它的性质上"),
        (CHEAT_BY_SOURCE, "没有源文件可读"),
        (CHEAT_BY_CODE_NAMES, "你的检查把一个错误报在了看不出它的性质上"),
        (CHEAT_BY_ATTRIBUTES, "你的检查没有发现"),
        (CHEAT_SDPA_SUBCLASS, "你的检查没有发现"),
        (CHEAT_PATCHES_CLASS, "修改了被测的类"),
        (CHEAT_PATCHES_AND_RESTORES, "你的检查没有发现"),
        (CHEAT_ONE_NUMBER, "你的检查把一个错误报在了看不出它的性质上"),
        (fingerprint_checker(), "你的检查把一个错误报在了看不出它的性质上"),
    ],
}}))
# the prompt warns about the flip of SDPA's mask and names W_O among what h = 1 sees: the public check names them
VARIANTS["mha_selfcheck"]["warned"] = ["你的检查没有发现：掩码的约定反了", "你的检查没有发现：缺少输出投影 W_o"]
# a thread pool in the answer cell, for something else, joined by its `with` before any check (the thread check)
VARIANTS["mha"]["correct"] += [MHA + '''
from concurrent.futures import ThreadPoolExecutor

with ThreadPoolExecutor(max_workers=2) as _pool:
    _squares = list(_pool.map(lambda n: n * n, range(8)))
''']
# red team round 6 (H1): helpers that pick a library function, a dtype or an attribute by a name given at run time,
# and a label that spells the forbidden API: the static check reads what the object it reads from holds
VARIANTS["mha"]["correct"] += [MHA + '''
from functools import reduce

import torch.nn.functional as F


def init_weights(module, how="xavier_uniform_"):
    for p in module.parameters():
        if p.dim() > 1:
            getattr(nn.init, how)(p)


def activation(x, name="relu"):
    return getattr(F, name)(x)


def tensor_op(t, op="softmax"):
    return getattr(torch.Tensor, op)(t, -1)


def as_dtype(x, dtype_name="float64"):
    return x.to(getattr(torch, dtype_name))


def zeros_of(x, dtype_name="float64"):  # red team round 7 (H4): the dtype bound to a local name first
    dtype = getattr(torch, dtype_name)
    return torch.zeros(x.shape, dtype=dtype) + x.to(dtype)


def parameter(model, path="W_q.weight"):
    return reduce(getattr, path.split("."), model)


def replace_linear(model, name="W_o"):
    nn.Module.__setattr__(model, name, nn.Linear(model.d_model, model.d_model))


print("scaled_dot_product_attention")
''']
# red team round 7 (N4, N1): a computed name on the student's own module (a loop over constant names), and the threads
# alive listed by their public API: what the static check still accepts
VARIANTS["mha"]["correct"] += [MHA + '''
import threading


def projections(model):
    return [getattr(model, n) for n in ("W_q", "W_k", "W_v", "W_o")]


print(sorted(t.name for t in threading.enumerate() if t.is_alive()))
''']
# red team round 8 (A): the class bound to its name by assignment (the static check once emptied the shared tree's
# assignment targets, so the second check read the name as undefined: 10/17)
MHA_BOUND_BY_ASSIGNMENT = MHA.replace("class MultiHeadAttention(nn.Module):", "class MHA(nn.Module):") + \
    "\n\nMultiHeadAttention = MHA\n"
VARIANTS["mha"]["correct"] += [MHA_BOUND_BY_ASSIGNMENT]
# red team round 8 (D): projections picked by name on the module itself, in a helper method (a parameter), from a
# module-level tuple, from a tuple kept on the module (0/17 and the notebook before: `getattr(self, <computed>)`)
_QKV = "".join(f"        {n} = self.W_{n}(x).view(B, T, h, d_k).transpose(1, 2)\n" for n in "qkv")
MHA_HELPER_BY_NAME = MHA.replace(_QKV, '        q, k, v = (self._heads(x, name) for name in ("W_q", "W_k", "W_v"))\n').replace(
    "    def forward(self, x, mask=None, need_weights=False):", '''    def _heads(self, x, proj):
        B, T, d = x.shape
        return getattr(self, proj)(x).view(B, T, self.n_heads, d // self.n_heads).transpose(1, 2)

    def forward(self, x, mask=None, need_weights=False):''')
MHA_NAMES_IN_A_TUPLE = 'PROJECTIONS = ("W_q", "W_k", "W_v")\n' + MHA.replace(
    _QKV, "        q, k, v = (getattr(self, n)(x).view(B, T, h, d_k).transpose(1, 2) for n in PROJECTIONS)\n")
MHA_NAMES_ON_SELF = MHA.replace(
    _QKV, "        q, k, v = (getattr(self, n)(x).view(B, T, h, d_k).transpose(1, 2) for n in self.proj_names)\n").replace(
    "        self.W_o = nn.Linear(d_model, d_model, bias=bias)\n",
    '        self.W_o = nn.Linear(d_model, d_model, bias=bias)\n        self.proj_names = ("W_q", "W_k", "W_v")\n')
assert len({MHA, MHA_HELPER_BY_NAME, MHA_NAMES_IN_A_TUPLE, MHA_NAMES_ON_SELF}) == 4
VARIANTS["mha"]["correct"] += [MHA_HELPER_BY_NAME, MHA_NAMES_IN_A_TUPLE, MHA_NAMES_ON_SELF]
# the helper called through the class with `self` (`MultiHeadAttention._heads(self, …)`): still the instance, once
# the static check stopped trusting `self` in a method called unbound
MHA_HELPER_THROUGH_CLASS = MHA_HELPER_BY_NAME.replace("self._heads(x, name)", "MultiHeadAttention._heads(self, x, name)")
assert MHA_HELPER_THROUGH_CLASS != MHA_HELPER_BY_NAME
VARIANTS["mha"]["correct"] += [MHA_HELPER_THROUGH_CLASS]
# red team round 9 (FP4): the per-projection helper nested in forward, reading the method's `self` (0/17)
MHA_NESTED_HELPER = MHA.replace(_QKV, """        def heads(proj):
            return getattr(self, proj)(x).view(B, T, h, d_k).transpose(1, 2)

        q, k, v = heads("W_q"), heads("W_k"), heads("W_v")
""")
assert MHA_NESTED_HELPER != MHA
VARIANTS["mha"]["correct"] += [MHA_NESTED_HELPER]
# red team round 10: the helper method named `heads`, like the release's own helper in mha_selfcheck's cell (a name
# read anywhere once made the method "loose": 0/17)
MHA_HELPER_NAMED_HEADS = MHA_HELPER_BY_NAME.replace("self._heads(", "self.heads(").replace("def _heads(", "def heads(")
assert MHA_HELPER_NAMED_HEADS != MHA_HELPER_BY_NAME
VARIANTS["mha"]["correct"] += [MHA_HELPER_NAMED_HEADS]
# red team round 10: the helper method handed on bound to the instance (`map(self._heads, …)`, a list of bound
# methods): once every method read without a call was "loose" (0/17)
MHA_BOUND_HELPER_MAPPED = MHA_HELPER_BY_NAME.replace(
    '(self._heads(x, name) for name in ("W_q", "W_k", "W_v"))',
    'map(functools.partial(self._heads, x), ("W_q", "W_k", "W_v"))').replace(
    "class MultiHeadAttention", "import functools\n\n\nclass MultiHeadAttention", 1)
MHA_BOUND_HELPER_LISTED = MHA_HELPER_BY_NAME.replace(
    '(self._heads(x, name) for name in ("W_q", "W_k", "W_v"))',
    '[h(x, name) for h in [self._heads] for name in ("W_q", "W_k", "W_v")]')
assert len({MHA_HELPER_BY_NAME, MHA_BOUND_HELPER_MAPPED, MHA_BOUND_HELPER_LISTED}) == 3
VARIANTS["mha"]["correct"] += [MHA_BOUND_HELPER_MAPPED, MHA_BOUND_HELPER_LISTED]

# red team round 11 (FP1-FP4): the h = 1 head's projections picked by a name built from constants (`.format`, a local
# name, a tuple indexed, a dict looked up): 0/17 for the whole notebook once
_ONE_HEAD = "        q, k, v = one.W_q(x), one.W_k(x), one.W_v(x)"
assert _ONE_HEAD in VARIANTS["mha_selfcheck"]["solution"]
VARIANTS["mha_selfcheck"]["correct"] += [VARIANTS["mha_selfcheck"]["solution"].replace(_ONE_HEAD, line) for line in (
    '        q, k, v = (getattr(one, "W_{}".format(c))(x) for c in "qkv")',
    '        parts = []\n        for c in "qkv":\n            attr = "W_" + c\n            parts.append(getattr(one, attr)(x))\n'
    '        q, k, v = parts',
    '        NAMES = ("W_q", "W_k", "W_v")\n        q, k, v = [getattr(one, NAMES[i])(x) for i in range(3)]',
    '        SLOT = {"q": "W_q", "k": "W_k", "v": "W_v"}\n        q, k, v = (getattr(one, SLOT[c])(x) for c in "qkv")')]

# red team round 12 (FP): a module-level helper `_heads(m, x, proj)` fed names from a class attribute read on `self`,
# `map(str, …)`, a name re-bound to itself, a comprehension: each 0/17 for the whole notebook once
_MODULE_HELPER = '''def _heads(m, x, proj):
    B, T, d = x.shape
    return getattr(m, proj)(x).view(B, T, m.n_heads, d // m.n_heads).transpose(1, 2)


'''
_BY_HELPER = "        q, k, v = (_heads(self, x, name) for name in {})\n"
MHA_CLASS_ATTRIBUTE_NAMES = _MODULE_HELPER + MHA.replace(_QKV, _BY_HELPER.format("self.PROJ")).replace(
    "class MultiHeadAttention(nn.Module):\n", 'class MultiHeadAttention(nn.Module):\n    PROJ = ("W_q", "W_k", "W_v")\n\n')
MHA_NAMES_MAPPED_TO_STR = _MODULE_HELPER + MHA.replace(_QKV, _BY_HELPER.format('map(str, ("W_q", "W_k", "W_v"))'))
MHA_NAMES_REEXPORTED = 'PROJ = ("W_q", "W_k", "W_v")\nPROJ = PROJ  # re-export\n' + _MODULE_HELPER + MHA.replace(
    _QKV, _BY_HELPER.format("PROJ"))
MHA_NAMES_BUILT = _MODULE_HELPER + MHA.replace(_QKV, _BY_HELPER.format('[f"W_{c}" for c in "qkv"]'))
assert len({MHA, MHA_CLASS_ATTRIBUTE_NAMES, MHA_NAMES_MAPPED_TO_STR, MHA_NAMES_REEXPORTED, MHA_NAMES_BUILT}) == 5
assert "class MultiHeadAttention(nn.Module):\n    PROJ" in MHA_CLASS_ATTRIBUTE_NAMES
VARIANTS["mha"]["correct"] += [MHA_CLASS_ATTRIBUTE_NAMES, MHA_NAMES_MAPPED_TO_STR, MHA_NAMES_REEXPORTED, MHA_NAMES_BUILT]

# red team round 13 (P1-P3): the h = 1 head's projections by a lambda mapped over the names, by zip(strict=True); an
# optional import under contextlib.suppress: each 0/17 for the whole notebook once
VARIANTS["mha_selfcheck"]["correct"] += [VARIANTS["mha_selfcheck"]["solution"].replace(_ONE_HEAD, line) for line in (
    '        q, k, v = map(lambda n: getattr(one, n)(x), ("W_q", "W_k", "W_v"))',
    '        q, k, v = (getattr(one, n)(x) for c, n in zip("qkv", ("W_q", "W_k", "W_v"), strict=True))')]
VARIANTS["split_merge_heads"]["correct"] += [
    "import contextlib\n\nwith contextlib.suppress(ImportError):\n    import einops  # optional: not used below\n\n"
    + VARIANTS["split_merge_heads"]["solution"]]

# red team round 14 (FP4, FP1): the softmax named by a class constant (`getattr(torch, self.normalizer)`), an optional
# import behind a find_spec flag (0/17 for the whole notebook once)
assert "        att = att.softmax(dim=-1)\n" in MHA
VARIANTS["mha"]["correct"] += [MHA.replace("        att = att.softmax(dim=-1)\n",
                                           "        att = getattr(torch, self.normalizer)(att, dim=-1)\n").replace(
    "class MultiHeadAttention(nn.Module):\n", 'class MultiHeadAttention(nn.Module):\n    normalizer = "softmax"\n\n')]
VARIANTS["split_merge_heads"]["correct"] += [
    'import importlib.util\n\nHAVE_EINOPS = importlib.util.find_spec("einops") is not None\nif HAVE_EINOPS:\n'
    "    import einops  # optional: not used below\n\n" + VARIANTS["split_merge_heads"]["solution"]]

# red team round 15 (F3): the softmax named by an instance attribute set to a constant in __init__ (0/17 once)
VARIANTS["mha"]["correct"] += [MHA.replace("        att = att.softmax(dim=-1)\n",
                                           "        att = getattr(torch, self.normalizer)(att, dim=-1)\n").replace(
    "        self.n_heads = n_heads\n", '        self.n_heads = n_heads\n        self.normalizer = "softmax"\n')]
