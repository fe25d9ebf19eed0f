"""autograder.report.similarity: answers that look copied, on the mutation tables' real answers."""
import ast
import random
import re
from pathlib import Path

import pytest

from autograder.report import similarity
from tests import cosmetic
from tests.variants import nb02_scaled_dot_product as v02
from tests.variants import nb04_multihead as v04

ROOT = Path(__file__).resolve().parents[1]
COMPANION = (ROOT / "notebooks" / "w1d1" / "w1day1_checks.py").read_text(encoding="utf-8")
HONEST_MHA = [v04.MHA, v04.MHA_EINSUM, v04.MHA_PERMUTE, v04.MHA_LOOP, v04.MHA_SDPA_ALIAS, v04.MHA_TORCH,
              v04.MHA_THREAD_SDPA_MATH, v04.MHA_PATCHES_DETECTOR]


def _stubs():
    from autograder.report.class_data import release_cells

    return {gid: src for name in ("02_scaled_dot_product", "04_multihead") for gid, src in release_cells(name)[0].items()}


STUBS = _stubs()


def only(src, name):
    """The imports of `src` and its definition of `name` (an answer cell of that exercise)."""
    tree = ast.parse(src)
    keep = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))
            or (isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == name)]
    return "\n\n".join(ast.get_source_segment(src, n) for n in keep) + "\n"


def renamed(src):
    """Every name the source binds renamed, comments reworded, blank lines moved."""
    names = {n.id for n in ast.walk(ast.parse(src)) if isinstance(n, ast.Name)}
    names |= {a.arg for a in ast.walk(ast.parse(src)) if isinstance(a, ast.arg)}
    names -= {"self", "super", "nn", "torch", "math", "np", "float", "range", "F"}
    for i, name in enumerate(sorted(names)):
        src = re.sub(rf"\b{re.escape(name)}\b", f"v{i}_x", src)
    lines = [re.sub(r"#.*$", "# 注释", line) for line in src.splitlines() if line.strip()]
    return "\n\n".join("\n".join(lines[i:i + 2]) for i in range(0, len(lines), 2)) + "\n"


def import_prefixed(src, prefix="import math; "):
    """`prefix` in front of every simple statement (issue 36 §4), and an import inside each function."""
    tree = ast.parse(src)
    simple = {n.lineno for n in ast.walk(tree) if isinstance(n, ast.stmt) and not hasattr(n, "body")}
    lines = src.splitlines()
    for i in sorted(simple):
        indent = len(lines[i - 1]) - len(lines[i - 1].lstrip())
        lines[i - 1] = lines[i - 1][:indent] + prefix + lines[i - 1][indent:]
    return re.sub(r"(\n( +)def [^\n]*:\n)", r"\1\2    import torch\n", "\n".join(lines) + "\n")


def honest_class(planted=None):
    answers = {f"s{i}": src for i, src in enumerate(HONEST_MHA)}
    if planted:
        answers["copier"] = planted
    return {"mha": answers}


def test_planted_copy_found_and_renaming_does_not_hide_it():
    copy = renamed(v04.MHA_LOOP)
    assert copy != v04.MHA_LOOP and "heads" not in copy
    result = similarity.compare(honest_class(copy), STUBS, {})
    pairs = [(p.a, p.b) for p in result.pairs]
    assert pairs == [("copier", "s3")], pairs
    pair = result.pairs[0]
    assert pair.kind == "students" and pair.grade_id == "mha"
    assert pair.score >= similarity.THRESHOLD and 0 <= pair.score <= 1
    assert pair.a_source == copy and pair.b_source == v04.MHA_LOOP
    verbatim = similarity.compare({"mha": {"a": v04.MHA_LOOP, "b": v04.MHA_LOOP + "\n"}}, STUBS, {})
    assert verbatim.pairs[0].score - pair.score < 0.1        # renaming costs next to nothing


@pytest.mark.parametrize("prefix", ["import math; ", "from torch import nn; ", "pass; ", "0; ", "'';"])
def test_imports_go_as_statements_not_lines(prefix):
    """Issue 36 §4: `import math; ` in front of every statement hid a copy (its lines went with the import); the
    tree's statements are what goes, and so do other statements that are no evidence."""
    copy = import_prefixed(renamed(v04.MHA_LOOP), prefix)
    assert copy.count(prefix) > 20 and "        import torch\n" in copy
    result = similarity.compare(honest_class(copy), STUBS, {})
    assert [(p.a, p.b) for p in result.pairs] == [("copier", "s3")] and result.pairs[0].score > 0.95
    assert result.compared == {"mha": len(HONEST_MHA) + 1} and result.left_out == {}


@pytest.mark.parametrize("edit", ["semicolons", "parentheses", "trailing commas", "annotations", "every edit"])
def test_a_cosmetic_edit_does_not_hide_a_copy(edit):
    """Red team, round 4: `;` after every statement of a copy paired it at 0.42 with its original, parentheses at
    0.13, annotations at 0.63; answers are compared in their canonical form (`ast.unparse`), which no such edit
    changes. (Backslashes broke no k-gram even before: whitespace is filtered; they are in "every edit".)"""
    copy = cosmetic.EDITS.get(edit, cosmetic.every_edit)(renamed(v04.MHA_LOOP))
    compile(copy, "copy", "exec")
    result = similarity.compare(honest_class(copy), STUBS, {"w1day1_checks.py": COMPANION})
    assert [(p.a, p.b, p.kind) for p in result.pairs] == [("copier", "s3", "students")] and result.pairs[0].score > 0.9


def test_a_broken_cell_beside_a_copy_leaves_the_rest_in_canonical_form():
    """An answer that does not parse as a whole (a broken cell joined to the working one) is compared part by
    part: what parses in its canonical form, the rest as written."""
    copy = "def (((:\n  ]]]\n\n" + cosmetic.semicolons(renamed(v04.MHA_LOOP)) + "\n@\n"
    result = similarity.compare(honest_class(copy), STUBS, {})
    assert [(p.a, p.b) for p in result.pairs] == [("copier", "s3")] and result.pairs[0].score > 0.9


def test_a_cosmetic_edit_does_not_hide_a_copy_of_the_companion():
    answers = {"h": only(v02.BACKWARD, "attention_backward"), "copier": cosmetic.every_edit(COPIED_BACKWARD)}
    result = similarity.compare({"attention_backward": answers}, STUBS, {"w1day1_checks.py": COMPANION})
    assert [(p.kind, p.a, p.b) for p in result.pairs] == [("reference", "copier", "w1day1_checks.py")]
    assert "dS = A * (dA - D)" in result.pairs[0].b_source


def test_every_answer_not_compared_is_listed_with_its_reason():
    """Issue 36 §4: the report said "mha（2 份）" and nothing of a third answer."""
    answers = {"a": v04.MHA_LOOP, "b": v04.MHA_EINSUM, "stub": STUBS["mha"], "blank": "  \n",
               "short": "class MultiHeadAttention(nn.Module):\n    def __init__(self, d_model, n_heads, bias=True):\n"
                        "        super().__init__()\n        self.proj = nn.Linear(d_model, d_model)\n\n"
                        "    def forward(self, x, mask=None, need_weights=False):\n"
                        "        return self.proj(x) * 2.0 + x.mean(dim=-1, keepdim=True)\n"}
    result = similarity.compare({"mha": answers, "init_score_std": {"x": v02.INIT}}, STUBS, {})
    assert result.compared == {"mha": 2} and set(result.skipped) == {"init_score_std"}
    why = result.left_out["mha"]
    assert why["stub"] == similarity.NOTHING_LEFT and why["blank"] == similarity.EMPTY and "太短" in why["short"]
    assert set(why) == {"stub", "blank", "short"} and "init_score_std" not in result.left_out
    rows = {(r[0], r[2]): r for r in result.rows() if r[1] == "not_compared"}
    assert set(rows) == {("mha", "stub"), ("mha", "blank"), ("mha", "short"), ("init_score_std", "")}
    assert rows[("mha", "short")][5] == why["short"] and rows[("init_score_std", "")][5] == result.skipped["init_score_std"]


def test_distinct_honest_styles_are_not_paired():
    result = similarity.compare(honest_class(), STUBS, {"w1day1_checks.py": COMPANION})
    assert result.pairs == []
    assert result.compared == {"mha": len(HONEST_MHA)} and result.skipped == {}


def test_release_stub_is_boilerplate():
    answers = honest_class()["mha"] | {"stub1": STUBS["mha"], "stub2": STUBS["mha"] + "\n# 还没写\n"}
    result = similarity.compare({"mha": answers}, STUBS, {})
    assert result.pairs == [] and result.compared == {"mha": len(HONEST_MHA)}
    only_stubs = similarity.compare({"mha": {"a": STUBS["mha"], "b": STUBS["mha"]}}, STUBS, {})
    assert only_stubs.pairs == [] and "mha" in only_stubs.skipped and only_stubs.compared == {}


def test_one_liner_exercise_is_skipped_with_a_reason():
    table = v02.VARIANTS["init_score_std"]
    answers = {f"s{i}": src for i, src in enumerate(table["correct"] + [v02.INIT] + [b for b, _ in table["buggy"]])}
    result = similarity.compare({"init_score_std": answers}, STUBS, {})
    assert result.pairs == [] and "init_score_std" not in result.compared
    assert "太短" in result.skipped["init_score_std"]


COPIED_BACKWARD = '''
import math
import numpy as np


def attention_backward(dY, cache):
    """缩放点积注意力的反向（numpy）。"""
    Q, K, V, A, Y = cache[:5]
    s = 1.0 / math.sqrt(Q.shape[-1])
    dV = A.T @ dY
    dA = dY @ V.T
    D = (dY * Y).sum(-1, keepdims=True)
    dS = A * (dA - D)
    return s * dS @ K, s * dS.T @ Q, dV
'''


def test_copy_of_the_companion_script_is_found_as_reference():
    honest = [only(v02.BACKWARD, "attention_backward")] + [only(s, "attention_backward")
                                                           for s in v02.VARIANTS["attention_backward"]["correct"][:4]]
    answers = {f"s{i}": src for i, src in enumerate(honest)} | {"copier": COPIED_BACKWARD}
    result = similarity.compare({"attention_backward": answers}, STUBS, {"w1day1_checks.py": COMPANION})
    assert [(p.kind, p.a, p.b) for p in result.pairs] == [("reference", "copier", "w1day1_checks.py")]
    excerpt = result.pairs[0].b_source
    assert "dS = A * (dA - D)" in excerpt and len(excerpt) < len(COMPANION) / 4   # the matched lines, not the file


def test_pairs_are_ranked_highest_first_and_rows_are_csv_ready():
    lightly_edited = renamed(v04.MHA_EINSUM).replace("torch.finfo(s.dtype).min", "-1e9")
    answers = honest_class()["mha"] | {"exact": v04.MHA_PERMUTE, "edited": lightly_edited,
                                       "edited2": lightly_edited.replace("math.sqrt(", "(lambda t: t ** 0.5)(")}
    result = similarity.compare({"mha": answers}, STUBS, {})
    scores = [p.score for p in result.pairs]
    assert len(scores) >= 3 and scores == sorted(scores, reverse=True) and scores[0] > scores[-1]
    rows = result.rows()
    assert similarity.ROW_FIELDS == ("grade_id", "kind", "a", "b", "score", "reason")
    assert [r[:4] for r in rows] == [(p.grade_id, p.kind, p.a, p.b) for p in result.pairs]
    assert [float(r[4]) for r in rows] == pytest.approx(scores, abs=1e-3) and {r[5] for r in rows} == {""}
    assert (result.threshold, result.k, result.win_size) == (similarity.THRESHOLD, similarity.K, similarity.WIN_SIZE)


def test_untrusted_sources_never_raise_nor_print(capsys, caplog):
    huge = v04.MHA_LOOP + "\n# " + "x" * 1_000_000 + "\n" + v04.MHA_PERMUTE
    answers = {"loop": v04.MHA_LOOP, "nul": v04.MHA_LOOP.replace("heads", "he\x00ads"), "syntax": "def (((:\n  ]]] '''\n" * 50,
               "huge": huge, "none": None, "bytes": b"import os", "blank1": "   \n\t", "blank2": "   \n\t",
               "empty1": "", "empty2": "", "ok": v04.MHA_EINSUM, "tabs": "\t\x0b\x0c\r\n" * 100}
    result = similarity.compare({"mha": answers}, STUBS, {"bad ref": "\x00" * 100, "none": None})
    flagged = {p.a for p in result.pairs} | {p.b for p in result.pairs}
    assert not flagged & {"blank1", "blank2", "empty1", "empty2", "none", "bytes"}
    assert "huge" not in flagged and result.left_out["mha"]["huge"] == similarity.TOO_LONG
    assert capsys.readouterr() == ("", "") and caplog.records == []


@pytest.mark.parametrize("padding", ["# " + "注释" * 10_000 + "\n", '"""' + "x" * 30_000 + '"""\n',
                                     "_ = [i for i in range(3)]\n" * 1_000, "(" * 5_000 + "\n",
                                     v04.MHA_EINSUM.replace("class ", "class Other") + "\n"])
def test_padding_does_not_hide_a_copy(padding):
    """Comments, a docstring, dead code, a broken cell or a second answer in front of a copy: still listed."""
    result = similarity.compare(honest_class(padding + renamed(v04.MHA_LOOP)), STUBS, {})
    pairs = {frozenset((p.a, p.b)): p for p in result.pairs}
    assert frozenset(("copier", "s3")) in pairs and "copier" not in result.left_out.get("mha", {})
    assert pairs[frozenset(("copier", "s3"))].kind in ("students", "contained")
    assert {p.kind for p in result.pairs} <= {"students", "contained"}
    assert all("copier" in (p.a, p.b) for p in result.pairs)      # honest pairs stay unlisted


def test_a_copy_moved_into_another_exercises_cell_is_compared_where_it_is_used():
    copier = {"split_merge_heads": renamed(v04.MHA_LOOP).replace("class MultiHeadAttention", "class _Base"),
              "mha": "class MultiHeadAttention(_Base):\n    pass\n"}
    answers = honest_class(similarity.with_helpers(copier)["mha"])
    assert ("copier", "s3") in {(p.a, p.b) for p in similarity.compare(answers, STUBS, {}).pairs} | \
        {(p.b, p.a) for p in similarity.compare(answers, STUBS, {}).pairs}
    assert similarity.with_helpers({"a": "def f():\n    return g()\n", "b": "def g():\n    return h\n",
                                    "c": "h = 1\nunused = 2\n"})["a"] == "def f():\n    return g()\n\n\ndef g():\n    return h\n\nh = 1"


def test_a_local_name_lends_nothing_from_another_cell():
    """Only names that reach the cell's globals pull in another cell's code: `x` of `forward(self, x)` and a
    local `d` are not the self-check's `x = torch.randn(...)` (that took a short mha past the length rule)."""
    mha = "class M(nn.Module):\n    def forward(self, x):\n        d = x.shape[-1]\n        return x * d + scale\n"
    other = "def check(M):\n    x = torch.randn(2, 3)\n    d = 5\n    return M()(x)\nscale = 2.0\n"
    assert similarity.with_helpers({"mha": mha, "check": other})["mha"] == mha + "\n\nscale = 2.0"


def test_the_class_report_compares_each_answer_with_its_helpers():
    from types import SimpleNamespace

    from autograder.report import class_report
    from autograder.report.class_data import Exercise

    mha = honest_class("class MultiHeadAttention(_Base):\n    pass\n")["mha"]
    split = {"copier": renamed(v04.MHA_LOOP).replace("class MultiHeadAttention", "class _Base")}
    data = SimpleNamespace(notebooks=["04_multihead"], students=sorted(mha), stubs=STUBS, references={},
                           exercises=[Exercise(g, "04_multihead", (f"test_{g}", 1), (f"test_{g}__hidden", 1))
                                      for g in ("split_merge_heads", "mha")],
                           answers={"mha": mha, "split_merge_heads": split})
    pairs = class_report.compare_answers(data).pairs
    assert {(p.grade_id, frozenset((p.a, p.b))) for p in pairs} == {("mha", frozenset(("copier", "s3")))}


def test_a_copy_run_from_a_string_is_compared_as_code():
    answers = honest_class("MultiHeadAttention = None\nexec(" + repr(renamed(v04.MHA_LOOP)) + ")\n")
    pairs = {frozenset((p.a, p.b)) for p in similarity.compare(answers, STUBS, {}).pairs}
    assert pairs == {frozenset(("copier", "s3"))}


WRAPPED = '''import numpy as np


def attention_backward(dY, cache):
    Q, K, V, A, Y, s = cache
    outs = [np.zeros(Q.shape), np.zeros(K.shape), np.zeros(V.shape)]
    for idx in np.ndindex(*Q.shape[:-2]):
        g = _bw2(Q[idx], K[idx], V[idx], A[idx], Y[idx], dY[idx])
        for o, key in zip(outs, ("dQ", "dK", "dV")):
            o[idx] = g[key]
    return tuple(outs)
'''
PASTED = COMPANION[COMPANION.index("def attention_backward("):COMPANION.index("def self_attention(")].replace(
    "def attention_backward(", "def _bw2(")


@pytest.mark.parametrize("where", ["same cell", "nested in another cell"])
def test_a_companion_function_wrapped_in_code_of_ones_own_is_found(where):
    """(Red team, report round 2.) The pasted function is compared with the companion on its own."""
    if where == "same cell":
        cells = {"attention_backward": PASTED + "\n\n" + WRAPPED}
    else:
        indented = "\n".join("    " + line if line.strip() else "" for line in PASTED.splitlines())
        cells = {"numerical_gradient": "x = 1\n\nif True:\n" + indented + "\n", "attention_backward": WRAPPED}
    honest = {f"h{i}": only(src, "attention_backward") for i, src in enumerate(v02.VARIANTS["attention_backward"]["correct"][:4])}
    answers = {"attention_backward": {**honest, "copier": similarity.with_helpers(cells)["attention_backward"]}}
    result = similarity.compare(answers, STUBS, {"w1day1_checks.py": COMPANION})
    assert [(p.kind, p.a, p.b) for p in result.pairs] == [("reference", "copier", "w1day1_checks.py")]


@pytest.mark.parametrize("encode", [lambda code: repr(code.replace("\n", "\r")),
                                    lambda code: repr(code.encode("utf-8"))])
def test_code_in_any_string_literal_is_compared(encode):
    copy = renamed(v04.MHA_LOOP).replace("class MultiHeadAttention", "class _Impl")
    answers = honest_class(f"exec({encode(copy)})\nMultiHeadAttention = _Impl\n")
    assert {frozenset((p.a, p.b)) for p in similarity.compare(answers, STUBS, {}).pairs} == {frozenset(("copier", "s3"))}


@pytest.mark.parametrize("mha, helper_prefix", [
    ("class MultiHeadAttention(_Base):\n    def f(self):\n        _Base = 1\n        return _Base\n", ""),
    ("class MultiHeadAttention(_Base):\n    pass\n", "_Base = None\n"),
    ("MultiHeadAttention = MultiHeadAttention\n", ""),
    ("class MultiHeadAttention(globals()['_Base']):\n    pass\n", ""),
])
def test_a_helper_is_followed_however_the_answer_names_it(mha, helper_prefix):
    """(Red team, report round 3.) A local of the same name, an earlier binding, a self-alias, a string."""
    name = "MultiHeadAttention" if mha.startswith("MultiHeadAttention =") else "_Base"
    helper = helper_prefix + renamed(v04.MHA_LOOP).replace("class MultiHeadAttention", f"class {name}")
    answers = honest_class(similarity.with_helpers({"split_merge_heads": helper, "mha": mha})["mha"])
    assert {frozenset((p.a, p.b)) for p in similarity.compare(answers, STUBS, {}).pairs} == {frozenset(("copier", "s3"))}


def test_a_copy_in_a_string_is_never_cut_off_by_padding():
    copy = renamed(v04.MHA_LOOP).replace("class MultiHeadAttention", "class _Impl")
    cell = f"exec({copy!r})\nMultiHeadAttention = _Impl\n"
    answers = honest_class(cell + "#" * (similarity.MAX_CHARS - len(cell) - 10) + "\n")
    assert {frozenset((p.a, p.b)) for p in similarity.compare(answers, STUBS, {}).pairs} == {frozenset(("copier", "s3"))}


def test_a_cell_too_long_to_compare_lends_no_helpers():
    big = "def helper():\n    return 1\n" + "v = 0\n" * (similarity.MAX_CHARS // 6)
    assert similarity.with_helpers({"a": "y = helper()\n", "b": big})["a"] == "y = helper()\n"


def test_an_answer_too_long_to_compare_is_listed_not_cut():
    answers = honest_class("# " + "x" * similarity.MAX_CHARS + "\n" + v04.MHA_LOOP)["mha"]
    result = similarity.compare({"mha": answers}, STUBS, {})
    assert result.left_out == {"mha": {"copier": similarity.TOO_LONG}} and result.compared == {"mha": len(HONEST_MHA)}


def test_a_class_of_300_finishes():
    rng = random.Random(1)
    styles = {"mha": HONEST_MHA, "attention_backward": [only(s, "attention_backward") for s in
                                                        v02.VARIANTS["attention_backward"]["correct"][:4]],
              "attention_forward": v02.VARIANTS["attention_forward"]["correct"][:3]}

    def student(src):
        lines = src.splitlines()
        for i in rng.sample(range(len(lines)), len(lines) // 3):
            lines[i] = re.sub(r"=\s*(.+)$", lambda m: f"= {rng.choice('abcxyz')} * {rng.randint(0, 999)} + m.sum()", lines[i])
        return "\n".join(lines)

    answers = {gid: {f"s{i:03d}": student(rng.choice(srcs)) for i in range(300)} for gid, srcs in styles.items()}
    answers["mha"]["s000"], answers["mha"]["s299"] = v04.MHA_LOOP, renamed(v04.MHA_LOOP)
    result = similarity.compare(answers, STUBS, {"w1day1_checks.py": COMPANION})
    assert set(result.compared) | set(result.skipped) == set(answers)
    assert ("mha", "s000", "s299") in {(p.grade_id, p.a, p.b) for p in result.pairs}
