"""The release hands over no answer: no demo cell of the student notebooks (nor `w1d1_viz.py`) defines a
function or class that passes an exercise's public check when it stands in for the student's answer.

Each release notebook's namespace is built as a student's kernel would hold it before answering: the
imports, functions and classes of its demo cells, and its answer cells as released (stubs). Every top-level
`def`/`class` of a demo cell and of `w1d1_viz.py` is then bound, in turn, under each name an exercise's
answer binds (the other names of a two-name answer get the solution's), and the exercise's public cases
run through the student package's driver and judge. `w1day1_checks.py` is the course text's companion, a
documented exception (README): its text, copied into an answer cell, answers exactly the exercises listed in
COMPANION_ANSWERS, and nothing more may join them. A demo function that computes multi-head attention by hand (in any of the layouts the
notebooks use) is an answer too, and so is a demo call of SDPA that does exercise `sdpa_attention`'s conversions.
"""
import ast
import contextlib
import importlib
import inspect
import io
import sys

import nbformat
import pytest
from w1d1_student import registry, wire
from w1d1_student.runner import run_cases

from autograder.course import ASSIGNMENT, RELEASE_DIR
from autograder.exercises.checks import judge_payload, make_cases
from tests.variants import notebook_solution

RELEASE = RELEASE_DIR / ASSIGNMENT
KEEP = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _definitions(source):
    """The imports, functions and classes of a cell, and the names of its functions and classes."""
    tree = ast.parse(source)
    nodes = [n for n in tree.body if isinstance(n, KEEP)]
    names = [n.name for n in nodes if not isinstance(n, (ast.Import, ast.ImportFrom))]
    return "\n".join(ast.get_source_segment(source, n) for n in nodes), names


def _exec(src, ns, where):
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            exec(compile(src, where, "exec"), ns)
        except NotImplementedError:
            pass


def _release_candidates():
    """[(where, name, obj)] for every top-level def/class of a release demo cell and of w1d1_viz.py."""
    if str(RELEASE) not in sys.path:
        sys.path.insert(0, str(RELEASE))
    out = []
    viz = importlib.import_module("w1d1_viz")
    src = (RELEASE / "w1d1_viz.py").read_text()
    for name in _definitions(src)[1]:
        out.append(("w1d1_viz.py", name, getattr(viz, name)))
    for path in sorted(RELEASE.glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        ns = {"__name__": "__main__"}
        found = []
        for cell in nb.cells:
            if cell.cell_type != "code":
                continue
            meta = cell.metadata.get("nbgrader", {})
            if meta.get("grade"):                      # test cells: check() calls only
                continue
            if meta.get("solution"):                   # the released stub of an answer
                _exec(cell.source, ns, f"<{path.stem} {cell.id}>")
                continue
            code, names = _definitions(cell.source)
            _exec(code, ns, f"<{path.stem} {cell.id}>")
            found += [(f"{path.stem} {cell.id}", name) for name in names]
        out += [(where, name, ns[name]) for where, name in found if name in ns]
    return out


@pytest.fixture(scope="module")
def candidates():
    cands = _release_candidates()
    assert len(cands) > 20, "no demo definitions found: is the release there?"
    return cands


def _solution_namespace(grade_id):
    ns = {"__name__": "__main__"}
    _exec(notebook_solution(grade_id), ns, f"<solution {grade_id}>")
    return ns


def _passes(grade_id, ns, cases):
    payload = run_cases(grade_id, ns, cases, hidden=False)
    if not any(r["ok"] for r in payload["results"]):
        return False
    return judge_payload(wire.loads(wire.dumps(payload)), seed=0).passed


def handed_over(grade_id, cands):
    """The candidates that pass the public check of `grade_id` under one of its answer's names."""
    import matplotlib.pyplot as plt

    names = registry.driver(grade_id).names
    solution = _solution_namespace(grade_id) if len(names) > 1 else {}
    cases = make_cases(grade_id, 0, False)
    hits = []
    for name in names:
        for where, cand_name, obj in cands:
            ns = {"__name__": "__main__", **{n: solution[n] for n in names if n != name}, name: obj}
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                ok = _passes(grade_id, ns, cases)
            plt.close("all")
            if ok:
                hits.append(f"{where}: {cand_name} passes `{grade_id}` as {name}")
    return hits


@pytest.mark.parametrize("grade_id", sorted(registry.NOTEBOOK_OF))
def test_no_demo_definition_passes_a_public_check(grade_id, candidates):
    hits = handed_over(grade_id, candidates)
    assert not hits, "the release hands over an answer:\n" + "\n".join(hits)


FORBIDDEN = ("scaled_dot_product", "multi_head_attention", "MultiheadAttention")


def _reference_mha(x, W, h, blocked):
    """float64 multi-head self-attention of x (B, T, d) with (in, out) weights; blocked True = masked."""
    import numpy as np

    B, T, d = x.shape
    dk = d // h
    q, k, v = ((x @ w).reshape(B, T, h, dk).transpose(0, 2, 1, 3) for w in W[:3])
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(dk)
    if blocked is not None:
        s = np.where(blocked, -np.inf, s)
    a = np.exp(s - s.max(-1, keepdims=True))
    y = (a / a.sum(-1, keepdims=True)) @ v
    return y.transpose(0, 2, 1, 3).reshape(B, T, d) @ W[3]


def _computes_mha_by_itself(fn):
    """True when `fn(x, W_q, W_k, W_v, W_o, h[, mask])`, in the torch (nn.Linear weights) or the numpy
    ((in, out) weights, one sequence) layout, returns a multi-head forward without PyTorch's own attention."""
    import inspect

    import numpy as np
    import torch
    from torch.overrides import TorchFunctionMode

    class Watch(TorchFunctionMode):
        used = False

        def __torch_function__(self, func, types, args=(), kwargs=None):
            if any(f in getattr(func, "__name__", "") for f in FORBIDDEN):
                Watch.used = True
            return func(*args, **(kwargs or {}))

    g = np.random.default_rng(0)
    B, T, d, h = 2, 5, 8, 2
    x = g.normal(size=(B, T, d))
    W = [g.normal(size=(d, d)) / np.sqrt(d) for _ in range(4)]
    blocked = np.triu(np.ones((T, T), dtype=bool), 1)
    xt, Wt, mt = torch.tensor(x), [torch.tensor(w.T) for w in W], torch.tensor(blocked)
    module = torch.nn.MultiheadAttention(d, h, batch_first=True).double()      # biases present, all zero
    with torch.no_grad():
        module.in_proj_weight.copy_(torch.cat(Wt[:3]))
        module.out_proj.weight.copy_(Wt[3])
        module.in_proj_bias.zero_()
        module.out_proj.bias.zero_()
    layouts = {"torch": ((xt, *Wt, h), mt, slice(None)), "numpy": ((x[0], *W, h), blocked, 0),
               "packed": ((xt, torch.cat(Wt[:3]), Wt[3], h), mt, slice(None)),   # (x, W_qkv (3d, d), W_o, h)
               "module": ((module, xt), mt, slice(None))}                        # (nn.MultiheadAttention, x)
    for mask in (None, blocked):
        want = _reference_mha(x, W, h, mask)
        for head, m, pick in layouts.values():
            args = head + (() if mask is None else (m,))
            try:
                inspect.signature(fn).bind(*args)
            except (TypeError, ValueError):
                continue
            Watch.used = False
            try:
                with Watch(), contextlib.redirect_stdout(io.StringIO()):
                    out = fn(*args)
                out = out[0] if isinstance(out, tuple) else out
                got = np.asarray(out.detach() if isinstance(out, torch.Tensor) else out, dtype=float)
            except Exception:                          # not a forward of this layout (or not an array at all)
                continue
            if not Watch.used and got.shape == want[pick].shape and np.allclose(got, want[pick], atol=1e-5):
                return True
    return False


def test_the_checker_recognises_a_multi_head_forward():
    import numpy as np

    def by_hand(X, Wq, Wk, Wv, Wo, h, mask=None):
        return _reference_mha(np.asarray(X)[None], [Wq, Wk, Wv, Wo], h, mask)[0]

    def with_torch(x, W_q, W_k, W_v, W_o, h, blocked=None):
        import torch.nn.functional as F
        xt = x.transpose(0, 1)
        return F.multi_head_attention_forward(xt, xt, xt, x.shape[-1], h, __import__("torch").cat([W_q, W_k, W_v]), None,
                                              None, None, False, 0.0, W_o, None, training=False, need_weights=False,
                                              attn_mask=blocked)[0].transpose(0, 1)

    def by_hand_torch(x, W_qkv, W_o, h):
        B, T, d = x.shape
        q, k, v = ((x @ w.T).view(B, T, h, d // h).transpose(1, 2) for w in W_qkv.chunk(3))
        a = (q @ k.transpose(-2, -1) / (d // h) ** 0.5).softmax(-1)
        return (a @ v).transpose(1, 2).reshape(B, T, d) @ W_o.T

    def from_module(mha, x):
        return by_hand_torch(x, mha.in_proj_weight, mha.out_proj.weight, mha.num_heads)

    assert _computes_mha_by_itself(by_hand)
    assert _computes_mha_by_itself(by_hand_torch)      # the packed (x, W_qkv, W_o, h) layout
    assert _computes_mha_by_itself(from_module)        # read off an nn.MultiheadAttention
    assert not _computes_mha_by_itself(with_torch)   # right, but through the API exercise 2 forbids
    assert not _computes_mha_by_itself(lambda X, Wq, Wk, Wv, Wo, h, mask=None: by_hand(X, Wq, Wk, Wv, Wo, 1, mask))


def test_no_demo_function_is_a_working_multi_head_forward(candidates):
    hits = [f"{where}: {name}" for where, name, obj in candidates
            if callable(obj) and not isinstance(obj, type) and _computes_mha_by_itself(obj)]
    assert not hits, "a demo function computes multi-head attention without PyTorch's own:\n" + "\n".join(hits)


def sdpa_conversions(source):
    """The calls of F.scaled_dot_product_attention in `source` that do exercise `sdpa_attention`'s conversions
    themselves: a mask inverted in the call (`~m`, `logical_not`) or a `dropout_p` chosen by `.training`."""
    hits = []
    for node in ast.walk(ast.parse(source)):
        func = getattr(node, "func", None)
        if not isinstance(node, ast.Call) or (getattr(func, "attr", None) or getattr(func, "id", None)) != "scaled_dot_product_attention":
            continue
        for kw in node.keywords:
            inner = list(ast.walk(kw.value))
            inverted = any(isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Invert) for n in inner) or any(
                getattr(n, "attr", getattr(n, "id", None)) in ("logical_not", "bitwise_not") for n in inner)
            by_mode = isinstance(kw.value, ast.IfExp) and any(getattr(n, "attr", None) == "training" for n in ast.walk(kw.value.test))
            if (kw.arg == "attn_mask" and inverted) or (kw.arg == "dropout_p" and by_mode):
                hits.append(f"line {node.lineno}: {ast.get_source_segment(source, node)}")
    return hits


def test_the_conversion_checker_sees_both_conversions():
    assert len(sdpa_conversions("F.scaled_dot_product_attention(q, k, v, attn_mask=~blocked)\n"
                                "F.scaled_dot_product_attention(q, k, v, attn_mask=m.logical_not())\n"
                                "F.scaled_dot_product_attention(q, k, v, dropout_p=self.p if self.training else 0.0)")) == 3
    assert not sdpa_conversions("F.scaled_dot_product_attention(q, k, v, attn_mask=keep, dropout_p=0.1)\n"
                                "sdpa_attention(q, k, v, mask=~keep)")


def test_no_demo_cell_converts_for_sdpa():
    """Exercise `sdpa_attention` asks for the course mask turned into SDPA's and dropout only while training:
    a demo cell shows the wrong call and leaves the right one to the student's function."""
    hits = []
    for path in sorted(RELEASE.glob("*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            meta = cell.metadata.get("nbgrader", {})
            if cell.cell_type == "code" and not meta.get("grade") and not meta.get("solution"):
                hits += [f"{path.stem} {cell.id}: {hit}" for hit in sdpa_conversions(cell.source)]
    assert not hits, "a demo cell converts for SDPA, as exercise sdpa_attention asks:\n" + "\n".join(hits)


# The companion's reference functions, copied into an answer cell, answer these (exercise, function) pairs and no
# others (README, "配套脚本"). Its builders and experiments (groups, weights, curves) answer nothing and are slow
# to call with an exercise's arguments, so only its parts are tried.
COMPANION_ANSWERS = {("flops", "mha_flops_formula"), ("flops", "quadratic_flop_share_from_shapes")}
COMPANION_PARTS = ("softmax", "causal_mask", "attention", "attention_backward", "self_attention", "gradient_error",
                   "mha_flops_from_shapes", "mha_flops_formula", "quadratic_flop_share_from_shapes", "attention_matrix_gib")


def test_the_companion_answers_only_what_the_readme_says():
    ns = {"__name__": "copied"}
    _exec((RELEASE / "w1day1_checks.py").read_text(), ns, "<an answer cell holding w1day1_checks.py>")
    assert set(COMPANION_PARTS) <= set(ns["__all__"])
    parts = [("w1day1_checks.py", name, ns[name]) for name in COMPANION_PARTS]
    found = {(grade_id, hit.split(": ")[1].split(" passes")[0]) for grade_id in sorted(registry.NOTEBOOK_OF)
             for hit in handed_over(grade_id, parts)}
    assert found == COMPANION_ANSWERS, found


def _passes_as(grade_id, ns, hidden):
    payload = run_cases(grade_id, ns, make_cases(grade_id, 0, hidden), hidden=hidden)
    return any(r["ok"] for r in payload["results"]) and judge_payload(wire.loads(wire.dumps(payload)), seed=0).passed


def test_no_companion_function_is_a_numerical_gradient():
    """02 exercise 3 asks for `numerical_gradient(f, x)`: the companion checks a hand gradient along random directions
    and holds no function that, pasted into the answer cell under that name, passes its public or hidden check."""
    ns = {"__name__": "copied"}
    _exec((RELEASE / "w1day1_checks.py").read_text(), ns, "<an answer cell holding w1day1_checks.py>")
    functions = {name: f for name, f in ns.items() if inspect.isfunction(f) and f.__module__ == "copied"}
    assert "gradient_error" in functions and len(functions) > 30
    passing = []
    for name, f in functions.items():
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            if any(_passes_as("numerical_gradient", {"__name__": "__main__", "numerical_gradient": f}, hidden)
                   for hidden in (False, True)):
                passing.append(name)
    assert not passing, f"the companion answers 02's numerical_gradient: {passing}"


def test_no_demo_builds_a_causal_mask_before_exercise_1():
    """03's exercise 1 (`causal_mask`) is a triu one-liner: no code cell above its answer cell calls triu/tril."""
    cells = nbformat.read(RELEASE / "03_masks.ipynb", as_version=4).cells
    answer = next(i for i, c in enumerate(cells) if c.get("id") == "causal_mask")
    early = [c.id for c in cells[:answer] if c.cell_type == "code" and ("triu" in c.source or "tril" in c.source)]
    assert not early, f"cells above exercise 1 build a causal mask: {early}"


def _free_names(node):
    """The names `node` reads that it does not bind itself (comprehension targets are bound)."""
    loads = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    bound = {n.id for c in ast.walk(node) if isinstance(c, ast.comprehension)
             for n in ast.walk(c.target) if isinstance(n, ast.Name)}
    return loads - bound


def _expressions_of_T_and_d(source):
    """Every expression in `source` that reads T (and maybe d) and nothing else but arithmetic builtins, as f(T, d)."""
    allowed = {"T", "d", "sum", "range", "int", "abs", "min", "max", "pow", "round"}
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.expr) and "T" in (free := _free_names(node)) and free <= allowed:
            code = compile(ast.Expression(node), "<demo expression>", "eval")
            out.append((ast.get_source_segment(source, node), lambda T, d, code=code: eval(code, {"T": T, "d": d})))
    return out


def demo_generation_flops(sources):
    """The expressions of demo cells that, pasted as the answer of exercise `generation_flops` (for one value of
    `kv_cache`, the solution's answer for the other), pass its public check."""
    from autograder.exercises.nb05_complexity import generation

    grid = [(1, 4), (3, 2), (7, 5), (20, 3)]
    halves = {True: [], False: []}
    for where, source in sources:
        for text, f in _expressions_of_T_and_d(source):
            for kv in (True, False):
                with contextlib.suppress(Exception):
                    if all(f(T, d) == generation(T, d, kv) for T, d in grid):
                        halves[kv].append((f"{where}: {text}", f))
    cases = make_cases("generation_flops", 0, False)
    hits = []
    for kv, found in halves.items():
        for text, f in found:
            def answer(T, d, kv_cache, f=f, kv=kv):
                return f(T, d) if kv_cache == kv else generation(T, d, kv_cache)
            if _passes("generation_flops", {"__name__": "__main__", "generation_flops": answer}, cases):
                hits.append(f"{text} (kv_cache={kv})")
    return hits


def test_the_expression_checker_finds_a_summed_answer():
    demo = ("naive = sum(8 * t * d * d + 4 * t * t * d for t in range(1, T + 1))\n"
            "f = [sum(8 * d * d + 4 * t * d for t in range(1, T + 1)) for T in Ts]\n"
            "per_step = 8 * d * d + 4 * t * d\nprint(4 * T * T * d)")
    assert len(demo_generation_flops([("demo", demo)])) == 2


def test_no_demo_cell_holds_the_generation_flops_sum():
    """05 exercise 3 asks for the FLOPs of generating T tokens, Σ over t: no demo cell of the release (the
    measurement cells below the answer included) writes that sum, which a student could paste as the answer."""
    sources = []
    for path in sorted(RELEASE.glob("*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            meta = cell.metadata.get("nbgrader", {})
            if cell.cell_type == "code" and not meta.get("grade") and not meta.get("solution"):
                sources.append((f"{path.stem} {cell.id}", cell.source))
    hits = demo_generation_flops(sources)
    assert not hits, "a demo cell holds an answer to generation_flops:\n" + "\n".join(hits)
