"""The measurements behind autograder/report/similarity.py's K, WIN_SIZE, THRESHOLD and MIN_TOKENS (printed, never asserted).

Answers are the mutation tables' correct styles (tests/variants), cut to what a student's answer cell holds;
the release stub of the exercise is removed as in compare(). For each (k, window):
  honest   the largest score between two distinct correct styles of mha (min of the two directions, and max);
  planted  the lowest score of a planted copy against its original (renamed, edited, and each with the cosmetic
           edits of tests/cosmetic.py);
  bw→ref   the answer's share found in w1day1_checks.py: a backward adapted from it, and the largest of the
           distinct backward styles.
Then the fingerprinted length (token_coverage) of the answers of each exercise, for MIN_TOKENS.

    .venv/bin/python bench/similarity_settings.py
"""
import ast
import re
import sys
from itertools import combinations
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from autograder.report import similarity as sim  # noqa: E402
from tests import cosmetic  # noqa: E402
from tests.variants import nb02_scaled_dot_product as v02  # noqa: E402
from tests.variants import nb04_multihead as v04  # noqa: E402

COMPANION = (ROOT / "notebooks" / "w1d1" / "w1day1_checks.py").read_text(encoding="utf-8")


def stubs():
    from autograder.report.class_data import release_cells

    return {gid: src for name in ("02_scaled_dot_product", "04_multihead") for gid, src in release_cells(name)[0].items()}


def release_code():
    """{"发布版 <notebook>": the release notebook's code cells that are not answer cells}."""
    out = {}
    for name in ("02_scaled_dot_product", "04_multihead"):
        nb = nbformat.read(ROOT / "notebooks" / "w1d1" / f"{name}.ipynb", as_version=4)
        out[f"发布版 {name}"] = "\n\n".join(c.source for c in nb.cells if c.cell_type == "code"
                                           and not c.metadata.get("nbgrader", {}).get("solution"))
    return out


def only(src, name):
    """The imports of `src` and its definition of `name`: what the answer cell of that exercise holds."""
    tree = ast.parse(src)
    keep = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))
            or (isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == name)]
    return "\n\n".join(ast.get_source_segment(src, n) for n in keep) + "\n"


def disguise(src, names, comment="# 我自己写的"):
    """Every identifier in `names` renamed, comments replaced, blank lines moved: the cheapest disguise."""
    for old, new in names.items():
        src = re.sub(rf"\b{re.escape(old)}\b", new, src)
    lines = [re.sub(r"#.*$", comment, line) for line in src.splitlines()]
    lines = [line for line in lines if line.strip()]
    out = []
    for i, line in enumerate(lines):
        out.append(line)
        if i % 3 == 2:
            out.append("")
    return "\n".join(out) + "\n"


MHA_NAMES = {"q": "query", "k": "key", "v": "value", "att": "scores", "B": "n", "T": "L", "d": "dim", "h": "heads",
             "d_k": "hd", "y": "out", "x": "inp", "mask": "m", "need_weights": "ret_w", "d_model": "dm",
             "n_heads": "nh", "bias": "use_b", "math": "_m", "W_q": "Wq", "W_k": "Wk", "W_v": "Wv", "W_o": "Wo"}
PLANTED_MHA = disguise(v04.MHA, MHA_NAMES)
# the same, with four statements reworded and two reordered (what a student hiding a copy does next)
PLANTED_MHA_EDITED = (PLANTED_MHA
                      .replace("scores = scores.softmax(dim=-1)", "scores = torch.softmax(scores, -1)")
                      .replace("_m.sqrt(hd)", "hd ** 0.5")
                      .replace("return (out, scores) if ret_w else out", "if ret_w:\n            return out, scores\n"
                                                                          "        return out")
                      .replace("assert dm % nh == 0", "assert dm % nh == 0, 'bad heads'"))
_lines = PLANTED_MHA_EDITED.splitlines()
_i, _j = next(i for i, s in enumerate(_lines) if "self.Wq =" in s), next(i for i, s in enumerate(_lines) if "self.Wv =" in s)
_lines[_i], _lines[_j] = _lines[_j], _lines[_i]
PLANTED_MHA_EDITED = "\n".join(_lines) + "\n"
PLANTED_EINSUM = disguise(v04.MHA_EINSUM, {"s": "sc", "a": "p", "lin": "layer", "name": "nm", "y": "res", "h": "nh_"}).replace(
    "if need_weights:\n        return y, a", "if need_weights:\n            return res, p").replace(
    "torch.finfo(sc.dtype).min", "-1e9")

HONEST_MHA = {"MHA": v04.MHA, "MHA_EINSUM": v04.MHA_EINSUM, "MHA_PERMUTE": v04.MHA_PERMUTE, "MHA_LOOP": v04.MHA_LOOP,
              "MHA_SDPA_ALIAS": v04.MHA_SDPA_ALIAS, "MHA_TORCH": v04.MHA_TORCH, "MHA_QKV_FUSED": v04.MHA_QKV_FUSED,
              "MHA_THREAD_SDPA_MATH": v04.MHA_THREAD_SDPA_MATH, "MHA_PATCHES_DETECTOR": v04.MHA_PATCHES_DETECTOR}
PLANTED = [("mha", "MHA renamed", PLANTED_MHA, v04.MHA), ("mha", "MHA renamed+edited", PLANTED_MHA_EDITED, v04.MHA),
           ("mha", "EINSUM renamed+edited", PLANTED_EINSUM, v04.MHA_EINSUM)]
# cosmetic edits (tests/cosmetic.py: `;`, parentheses, trailing commas, annotations, backslashes) of the planted copies
PLANTED += [(gid, f"{label} {edit}", change(copy), original) for gid, label, copy, original in PLANTED[:1] + PLANTED[2:]
            for edit, change in [*cosmetic.EDITS.items(), ("every edit", cosmetic.every_edit)]]

# the companion's five-line backward (lines ~199-214), adapted to the exercise's signature and batched axes
BACKWARD_FROM_COMPANION = '''
import math
import numpy as np


def attention_backward(dY, cache):
    Q, K, V, A, Y = cache[:5]
    s = 1.0 / math.sqrt(Q.shape[-1])
    dV = A.swapaxes(-1, -2) @ dY
    dA = dY @ V.swapaxes(-1, -2)
    D = (dY * Y).sum(-1, keepdims=True)
    dS = A * (dA - D)
    return s * dS @ K, s * dS.swapaxes(-1, -2) @ Q, dV
'''
BACKWARD_FROM_COMPANION_T = BACKWARD_FROM_COMPANION.replace(".swapaxes(-1, -2)", ".T")
_bw = v02.VARIANTS["attention_backward"]["correct"]
HONEST_BACKWARD = {"solution": only(v02.BACKWARD, "attention_backward"), "einsum": only(_bw[0], "attention_backward"),
                   "torch": only(_bw[1], "attention_backward"), "loops": only(_bw[2], "attention_backward"),
                   "torch+einsum": only(_bw[3], "attention_backward")}


def fingerprints(sources, stub, k, win):
    release = sim._release(stub, k)
    return {name: sim._answer_fingerprint(src, release, k, win) for name, src in sources.items()}


def measure(k, win, st):
    honest = fingerprints(HONEST_MHA, st["mha"], k, win)
    pairs = []
    for a, b in combinations(honest, 2):
        sa, sb, _ = sim._similarities(honest[a], honest[b])
        pairs.append((min(sa, sb), max(sa, sb), a, b))
    planted = []
    for gid, label, copy, original in PLANTED:
        f = fingerprints({"c": copy, "o": original}, st[gid], k, win)
        planted.append((min(sim._similarities(f["c"], f["o"])[:2]), label))
    ref = sim.reference(COMPANION, k, win)[1]
    bw = fingerprints({**HONEST_BACKWARD, "from companion": BACKWARD_FROM_COMPANION,
                       "from companion (.T)": BACKWARD_FROM_COMPANION_T}, st["attention_backward"], k, win)
    to_ref = {name: sim._similarities(fp, ref)[0] for name, fp in bw.items()}
    return sorted(pairs, reverse=True), sorted(planted), to_ref


def main():
    st = stubs()
    print("k  win | honest mha: largest min (pair) / next / largest max | planted: lowest | backward→companion: "
          "adapted / adapted .T / largest honest")
    for k in (20, 25, 30, 35):
        for win in (1, 4, 6):
            pairs, planted, to_ref = measure(k, win, st)
            by_max = max(p[1] for p in pairs)
            honest_bw = max((v, n) for n, v in to_ref.items() if not n.startswith("from"))
            print(f"{k:2} {win:3} | {pairs[0][0]:.2f} ({pairs[0][2]}~{pairs[0][3]}) / {pairs[1][0]:.2f} / {by_max:.2f} | "
                  f"{planted[0][0]:.2f} ({planted[0][1]}) | {to_ref['from companion']:.2f} / "
                  f"{to_ref['from companion (.T)']:.2f} / {honest_bw[0]:.2f} ({honest_bw[1]})")
    k, win = sim.K, sim.WIN_SIZE
    pairs, planted, to_ref = measure(k, win, st)
    print(f"\nat k={k}, win={win}: honest mha pairs (min, max):")
    for lo, hi, a, b in pairs[:8]:
        print(f"  {lo:.2f} {hi:.2f}  {a} ~ {b}")
    print("  planted:", ", ".join(f"{label} {s:.2f}" for s, label in planted))
    print("  backward → companion:", ", ".join(f"{n} {v:.2f}" for n, v in sorted(to_ref.items(), key=lambda t: -t[1])))
    print(f"\nat k={k}, win={win}: the largest share of a correct answer found in code students see")
    refs = {"w1day1_checks.py": COMPANION, **release_code()}
    for table in (v02.VARIANTS, v04.VARIANTS):
        for gid, v in table.items():
            if gid not in st:
                continue
            srcs = {f"c{i}": s for i, s in enumerate(v["correct"])}
            fps = [fp for fp in fingerprints(srcs, st[gid], k, win).values() if fp is not None]
            best = max((sim._similarities(fp, sim.reference(src, k, win)[1])[0], label)
                       for fp in fps for label, src in refs.items())
            print(f"  {gid:22} {best[0]:.2f} ({best[1]})")
    print(f"\ntoken_coverage after the stub (k={k}, win={win}), per exercise: min–max over the correct styles")
    for table in (v02.VARIANTS, v04.VARIANTS):
        for gid, v in table.items():
            if gid not in st:
                continue
            srcs = {f"c{i}": s for i, s in enumerate(v["correct"])}
            if gid == "attention_backward":
                srcs = HONEST_BACKWARD
            cov = [fp.token_coverage for fp in fingerprints(srcs, st[gid], k, win).values()]
            stub_fp = fingerprints({"stub": st[gid]}, st[gid], k, win)["stub"]
            stub_cov = 0 if stub_fp is None else stub_fp.token_coverage
            print(f"  {gid:22} {min(cov):5.0f}–{max(cov):5.0f}   (the stub itself: {stub_cov:.0f})")


if __name__ == "__main__":
    main()
