"""Variants of notebook 03's answers (§3 masks)."""
from tests.variants import decorated, with_solutions

CAUSAL = '''
import torch
def causal_mask(T):
    return torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
'''

PADDING = '''
import torch
def padding_mask(lengths, T, side="right"):
    lengths = torch.as_tensor(lengths)
    pos = torch.arange(T)
    if side == "right":
        return pos[None, :] >= lengths[:, None]
    return pos[None, :] < (T - lengths)[:, None]
'''

ATTENTION_MASK = '''
import torch
def attention_mask(key_padding, causal=True):
    B, T = key_padding.shape
    m = key_padding[:, None, None, :]
    if causal:
        m = m | torch.triu(torch.ones(T, T, dtype=torch.bool, device=key_padding.device), diagonal=1)
    return m.expand(B, 1, T, T)
'''

MASKED_SOFTMAX = '''
import torch
def masked_softmax(scores, mask):
    filled = scores.masked_fill(mask, torch.finfo(scores.dtype).min)
    return torch.softmax(filled, dim=-1).masked_fill(mask, 0.0)
'''

LEFTPAD = '''
import math
import torch
def safe_causal_attention(q, k, v, key_padding):
    T = q.shape[-2]
    causal = torch.triu(torch.ones(T, T, dtype=torch.bool, device=q.device), diagonal=1)
    mask = key_padding[:, None, :] | causal
    mask = mask & ~torch.eye(T, dtype=torch.bool, device=q.device)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v
'''

_LP_HEAD = '''
import math
import torch
def _mask(key_padding, T):
    causal = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    return key_padding[:, None, :] | causal
'''

VARIANTS = with_solutions({
    "causal_mask": {
        "correct": [
            '''
import torch
def causal_mask(T):
    i = torch.arange(T)
    return i[None, :] > i[:, None]
''',
            '''
import torch
def causal_mask(T):
    return ~torch.tril(torch.ones(T, T)).bool()
''',
            '''
import numpy as np, torch
def causal_mask(T):
    return torch.from_numpy(np.triu(np.ones((T, T), dtype=bool), k=1))
''',
        ],
        "buggy": [
            (CAUSAL.replace("diagonal=1", "diagonal=0"), "diagonal=1"),
            ('''
import torch
def causal_mask(T):
    return torch.tril(torch.ones(T, T, dtype=torch.bool))
''', "约定反了"),
            ('''
import torch
def causal_mask(T):
    return torch.triu(torch.ones(T, T), diagonal=1)
''', "dtype"),
            ('''
import torch
def causal_mask(T):
    i = torch.arange(T)
    return i[None, :] < i[:, None]
''', "方向反了"),
            ('''
import numpy as np
def causal_mask(T):
    return np.triu(np.ones((T, T), dtype=bool), k=1)
''', "torch.Tensor"),
        ],
    },
    "padding_mask": {
        "correct": [
            '''
import torch
def padding_mask(lengths, T, side="right"):
    rows = []
    for n in [int(x) for x in lengths]:
        row = torch.zeros(T, dtype=torch.bool)
        if side == "right":
            row[n:] = True
        else:
            row[:T - n] = True
        rows.append(row)
    return torch.stack(rows)
''',
            '''
import torch
def padding_mask(lengths, T, side="right"):
    lengths = torch.tensor(lengths) if isinstance(lengths, list) else lengths.clone()
    m = torch.arange(T).expand(len(lengths), T) >= lengths.unsqueeze(1)
    return m.flip(-1) if side == "left" else m
''',
        ],
        "buggy": [
            (PADDING.replace('if side == "right"', 'if side == "left"'), "左右弄反"),
            ('''
import torch
def padding_mask(lengths, T, side="right"):
    lengths = torch.as_tensor(lengths)
    return torch.arange(T)[None, :] >= lengths[:, None]
''', "没有处理 side='left'"),
            (PADDING.replace(">= lengths", "< lengths").replace("< (T - lengths)", ">= (T - lengths)"), "约定反了"),
            (PADDING.replace(">= lengths", "> lengths").replace("< (T - lengths)", "<= (T - lengths)"), "差一"),
            (PADDING.replace('side="right"', 'side="left"'), "默认值"),
        ],
    },
    "attention_mask": {
        "correct": [
            '''
import torch
def attention_mask(key_padding, causal=True):
    B, T = key_padding.shape
    i = torch.arange(T)
    future = (i[None, :] > i[:, None]) if causal else torch.zeros(T, T, dtype=torch.bool)
    return torch.logical_or(key_padding.view(B, 1, 1, T), future.view(1, 1, T, T))
''',
            '''
import torch
def attention_mask(key_padding, causal=True):
    B, T = key_padding.shape
    out = torch.zeros(B, 1, T, T, dtype=torch.bool)
    for b in range(B):
        for i in range(T):
            for j in range(T):
                out[b, 0, i, j] = bool(key_padding[b, j]) or (causal and j > i)
    return out
''',
        ],
        "buggy": [
            (ATTENTION_MASK.replace("m = m | torch", "m = m & torch"), "逻辑与"),
            (ATTENTION_MASK.replace("key_padding[:, None, None, :]", "key_padding[:, None, :, None]"), "query 那一维"),
            (ATTENTION_MASK.replace("diagonal=1", "diagonal=0"), "diagonal=1"),
            (ATTENTION_MASK.replace("    return m.expand(B, 1, T, T)", "    return ~m.expand(B, 1, T, T)"), "约定反了"),
            (ATTENTION_MASK.replace("causal=True", "causal=False"), "默认值应为 True"),
            (ATTENTION_MASK.replace("m = key_padding[:, None, None, :]",
                                    "m = key_padding[:, None, None, :] | key_padding[:, None, :, None]"),
             "query 那一维也屏蔽了"),
        ],
    },
    "masked_softmax": {
        "correct": [
            # -inf, then zero the fully blocked rows explicitly (torch.where keeps grads finite)
            '''
import torch
def masked_softmax(scores, mask):
    mask = torch.broadcast_to(mask, scores.shape)
    p = torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)
    empty = mask.all(dim=-1, keepdim=True)
    return torch.where(empty, torch.zeros_like(p), p)
''',
            # -1e9 replaced (not added): fully blocked rows come out uniform
            '''
import torch
def masked_softmax(scores, mask):
    return torch.softmax(torch.where(mask, torch.tensor(-1e9, dtype=scores.dtype), scores), dim=-1)
''',
            # by hand: stable exp, multiply by the keep mask, safe division
            '''
import torch
def masked_softmax(scores, mask):
    keep = (~mask).to(scores.dtype)
    z = scores.masked_fill(mask, torch.finfo(scores.dtype).min)
    e = torch.exp(z - z.amax(dim=-1, keepdim=True)) * keep
    return e / e.sum(dim=-1, keepdim=True).clamp_min(torch.finfo(scores.dtype).tiny)
''',
            # -inf by masked_fill, NaN rows wiped afterwards: masked_fill's backward zeroes the blocked
            # entries, so the NaN of a fully blocked row never reaches the scores' gradient (03 shows it)
            '''
import torch
def masked_softmax(scores, mask):
    return torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1).nan_to_num(0.0)
''',
            # additive finfo.min mask: fully blocked rows uniform, grads finite
            '''
import torch
def masked_softmax(scores, mask):
    add = torch.zeros(mask.shape, dtype=scores.dtype).masked_fill(mask, torch.finfo(scores.dtype).min)
    return torch.softmax(scores + add, dim=-1)
''',
        ],
        "buggy": [
            ('''
import torch
def masked_softmax(scores, mask):
    return torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)
''', "0/0 = NaN"),
            ('''
import torch
def masked_softmax(scores, mask):
    return torch.softmax(scores, dim=-1).masked_fill(mask, 0.0)
''', "在 softmax 之后才屏蔽"),
            (MASKED_SOFTMAX.replace("masked_fill(mask,", "masked_fill(~mask,"), "约定反了"),
            ('''
import torch
def masked_softmax(scores, mask):
    add = torch.zeros(mask.shape, dtype=scores.dtype).masked_fill(mask, float("-inf"))
    return torch.softmax(scores + add, dim=-1).nan_to_num(0.0)
''', "梯度里有 NaN"),
            ('''
import torch
def masked_softmax(scores, mask):
    return torch.softmax(scores + mask * -1e9, dim=-1)
''', "既不是全 0 也不是均匀"),
            ('''
import torch
def masked_softmax(scores, mask):
    return torch.softmax(scores.masked_fill(mask, -100.0), dim=-1)
''', "不是恰好 0"),
            (MASKED_SOFTMAX.replace("torch.finfo(scores.dtype).min", "torch.finfo(torch.float64).min"), "finfo"),
            (MASKED_SOFTMAX.replace("dim=-1", "dim=-2"), "维度不对"),
            (MASKED_SOFTMAX.replace("filled = scores.masked_fill(", "filled = scores.masked_fill_("), "修改了输入"),
            (MASKED_SOFTMAX.replace("    filled =", "    scores = scores.double()\n    filled ="), "dtype"),
        ],
    },
    "leftpad_safe": {
        "correct": [
            # fix 1: finite fill finfo.min (pad rows uniform)
            _LP_HEAD + '''
def safe_causal_attention(q, k, v, key_padding):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(_mask(key_padding, q.shape[-2]), torch.finfo(q.dtype).min)
    return torch.softmax(scores, dim=-1) @ v
''',
            # -inf, but fully blocked rows zeroed with torch.where before the softmax sees them
            _LP_HEAD + '''
def safe_causal_attention(q, k, v, key_padding):
    mask = _mask(key_padding, q.shape[-2])
    empty = mask.all(-1, keepdim=True)
    mask = mask & ~empty
    s = torch.einsum("btd,bsd->bts", q, k) / q.shape[-1] ** 0.5
    a = torch.softmax(s.masked_fill(mask, float("-inf")), dim=-1)
    a = torch.where(empty, torch.zeros_like(a), a)
    return torch.einsum("bts,bsd->btd", a, v)
''',
            # SDPA with the allowed-mask convention and the diagonal opened
            '''
import torch
import torch.nn.functional as F
def safe_causal_attention(q, k, v, key_padding):
    T = q.shape[-2]
    allowed = torch.tril(torch.ones(T, T, dtype=torch.bool)) & ~key_padding[:, None, :]
    allowed = allowed | torch.eye(T, dtype=torch.bool)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
''',
        ],
        "buggy": [
            (_LP_HEAD + '''
def safe_causal_attention(q, k, v, key_padding):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(_mask(key_padding, q.shape[-2]), float("-inf"))
    return torch.softmax(scores, dim=-1) @ v
''', "0/0 = NaN"),
            (_LP_HEAD + '''
def safe_causal_attention(q, k, v, key_padding):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(_mask(key_padding, q.shape[-2]), float("-inf"))
    return (torch.softmax(scores, dim=-1) @ v).nan_to_num(0.0)
''', "NaN × 0 = NaN"),
            (LEFTPAD.replace("key_padding[:, None, :] | causal", "key_padding[:, :, None] | causal"), "pad key"),
            (LEFTPAD.replace("key_padding[:, None, :] | causal", "key_padding[:, None, :] & causal"), "逻辑与"),
            (_LP_HEAD + '''
def safe_causal_attention(q, k, v, key_padding):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    a = torch.softmax(scores, dim=-1).masked_fill(_mask(key_padding, q.shape[-2]), 0.0)
    return a @ v
''', "在 softmax 之后才屏蔽"),
            (LEFTPAD.replace("mask = mask & ~torch.eye(T, dtype=torch.bool, device=q.device)", "mask[..., 0] = False"),
             "第 0 列"),
            (LEFTPAD.replace("    T = q.shape[-2]\n", "    T = q.shape[-2]\n    v.masked_fill_(key_padding[..., None], 0.0)\n"),
             "修改了输入"),
        ],
    },
})

# an lru_cache'd mask builder and a decorated answer: correct styles (issue 11)
VARIANTS["causal_mask"]["correct"] += [decorated(CAUSAL, "causal_mask", "@functools.lru_cache(maxsize=None)")]
VARIANTS["masked_softmax"]["correct"] += [decorated(MASKED_SOFTMAX, "masked_softmax")]

# issue 21 §3: bugs the prompts warn about, which the PUBLIC checks name
VARIANTS["causal_mask"]["warned"] = ["diagonal=1", "dtype"]
VARIANTS["padding_mask"]["warned"] = ["左右弄反", "没有处理 side='left'"]
VARIANTS["attention_mask"]["warned"] = ["query 那一维也屏蔽了", "query 那一维"]
VARIANTS["masked_softmax"]["warned"] = ["0/0 = NaN", "梯度里有 NaN", "不是恰好 0", "修改了输入", "dtype"]
VARIANTS["leftpad_safe"]["warned"] = ["0/0 = NaN", "NaN × 0 = NaN", "修改了输入"]
