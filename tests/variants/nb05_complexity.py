"""Variants of notebook 05's answers (§5 complexity)."""
from tests.variants import decorated, with_solutions

FLOPS = '''
def mha_flops(T, d):
    return 8 * T * d**2 + 4 * T**2 * d

def attention_flop_share(T, d):
    return 4 * T**2 * d / mha_flops(T, d)
'''

MEMORY = '''
def attn_matrix_bytes(B, h, T, bytes_per_element=2, n_layers=1):
    return B * h * T * T * bytes_per_element * n_layers
'''

GENERATION = '''
def generation_flops(T, d, kv_cache):
    total = 0
    for t in range(1, T + 1):
        if kv_cache:
            total += 8 * d**2 + 4 * t * d
        else:
            total += 8 * t * d**2 + 4 * t**2 * d
    return total
'''

VARIANTS = with_solutions({
    "flops": {
        "correct": [
            # step by step from the matmul shapes, 2mkn each
            '''
def _mm(m, k, n):
    return 2 * m * k * n

def mha_flops(T, d):
    proj = 3 * _mm(T, d, d) + _mm(T, d, d)
    attn = _mm(T, d, T) + _mm(T, T, d)
    return proj + attn

def attention_flop_share(T, d):
    return T / (T + 2 * d)
''',
            # per-head loop, numpy integer inside, int() outside
            '''
import numpy as np
def mha_flops(T, d, h=8):
    dk = d // h if d % h == 0 else d
    heads = h if d % h == 0 else 1
    per_head = 2 * T * dk * T + 2 * T * T * dk
    return int(np.int64(8) * T * d * d) + heads * per_head

def attention_flop_share(T, d):
    total = mha_flops(T, d)
    return float((total - 8 * T * d * d) / total)
''',
        ],
        "buggy": [
            (FLOPS.replace("8 * T * d**2 + 4 * T**2 * d", "4 * T * d**2 + 2 * T**2 * d"), "乘加算成了 1 次"),
            (FLOPS.replace("8 * T * d**2", "6 * T * d**2"), "漏了输出投影"),
            (FLOPS.replace("4 * T**2 * d / mha_flops(T, d)", "8 * T * d**2 / mha_flops(T, d)"), "投影项"),
            (FLOPS.replace("return 8 * T * d**2 + 4 * T**2 * d", "return 8.0 * T * d**2 + 4.0 * T**2 * d"), "int"),
            (FLOPS.replace("/ mha_flops(T, d)", "/ mha_flops(T, d) * 100"), "百分数"),
            # red team, issue 12: an int too large for a float used to crash the judge (notebook 0)
            (FLOPS.replace("4 * T**2 * d / mha_flops(T, d)", "10**400"), "`share` 的数值不对"),
        ],
    },
    "attn_memory": {
        "correct": [
            '''
import math
def attn_matrix_bytes(B, h, T, bytes_per_element=2, n_layers=1):
    n_elements = math.prod((B, h, T, T))
    return n_layers * n_elements * bytes_per_element
''',
            '''
import torch
def attn_matrix_bytes(B, h, T, bytes_per_element=2, n_layers=1):
    per_layer = B * h * T**2
    return int(per_layer) * int(bytes_per_element) * int(n_layers)
''',
        ],
        "buggy": [
            (MEMORY.replace(" * n_layers", ""), "n_layers"),
            (MEMORY.replace(" * bytes_per_element", ""), "字节数"),
            (MEMORY.replace("B * h * T * T", "B * h * T"), "T²"),
            (MEMORY.replace("* n_layers", "* n_layers / 2**30"), "GiB"),
            (MEMORY.replace("bytes_per_element * n_layers", "2 * n_layers"), "写死"),
        ],
    },
    "generation_flops": {
        "correct": [
            # closed form sums, integer arithmetic
            '''
def generation_flops(T, d, kv_cache):
    s1 = T * (T + 1) // 2
    s2 = T * (T + 1) * (2 * T + 1) // 6
    return 8 * d * d * T + 4 * d * s1 if kv_cache else 8 * d * d * s1 + 4 * d * s2
''',
            # reuse mha_flops for the uncached prefix recompute
            '''
def mha_flops(T, d):
    return 8 * T * d**2 + 4 * T**2 * d

def generation_flops(T, d, kv_cache):
    if not kv_cache:
        return sum(mha_flops(t, d) for t in range(1, T + 1))
    return sum(2 * d * d * 4 + 2 * t * d * 2 for t in range(1, T + 1))
''',
        ],
        "buggy": [
            (GENERATION.replace("range(1, T + 1)", "range(T)"), "从 0 开始"),
            (GENERATION.replace("range(1, T + 1)", "range(1, T)"), "最后一步"),
            (GENERATION.replace("if kv_cache:", "if not kv_cache:"), "弄反"),
            (GENERATION.replace("8 * d**2 + 4 * t * d", "8 * t * d**2 + 4 * t * d"), "投影不必重算"),
            ('''
import numpy as np
def generation_flops(T, d, kv_cache):
    t = np.arange(1, T + 1, dtype=np.int64)
    per_step = 8 * d**2 + 4 * t * d if kv_cache else 8 * t * d**2 + 4 * t**2 * d
    return int(per_step.sum())
''', "int64"),
            ('''
def generation_flops(T, d, kv_cache):
    s1 = T * (T + 1) / 2
    s2 = T * (T + 1) * (2 * T + 1) / 6
    return 8 * d * d * T + 4 * d * s1 if kv_cache else 8 * d * d * s1 + 4 * d * s2
''', "int"),
        ],
    },
})

# cached and decorated formulas: correct styles (issue 11)
VARIANTS["flops"]["correct"] += [decorated(FLOPS, "mha_flops", "@functools.lru_cache(maxsize=None)")]
VARIANTS["generation_flops"]["correct"] += [decorated(GENERATION, "generation_flops")]

# issue 21 §3: the bugs the prompts warn about fail the PUBLIC check (a count above 2^53, a sum above int64)
VARIANTS["flops"]["buggy"] += [
    # a float inside, int() outside: exact only below 2^53
    (FLOPS.replace("return 8 * T * d**2 + 4 * T**2 * d", "return int(8.0 * T * d**2 + 4.0 * T**2 * d)"), "丢了精度"),
]
VARIANTS["flops"]["correct"] += [
    # the two terms factored, integer division for the share's pieces
    '''
def mha_flops(T, d):
    return 4 * T * d * (2 * d + T)

def attention_flop_share(T, d):
    return float(T) / float(T + 2 * d)
''',
]
VARIANTS["flops"]["warned"] = ["int", "丢了精度"]
VARIANTS["generation_flops"]["correct"] += [
    # Python ints over numpy's loop indices
    '''
import numpy as np
def generation_flops(T, d, kv_cache):
    steps = range(1, T + 1)
    if kv_cache:
        return sum(8 * d * d + 4 * t * d for t in steps)
    return sum(8 * t * d * d + 4 * t * t * d for t in steps)
''',
]
VARIANTS["generation_flops"]["buggy"] += [
    # red team (issue 21): float sums wrapped in int() were exact on the power-of-two cases
    ("""
def generation_flops(T, d, kv_cache):
    s1 = T * (T + 1) / 2
    s2 = T * (T + 1) * (2 * T + 1) / 6
    return int(8 * d * d * T + 4 * d * s1) if kv_cache else int(8 * d * d * s1 + 4 * d * s2)
""", "丢了精度"),
]
VARIANTS["generation_flops"]["warned"] = ["从 0 开始", "int64", "int", "丢了精度"]
VARIANTS["attn_memory"]["warned"] = ["写死", "字节数", "n_layers", "T²"]
