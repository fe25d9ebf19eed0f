"""A composable style generator for notebook 04's `mha` answer (used by tools/report_demo_class.py).

Thirty students who all get `MultiHeadAttention` right do not write the same code: each picks, line by
line, one of the spellings below (how the four nn.Linear are built, `view`+`transpose` or
`reshape`+`permute` or `unflatten`, `@` or `torch.matmul` or einsum, where the scale goes, how the mask
is filled, which softmax...), in an order of statements of their own. `style(rng)` draws one student's
choices; `mha_source(choices, bug)` writes the answer cell, with one of the known bugs applied if asked.
The class line, the method signatures and their docstrings are the release's own (what a student keeps).
"""
import builtins
import io
import keyword
import tokenize

HEADER = ('class MultiHeadAttention(nn.Module):\n'
          '    """手写多头自注意力。x (B, T, d_model) -> y (B, T, d_model)；mask 布尔，True = 屏蔽。"""\n')
INIT_SIG = "    def __init__(self, d_model, n_heads, bias=True):\n        super().__init__()\n"
FORWARD_SIG = ('    def forward(self, x, mask=None, need_weights=False):\n'
               '        """mask: (T, T)、(B, 1, T, T) 或 (B, h, T, T)；返回 y，或 need_weights=True 时 (y, attn (B, h, T, T))。"""\n')

STUB = (HEADER + "\n" + INIT_SIG + "        # 在这里写你的代码\n        raise NotImplementedError()\n\n" + FORWARD_SIG
        + "        # 在这里写你的代码\n        raise NotImplementedError()\n")

# the bugs this generator can plant, by the answer key's name (student/w1d1_student/exercises/nb04_multihead.py)
BUGS = ("scale_none", "scale_dmodel", "merge_no_transpose", "mask_inverted")

CHOICES = {
    "attrs": 4, "check": 4, "linears": 8, "wo": 3, "init_order": 2,
    "unpack": 5, "heads": 4, "split": 6, "scale": 6, "scores": 5, "mask": 6, "softmax": 6,
    "apply": 3, "merge": 5, "ret": 4, "names": 5, "comments": 3,
}

NAMES = [  # (scores, weights, context, merged)
    ("scores", "attn", "ctx", "out"),
    ("att", "att", "y", "y"),
    ("s", "a", "heads", "concat"),
    ("logits", "probs", "z", "merged"),
    ("energy", "weights", "values", "h_out"),
]


def style(rng, **fixed):
    """One student's choices: an index per line of CHOICES, drawn from `rng`; `fixed` overrides some."""
    out = {k: rng.randrange(n) for k, n in CHOICES.items()}
    out.update(fixed)
    return out


def shape(src):
    """The source as a similarity detector sees it: names as V, strings as S, no comments nor spacing."""
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(src).readline):
        if tok.type == tokenize.NAME:
            keep = keyword.iskeyword(tok.string) or hasattr(builtins, tok.string) or tok.string == "self"
            out.append(tok.string if keep else "V")
        elif tok.type == tokenize.STRING:
            out.append("S")
        elif tok.type in (tokenize.OP, tokenize.NUMBER):
            out.append(tok.string)
    return "".join(out)


def kgrams(src, k=25, minus=frozenset()):
    text = shape(src)
    return {text[i:i + k] for i in range(len(text) - k + 1)} - minus


def overlap(a, b):
    return len(a & b) / max(1, min(len(a), len(b)))


def diverse_styles(rng, n, write, fixed=None, allowed=None, tries=200):
    """n students' choices, drawn one after another: of `tries` draws each, the one whose source
    (`write(i, choices)`) shares the fewest 25-grams of its shape with any student's before it (the release
    stub's left out). `fixed`: {i: {key: index}} forced on student i; `allowed(i, choices)`: whether a draw
    is acceptable for student i."""
    fixed, chosen, grams = fixed or {}, [], []
    stub = kgrams(STUB)
    for i in range(n):
        best = None
        for _ in range(tries):
            c = style(rng, **fixed.get(i, {}))
            if allowed and not allowed(i, c):
                continue
            g = kgrams(write(i, c), minus=stub)
            worst = max((overlap(g, o) for o in grams), default=0.0)
            if best is None or worst < best[0]:
                best = (worst, c, g)
        chosen.append(best[1])
        grams.append(best[2])
    return chosen


def _indent(lines, n=8):
    return "".join(" " * n + line + "\n" if line else "\n" for line in lines)


def _comment(c, text):
    return f"  # {text}" if c["comments"] == 1 else ""


def _init(c):
    attrs = [
        ["self.d_model = d_model", "self.n_heads = n_heads"],
        ["self.d_model, self.n_heads = d_model, n_heads"],
        ["self.d_model = d_model", "self.n_heads = n_heads", "self.d_k = d_model // n_heads"],
        ["self.n_heads = n_heads", "self.d_model = d_model", "self.head_dim = d_model // n_heads"],
    ][c["attrs"]]
    check = [
        [],
        ["assert d_model % n_heads == 0"],
        ['assert d_model % n_heads == 0, "d_model 必须能被 n_heads 整除"'],
        ["if d_model % n_heads != 0:", '    raise ValueError("d_model must be divisible by n_heads")'],
    ][c["check"]]
    names = "qkv" if c["wo"] else "qkvo"
    ws = ", ".join(f"self.W_{n}" for n in names)
    linears = [
        [f"self.W_{n} = nn.Linear(d_model, d_model, bias=bias)" for n in names],
        [f"self.W_{n} = nn.Linear(d_model, d_model, bias)" for n in names],
        [f"for name in ({', '.join(repr('W_' + n) for n in names)}):".replace("'", '"'),
         "    setattr(self, name, nn.Linear(d_model, d_model, bias=bias))"],
        [f"{ws} = (nn.Linear(d_model, d_model, bias=bias) for _ in range({len(names)}))"],
        ["def linear():", "    return nn.Linear(d_model, d_model, bias=bias)"] + [f"self.W_{n} = linear()" for n in names],
        [f'for p in "{names}":', '    setattr(self, "W_" + p, nn.Linear(in_features=d_model, out_features=d_model, bias=bias))'],
        [f"{ws} = [nn.Linear(d_model, d_model, bias=bias) for _ in '{names}']"],
        ["make = lambda: nn.Linear(d_model, d_model, bias=bias)  # noqa: E731", f"{ws} = " + ", ".join("make()" for _ in names)],
    ][c["linears"]]
    wo = [[], ["self.W_o = nn.Linear(d_model, d_model, bias=bias)  # 输出投影"],
          ["self.W_o = nn.Linear(in_features=d_model, out_features=d_model, bias=bias)"]][c["wo"]]
    lines = check + (attrs + linears + wo if c["init_order"] == 0 else linears + attrs + wo)
    return _indent(lines)


def _forward(c, bug):
    sc, wt, cx, mg = NAMES[c["names"]]
    lines = []
    B, T, D = [("B", "T", "d"), ("B", "T", None), ("batch", "seq_len", "d_model"), ("B", "T", "C"),
               ("n", "t", None)][c["unpack"]]
    lines.append([f"{B}, {T}, {D} = x.shape", f"{B}, {T} = x.shape[:2]", f"{B}, {T}, {D} = x.size()",
                  f"{B}, {T}, {D} = x.shape[0], x.shape[1], x.shape[2]", f"{B}, {T} = x.size(0), x.size(1)"][c["unpack"]])
    dm = D or "self.d_model"
    has_attr = {2: "self.d_k", 3: "self.head_dim"}.get(c["attrs"])
    heads = c["heads"]
    if heads == 2 and not has_attr:
        heads = 1
    if heads == 0:
        lines.append(f"h = self.n_heads{_comment(c, '头数')}")
        lines.append(f"d_k = {dm} // h")
        h, dk = "h", "d_k"
    elif heads == 1:
        lines.append("h, d_k = self.n_heads, self.d_model // self.n_heads")
        h, dk = "h", "d_k"
    elif heads == 2:
        h, dk = "self.n_heads", has_attr
    else:
        lines.append(f"hd = {dm} // self.n_heads")
        h, dk = "self.n_heads", "hd"
    split = c["split"]
    if split == 0:
        for n in "qkv":
            note = _comment(c, "(B, h, T, d_k)") if n == "q" else ""
            lines.append(f"{n} = self.W_{n}(x).view({B}, {T}, {h}, {dk}).transpose(1, 2){note}")
    elif split == 1:
        lines += ["def split(t):", f"    return t.view({B}, {T}, {h}, {dk}).transpose(1, 2)", "",
                  "q, k, v = split(self.W_q(x)), split(self.W_k(x)), split(self.W_v(x))"]
    elif split == 2:
        lines.append(f"q, k, v = (lin(x).reshape({B}, {T}, {h}, -1).permute(0, 2, 1, 3)"
                     " for lin in (self.W_q, self.W_k, self.W_v))")
    elif split == 3:
        lines += ["q, k, v = self.W_q(x), self.W_k(x), self.W_v(x)",
                  f"q, k, v = [t.unflatten(-1, ({h}, {dk})).transpose(1, 2) for t in (q, k, v)]"]
    elif split == 4:
        lines += [f"q = split_heads(self.W_q(x), {h}){_comment(c, '用上面写好的 split_heads')}",
                  f"k = split_heads(self.W_k(x), {h})", f"v = split_heads(self.W_v(x), {h})"]
    else:
        lines += ["projected = [self.W_q(x), self.W_k(x), self.W_v(x)]",
                  f"q, k, v = (p.view({B}, -1, {h}, {dk}).swapaxes(1, 2) for p in projected)"]
    # scale (bugs: none, or √d_model)
    root = dm if bug == "scale_dmodel" else dk
    scale = c["scale"]
    pre, post = [], ""
    if bug == "scale_none":
        pass
    elif scale == 0:
        post = f" / math.sqrt({root})"
    elif scale == 1:
        post = f" * {root} ** -0.5"
    elif scale == 2:
        pre = [f"scale = 1.0 / math.sqrt({root})"]
        post = " * scale"
    elif scale == 3:
        post = f" / {root} ** 0.5"
    elif scale == 4:
        pre = [f"q = q / math.sqrt({root}){_comment(c, '先缩放 q')}"]
    else:
        post = f" / ({root} ** 0.5)"
    lines += pre
    lines.append(f"{sc} = " + [
        "q @ k.transpose(-2, -1)", "torch.matmul(q, k.transpose(2, 3))", "q @ k.mT",
        'torch.einsum("bhid,bhjd->bhij", q, k)', "q.matmul(k.transpose(-1, -2))"][c["scores"]] + post
        + _comment(c, "(B, h, T, T)"))
    m = "~mask" if bug == "mask_inverted" else "mask"
    mask = [
        [f'{sc} = {sc}.masked_fill({m}, float("-inf"))'],
        [f"{sc} = {sc}.masked_fill({m}, -torch.inf)"],
        [f'{sc}.masked_fill_({m}, float("-inf")){_comment(c, "True = 屏蔽")}'],
        [f'{sc} = torch.where({m}, torch.full_like({sc}, float("-inf")), {sc})'],
        [f"{sc} = {sc}.masked_fill({m}, torch.finfo({sc}.dtype).min)"],
        [f'{sc} = {sc} + torch.zeros_like({sc}).masked_fill({m}, float("-inf"))'],
    ][c["mask"]]
    lines += ["if mask is not None:"] + ["    " + line for line in mask]
    lines += [[f"{wt} = {sc}.softmax(dim=-1)"], [f"{wt} = torch.softmax({sc}, dim=-1)"],
              [f"{wt} = F.softmax({sc}, dim=-1)"], [f"{wt} = nn.functional.softmax({sc}, -1)"],
              [f"{wt} = torch.exp({sc} - {sc}.amax(dim=-1, keepdim=True))", f"{wt} = {wt} / {wt}.sum(dim=-1, keepdim=True)"],
              [f"{wt} = {sc}.softmax(-1)"]][c["softmax"]]
    apply = ["{w} @ v", "torch.matmul({w}, v)", 'torch.einsum("bhij,bhjd->bhid", {w}, v)'][c["apply"]].format(w=wt)
    dd = dm if D else "-1"
    if bug == "merge_no_transpose":
        merge = [f"{cx}.reshape({B}, {T}, {dd})", f"{cx}.contiguous().view({B}, {T}, -1)",
                 f"{cx}.view({B}, {T}, {dd})", f"{cx}.reshape({B}, {T}, -1)", f"{cx}.reshape({B}, {T}, {dd})"][c["merge"]]
    else:
        merge = [f"{cx}.transpose(1, 2).contiguous().view({B}, {T}, {dd})", f"{cx}.transpose(1, 2).reshape({B}, {T}, -1)",
                 f"{cx}.permute(0, 2, 1, 3).reshape({B}, {T}, {dd})", f"{cx}.transpose(1, 2).flatten(2)",
                 f"merge_heads({cx})"][c["merge"]]
    lines += [f"{cx} = {apply}", f"{mg} = self.W_o({merge}){_comment(c, '合并各头，再做输出投影')}"]
    lines += [[f"return ({mg}, {wt}) if need_weights else {mg}"],
              ["if need_weights:", f"    return {mg}, {wt}", f"return {mg}"],
              ["if not need_weights:", f"    return {mg}", f"return {mg}, {wt}"],
              [f"return {mg} if not need_weights else ({mg}, {wt})"]][c["ret"]]
    return _indent(lines)


def mha_source(c, bug=None):
    """The answer cell of one student's choices `c`, with `bug` (one of BUGS) planted."""
    assert bug is None or bug in BUGS, bug
    imports = ""
    if c["softmax"] == 2:
        imports = ["import torch.nn.functional as F\n\n\n", "from torch.nn import functional as F\n\n\n",
                   "import torch.nn.functional as F\n\n\n"][c["comments"]]
    return imports + HEADER + "\n" + INIT_SIG + _init(c) + "\n" + FORWARD_SIG + _forward(c, bug)
