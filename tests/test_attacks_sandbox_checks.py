"""Red-team findings on the kernel-side checks, graded through the real sandbox.

B1: an answer that switches the kernel's detector of forbidden calls off and then uses torch's
multi-head attention earns nothing for mha: the grader's static check names a direct reference and the
obfuscated one's aliases, the kernel's detector (a closure a module patch cannot reach) catches both.
B2: an AttentionFunction that overrides `apply` (no forward or backward written) earns nothing.
B8: SDPA reached through functools.partial or a default argument keeps every point.
Round 6: work run on the kernel's own IOPub thread through `get_ipython().kernel`, with torch hidden behind an
alias the static check could not follow (`[torch][0]`), and code written to a module file and imported, earn
nothing; helpers that pick a library function or dtype by a name given at run time keep every point.
Round 7: a written module imported under an optional guard (`try … except ImportError`) is not found.
Round 8: a method called unbound with another object as `self` is no longer read as the instance.
Round 9: a match capture is a binding; constant names read per loop, through a tuple's name, enumerate and a
helper's constant arguments; `self` read by a function nested in the method.
"""
import base64

import nbformat
import pytest

from autograder.course import ASSIGNMENT, SOURCE_DIR
from autograder.report.grade_tables import graded_cells
from tests.entry_points import ENTRY_POINTS
from tests.red_team_submissions import (
    FILTERED_THREADS_BACKWARD,
    METACLASS_BACKWARD,
    MHA_HIDDEN_THREAD,
    REFLECTED_PREFIX_MHA,
    SHELL_NAMES_BACKWARD,
    TWIN_METHOD_MHA,
)
from tests.shared_class import attack_class
from tests.variants.nb02_scaled_dot_product import FORWARD, function_cheat
from tests.variants.nb02_scaled_dot_product import VARIANTS as V02
from tests.variants.nb04_multihead import MHA_OBFUSCATED, MHA_PATCHES_DETECTOR
from tests.variants.nb04_multihead import VARIANTS as V04
from tests.variants.nb06_api import VARIANTS as V06

APPLY_OVERRIDDEN = next(src for src, diag in V02["attention_function"]["buggy"] if diag == "重写了 apply")


def _solution(name, **answers):
    """The solution notebook with some answer cells replaced (grade_id -> source)."""
    nb = nbformat.read(SOURCE_DIR / ASSIGNMENT / f"{name}.ipynb", as_version=4)
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if gid in answers:
            cell.source = answers.pop(gid)
    assert not answers, answers
    return nb


# red team round 4 (red4): the detector found in the callers' frames by names built from literals, its notes made
# no-ops, then autograd in attention_backward (25/25 on both paths before the static check folded the names)
FRAMES_QUIET = '''
import sys
import numpy as np
import torch


def _quiet():
    f = vars(sys)["_get" + "frame"](1)
    while f is not None:
        u = getattr(f, "f_lo" + "cals").get("use")
        if u is not None and hasattr(u, "seen") and hasattr(u, "note"):
            type(u).note = lambda *a, **k: None
            return
        f = getattr(f, "f_ba" + "ck")


def attention_backward(dY, cache):
    _quiet()
    Q, K, V, A, Y, s = cache
    q, k, v = (torch.tensor(a, requires_grad=True) for a in (Q, K, V))
    S = (q @ k.transpose(-2, -1)) * s
    y = torch.softmax(S, dim=-1) @ v
    return tuple(g.numpy() for g in torch.autograd.grad(y, (q, k, v), torch.tensor(dY)))
'''
# red team round 8: the same scrub, every name decoded at run time and read through `getattr(self, name)` in a method
# the cell calls unbound with the object to read from (`Attr.get(sys, name)`): `self` is not the instance there
FRAMES_UNBOUND = FRAMES_QUIET.replace("""def _quiet():
    f = vars(sys)["_get" + "frame"](1)
    while f is not None:
        u = getattr(f, "f_lo" + "cals").get("use")""", """class Attr:
    def get(self, name):
        return getattr(self, name)


def _name(b):
    return base64.b64decode(b).decode()


def _quiet():
    f = Attr.get(sys, _name(b"X2dldGZyYW1l"))(1)
    while f is not None:
        u = Attr.get(f, _name(b"Zl9sb2NhbHM=")).get("use")""").replace(
    """        f = getattr(f, "f_ba" + "ck")""", """        f = Attr.get(f, _name(b"Zl9iYWNr"))""").replace(
    "import sys\n", "import base64\nimport sys\n", 1)
assert "Attr.get(f, _name" in FRAMES_UNBOUND and "f_ba" not in FRAMES_UNBOUND and "_get" + "frame" not in FRAMES_UNBOUND
# red team round 9 (B1): a name the static check read as a constant (`for key in ("W_q",)`) rebound by a match
# capture, so `getattr(obj, key)` takes any name: torch's two watchers switched off around plain autograd in both
# backward exercises (25/25 on both paths before; the same autograd without the trick: 8/25)
MATCH_KEY_BACKWARD = '''import numpy as np
import torch


def _get(obj, spelled):
    """obj 上名字倒着写的属性。"""
    for key in ("W_q",):
        pass
    match "".join(reversed(spelled)):
        case key:
            return getattr(obj, key)


def _quiet():
    C = _get(torch, "C_")
    return _get(C, "noitcnuFhcroTelbasiD")(), _get(C, "hctapsiDhcroTelbasiD_")()


def attention_backward(dY, cache):
    """缩放点积注意力的反向（numpy）：这里交给 autograd。"""
    Q, K, V, A, Y, s = cache
    a, b = _quiet()
    with a, b, torch.enable_grad():
        q, k, v = (torch.tensor(np.asarray(t, dtype=np.float64), requires_grad=True) for t in (Q, K, V))
        S = (q @ k.transpose(-1, -2)) * s
        S = S.masked_fill(torch.tensor(np.asarray(A) == 0), float("-inf"))
        y = torch.softmax(S, dim=-1) @ v
        dq, dk, dv = torch.autograd.grad(y, (q, k, v), torch.tensor(np.asarray(dY, dtype=np.float64)))
        return dq.detach().numpy(), dk.detach().numpy(), dv.detach().numpy()
'''
MATCH_KEY_FUNCTION = MATCH_KEY_BACKWARD.split("def attention_backward")[0] + function_cheat("""
a, b = _quiet()
with a, b, torch.enable_grad():
    dq, dk, dv = torch.autograd.grad(_rebuild(q, k, v, mask), (q, k, v), dy.detach())
""")
# red team round 10 (A2): a list the check read as constant strings, changed in place before the loop reads it, so
# `getattr(obj, key)` takes any name (the round-9 payload otherwise)
_MATCH_GET = """def _get(obj, spelled):
    \"\"\"obj 上名字倒着写的属性。\"\"\"
    for key in ("W_q",):
        pass
    match "".join(reversed(spelled)):
        case key:
            return getattr(obj, key)
"""
LIST_KEY_BACKWARD = MATCH_KEY_BACKWARD.replace(_MATCH_GET, """_KEYS = ["W_q"]


def _get(obj, spelled):
    \"\"\"obj 上名字倒着写的属性。\"\"\"
    _KEYS[0] = "".join(reversed(spelled))
    for key in _KEYS:
        return getattr(obj, key)
""")
assert LIST_KEY_BACKWARD != MATCH_KEY_BACKWARD and "match" not in LIST_KEY_BACKWARD
# red team round 10's correct styles the static check zeroed (0/13, 0/17): a dict's items, `.split()`, a helper called
# in a loop over constants; a helper method handed on bound (`map(self._heads, …)`)
ROUND10_HONEST_06 = next(src for src in V06["to_torch_mha"]["correct"] if "SLOT.items()" in src)
ROUND10_HONEST_04 = next(src for src in V04["mha"]["correct"] if "map(functools.partial(self._heads" in src)
# red team round 12 (f8): names from a class attribute read on `self`, fed to a module-level helper (0/17 before)
ROUND12_HONEST_04 = next(src for src in V04["mha"]["correct"] if "for name in self.PROJ" in src)
# red team round 9 (FP1, FP4): honest answers the static check zeroed (0/13, 0/17): projections picked from a
# module-level tuple of names, a per-projection helper nested in forward
FROM_A_TUPLE = next(src for src in V06["to_torch_mha"]["correct"] if src.startswith('PROJ = ("W_q"'))
NESTED_HELPER = next(src for src in V04["mha"]["correct"] if "def heads(proj):" in src)
# red team round 6 (B1, B4b): torch's attention on the kernel's IOPub thread, which the thread check trusts, reached
# through an alias of torch the static check did not follow (9/9 for split and mha on both paths before)
KERNEL_THREAD_MHA = MHA_HIDDEN_THREAD.replace("import threading\n", '''import base64
import threading
import torch

_lib = [torch][0]
_attend = getattr(_lib, base64.b64decode(b"X3NjYWxlZF9kb3RfcHJvZHVjdF9hdHRlbnRpb25fbWF0aA==").decode())
''').replace('''        box = {}
        threading.setprofile(None)
        t = threading.Thread(target=lambda: box.update(r=attend(q, k, v, attn_mask=am)))
        t.start()
        t.join()
''', '''        box, done = {}, threading.Event()

        def work():
            try:
                box["r"] = _attend(q, k, v, attn_mask=am)
            finally:
                done.set()
        get_ipython().kernel.iopub_thread.schedule(work)
        done.wait()
''').replace('        attend = getattr(torch, "_scaled_dot_" + "product_attention_math")\n', "")
assert KERNEL_THREAD_MHA.count("_attend") == 2 and "iopub_thread" in KERNEL_THREAD_MHA
# red team round 6 (B3): a module the cell writes (base64: no check reads it) and imports; it clears the watch's
# notes through the callers' frames after autograd (25/25 on both paths before)
_SCRUB = '''
import sys

def scrub():
    f = sys._getframe(1)
    while f is not None:
        use = f.f_locals.get("use")
        if use is not None and hasattr(use, "seen"):
            for kinds in use.seen.values():
                for names in kinds.values():
                    names.clear()
        f = f.f_back
'''
MODULE_FILE_BACKWARD = f'''
import base64, importlib, os, sys
with open("attn_helpers.py", "w") as _fh:
    _fh.write(base64.b64decode({base64.b64encode(_SCRUB.encode()).decode()!r}).decode())
importlib.invalidate_caches()
sys.path.insert(0, os.getcwd())
import attn_helpers
import torch


def attention_backward(dY, cache):
    Q, K, V, A, Y, s = cache
    q, k, v = (torch.tensor(a, requires_grad=True) for a in (Q, K, V))
    S = (q @ k.transpose(-2, -1)) * s
    S = S.masked_fill(torch.as_tensor(A == 0), float("-inf"))
    y = torch.softmax(S, dim=-1) @ v
    g = tuple(t.numpy() for t in torch.autograd.grad(y, (q, k, v), torch.tensor(dY)))
    attn_helpers.scrub()
    return g
'''
# red team round 7 (N3): the same module imported under `try/except ImportError` (an optional package's guard, which
# the static check lets through) and without touching sys.path: the working folder is no longer on the kernel's
# import path, so the import fails and the fallback runs
MODULE_FILE_OPTIONAL = MODULE_FILE_BACKWARD.replace(
    "importlib.invalidate_caches()\nsys.path.insert(0, os.getcwd())\nimport attn_helpers\n",
    "try:\n    import attn_helpers\nexcept ImportError:\n    attn_helpers = None\n").replace(
    "    attn_helpers.scrub()\n", "    if attn_helpers is not None:\n        attn_helpers.scrub()\n").replace(
    "import base64, importlib, os, sys", "import base64")
assert "sys.path" not in MODULE_FILE_OPTIONAL and "except ImportError" in MODULE_FILE_OPTIONAL
# red team round 6 (H1): helpers that pick nn.init, F, Tensor methods and dtypes by name (0/17 before)
BY_NAME = next(src for src in V04["mha"]["correct"] if "getattr(nn.init, how)" in src)
# and the honest reproducibility line that cost a notebook 0/25 (assignment into an imported object)
CONFIGURED = next(src for src in V02["attention_backward"]["correct"] if "cudnn.deterministic = True" in src)

# red team round 15 (F1): autograd on the kernel's IOPub thread, reached as `input.__self__` (ipykernel binds input to the
# kernel's raw_input), with the work queued by its `schedule` (25/25 on both paths before)
KERNEL_QUEUE_FORWARD = FORWARD.replace("return Y, (Q, K, V, A, Y, s)", "return Y, (Q, K, V, mask)")
# autograd's gradients of the rebuilt forward, for a cache (Q, K, V, mask)
_GRADS = '''
import numpy as np
import torch


def _grads(dY, cache):
    Q, K, V, mask = cache
    q, k, v = (torch.tensor(x, requires_grad=True) for x in (Q, K, V))
    S = (q @ k.transpose(-2, -1)) / np.sqrt(Q.shape[-1])
    if mask is not None:
        S = S.masked_fill(torch.as_tensor(np.broadcast_to(mask, S.shape).copy()), float("-inf"))
    y = torch.softmax(S, dim=-1) @ v
    return tuple(g.detach().numpy() for g in torch.autograd.grad(y, (q, k, v), torch.tensor(dY)))
'''
KERNEL_QUEUE_BACKWARD = "import threading\n" + _GRADS + '''

def attention_backward(dY, cache):
    box, done = [], threading.Event()

    def job():
        try:
            box.append(_grads(dY, cache))
        except BaseException as e:
            box.append(e)
        finally:
            done.set()

    input.__self__.iopub_thread.schedule(job)
    done.wait()
    if isinstance(box[0], BaseException):
        raise box[0]
    return box[0]
'''
# red team round 15 (F2): a parameter the grader passes (`cache`, what the student's forward returned) read as its
# default constant names; at run time it names torch's mode switches (25/25 on both paths before)
GRADER_DEFAULT_FORWARD = FORWARD.replace("    return Y, (Q, K, V, A, Y, s)", """\
    names = tuple("".join(reversed(n)) for n in ("noitcnuFhcroTelbasiD", "hctapsiDhcroTelbasiD_"))
    return Y, (*names, Q, K, V, mask)""")
GRADER_DEFAULT_BACKWARD = _GRADS + '''

def attention_backward(dY, cache=("float64", "float32", None, None, None, None)):
    first = getattr(torch._C, cache[0])
    second = getattr(torch._C, cache[1])
    with first(), second():
        return _grads(dY, cache[2:])
'''


def build(subs):
    notebooks = {
        "lazy": [("04_multihead", {"mha": MHA_PATCHES_DETECTOR}),
                 ("02_scaled_dot_product", {"attention_function": APPLY_OVERRIDDEN})],
        "obfuscated": [("04_multihead", {"mha": MHA_OBFUSCATED})],
        "frames_quiet": [("02_scaled_dot_product", {"attention_backward": FRAMES_QUIET})],
        "frames_unbound": [("02_scaled_dot_product", {"attention_backward": FRAMES_UNBOUND})],
        "match_key": [("02_scaled_dot_product", {"attention_backward": MATCH_KEY_BACKWARD,
                                                 "attention_function": MATCH_KEY_FUNCTION})],
        "round9_honest": [("06_api", {"to_torch_mha": FROM_A_TUPLE}), ("04_multihead", {"mha": NESTED_HELPER})],
        "list_key": [("02_scaled_dot_product", {"attention_backward": LIST_KEY_BACKWARD})],
        "twin_method": [("04_multihead", {"mha": TWIN_METHOD_MHA})],
        "shell_names": [("02_scaled_dot_product", {"attention_backward": SHELL_NAMES_BACKWARD})],
        "metaclass": [("02_scaled_dot_product", {"attention_backward": METACLASS_BACKWARD})],
        "filtered_threads": [("02_scaled_dot_product", {"attention_backward": FILTERED_THREADS_BACKWARD})],
        "reflected_prefix": [("04_multihead", {"mha": REFLECTED_PREFIX_MHA})],
        "kernel_queue": [("02_scaled_dot_product", {"attention_forward": KERNEL_QUEUE_FORWARD,
                                                    "attention_backward": KERNEL_QUEUE_BACKWARD})],
        "grader_default": [("02_scaled_dot_product", {"attention_forward": GRADER_DEFAULT_FORWARD,
                                                      "attention_backward": GRADER_DEFAULT_BACKWARD})],
        "round10_honest": [("06_api", {"to_torch_mha": ROUND10_HONEST_06}), ("04_multihead", {"mha": ROUND10_HONEST_04})],
        "round12_honest": [("04_multihead", {"mha": ROUND12_HONEST_04})],
        "configured": [("02_scaled_dot_product", {"attention_backward": CONFIGURED})],
        "kernel_thread": [("04_multihead", {"mha": KERNEL_THREAD_MHA})],
        "module_file": [("02_scaled_dot_product", {"attention_backward": MODULE_FILE_BACKWARD})],
        "module_optional": [("02_scaled_dot_product", {"attention_backward": MODULE_FILE_OPTIONAL})],
        "by_name": [("04_multihead", {"mha": BY_NAME})],
        "styles": [("06_api", {"sdpa_attention": V06["sdpa_attention"]["correct"][-1],
                               "decode_step": V06["decode_step"]["correct"][-1]})],
    }
    for student, items in notebooks.items():
        (subs / student).mkdir()
        for name, answers in items:
            nbformat.write(_solution(name, **answers), subs / student / f"{name}.ipynb")


@pytest.fixture(scope="module")
def classes(tmp_path_factory):
    return attack_class(tmp_path_factory)  # build()'s students, graded with the other attack files'


@pytest.fixture(scope="module", params=ENTRY_POINTS)
def scores(classes, request):
    """(points per (student, exercise), feedback pages) by the grading command, then by plain nbgrader: made
    once per entry point (each page read once), read by every test."""
    run = classes[request.param]
    worth = {name: dict(graded_cells(name)[0]) for name in {notebook for _, notebook, _ in run.scores}}
    table = {}
    for (student, notebook, grade_id), score in run.scores.items():
        gid = grade_id.removeprefix("test_").split("__")[0]
        got, total = table.get((student, gid), (0.0, 0.0))
        table[(student, gid)] = (got + score, total + worth[notebook][grade_id])
    pages = {(s, n): run.page(s, n) for s, n, _ in run.scores}
    return table, {f"{s}/{n}": page for (s, n), page in pages.items() if page}


def test_patching_the_detector_does_not_hide_torch_mha(scores):
    table, feedback = scores
    assert table[("lazy", "mha")][1] > 0 and table[("lazy", "mha")][0] == 0
    assert "评分检查机制" in feedback["lazy/04_multihead"]


def test_obfuscated_patch_is_caught(scores):
    """The kernel's detector, held in a closure, still sees torch's MHA; the static check sees the aliases."""
    table, feedback = scores
    assert table[("obfuscated", "mha")][1] > 0 and table[("obfuscated", "mha")][0] == 0
    assert "nn.MultiheadAttention" in feedback["obfuscated/04_multihead"]
    # the package's name built from literals is read as the literal, import_module and getattr under other names
    # are reflection used as values (red4): every exercise of the notebook scores 0, saying why; no spelling of the
    # import reaches the kernel past the static check, so the detector's own defence (a closure a module patch
    # cannot reach) is checked in-process by the mutation table, which runs the checks without it
    assert table[("obfuscated", "split_merge_heads")][0] == 0 < table[("obfuscated", "split_merge_heads")][1]
    assert "评分检查机制" in feedback["obfuscated/04_multihead"] and "w1d1_student" in feedback["obfuscated/04_multihead"]


def test_the_detector_found_through_frames_by_folded_names_costs_the_notebook(scores):
    """Red team round 4: `vars(sys)["_get" + "frame"]`, `getattr(f, "f_lo" + "cals")` are read as the literals."""
    table, feedback = scores
    for exercise in ("attention_forward", "attention_backward", "attention_function", "numerical_gradient"):
        assert table[("frames_quiet", exercise)][0] == 0 < table[("frames_quiet", exercise)][1], exercise
    assert "评分检查机制" in feedback["frames_quiet/02_scaled_dot_product"]
    assert "_getframe" in feedback["frames_quiet/02_scaled_dot_product"]


def test_a_method_called_unbound_does_not_pass_for_the_instance(scores):
    """Red team round 8: `getattr(self, name)` reads the instance only where the method is never called with another
    first argument; `Attr.get(sys, name)` makes it a reach into whatever it is given, and the notebook scores 0."""
    table, feedback = scores
    for exercise in ("attention_forward", "attention_backward", "attention_function", "numerical_gradient"):
        assert table[("frames_unbound", exercise)][0] == 0 < table[("frames_unbound", exercise)][1], exercise
    assert "检查认不出的对象" in feedback["frames_unbound/02_scaled_dot_product"]


@pytest.mark.parametrize("student", ["match_key", "list_key"])
def test_a_name_rebound_out_of_sight_holds_no_constant_strings(scores, student):
    """Red team round 9 (B1): a name rebound by `case key:`; round 10 (A2): `_KEYS[0] = …` before `for key in _KEYS`.
    Either name holds any string; the notebook scores 0, saying why (25/25 before)."""
    table, feedback = scores
    for exercise in ("attention_forward", "attention_backward", "attention_function", "numerical_gradient"):
        assert table[(student, exercise)][0] == 0 < table[(student, exercise)][1], exercise
    assert "评分检查机制" in feedback[f"{student}/02_scaled_dot_product"]


def test_a_method_defined_twice_is_loose_if_either_definition_is(scores):
    """Red team round 11 (F6): the decorated `_part` ran on torch._C with names built from char codes (17/17)."""
    table, feedback = scores
    for exercise in _exercises("twin_method", "04_multihead"):
        assert table[exercise][0] == 0 < table[exercise][1], exercise
    assert "检查认不出的对象" in feedback["twin_method/04_multihead"]


@pytest.mark.parametrize("student,what", [("shell_names", "检查认不出的对象"), ("metaclass", "检查认不出的对象"),
                                          ("filtered_threads", "线程对象交给了")])
def test_round_13_routes_to_autograd_cost_the_notebook(scores, student, what):
    """Red team round 13 (F1-F3): torch autograd in attention_backward with the watch switched off by names the shell
    rebinds (`_i`), through a metaclass's fake instance, or on a kernel thread reached through `filter` (each 11/11 on
    both paths before): every exercise of 02 scores 0, saying why."""
    table, feedback = scores
    for exercise in _exercises(student, "02_scaled_dot_product"):
        assert table[exercise][0] == 0 < table[exercise][1], exercise
    assert what in feedback[f"{student}/02_scaled_dot_product"]


def test_a_prefix_made_by_an_operands_own_method_is_no_public_prefix(scores):
    """Red team round 14 (F1): `getattr(where, "W_" + name)` with `name` a str subclass defining `__radd__` fetched
    torch's mode switches, and SDPA ran unseen under them (17/17 on both paths): every exercise of 04 scores 0."""
    table, feedback = scores
    for exercise in _exercises("reflected_prefix", "04_multihead"):
        assert table[exercise][0] == 0 < table[exercise][1], exercise
    assert "检查认不出的对象" in feedback["reflected_prefix/04_multihead"]


@pytest.mark.parametrize("student,what", [("kernel_queue", "`schedule`"), ("grader_default", "运行时算出的名字")])
def test_round_15_routes_to_autograd_cost_the_notebook(scores, student, what):
    """Red team round 15: autograd queued on the kernel's IOPub thread (F1), or behind mode switches named by a
    parameter the grader passes, read as its default (F2); each 25/25 on both paths before: every exercise of 02
    scores 0, saying why."""
    table, feedback = scores
    for exercise in _exercises(student, "02_scaled_dot_product"):
        assert table[exercise][0] == 0 < table[exercise][1], exercise
    assert what in feedback[f"{student}/02_scaled_dot_product"]


@pytest.mark.parametrize("student,notebook", [("round9_honest", "06_api"), ("round9_honest", "04_multihead"),
                                              ("round10_honest", "06_api"), ("round10_honest", "04_multihead"),
                                              ("round12_honest", "04_multihead")])
def test_honest_names_read_by_name_keep_every_point(scores, student, notebook):
    """Red team round 9 (FP1, FP4): names from a module-level tuple, `self` in a nested helper; round 10: a dict's
    items, a method handed on bound to the instance; round 12: a class attribute of names read on `self`. 0/13 and
    0/17 before; every exercise earns its points."""
    table, feedback = scores
    mine = _exercises(student, notebook)
    assert mine and all(table[k][0] == table[k][1] > 0 for k in mine), {k: table[k] for k in mine}
    assert "评分检查机制" not in feedback.get(f"{student}/{notebook}", "")


def test_reproducibility_switches_keep_every_point(scores):
    """Red team round 4: `torch.backends.cudnn.deterministic = True` is configuration, not patching."""
    table, feedback = scores
    for exercise in ("attention_forward", "attention_backward", "attention_function", "numerical_gradient"):
        assert table[("configured", exercise)][0] == table[("configured", exercise)][1] > 0, exercise
    assert "评分检查机制" not in feedback.get("configured/02_scaled_dot_product", "")


def test_overriding_apply_earns_nothing(scores):
    table, feedback = scores
    assert table[("lazy", "attention_function")][1] > 0 and table[("lazy", "attention_function")][0] == 0
    assert "重写了 apply" in feedback["lazy/02_scaled_dot_product"]
    assert table[("lazy", "attention_forward")][0] == table[("lazy", "attention_forward")][1] > 0


@pytest.mark.parametrize("exercise", ["sdpa_attention", "decode_step"])
def test_sdpa_through_partial_or_default_argument_keeps_every_point(scores, exercise):
    got, total = scores[0][("styles", exercise)]
    assert got == total > 0


def _exercises(student, notebook):
    """(student, exercise) of every exercise of a notebook."""
    return sorted({(student, gid.removeprefix("test_").split("__")[0]) for gid, _ in graded_cells(notebook)[0]})


@pytest.mark.parametrize("student,notebook,what", [
    ("kernel_thread", "04_multihead", "get_ipython().kernel"),
    ("module_file", "02_scaled_dot_product", "attn_helpers")])
def test_the_kernels_threads_and_a_module_written_at_run_time_cost_the_notebook(scores, student, notebook, what):
    table, feedback = scores
    mine = _exercises(student, notebook)
    assert all(table[k][0] == 0 < table[k][1] for k in mine), {k: table[k] for k in mine}
    assert "评分检查机制" in feedback[f"{student}/{notebook}"] and what in feedback[f"{student}/{notebook}"]


def test_helpers_that_pick_a_library_function_by_name_keep_every_point(scores):
    table, feedback = scores
    mine = _exercises("by_name", "04_multihead")
    assert all(table[k][0] == table[k][1] > 0 for k in mine), {k: table[k] for k in mine}
    assert "评分检查机制" not in feedback.get("by_name/04_multihead", "")


def test_a_module_written_at_run_time_is_not_importable_under_an_optional_guard(scores):
    """The written module's import fails in the grading kernel (its working folder is off the import path), so the
    backward runs autograd in plain sight and earns nothing; the rest of the notebook keeps every point."""
    table, feedback = scores
    mine = _exercises("module_optional", "02_scaled_dot_product")
    assert table[("module_optional", "attention_backward")][0] == 0, table[("module_optional", "attention_backward")]
    rest = [k for k in mine if k[1] != "attention_backward"]
    assert rest and all(table[k][0] == table[k][1] > 0 for k in rest), {k: table[k] for k in rest}
