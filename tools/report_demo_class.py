"""A realistic class of 30 for the class report: `python tools/report_demo_class.py DEST`.

Every student hands in notebook 04 (`split_merge_heads`, `mha`); eight of them hand in notebook 02 as
well; nobody hands in the others. Each notebook is the release's own (notebooks/w1d1/) with only its
answer cells replaced, so every locked and test cell is the release's. The mix is fixed and known:
EXPECTED says, per exercise, who gets full marks, who loses points to which bug of the answer key
(the name in `known("...")` of student/w1d1_student/exercises/), who passes the public check but not
the hidden one, who left the release stub, ...; PLANTED_COPIES says which answers are copied.

Outcomes of one exercise (each student answering it is in exactly one):
  full          both checks pass
  mistakes      {bug: [ids]}: the first failing check names that known bug of the answer key
  named_error   {diagnosis: [ids]}: the first failing check names a mistake the answer key has no bug
                for (an error the judge recognises, such as `.T` on batched arrays)
  unrecognised  fails, and no known bug or recognised error is named (a generic mismatch)
  public_only   the public check passes (any seed), the hidden one fails
  zero          a rule of the exercise sets it to 0 (torch's attention, autograd in a hand-written backward)
  unanswered    the answer cell is the release stub

Honest students write in styles of their own (tools/mha_styles.py composes `mha` line by line), so a
code-similarity detector finds only the planted copies: two students share one `mha` (the copier
renamed the variables and rewrote comments and spacing), and one student's `attention_backward` is the
companion script's (notebooks/w1d1/w1day1_checks.py), adapted to the exercise's signature.
"""
import functools
import random
import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tools import mha_styles  # noqa: E402
from tools.mha_styles import mha_source  # noqa: E402

RELEASE = ROOT / "notebooks" / "w1d1"
NB04, NB02 = "04_multihead", "02_scaled_dot_product"
SEED = 2204

STUDENTS = ["zhang_wei", "wang_fang", "li_na", "liu_yang", "chen_jing", "yang_lei", "zhao_min", "huang_tao",
            "zhou_jie", "wu_xia", "xu_lin", "sun_hao", "ma_li", "zhu_qiang", "hu_yan", "guo_peng", "he_ting",
            "gao_jun", "lin_xue", "luo_bin", "zheng_hui", "liang_chen", "song_yu", "xie_fei", "tang_kai",
            "han_mei", "feng_rui", "deng_yi", "cao_ning", "peng_bo"]
WITH_02 = ["zhang_wei", "wang_fang", "liu_yang", "chen_jing", "zhou_jie", "wu_xia", "gao_jun", "han_mei"]
FILE_NAMES = {"liang_chen": {NB04: "04_multihead (1).ipynb"}}   # a renamed file: the grader writes an intake note

# ------------------------------------------------------------------------------------------- 04: split / merge

SPLIT_SIG = 'def split_heads(x, n_heads):\n    """(B, T, d) -> (B, h, T, d_k)，d_k = d / h；第 i 个头 = 特征 x[..., i*d_k:(i+1)*d_k]。"""\n'
MERGE_SIG = '\n\ndef merge_heads(x):\n    """(B, h, T, d_k) -> (B, T, h*d_k)：split_heads 的逆；x 可能不连续。"""\n'
SPLITS = [
    "    B, T, d = x.shape\n    return x.view(B, T, n_heads, d // n_heads).transpose(1, 2)\n",
    "    B, T, _ = x.shape\n    return x.reshape(B, T, n_heads, -1).permute(0, 2, 1, 3)\n",
    "    return x.unflatten(-1, (n_heads, x.shape[-1] // n_heads)).transpose(1, 2)\n",
    "    d_k = x.size(-1) // n_heads\n    return torch.stack(x.split(d_k, dim=-1), dim=1)\n",
    "    b, t, d = x.size()\n    heads = x.reshape(b, t, n_heads, d // n_heads)\n    return heads.swapaxes(1, 2)\n",
    "    chunks = torch.chunk(x, n_heads, dim=-1)  # 每个头一段连续的特征\n    return torch.stack(chunks, 1)\n",
]
MERGES = [
    "    B, h, T, d_k = x.shape\n    return x.transpose(1, 2).reshape(B, T, h * d_k)\n",
    "    B, h, T, d_k = x.shape\n    return x.transpose(1, 2).contiguous().view(B, T, h * d_k)\n",
    "    return x.permute(0, 2, 1, 3).flatten(start_dim=2)\n",
    "    return torch.cat(x.unbind(dim=1), dim=-1)\n",
    "    b, h, t, dk = x.size()\n    y = x.transpose(1, 2)  # (B, T, h, d_k)\n    return y.reshape(b, t, -1)\n",
    "    return x.movedim(1, 2).flatten(-2)\n",
]
SPLIT_BUGGY = {
    # split right, merge without the transpose (§A.5)
    "merge_no_transpose": [
        SPLITS[0], "    B, h, T, d_k = x.shape\n    return x.reshape(B, T, h * d_k)  # 形状对了\n",
        SPLITS[3], "    b, h, t, dk = x.shape\n    return x.contiguous().view(b, t, h * dk)\n"],
    # the features dealt to the heads in turn (view(B, T, d_k, h))
    "interleave": [
        "    B, T, d = x.shape\n    return x.reshape(B, T, d // n_heads, n_heads).permute(0, 3, 1, 2)\n", MERGES[0],
        "    return torch.stack([x[..., i::n_heads] for i in range(n_heads)], dim=1)\n", MERGES[1]],
    # view(B, h, T, d_k) straight away, and back the same way
    "view": ["    B, T, d = x.shape\n    return x.view(B, n_heads, T, d // n_heads)\n",
             "    B, h, T, d_k = x.shape\n    return x.reshape(B, T, h * d_k)\n"],
}


def split_source(split, merge):
    return SPLIT_SIG + split + MERGE_SIG + merge


# ------------------------------------------------------------------------------------------------- 04: mha

# copied pair: feng_rui hands in zhao_min's mha with other names, comments and spacing
RENAMES = {"scores": "score_mat", "attn": "p_attn", "ctx": "context", "out": "result", "att": "w", "y": "res",
           "q": "query", "k": "key", "v": "value", "B": "bsz", "T": "n_tok", "d": "dim", "h": "nh", "d_k": "head_size",
           "C": "width", "s": "sc", "a": "pr", "heads": "hs", "concat": "cat", "t": "tensor", "lin": "layer",
           "hd": "hsz", "scale": "factor", "batch": "nb", "seq_len": "L", "logits": "lg", "probs": "pb", "z": "zz",
           "merged": "mm", "energy": "en", "weights": "wts", "values": "vals", "h_out": "ho", "p": "proj",
           "projected": "projs", "name": "attr"}


def disguise(src):
    """The same code as `src` with local names renamed, comments rewritten and the spacing changed."""
    body = src.split(mha_styles.FORWARD_SIG, 1)[1]
    for old, new in RENAMES.items():
        body = re.sub(rf"(?<![\w.\"']){re.escape(old)}\b(?![\"'])", new, body)
    body = re.sub(r"  # .*", "", body)
    lines = body.splitlines()
    out = []
    for i, line in enumerate(lines):
        if "self.W_o(" in line:
            out += ["", "        # concat heads -> output projection"]
        out.append(line.replace(", ", ",  ", 1) if i % 3 == 1 else line)
    head = src.split(mha_styles.FORWARD_SIG, 1)[0].replace("        super().__init__()\n",
                                                            "        super().__init__()  # 初始化父类\n")
    # a comment with a terminal escape and a right-to-left override: the report shows them escaped
    return head + mha_styles.FORWARD_SIG + "        # 按头拆开 \x1b[1m\u202e\n" + "\n".join(out) + "\n"


# public check passes, hidden fails: the hidden check's per-head masks (B, h, T, T), and bias=False runs
def _mask_per_batch(src):
    return src.replace("        if mask is not None:\n",
                       "        if mask is not None:\n            mask = mask.view(-1, 1, mask.shape[-2], mask.shape[-1])"
                       "  # 广播到所有头\n", 1)


def _bias_by_hand(src):
    pattern = re.compile(r"self\.W_(q|k|v)\(x\)")
    assert pattern.search(src), src
    return pattern.sub(lambda m: f"(x @ self.W_{m[1]}.weight.T + self.W_{m[1]}.bias)", src)


# unrecognised: a residual connection the exercise does not ask for
def _residual(src):
    return re.sub(r"= self\.W_o\((.*)\)(  #.*)?\n", r"= self.W_o(\1) + x  # 残差\n", src, count=1)


MHA_SDPA = '''import torch.nn.functional as F


''' + mha_styles.HEADER + '''
    def __init__(self, d_model, n_heads, bias=True):
        super().__init__()
        self.d_model = d_model
        self.n_heads = n_heads
        self.W_q = nn.Linear(d_model, d_model, bias=bias)
        self.W_k = nn.Linear(d_model, d_model, bias=bias)
        self.W_v = nn.Linear(d_model, d_model, bias=bias)
        self.W_o = nn.Linear(d_model, d_model, bias=bias)

''' + mha_styles.FORWARD_SIG + '''        n, t, _ = x.shape
        heads = lambda z: z.view(n, t, self.n_heads, -1).transpose(1, 2)  # noqa: E731
        q, k, v = heads(self.W_q(x)), heads(self.W_k(x)), heads(self.W_v(x))
        keep = None if mask is None else ~mask
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)  # 官方实现更快
        y = self.W_o(y.transpose(1, 2).reshape(n, t, -1))
        if need_weights:
            w = (q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5)
            if mask is not None:
                w = w.masked_fill(mask, float("-inf"))
            return y, w.softmax(-1)
        return y
'''

# one student thinks in heads, one at a time
MHA_PER_HEAD = mha_styles.HEADER + '''
    def __init__(self, d_model, n_heads, bias=True):
        super().__init__()
        assert d_model % n_heads == 0
        self.n_heads, self.d_model = n_heads, d_model
        self.W_q = nn.Linear(d_model, d_model, bias=bias)
        self.W_k = nn.Linear(d_model, d_model, bias=bias)
        self.W_v = nn.Linear(d_model, d_model, bias=bias)
        self.W_o = nn.Linear(d_model, d_model, bias=bias)

''' + mha_styles.FORWARD_SIG + '''        Q, K, V = self.W_q(x), self.W_k(x), self.W_v(x)
        dk = self.d_model // self.n_heads
        if mask is not None and mask.dim() == 2:
            mask = mask[None, None]
        outs, maps = [], []
        for i in range(self.n_heads):
            cols = slice(i * dk, (i + 1) * dk)  # 第 i 个头的特征
            S = Q[..., cols] @ K[..., cols].transpose(1, 2) / math.sqrt(dk)
            if mask is not None:
                S = S.masked_fill(mask[:, i if mask.shape[1] > 1 else 0], float("-inf"))
            P = torch.softmax(S, dim=-1)
            outs.append(P @ V[..., cols])
            maps.append(P)
        y = self.W_o(torch.cat(outs, dim=-1))
        return (y, torch.stack(maps, 1)) if need_weights else y
'''

# one writes the whole thing in einsum over (B, T, h, d_k)
MHA_EINSUM = mha_styles.HEADER + '''
    def __init__(self, d_model, n_heads, bias=True):
        super().__init__()
        self.d_model = d_model
        self.n_heads = n_heads
        for w in ("W_q", "W_k", "W_v", "W_o"):
            self.add_module(w, nn.Linear(d_model, d_model, bias=bias))

''' + mha_styles.FORWARD_SIG + '''        *lead, width = x.shape
        nh = self.n_heads
        qs = self.W_q(x).reshape(*lead, nh, width // nh)
        ks = self.W_k(x).reshape(*lead, nh, width // nh)
        vs = self.W_v(x).reshape(*lead, nh, width // nh)
        logits = torch.einsum("bqhd,bkhd->bhqk", qs, ks) * (width // nh) ** -0.5
        if mask is not None:
            logits = logits.masked_fill(mask, torch.finfo(logits.dtype).min)
        p = logits.softmax(-1)
        mixed = torch.einsum("bhqk,bkhd->bqhd", p, vs).flatten(-2)
        y = self.W_o(mixed)
        if need_weights:
            return y, p
        return y
'''


MHA_BUGS = {"scale_none": ["wang_fang", "chen_jing", "sun_hao", "he_ting"],
            "merge_no_transpose": ["li_na", "zhou_jie"],    # tang_kai's comes from his own merge_heads
            "scale_dmodel": ["yang_lei", "lin_xue"], "mask_inverted": ["guo_peng"]}
PLANTED_BUGS = {s: bug for bug, ids in MHA_BUGS.items() for s in ids}


@functools.lru_cache(maxsize=None)
def _mha_plan():
    """{student: (mha source or None for the stub, outcome, bug)} and the split / merge answers."""
    rng = random.Random(SEED)
    own_helpers = {"zhang_wei": {"split": 4}, "zheng_hui": {"split": 4, "merge": 4}, "tang_kai": {"merge": 4}}
    order = sorted(STUDENTS, key=lambda s: s not in own_helpers)

    # split_heads / merge_heads only where the student wrote them; guo_peng's inverted mask fills -inf
    # (an inverted finite fill is another bug of the answer key)
    def allowed(i, c):
        s = order[i]
        helpers = own_helpers.get(s, {})
        return ((c["split"] != 4 or "split" in helpers) and (c["merge"] != 4 or "merge" in helpers)
                and (s != "guo_peng" or c["mask"] != 4))

    drawn = mha_styles.diverse_styles(rng, len(order), lambda i, c: mha_source(c, PLANTED_BUGS.get(order[i])),
                                      {i: own_helpers.get(s, {}) for i, s in enumerate(order)}, allowed)
    styles = dict(zip(order, drawn))
    plan = {}
    for s, bug in PLANTED_BUGS.items():
        plan[s] = (mha_source(styles[s], bug), ("mistakes", bug))
    plan["tang_kai"] = (mha_source(styles["tang_kai"]), ("mistakes", "merge_no_transpose"))
    plan["huang_tao"] = (_mask_per_batch(mha_source(styles["huang_tao"])), ("public_only", None))
    plan["deng_yi"] = (_bias_by_hand(mha_source(styles["deng_yi"])), ("public_only", None))
    plan["luo_bin"] = (_residual(mha_source(styles["luo_bin"])), ("unrecognised", None))
    plan["xie_fei"] = (MHA_SDPA, ("zero", None))
    plan["cao_ning"] = plan["peng_bo"] = (None, ("unanswered", None))
    plan["zhao_min"] = (mha_source(styles["zhao_min"]), ("full", None))
    plan["feng_rui"] = (disguise(plan["zhao_min"][0]), ("full", None))
    plan["hu_yan"] = (MHA_PER_HEAD, ("full", None))
    plan["song_yu"] = (MHA_EINSUM, ("full", None))
    for s in STUDENTS:
        plan.setdefault(s, (mha_source(styles[s]), ("full", None)))
    return plan


def _split_plan():
    rng = random.Random(SEED + 1)
    plan = {}
    buggy = {"tang_kai": ("merge_no_transpose", 0), "ma_li": ("merge_no_transpose", 1),
             "hu_yan": ("interleave", 0), "gao_jun": ("interleave", 1), "xu_lin": ("view", 0)}
    for s in STUDENTS:
        if s in ("peng_bo", "xie_fei"):
            plan[s] = (None, ("unanswered", None))
        elif s in buggy:
            bug, i = buggy[s]
            pair = SPLIT_BUGGY[bug][2 * i: 2 * i + 2]
            plan[s] = (split_source(*pair), ("mistakes", bug))
        else:
            plan[s] = (split_source(rng.choice(SPLITS), rng.choice(MERGES)), ("full", None))
    # zheng_hui and zhang_wei call split_heads / merge_heads in their mha: theirs must be right
    plan["zheng_hui"] = (split_source(SPLITS[2], MERGES[3]), ("full", None))
    plan["zhang_wei"] = (split_source(SPLITS[5], MERGES[4]), ("full", None))
    return plan


# ------------------------------------------------------------------------------------------------- 02

DOC_FWD = ('    """缩放点积注意力的前向（numpy）。\n\n    Q: (..., T, d_k)   K: (..., S, d_k)   V: (..., S, d_v)\n'
           '    mask: None 或可广播到 (..., T, S) 的 bool 数组，True = 屏蔽\n'
           '    返回 (Y, cache)：Y (..., T, d_v)；cache 只给你的 attention_backward 用\n    """\n')
DOC_BWD = ('    """缩放点积注意力的反向（numpy）。\n\n    dY: (..., T, d_v)，即 ∂L/∂Y；cache: 你的 attention_forward 返回的 cache\n'
           '    返回 (dQ, dK, dV)：形状分别是 (..., T, d_k)、(..., S, d_k)、(..., S, d_v)\n    """\n')
DOC_NUM = ('    """标量函数 f 在 x 处的中心差分梯度。\n\n'
           '    f: 接受与 x 同形状的数组、返回标量；x: float64 数组（任意形状），返回后必须不变\n'
           '    返回: 与 x 同形状的数组\n    """\n')
DOC_INIT = ('    """初始化时 q·k/sqrt(d_k) 的标准差（闭式，返回 float）。\n\n'
            '    d: 输入维度（投影矩阵的行数）；weight_bound: W_Q、W_K 的元素 ~ U(-weight_bound, weight_bound)；\n'
            '    input_var: 输入每一维的方差。没有偏置。\n    """\n')
FWD_SIG = "import numpy as np\n\n\ndef attention_forward(Q, K, V, mask=None):\n" + DOC_FWD
BWD_SIG = "def attention_backward(dY, cache):\n" + DOC_BWD
NUM_SIG = "import numpy as np\n\n\ndef numerical_gradient(f, x, eps=1e-6):\n" + DOC_NUM
INIT_SIG = "def init_score_std(d, weight_bound, input_var=1.0):\n" + DOC_INIT
FN_HEAD = ('import math\n\nimport torch\n\n\nclass AttentionFunction(torch.autograd.Function):\n'
           '    """y = softmax(q kᵀ / sqrt(d_k)，被屏蔽处为 -inf) v；backward 按 §2.3 的公式手写。\n\n'
           '    q: (..., T, d_k)，k: (..., S, d_k)，v: (..., S, d_v)，mask: None 或 bool（True = 屏蔽）\n    """\n\n')

FORWARDS = {
    "zhang_wei": '''    d_k = Q.shape[-1]
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(d_k)
    if mask is not None:
        scores = np.where(mask, -np.inf, scores)
    scores = scores - scores.max(axis=-1, keepdims=True)  # 数值稳定
    weights = np.exp(scores)
    weights /= weights.sum(axis=-1, keepdims=True)
    Y = weights @ V
    cache = (Q, K, V, weights, Y)
    return Y, cache
''',
    "wang_fang": '''    scale = 1 / np.sqrt(Q.shape[-1])
    S = np.einsum("...td,...sd->...ts", Q, K) * scale
    if mask is not None:
        S = np.where(mask, -np.inf, S)
    P = np.exp(S - np.max(S, axis=-1, keepdims=True))
    P = P / np.sum(P, axis=-1, keepdims=True)
    out = np.einsum("...ts,...sv->...tv", P, V)
    return out, {"q": Q, "k": K, "v": V, "p": P, "scale": scale}
''',
    "liu_yang": '''    s = Q.shape[-1] ** -0.5
    logits = np.matmul(Q, np.moveaxis(K, -1, -2)) * s
    if mask is not None:
        logits[np.broadcast_to(mask, logits.shape)] = -np.inf
    logits -= logits.max(-1, keepdims=True)
    A = np.exp(logits)
    A /= A.sum(-1, keepdims=True)
    return np.matmul(A, V), (A, Q, K, V, s)
''',
    "chen_jing": '''    Kt = K.swapaxes(-1, -2)
    S = (Q @ Kt) / np.sqrt(K.shape[-1])
    if mask is not None:
        S = np.where(mask, np.finfo(S.dtype).min, S)
    m = S.max(axis=-1, keepdims=True)
    e = np.exp(S - m)
    A = e / e.sum(axis=-1, keepdims=True)
    return A @ V, [Q, K, V, A]
''',
    "zhou_jie": '''    def softmax(S):
        S = S - S.max(axis=-1, keepdims=True)
        E = np.exp(S)
        return E / E.sum(axis=-1, keepdims=True)

    S = np.matmul(Q, K.swapaxes(-2, -1)) / math.sqrt(Q.shape[-1])
    if mask is not None:
        S = np.where(mask, -np.inf, S)
    A = softmax(S)
    Y = np.matmul(A, V)
    return Y, (Q, K, V, A, Y)
''',
    "wu_xia": '''    import torch
    q, k, v = (torch.from_numpy(np.asarray(t, dtype=np.float64)) for t in (Q, K, V))
    sc = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        sc = sc.masked_fill(torch.from_numpy(np.asarray(mask)), float("-inf"))
    w = torch.softmax(sc, dim=-1)
    y = w @ v
    return y.numpy(), {"w": w, "y": y, "q": q, "k": k, "v": v}
''',
    "gao_jun": '''    S = Q @ np.swapaxes(K, -1, -2)
    S = S / np.sqrt(Q.shape[-1])
    S = S - S.max(-1, keepdims=True)
    A = np.exp(S) / np.exp(S).sum(-1, keepdims=True)
    if mask is not None:
        A = np.where(mask, 0.0, A)  # 被屏蔽的权重置 0
    return A @ V, (Q, K, V, A)
''',
    "han_mei": '''    *batch, T, d_k = Q.shape
    S = np.einsum("...ik,...jk->...ij", Q, K) / d_k ** 0.5
    if mask is not None:
        S = S + np.where(mask, -np.inf, 0.0)
    A = np.exp(S - S.max(-1)[..., None])
    A = A / A.sum(-1)[..., None]
    Y = np.einsum("...ij,...jv->...iv", A, V)
    return Y, dict(Q=Q, K=K, V=V, A=A, Y=Y)
''',
}

BACKWARDS = {
    "zhang_wei": '''    Q, K, V, A, Y = cache
    tr = lambda M: np.swapaxes(M, -1, -2)  # noqa: E731  只交换最后两维
    scale = 1.0 / np.sqrt(Q.shape[-1])
    grad_V = np.matmul(tr(A), dY)
    grad_A = np.matmul(dY, tr(V))
    grad_S = A * (grad_A - np.sum(dY * Y, axis=-1, keepdims=True))
    return scale * np.matmul(grad_S, K), scale * np.matmul(tr(grad_S), Q), grad_V
''',
    # bwd_noD, einsum and a dict cache
    "wang_fang": '''    P, scale = cache["p"], cache["scale"]
    dV = np.einsum("...ts,...tv->...sv", P, dY)
    dP = np.einsum("...tv,...sv->...ts", dY, cache["v"])
    dS = P * dP  # softmax 的导数
    dQ = np.einsum("...ts,...sd->...td", dS, cache["k"]) * scale
    dK = np.einsum("...ts,...td->...sd", dS, cache["q"]) * scale
    return dQ, dK, dV
''',
    "liu_yang": '''    A, Q, K, V, s = cache
    At = np.moveaxis(A, -1, -2)
    grad_A = np.matmul(dY, np.moveaxis(V, -1, -2))
    row = (grad_A * A).sum(axis=-1, keepdims=True)
    grad_S = A * (grad_A - row)
    return (s * np.matmul(grad_S, K), s * np.matmul(np.moveaxis(grad_S, -1, -2), Q), np.matmul(At, dY))
''',
    # bwd_noD, row by row: the softmax Jacobian without its outer-product term
    "chen_jing": '''    Q, K, V, A = cache
    scale = 1 / np.sqrt(K.shape[-1])
    dQ, dK, dV = np.zeros_like(Q), np.zeros_like(K), np.zeros_like(V)
    for idx in np.ndindex(*A.shape[:-2]):
        a, g = A[idx], dY[idx]
        dV[idx] = a.T @ g
        da = g @ V[idx].T
        ds = np.empty_like(a)
        for i in range(a.shape[0]):
            ds[i] = np.diag(a[i]) @ da[i]
        dQ[idx] = scale * (ds @ K[idx])
        dK[idx] = scale * (ds.T @ Q[idx])
    return dQ, dK, dV
''',
    # copied from the companion script notebooks/w1d1/w1day1_checks.py (its attention_backward), adapted
    "zhou_jie": '''    Q, K, V, A, Y = cache
    s = 1.0 / math.sqrt(Q.shape[-1])
    dV = A.T @ dY
    dA = dY @ V.T
    D = (dY * Y).sum(-1, keepdims=True)
    dS = A * (dA - D)
    grads = {"dQ": s * dS @ K, "dK": s * dS.T @ Q, "dV": dV, "dS": dS, "D": D, "dA": dA}
    return grads["dQ"], grads["dK"], grads["dV"]
''',
    "wu_xia": '''    import torch
    g = torch.from_numpy(np.asarray(dY, dtype=np.float64))
    w, y = cache["w"], cache["y"]
    dv = w.transpose(-2, -1) @ g
    ds = w * (g @ cache["v"].transpose(-2, -1) - (g * y).sum(-1, keepdim=True))
    c = 1 / math.sqrt(cache["q"].shape[-1])
    dq = c * ds @ cache["k"]
    dk = c * ds.transpose(-2, -1) @ cache["q"]
    return dq.numpy(), dk.numpy(), dv.numpy()
''',
    "han_mei": '''    Q, K, V, A, Y = (cache[n] for n in "QKVAY")
    s = Q.shape[-1] ** -0.5
    Dterm = np.einsum("...iv,...iv->...i", dY, Y)[..., None]
    dS = A * (np.einsum("...iv,...jv->...ij", dY, V) - Dterm)
    dQ = s * np.einsum("...ij,...jk->...ik", dS, K)
    dK = s * np.einsum("...ij,...ik->...jk", dS, Q)
    dV = np.einsum("...ij,...iv->...jv", A, dY)
    return dQ, dK, dV
''',
}

NUMGRADS = {
    "zhang_wei": '''    grad = np.zeros(x.shape, dtype=float)
    for idx in np.ndindex(*x.shape):
        old = x[idx]
        x[idx] = old + eps
        f_plus = f(x)
        x[idx] = old - eps
        f_minus = f(x)
        x[idx] = old
        grad[idx] = (f_plus - f_minus) / (2 * eps)
    return grad
''',
    "wang_fang": '''    flat = x.reshape(-1)
    g = np.empty(flat.size)
    for i in range(flat.size):
        keep = flat[i]
        try:
            flat[i] = keep + eps
            up = float(f(x))
            flat[i] = keep - eps
            down = float(f(x))
        finally:
            flat[i] = keep
        g[i] = (up - down) / (2 * eps)
    return g.reshape(x.shape)
''',
    # half: divides by ε
    "liu_yang": '''    out = np.zeros_like(x, dtype=np.float64)
    it = np.nditer(x, flags=["multi_index"])
    for _ in it:
        i = it.multi_index
        x0 = x[i]
        x[i] = x0 + eps
        hi = f(x)
        x[i] = x0 - eps
        lo = f(x)
        x[i] = x0
        out[i] = (hi - lo) / eps
    return out
''',
    "chen_jing": '''    grad = np.zeros_like(x, dtype=np.float64)
    for idx in np.ndindex(x.shape):
        e = np.zeros_like(x, dtype=np.float64)
        e[idx] = eps
        grad[idx] = (f(x + e) - f(x - e)) / (2 * eps)
    return grad
''',
    "zhou_jie": '''    z = np.array(x, dtype=np.float64, copy=True)
    grad = np.zeros_like(z)
    for k in range(z.size):
        pos = np.unravel_index(k, z.shape)
        base = z[pos]
        z[pos] = base + eps
        fp = f(z)
        z[pos] = base - eps
        fm = f(z)
        z[pos] = base
        grad[pos] = (fp - fm) / (2.0 * eps)
    return grad
''',
    # forward: one-sided difference
    "wu_xia": '''    f0 = f(x)
    grad = np.zeros(x.shape)
    for idx in np.ndindex(*x.shape):
        xp = x.copy()
        xp[idx] += eps
        grad[idx] = (f(xp) - f0) / eps
    return grad
''',
    # no_restore: perturbs its own copy and never puts the value back
    "han_mei": '''    x = x.copy()
    grad = np.zeros(x.shape, dtype=float)
    for idx in np.ndindex(*x.shape):
        v = x[idx]
        x[idx] = v + eps
        a = f(x)
        x[idx] = v - eps
        b = f(x)
        grad[idx] = (a - b) / (2 * eps)
    return grad
''',
}

INITS = {
    "zhang_wei": "    var_w = weight_bound ** 2 / 3\n    var_q = d * input_var * var_w\n    return float(var_q)\n",
    "wang_fang": ("    import math\n    std_w = weight_bound / math.sqrt(3)\n    std_q = math.sqrt(d * input_var) * std_w\n"
                  "    return std_q * std_q\n"),
    "liu_yang": ("    # Var[q_i] = d * Var[x] * Var[w]，Var[w] = b^2 / 3；score 的方差 = d_k Var[q_i]^2 / d_k\n"
                 "    v = d * input_var * (2 * weight_bound) ** 2 / 12\n    return float((v * v) ** 0.5)\n"),
    # init_var_b2: the variance of U(-b, b) taken as b², in two spellings
    "chen_jing": "    var_w = weight_bound ** 2\n    var_q = d * input_var * var_w\n    return float(var_q)\n",
    "zhou_jie": "    return float(d * input_var * weight_bound * weight_bound)\n",
    # init_std_q: stops at the standard deviation of q_i
    "wu_xia": "    import math\n    return math.sqrt(d * input_var * weight_bound ** 2 / 3)\n",
    "han_mei": "    import numpy as np\n    return float(np.prod([d, input_var, weight_bound ** 2]) / 3.0)\n",
}

FUNCTIONS = {
    "zhang_wei": '''    @staticmethod
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
''',
    "wang_fang": '''    @staticmethod
    def forward(ctx, q, k, v, mask=None):
        s = q.shape[-1] ** -0.5
        scores = torch.einsum("...td,...sd->...ts", q, k) * s
        if mask is not None:
            scores = torch.where(mask, torch.finfo(scores.dtype).min, scores)
        P = torch.softmax(scores, dim=-1)
        ctx.save_for_backward(q, k, v, P)
        ctx.s = s
        return torch.einsum("...ts,...sv->...tv", P, v)

    @staticmethod
    def backward(ctx, dy):
        q, k, v, P = ctx.saved_tensors
        dP = torch.einsum("...tv,...sv->...ts", dy, v)
        dS = P * (dP - (dP * P).sum(-1, keepdim=True))
        dq = ctx.s * torch.einsum("...ts,...sd->...td", dS, k)
        dk = ctx.s * torch.einsum("...ts,...td->...sd", dS, q)
        dv = torch.einsum("...ts,...tv->...sv", P, dy)
        return dq, dk, dv, None
''',
    # bwd_dK_noT
    "liu_yang": '''    @staticmethod
    def forward(ctx, q, k, v, mask=None):
        scale = 1 / math.sqrt(q.size(-1))
        att = torch.matmul(q, k.mT) * scale
        if mask is not None:
            att = att.masked_fill(mask, -math.inf)
        att = att.softmax(-1)
        ctx.save_for_backward(q, k, v, att)
        ctx.scale = scale
        return torch.matmul(att, v)

    @staticmethod
    def backward(ctx, dy):
        q, k, v, att = ctx.saved_tensors
        datt = torch.matmul(dy, v.mT)
        ds = att * (datt - (datt * att).sum(-1, keepdim=True))
        dq = ctx.scale * torch.matmul(ds, k)
        dk = ctx.scale * torch.matmul(ds, q)
        return dq, dk, torch.matmul(att.mT, dy), None
''',
    "chen_jing": '''    @staticmethod
    def forward(ctx, q, k, v, mask=None):
        ctx.save_for_backward(q, k, v)
        ctx.mask = mask
        return AttentionFunction._weights(q, k, mask) @ v

    @staticmethod
    def _weights(q, k, mask):
        s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        if mask is not None:
            s = s.masked_fill(mask, -math.inf)
        return torch.softmax(s, -1)

    @staticmethod
    def backward(ctx, dy):
        q, k, v = ctx.saved_tensors
        A = AttentionFunction._weights(q, k, ctx.mask)  # 重算，不存 A
        y = A @ v
        c = 1 / math.sqrt(q.shape[-1])
        dS = A * (dy @ v.transpose(-2, -1) - (dy * y).sum(-1, keepdim=True))
        return c * dS @ k, c * dS.transpose(-2, -1) @ q, A.transpose(-2, -1) @ dy, None
''',
    # autograd inside the backward: 0 for the exercise
    "wu_xia": '''    @staticmethod
    def forward(ctx, q, k, v, mask=None):
        ctx.save_for_backward(q, k, v)
        ctx.mask = mask
        s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        if mask is not None:
            s = s.masked_fill(mask, float("-inf"))
        return torch.softmax(s, -1) @ v

    @staticmethod
    def backward(ctx, dy):
        q, k, v = (t.detach().requires_grad_(True) for t in ctx.saved_tensors)
        with torch.enable_grad():
            s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
            if ctx.mask is not None:
                s = s.masked_fill(ctx.mask, float("-inf"))
            y = torch.softmax(s, -1) @ v
            dq, dk, dv = torch.autograd.grad(y, (q, k, v), dy)  # 让 autograd 算
        return dq, dk, dv, None
''',
    "han_mei": '''    @staticmethod
    def forward(ctx, q, k, v, mask=None):
        d = q.shape[-1]
        logits = torch.matmul(q, k.transpose(-1, -2)) / d ** 0.5
        if mask is not None:
            logits = logits + torch.zeros_like(logits).masked_fill(mask, float("-inf"))
        w = torch.exp(logits - logits.amax(-1, keepdim=True))
        w = w / w.sum(-1, keepdim=True)
        ctx.save_for_backward(q, k, v, w)
        return torch.matmul(w, v)

    @staticmethod
    def backward(ctx, dy):
        q, k, v, w = ctx.saved_tensors
        g = dy.matmul(v.transpose(-1, -2))
        gs = w * (g - (g * w).sum(dim=-1, keepdim=True))
        r = q.shape[-1] ** -0.5
        return r * gs.matmul(k), r * gs.transpose(-1, -2).matmul(q), w.transpose(-1, -2).matmul(dy), None
''',
}

def _nb02_plan():
    """{student: {grade_id: (source or None, outcome)}} for the students who hand in notebook 02."""
    plan = {}
    for s in WITH_02:
        p = {}
        fwd = FORWARDS[s]
        p["attention_forward"] = (FWD_SIG + fwd, ("mistakes", "fwd_mask_after_softmax") if s == "gao_jun" else ("full", None))
        p["init_score_std"] = (INIT_SIG + INITS[s], {"chen_jing": ("mistakes", "init_var_b2"),
                                                     "zhou_jie": ("mistakes", "init_var_b2"),
                                                     "wu_xia": ("mistakes", "init_std_q")}.get(s, ("full", None))) \
            if s in INITS else (None, ("unanswered", None))
        p["numerical_gradient"] = (NUM_SIG + NUMGRADS[s], {"liu_yang": ("mistakes", "half"),
                                                           "wu_xia": ("mistakes", "forward"),
                                                           "han_mei": ("mistakes", "no_restore")}.get(s, ("full", None))) \
            if s in NUMGRADS else (None, ("unanswered", None))
        p["attention_backward"] = (BWD_SIG + BACKWARDS[s], {"wang_fang": ("mistakes", "bwd_noD"),
                                                            "chen_jing": ("mistakes", "bwd_noD"),
                                                            "zhou_jie": ("named_error", "swapaxes")}.get(s, ("full", None))) \
            if s in BACKWARDS else (None, ("unanswered", None))
        p["attention_function"] = (FN_HEAD + FUNCTIONS[s], {"liu_yang": ("mistakes", "bwd_dK_noT"),
                                                            "wu_xia": ("zero", None)}.get(s, ("full", None))) \
            if s in FUNCTIONS else (None, ("unanswered", None))
        plan[s] = p
    return plan


# ------------------------------------------------------------------------------------------------- §C text

TEXT = {
    "q4_one_head_dims": ["单头只有一组注意力权重，输出是各个 value 的同一个加权平均，所有维度一起混合，没法对不同维度用不同的权重。"
                         "多头把特征切成 h 段，每个头有自己的权重，可以一个头看 A、另一个头看 B。",
                         "因为 softmax 之后每个位置只有一个权重，所有特征维度共享它。多头让每个子空间各自决定看哪里。"],
    "q4_split_not_copy": ["切分让总参数量仍是 4d²，计算量也不变；复制会让参数乘以 h。"
                          "h 不能无限大：d_k = d/h 太小时每个头的点积区分不了 key。",
                          "切分：每个头 d_k = d/h 维，总成本不变。h 最多到 d，但 d_k 太小注意力就退化了。"],
    "q4_qk_ov": ["每个头的贡献是 softmax(x W_Q^i (x W_K^i)ᵀ/√d_k) x W_V^i W_O^i，只有 W_Q^i W_K^iᵀ 这个乘积出现，"
                 "把 W_Q 右乘可逆矩阵 R、W_K 右乘 R⁻ᵀ，结果不变，所以 W_Q 单独不可辨识。"],
    "q4_reshape_transpose": ["att @ v 的形状是 (B, h, T, d_k)，直接 reshape 会把同一个头不同位置的特征拼到一行，不会报错，结果是错的。"
                             "要先 transpose(1, 2) 回到 (B, T, h, d_k)。",
                             "不会报错，形状对但数值错。先 transpose 再 reshape（或 contiguous().view）。"],
    "q2_derive_backward": ["V̄ = AᵀȲ，Ā = ȲVᵀ，S̄_ij = A_ij(Ā_ij − D_i)，D_i = Σ_j Ā_ij A_ij = ȳ_i·y_i，Q̄ = s S̄K，K̄ = s S̄ᵀQ。"],
    "q2_masked_grad_sum_zero": ["被屏蔽处 A_il = 0，所以 S̄_il = 0。"
                                "Σ_l S̄_il = Σ A_il Ā_il − D_i Σ A_il = D_i − D_i = 0，对应 softmax 的平移不变性。"],
    "q2_init_std": ["Var[w] = 1/(3d)，Var[q_i] = d·1·1/(3d) = 1/3，分数的标准差是 1/3：初始化时注意力接近均匀。"],
    "q2_convex_hull": ["输出是 value 的凸组合（权重非负、和为 1），所以落在凸包里。所以需要残差连接和 MLP 来产生凸包外的表示。"],
}
WRITERS = {NB04: ["zhang_wei", "li_na", "liu_yang", "zhao_min", "wu_xia", "ma_li", "hu_yan", "gao_jun", "zheng_hui",
                  "song_yu", "han_mei", "feng_rui"],
           NB02: ["zhang_wei", "liu_yang", "chen_jing", "han_mei"]}


def _texts(student, notebook):
    if student not in WRITERS[notebook]:
        return {}
    rng = random.Random(f"{SEED}-{student}-{notebook}")
    prefix = "q4_" if notebook == NB04 else "q2_"
    out = {}
    for gid, answers in TEXT.items():
        if gid.startswith(prefix) and rng.random() < 0.7:
            out[gid] = rng.choice(answers)
    return out


# ------------------------------------------------------------------------------------------------- the class

def answers():
    """{student: {notebook: {grade_id: source}}}: the answer cells each student filled (others keep the stub)."""
    mha, split, nb02 = _mha_plan(), _split_plan(), _nb02_plan()
    out = {}
    for s in STUDENTS:
        cells = {"split_merge_heads": split[s][0], "mha": mha[s][0], **_texts(s, NB04)}
        out[s] = {NB04: {g: src for g, src in cells.items() if src is not None}}
        if s in nb02:
            cells = {g: src for g, (src, _) in nb02[s].items()}
            out[s][NB02] = {g: src for g, src in {**cells, **_texts(s, NB02)}.items() if src is not None}
    return out


def _expected():
    table = {}

    def add(gid, student, outcome):
        kind, detail = outcome
        entry = table.setdefault(gid, {"full": [], "zero": [], "unanswered": [], "mistakes": {}, "named_error": {},
                                       "unrecognised": [], "public_only": []})
        if kind in ("mistakes", "named_error"):
            entry[kind].setdefault(detail, []).append(student)
        else:
            entry[kind].append(student)

    mha, split, nb02 = _mha_plan(), _split_plan(), _nb02_plan()
    for s in STUDENTS:
        add("split_merge_heads", s, split[s][1])
        add("mha", s, mha[s][1])
        for gid, (_, outcome) in nb02.get(s, {}).items():
            add(gid, s, outcome)
    return table


EXPECTED = _expected()
# (grade_id, student, copied from: a student, or the companion script's file name)
PLANTED_COPIES = [("mha", "zhao_min", "feng_rui"), ("attention_backward", "zhou_jie", "w1day1_checks.py")]
NOTEBOOKS = {s: [NB04] + ([NB02] if s in WITH_02 else []) for s in STUDENTS}


def release(notebook):
    return nbformat.read(RELEASE / f"{notebook}.ipynb", as_version=4)


def notebook_of(student, notebook, filled=None):
    """One student's notebook: the release's, with the answer cells they filled."""
    filled = answers()[student][notebook] if filled is None else filled
    nb = release(notebook)
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if gid in filled and cell.metadata["nbgrader"].get("solution"):
            cell.source = filled[gid].rstrip("\n")
    return nb


def file_name(student, notebook):
    return FILE_NAMES.get(student, {}).get(notebook, f"{notebook}.ipynb")


def write(dest):
    """Write the class into `dest`: one folder per student (named by the student's id)."""
    every = answers()
    for s in STUDENTS:
        folder = Path(dest) / s
        folder.mkdir(parents=True, exist_ok=True)
        for notebook, filled in every[s].items():
            nbformat.write(notebook_of(s, notebook, filled), folder / file_name(s, notebook))
    return Path(dest)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python tools/report_demo_class.py DEST")
    write(sys.argv[1])
