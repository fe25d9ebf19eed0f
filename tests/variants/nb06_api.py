"""Variants of notebook 06's answers (§A API)."""
from pathlib import Path

import nbformat

from tests.variants import decorated, with_solutions


def _course_mha_class():
    """The course-provided MultiHeadAttention of notebook 06 (its locked demo cell): to_torch_mha needs it."""
    nb = nbformat.read(Path(__file__).resolve().parents[2] / "solutions" / "w1d1" / "06_api.ipynb", as_version=4)
    cell = next(c for c in nb.cells if c.cell_type == "code" and "class MultiHeadAttention" in c.source)
    return "import math\n" + cell.source + "\n"


MHA_CLASS = _course_mha_class()

SDPA = '''
import torch
import torch.nn.functional as F

def sdpa_attention(q, k, v, mask=None, is_causal=False, dropout_p=0.0, training=False):
    p = dropout_p if training else 0.0
    if mask is None:
        return F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=is_causal)
    allowed = ~mask
    if is_causal:
        L, S = q.shape[-2], k.shape[-2]
        allowed = allowed & torch.ones(L, S, dtype=torch.bool, device=q.device).tril()
    return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, dropout_p=p)
'''

DECODE = '''
import torch.nn.functional as F

def decode_step(q_new, k_cache, v_cache):
    return F.scaled_dot_product_attention(q_new, k_cache, v_cache, is_causal=False)
'''

TO_TORCH = MHA_CLASS + '''
def to_torch_mha(mha):
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
'''

FORWARD = '''
import torch

def torch_mha_forward(torch_mha, x, key_padding=None, causal=False):
    T = x.shape[1]
    attn_mask = None
    if causal:
        attn_mask = torch.triu(torch.ones(T, T, dtype=torch.bool, device=x.device), diagonal=1)
    y, _ = torch_mha(x, x, x, key_padding_mask=key_padding, attn_mask=attn_mask, need_weights=False)
    return y
'''

VARIANTS = with_solutions({
    "sdpa_attention": {
        "correct": [
            # additive float mask (0 / -inf), SDPA imported by name
            '''
import torch
from torch.nn.functional import scaled_dot_product_attention

def sdpa_attention(q, k, v, mask=None, is_causal=False, dropout_p=0.0, training=False):
    L, S = q.shape[-2], k.shape[-2]
    blocked = torch.zeros(L, S, dtype=torch.bool, device=q.device)
    if mask is not None:
        blocked = blocked | mask
    if is_causal:
        blocked = blocked | torch.triu(torch.ones(L, S, dtype=torch.bool, device=q.device), diagonal=1)
    bias = torch.zeros(blocked.shape, dtype=q.dtype, device=q.device).masked_fill(blocked, float("-inf"))
    return scaled_dot_product_attention(q, k, v, attn_mask=bias, dropout_p=dropout_p if training else 0.0)
''',
            # full module path, logical_not, is_causal kept when there is no mask
            '''
import torch

def sdpa_attention(q, k, v, mask=None, is_causal=False, dropout_p=0.0, training=False):
    kwargs = {"dropout_p": float(dropout_p) * float(bool(training))}
    if mask is not None and is_causal:
        causal = torch.ones(q.size(-2), k.size(-2), dtype=torch.bool).triu(1)
        kwargs["attn_mask"] = torch.logical_not(torch.logical_or(mask, causal))
    elif mask is not None:
        kwargs["attn_mask"] = torch.logical_not(mask)
    else:
        kwargs["is_causal"] = is_causal
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, **kwargs)
''',
        ],
        "buggy": [
            (SDPA.replace("allowed = ~mask", "allowed = mask"), "取反"),
            (SDPA.replace("allowed = ~mask", "allowed = mask.clone()").replace(
                "allowed & torch.ones(L, S, dtype=torch.bool, device=q.device).tril()",
                "allowed | torch.ones(L, S, dtype=torch.bool, device=q.device).triu(1)"), "取反"),
            ('''
import torch.nn.functional as F

def sdpa_attention(q, k, v, mask=None, is_causal=False, dropout_p=0.0, training=False):
    p = dropout_p if training else 0.0
    return F.scaled_dot_product_attention(q, k, v, attn_mask=None if mask is None else ~mask,
                                          dropout_p=p, is_causal=is_causal)
''', "不能同时"),
            (SDPA.replace("p = dropout_p if training else 0.0", "p = dropout_p"), "training=False 时仍把 dropout_p"),
            (SDPA.replace("p = dropout_p if training else 0.0", "p = 0.0"), "完全一样"),
            (SDPA.replace("    if is_causal:\n        L, S", "    if False:\n        L, S"), "只用了 mask"),
            (SDPA.replace("allowed = ~mask", "allowed = (~mask).to(q.dtype)").replace(
                "allowed = allowed & torch.ones(L, S, dtype=torch.bool, device=q.device).tril()",
                "allowed = allowed.masked_fill(torch.ones(L, S, dtype=torch.bool).triu(1), float('-inf'))"),
             "0/1 的浮点数"),
            (SDPA.replace(".tril()", ".tril(diagonal=-1)"), "对角线"),
            ('''
import math
import torch

def sdpa_attention(q, k, v, mask=None, is_causal=False, dropout_p=0.0, training=False):
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        s = s.masked_fill(mask, float("-inf"))
    if is_causal:
        T = q.shape[-2]
        s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    a = torch.softmax(s, dim=-1)
    if training and dropout_p > 0:
        a = torch.nn.functional.dropout(a, dropout_p)
    return a @ v
''', "没有调用"),
            (SDPA.replace("allowed = ~mask", "allowed = mask.logical_not_()"), "原地修改"),
        ],
    },
    "decode_step": {
        "correct": [
            '''
import math
import torch
from torch.nn.functional import scaled_dot_product_attention as sdpa

def decode_step(q_new, k_cache, v_cache):
    S = k_cache.shape[-2]
    allowed = torch.ones(1, S, dtype=torch.bool, device=q_new.device)   # 新 token 能看全部
    return sdpa(q_new, k_cache, v_cache, attn_mask=allowed, scale=1 / math.sqrt(q_new.shape[-1]))
''',
            '''
import torch

def decode_step(q_new, k_cache, v_cache):
    zeros = torch.zeros(q_new.shape[-2], k_cache.shape[-2], dtype=q_new.dtype)
    out = torch.nn.functional.scaled_dot_product_attention(q_new, k_cache, v_cache, attn_mask=zeros)
    return out.reshape(q_new.shape[:-1] + (v_cache.shape[-1],))
''',
        ],
        "buggy": [
            (DECODE.replace("is_causal=False", "is_causal=True"), "is_causal=True"),
            (DECODE.replace("k_cache, v_cache, is_causal", "k_cache[..., :-1, :], v_cache[..., :-1, :], is_causal"),
             "少看了最后一个"),
            ('''
import math
import torch

def decode_step(q_new, k_cache, v_cache):
    a = torch.softmax(q_new @ k_cache.transpose(-2, -1) / math.sqrt(q_new.shape[-1]), dim=-1)
    return a @ v_cache
''', "没有调用"),
            (DECODE.replace("return F.scaled_dot_product_attention(q_new, k_cache, v_cache, is_causal=False)",
                            "return F.scaled_dot_product_attention(q_new, k_cache, v_cache).squeeze(-2)"), "squeeze"),
            ('''
import torch
import torch.nn.functional as F

def decode_step(q_new, k_cache, v_cache):
    S = k_cache.shape[-2]
    allowed = torch.ones(1, S, dtype=torch.bool).tril()
    return F.scaled_dot_product_attention(q_new, k_cache, v_cache, attn_mask=allowed)
''', "第一个 key"),
        ],
    },
    "to_torch_mha": {
        "correct": [
            # load_state_dict with the packed layout
            MHA_CLASS + '''
def to_torch_mha(mha):
    bias = mha.W_q.bias is not None
    t = nn.MultiheadAttention(mha.d_model, mha.n_heads, bias=bias, batch_first=True)
    t = t.to(mha.W_q.weight.dtype)
    sd = {"in_proj_weight": torch.cat([mha.W_q.weight, mha.W_k.weight, mha.W_v.weight]),
          "out_proj.weight": mha.W_o.weight}
    if bias:
        sd["in_proj_bias"] = torch.cat([mha.W_q.bias, mha.W_k.bias, mha.W_v.bias])
        sd["out_proj.bias"] = mha.W_o.bias
    t.load_state_dict({k: v.detach().clone() for k, v in sd.items()})
    return t
''',
            # slice by slice, always with bias (zero bias when the source has none)
            MHA_CLASS + '''
def to_torch_mha(mha):
    d = mha.d_model
    t = nn.MultiheadAttention(embed_dim=d, num_heads=mha.n_heads, batch_first=True)
    with torch.no_grad():
        for i, lin in enumerate((mha.W_q, mha.W_k, mha.W_v)):
            t.in_proj_weight[i * d:(i + 1) * d] = lin.weight
            t.in_proj_bias[i * d:(i + 1) * d] = 0.0 if lin.bias is None else lin.bias
        t.out_proj.weight[:] = mha.W_o.weight
        t.out_proj.bias[:] = 0.0 if mha.W_o.bias is None else mha.W_o.bias
    return t
''',
        ],
        "buggy": [
            (TO_TORCH.replace("batch_first=True,", ""), "batch_first"),
            (TO_TORCH.replace("[mha.W_q.weight, mha.W_k.weight, mha.W_v.weight]",
                              "[mha.W_k.weight, mha.W_q.weight, mha.W_v.weight]"), "布局"),
            (TO_TORCH.replace("[mha.W_q.weight, mha.W_k.weight, mha.W_v.weight]",
                              "[mha.W_q.weight.T, mha.W_k.weight.T, mha.W_v.weight.T]"), "转置"),
            (TO_TORCH.replace("        if has_bias:\n            t.in_proj_bias", "        if False:\n            t.in_proj_bias"),
             "偏置没有搬"),
            (TO_TORCH.replace("        t.out_proj.weight.copy_(mha.W_o.weight)\n", ""), "out_proj"),
            (TO_TORCH.replace("nn.MultiheadAttention(mha.d_model, mha.n_heads,", "nn.MultiheadAttention(mha.d_model, 1,"),
             "头数"),
        ],
    },
    "torch_mha_forward": {
        "correct": [
            # one merged bool mask of shape (B·h, T, T)
            '''
import torch

def torch_mha_forward(torch_mha, x, key_padding=None, causal=False):
    B, T, _ = x.shape
    h = torch_mha.num_heads
    blocked = torch.zeros(B, T, T, dtype=torch.bool)
    if key_padding is not None:
        blocked = blocked | key_padding[:, None, :]
    if causal:
        blocked = blocked | torch.ones(T, T, dtype=torch.bool).triu(1)
    blocked = blocked.repeat_interleave(h, dim=0)          # (B·h, T, T)，batch 在前、头在后
    return torch_mha(x, x, x, attn_mask=blocked, need_weights=False)[0]
''',
            # float masks everywhere, is_causal as the hint
            '''
import torch
from torch import nn

def torch_mha_forward(torch_mha, x, key_padding=None, causal=False):
    T = x.shape[1]
    kw = {"need_weights": False}
    if key_padding is not None:
        kw["key_padding_mask"] = torch.zeros(key_padding.shape, dtype=x.dtype).masked_fill(key_padding, float("-inf"))
    if causal:
        kw["attn_mask"] = nn.Transformer.generate_square_subsequent_mask(T, dtype=x.dtype)
        kw["is_causal"] = True
    out, weights = torch_mha(x, x, x, **kw)
    assert weights is None
    return out
''',
        ],
        "buggy": [
            (FORWARD.replace("key_padding_mask=key_padding,", "key_padding_mask=None if key_padding is None else ~key_padding,"),
             "约定弄反"),
            (FORWARD.replace(", need_weights=False)", ")"), "need_weights"),
            (FORWARD.replace("    y, _ = torch_mha(", "    y = torch_mha(").replace(", need_weights=False)", ")"),
             "只返回 y"),
            ('''
def torch_mha_forward(torch_mha, x, key_padding=None, causal=False):
    y, _ = torch_mha(x, x, x, key_padding_mask=key_padding, is_causal=causal, need_weights=False)
    return y
''', "只是提示"),
            (FORWARD.replace("torch.triu(torch.ones(T, T, dtype=torch.bool, device=x.device), diagonal=1)",
                             "torch.tril(torch.ones(T, T, dtype=torch.bool, device=x.device))"), "SDPA 的约定"),
            (FORWARD.replace("    if causal:\n        attn_mask", "    if False:\n        attn_mask"), "没有加因果掩码"),
        ],
    },
})

# -------- issue 36 §3: star imports (torch, torch.nn.functional, numpy) in the answer cell
VARIANTS["sdpa_attention"]["correct"] += ['''
from torch import *
from torch.nn.functional import *


def sdpa_attention(q, k, v, mask=None, is_causal=False, dropout_p=0.0, training=False):
    p = dropout_p if training else 0.0
    if mask is None:
        return scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=is_causal)
    allowed = ~mask
    if is_causal:
        allowed = allowed & ones(q.shape[-2], k.shape[-2], dtype=bool, device=q.device).tril()
    return scaled_dot_product_attention(q, k, v, attn_mask=allowed, dropout_p=p)
''']
VARIANTS["decode_step"]["correct"] += ['''
from numpy import *
from torch.nn.functional import *


def decode_step(q_new, k_cache, v_cache):
    return scaled_dot_product_attention(q_new, k_cache, v_cache)
''']

# decorated answers: correct styles (issue 11)
VARIANTS["sdpa_attention"]["correct"] += [decorated(SDPA, "sdpa_attention")]
VARIANTS["to_torch_mha"]["correct"] += [decorated(TO_TORCH, "to_torch_mha", "@torch.no_grad()")]

# SDPA reached through functools.partial or a default argument: correct styles (red-team finding B8)
VARIANTS["sdpa_attention"]["correct"] += ['''
import functools
import torch
import torch.nn.functional as F

_attend = functools.partial(F.scaled_dot_product_attention, scale=None)


def sdpa_attention(q, k, v, mask=None, is_causal=False, dropout_p=0.0, training=False):
    p = dropout_p if training else 0.0
    if mask is None:
        return _attend(q, k, v, dropout_p=p, is_causal=is_causal)
    allowed = ~mask
    if is_causal:
        allowed = allowed & torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril()
    return _attend(q, k, v, attn_mask=allowed, dropout_p=p)
''']
VARIANTS["decode_step"]["correct"] += ['''
import torch.nn.functional as F


def decode_step(q_new, k_cache, v_cache, attend=F.scaled_dot_product_attention):
    return attend(q_new, k_cache, v_cache)
''']

# issue 21 §3: bugs the prompts warn about, which the PUBLIC checks name (a training=True case for dropout)
VARIANTS["sdpa_attention"]["warned"] = ["取反", "不能同时", "只用了 mask", "training=False 时仍把 dropout_p", "完全一样",
                                        "原地修改", "没有调用"]
VARIANTS["decode_step"]["warned"] = ["is_causal=True"]
VARIANTS["to_torch_mha"]["warned"] = ["batch_first", "偏置没有搬", "头数"]
VARIANTS["torch_mha_forward"]["warned"] = ["need_weights", "只是提示", "约定弄反"]

# red team round 9 (FP1-FP3, FP5): projections picked by name from a module-level tuple, in a comprehension over
# constant names reused later for another loop, through a helper every call of which passes a constant, and with
# enumerate (0/13 on both paths: `getattr(<unknown object>, <computed name>)`)
_FP_HEAD = MHA_CLASS + """import torch
from torch import nn


def to_torch_mha(mha):
    W = mha.W_q.weight
    d = mha.d_model
    has_bias = mha.W_q.bias is not None
    t = nn.MultiheadAttention(mha.d_model, mha.n_heads, bias=has_bias, batch_first=True, device=W.device, dtype=W.dtype)
    with torch.no_grad():
"""
_FP_TAIL = """        t.out_proj.weight.copy_(mha.W_o.weight)
        if has_bias:
            t.out_proj.bias.copy_(mha.W_o.bias)
    return t
"""
VARIANTS["to_torch_mha"]["correct"] += [
    'PROJ = ("W_q", "W_k", "W_v")\n' + _FP_HEAD + """        t.in_proj_weight.copy_(torch.cat([getattr(mha, p).weight for p in PROJ]))
        if has_bias:
            t.in_proj_bias.copy_(torch.cat([getattr(mha, p).bias for p in PROJ]))
""" + _FP_TAIL,
    _FP_HEAD + """        t.in_proj_weight.copy_(torch.cat([getattr(mha, name).weight for name in ("W_q", "W_k", "W_v")]))
        if has_bias:
            t.in_proj_bias.copy_(torch.cat([getattr(mha, name).bias for name in ("W_q", "W_k", "W_v")]))
""" + _FP_TAIL.replace("    return t\n", "    for name, p in t.named_parameters():\n        p.requires_grad_(bool(name))\n    return t\n"),
    'def _stacked(mha, what):\n    return torch.cat([getattr(mha.W_q, what), getattr(mha.W_k, what), getattr(mha.W_v, what)])\n\n\n'
    + _FP_HEAD + """        t.in_proj_weight.copy_(_stacked(mha, "weight"))
        if has_bias:
            t.in_proj_bias.copy_(_stacked(mha, "bias"))
""" + _FP_TAIL,
    _FP_HEAD + """        for i, name in enumerate(("W_q", "W_k", "W_v")):
            lin = getattr(mha, name)
            t.in_proj_weight[i * d:(i + 1) * d].copy_(lin.weight)
            if has_bias:
                t.in_proj_bias[i * d:(i + 1) * d].copy_(lin.bias)
""" + _FP_TAIL]


# red team round 10's correct styles (0/13 until the static check read names by scope): a helper called in a loop
# over constants, `.split()`, a dict's keys and items, a tuple unpacked in the function, reversed(), a slice, zip(),
# sorted() with a key


def _in_proj(loop):
    return _FP_HEAD + loop + _FP_TAIL


_SLOTS = """            t.in_proj_weight[i * d:(i + 1) * d].copy_(getattr(mha, name).weight)
            if has_bias:
                t.in_proj_bias[i * d:(i + 1) * d].copy_(getattr(mha, name).bias)
"""
VARIANTS["to_torch_mha"]["correct"] += [
    'def _lin(mha, name):\n    return getattr(mha, name)\n\n\n' + _in_proj(
        """        t.in_proj_weight.copy_(torch.cat([_lin(mha, p).weight for p in ("W_q", "W_k", "W_v")]))
        if has_bias:
            t.in_proj_bias.copy_(torch.cat([_lin(mha, p).bias for p in ("W_q", "W_k", "W_v")]))
"""),
    _in_proj("""        for i, name in enumerate("W_q W_k W_v".split()):\n""" + _SLOTS),
    'SLOT = {"W_q": 0, "W_k": 1, "W_v": 2}\n' + _in_proj("""        for name, i in SLOT.items():\n""" + _SLOTS),
    'SLOT = {"W_q": 0, "W_k": 1, "W_v": 2}\n' + _in_proj("""        for name in SLOT:\n            i = SLOT[name]\n""" + _SLOTS),
    _in_proj("""        q, k, v = "W_q", "W_k", "W_v"
        t.in_proj_weight.copy_(torch.cat([getattr(mha, q).weight, getattr(mha, k).weight, getattr(mha, v).weight]))
        if has_bias:
            t.in_proj_bias.copy_(torch.cat([getattr(mha, q).bias, getattr(mha, k).bias, getattr(mha, v).bias]))
"""),
    'PROJ = ("W_v", "W_k", "W_q")\n' + _in_proj("""        for i, name in enumerate(reversed(PROJ)):\n""" + _SLOTS),
    'PROJ = ("W_q", "W_k", "W_v", "W_o")\n' + _in_proj("""        for i, name in enumerate(PROJ[:3]):\n""" + _SLOTS),
    _in_proj("""        for i, name in zip(range(3), ("W_q", "W_k", "W_v")):\n""" + _SLOTS),
    _in_proj("""        for i, name in enumerate(sorted(("W_v", "W_q", "W_k"), key=lambda s: "qkv".index(s[-1]))):\n""" + _SLOTS),
]


# red team round 14 (FP2, FP3): names from a concatenated tuple of constants, from a parameter's default in a function
# only the grader calls (0/13 for the whole notebook once)
_SOLUTION = VARIANTS["to_torch_mha"]["solution"]
_CATS = "        t.in_proj_weight.copy_(torch.cat([mha.W_q.weight, mha.W_k.weight, mha.W_v.weight], dim=0))\n"
_COPIES = """    with torch.no_grad():
""" + _CATS + """        t.out_proj.weight.copy_(mha.W_o.weight)
        if has_bias:
            t.in_proj_bias.copy_(torch.cat([mha.W_q.bias, mha.W_k.bias, mha.W_v.bias], dim=0))
            t.out_proj.bias.copy_(mha.W_o.bias)
"""
assert _COPIES in _SOLUTION and "def to_torch_mha(mha):" in _SOLUTION
VARIANTS["to_torch_mha"]["correct"] += [
    _SOLUTION.replace(_COPIES, """    with torch.no_grad():
        for attr in ("weight",) + (("bias",) if has_bias else ()):
            joined = torch.cat([getattr(getattr(mha, n), attr) for n in ("W_q", "W_k", "W_v")], dim=0)
            getattr(t, "in_proj_" + attr).copy_(joined)
            getattr(t.out_proj, attr).copy_(getattr(mha.W_o, attr))
"""),
    _SOLUTION.replace("def to_torch_mha(mha):", 'def to_torch_mha(mha, names=("W_q", "W_k", "W_v")):').replace(
        _CATS, "        t.in_proj_weight.copy_(torch.cat([getattr(mha, n).weight for n in names], dim=0))\n")]
