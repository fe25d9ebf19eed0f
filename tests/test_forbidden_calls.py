"""The grader's static check of answer cells (autograder/static/forbidden_calls.py): direct uses of forbidden
APIs and references to the checking machinery cost the exercise; no correct variant is touched."""
import ast

import nbformat
import pytest
from w1d1_student import registry
from w1d1_student.cell_source import tree

from autograder.course import ASSIGNMENT, SOURCE_DIR
from autograder.static import forbidden_calls, provenance
from tests.test_mutations import VARIANTS
from tests.variants.nb01_self_attention import SOFTMAX_BOUND_BY_ASSIGNMENT
from tests.variants.nb04_multihead import MHA_BOUND_BY_ASSIGNMENT


def _notebook(answer_sources):
    nb = nbformat.v4.new_notebook()
    for gid, src in answer_sources.items():
        cell = nbformat.v4.new_code_cell(src)
        cell.metadata["nbgrader"] = {"solution": True, "grade": False, "grade_id": gid, "locked": False}
        nb.cells.append(cell)
    return nb


def _correct():
    # the solution as it stands in its answer cell (None: keep it); table["solution"] carries the demo
    # cells' definitions too, which may use PyTorch's own attention outside the answer
    for gid, table in VARIANTS.items():
        for i, src in enumerate([None, *table["correct"]]):
            yield pytest.param(gid, src, id=f"{gid}-{i}")


# a class attribute of names read on `self` (round 12 FP f8)
_NAMES_ON_CLASS = "class M:\n    PROJ = ('W_q', 'W_k')\n    def f(self, m):\n        return [getattr(m, n) for n in self.PROJ]\n"


@pytest.mark.parametrize("grade_id,src", list(_correct()))
def test_correct_answers_pass_the_static_check(grade_id, src):
    """In the real notebook: with its setup cell's imports and every other answer cell solved."""
    nb = nbformat.read(SOURCE_DIR / ASSIGNMENT / f"{registry.NOTEBOOK_OF[grade_id]}.ipynb", as_version=4)
    if src is not None:
        next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id).source = src
    assert forbidden_calls.answer_problems(nb, grade_id) == []


@pytest.mark.parametrize("grade_id,src", [("mha", MHA_BOUND_BY_ASSIGNMENT), ("softmax", SOFTMAX_BOUND_BY_ASSIGNMENT)])
def test_checks_leave_the_trees_they_share_as_they_were(grade_id, src):
    """A cell's syntax tree is parsed once and shared by every reader (cell_source.tree): a check that changed it would
    change what the next check, and the next student with the same text, reads (red team round 8: an answer bound
    by assignment, `MultiHeadAttention = MHA`, read as defining nothing from the second test cell on)."""
    nb = nbformat.read(SOURCE_DIR / ASSIGNMENT / f"{registry.NOTEBOOK_OF[grade_id]}.ipynb", as_version=4)
    next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id).source = src
    trees = [tree(c.source) for c in nb.cells if c.cell_type == "code" and tree(c.source) is not None]
    before = [ast.dump(t) for t in trees]
    for _ in range(3):  # as the test cells of one notebook, one after another
        assert provenance.answer_problems(nb, grade_id, registry.driver(grade_id).names) == []
        assert forbidden_calls.answer_problems(nb, grade_id) == []
    assert [ast.dump(t) for t in trees] == before


@pytest.mark.parametrize("src,what", [
    ("y = nn.functional.multi_head_attention_forward", "F.multi_head_attention_forward"),
    ("m = nn.MultiheadAttention(4, 2)", "nn.MultiheadAttention"),
    ("y = torch._scaled_dot_product_attention_math", "F.scaled_dot_product_attention"),
    ("y = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu", "F.scaled_dot_product_attention"),
    ("%%time\ny = F.scaled_dot_product_attention(q, k, v)", "F.scaled_dot_product_attention"),
    # red team round 4: reached without an import of its own
    ("sa = nn.TransformerEncoderLayer(4, 2, batch_first=True).self_attn", "nn.Transformer"),
    ("nn_, G = torch.nn, torch.nn.functional\nm = nn_.MultiheadAttention(4, 2)", "nn.MultiheadAttention"),
    ("def f(q, k, v, G=torch.nn.functional):\n    return G.scaled_dot_product_attention(q, k, v)",
     "F.scaled_dot_product_attention"),
    ("class M:\n    def __init__(self):\n        self.G = F\n    def f(self, q, k, v):\n"
     "        return self.G.scaled_dot_product_attention(q, k, v)", "F.scaled_dot_product_attention"),
])
def test_torch_imported_by_the_setup_cell_counts_in_answer_cells(src, what):
    """Red team, issue 12 round 3: `torch`, `nn`, `F` come from the setup cell, not the answer cell."""
    nb = _notebook({"mha": src})
    nb.cells.insert(0, nbformat.v4.new_code_cell("import torch\nfrom torch import nn\nimport torch.nn.functional as F"))
    problems = forbidden_calls.answer_problems(nb, "mha")
    assert len(problems) == 1 and what in problems[0], problems


@pytest.mark.parametrize("text", ['"""手写多头注意力。为什么不直接用 nn.MultiheadAttention?"""',
                                  '"""Why not nn.MultiheadAttention??"""',
                                  '"""Same as:\n\nnn.MultiheadAttention(d_model, n_heads)\n"""',
                                  'raise ValueError("mask 形状不对（不是 F.scaled_dot_product_attention 的约定?）")'])
def test_prose_about_the_forbidden_apis_is_no_use(text):
    """Red team round 4: a docstring ending in `name?` was taken for IPython's help syntax, then for code."""
    src = f"def check_mask(mask):\n    {text}\n"
    nb = _notebook({"mha": src})
    nb.cells.insert(0, nbformat.v4.new_code_cell("import torch\nfrom torch import nn\nimport torch.nn.functional as F"))
    assert forbidden_calls.answer_problems(nb, "mha") == []


@pytest.mark.parametrize("call", ["type(self).scaled_dot_product_attention", "super().scaled_dot_product_attention",
                                  "self.scaled_dot_product_attention", "scaled_dot_product_attention"])
def test_the_students_own_function_of_that_name_is_no_forbidden_use(call):
    own = ("import torch\n\ndef scaled_dot_product_attention(q, k, v):\n    return torch.softmax(q @ k.T, -1) @ v\n\n"
           f"class M:\n    def forward(self, q, k, v):\n        return {call}(q, k, v)\n")
    nb = _notebook({"mha": own})
    nb.cells.insert(0, nbformat.v4.new_code_cell("import torch\nfrom torch import nn"))
    assert forbidden_calls.answer_problems(nb, "mha") == []


@pytest.mark.parametrize("src,what", [
    ("import torch.nn.functional as F\ny = F.scaled_dot_product_attention", "F.scaled_dot_product_attention"),
    ("from torch.nn.functional import multi_head_attention_forward as f", "F.multi_head_attention_forward"),
    ("import functools, torch\nf = functools.partial(torch.nn.MultiheadAttention, 4, 2)", "nn.MultiheadAttention"),
    ("import torch\nf = getattr(torch.nn.functional, 'scaled_dot_product_attention')", "F.scaled_dot_product_attention"),
    ("from torch.nn.functional import *\ny = scaled_dot_product_attention", "F.scaled_dot_product_attention"),
    ("import torch as t\nm = t.nn.MultiheadAttention(4, 2)", "nn.MultiheadAttention"),
    ("y = __import__('torch').nn.functional.scaled_dot_product_attention", "F.scaled_dot_product_attention"),
    ("import torch.nn.functional as F\nG = F\nH = G\ny = H.scaled_dot_product_attention", "F.scaled_dot_product_attention"),
    # red team of issue 20: a %%time body holding a line magic is no plain Python, and is read as IPython runs it
    ("%%time\n%pwd\nimport torch\ny = torch.nn.functional.multi_head_attention_forward", "F.multi_head_attention_forward"),
    # torch's own eager attention under other names, and names of any case
    ("from torch._higher_order_ops.flex_attention import math_attention", "flex_attention"),
    ("from torch._higher_order_ops import math_attention", "_higher_order_ops"),
    ("import torch\nf = torch.ops.higher_order.math_attention", "math_attention"),
    ("import torch._higher_order_ops.flex_attention as fa\ny = fa", "flex_attention"),
    ("import torch\ny = torch._transformer_encoder_layer_fwd", "nn.Transformer"),
    # red team round 4 (red4): a name built from literals is read as the literal it folds to
    ("import torch.nn.functional as F\nf = getattr(F, 'scaled_dot_' + 'product_attention')", "F.scaled_dot_product_attention"),
    ("import torch.nn.functional as F\nf = vars(F)[f\"{'scaled'}_dot_product_{'attention'}\"]", "F.scaled_dot_product_attention"),
    ("import torch\nf = getattr(torch.nn, '%sheadAttention' % 'Multi')", "nn.MultiheadAttention"),
])
def test_forbidden_api_in_any_answer_cell_zeroes_mha(src, what):
    nb = _notebook({"split_merge_heads": src, "mha": "class MultiHeadAttention: pass"})
    problems = forbidden_calls.answer_problems(nb, "mha")
    assert len(problems) == 1 and what in problems[0] and "计 0 分" in problems[0], problems
    assert forbidden_calls.answer_problems(nb, "split_merge_heads") == []  # only mha forbids them


def test_a_forbidden_api_after_the_exercises_last_check_costs_nothing():
    """mha_selfcheck compares with SDPA in its answer cell, which runs after mha's checks and cannot reach them;
    the same cell moved above mha's test cells could, and costs mha its points."""
    nb = nbformat.read(SOURCE_DIR / ASSIGNMENT / "04_multihead.ipynb", as_version=4)
    selfcheck = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "mha_selfcheck")
    assert "F.scaled_dot_product_attention" in selfcheck.source
    assert forbidden_calls.answer_problems(nb, "mha") == []
    nb.cells.remove(selfcheck)
    nb.cells.insert(next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == "test_mha"),
                    selfcheck)
    problems = forbidden_calls.answer_problems(nb, "mha")
    assert len(problems) == 1 and "mha_selfcheck" in problems[0] and "F.scaled_dot_product_attention" in problems[0]


# an instance attribute naming a torch function, set in __init__
_NORM = ("import torch\nclass M(torch.nn.Module):\n    def __init__(self, x=1):\n        super().__init__()\n"
         "        self.norm = 'softmax'\n    def f(self):\n        return getattr(torch._C, self.norm)\n")
# a helper that reads its first argument by a name given at run time
_GET = "class M:\n    def get(self, n):\n        return getattr(self, n)\n"


@pytest.mark.parametrize("src", [
    "import w1d1_student.exercises.nb04_multihead as k\nk._tripwires = None",
    "from autograder.judge import judge_payload",
    "import pkgutil\nk = pkgutil.resolve_name('x.y')",
    "import sys\nk = sys.modules['w1d1_' + 'student']",
    "import importlib\nk = importlib.import_module('w1d1_student.runner')",
    "import torch\nwith torch._C.DisableTorchFunction():\n    pass",
    "from torch.overrides import _pop_mode",
    "%time import w1d1_student",
    "exec('import autograder')",
    # red team round 4: ways around the run-time detection
    "import _thread\n_thread.start_new_thread(print, ())",
    "import torch\nclass T(torch.Tensor):\n    @classmethod\n    def __torch_function__(cls, f, t, a=(), k=None):\n"
    "        return f(*a, **(k or {}))",
    # red team of issue 20: the package reached through objects the notebook holds, not by its name
    "%%time\n%pwd\nimport w1d1_student.exercises.nb04_multihead as M",
    "def softmax(x):\n    return check.__globals__['run_cases']",
    "import sys\n\ndef blind():\n    f = sys._getframe(1)\n    while f is not None:\n        f = f.f_back",
    "import inspect\nx = inspect.currentframe()",
    "import gc\nw = [o for o in gc.get_objects() if type(o).__name__ == 'X']",
    "from torch.utils._python_dispatch import _pop_mode_temporarily",
    "import torch\nstack = torch.overrides._get_current_function_mode_stack()",
    "get_ipython().input_transformers_cleanup.append(str.upper)",
    # a second red team: code run by the cell that delivers the cases sees them
    "def _peek(info):\n    pass\nget_ipython().events.register('pre_run_cell', _peek)",
    "import sys\nsys.settrace(lambda *a: None)",
    "import sys\nsys.addaudithook(print)",
    # issue 36, red team round 2: a module, attribute or code computed at run time; the grader's objects changed
    "import importlib\nm = importlib.import_module('w1d1' + '_student.exercises')",
    "m = __import__(''.join(['w1d1_', 'student']))",
    "exec(''.join(reversed('so tropmi')))",
    "import IPython.display as d\nd.display = print",
    "import IPython.display\nfor m in (IPython.display,):\n    m.display = print",
    "get_ipython().display_pub.publish = print",
    "import inspect\ninspect.getmodule(check).run_cases = print",
    "import json\nsetattr(json, 'dumps', repr)",
    "import IPython.display as d\nvars(d)['display'] = print",
    "from IPython.display import display\ndel display.__wrapped__",
    # red team round 4 (red4): names built from literals (folded: read as the literal), the reflection builtins
    # used as values, a module's namespace read by a computed key, code loaded from data
    "import sys\nf = vars(sys)['_get' + 'frame'](1)",
    "def locals_of(f):\n    return getattr(f, 'f_lo' + 'cals')",
    "def caller(f):\n    return getattr(f, f\"{'f_ba'}ck\")",
    "def frame(tb):\n    return getattr(tb, 'tb_%s' % 'frame')",
    "def frame(gen):\n    return getattr(gen, '_'.join(['gi', 'frame']))",
    "def frame(gen):\n    return getattr(gen, 'emarf_ig'[::-1])",
    "import sys\nx = sys.__dict__['_get' + 'frame']",
    "import operator, sys\nx = operator.attrgetter('_get' + 'frame')(sys)",
    "import sys\nx = type(sys).__getattribute__(sys, '_get' + 'frame')",
    "import sys\nx = object.__getattribute__(sys, 'mod' + 'ules')",
    "import inspect, sys\nx = inspect.getattr_static(sys, 'mod' + 'ules')",
    "import sys\nx = getattr(sys, 'modules')",
    "g = getattr\nimport sys\nx = g(sys, 'mod' + 'ules')",
    "e = exec\ne('print(1)')",
    "import builtins\nvars(builtins)['ex' + 'ec']('print(1)')",
    "import builtins\nf = getattr(builtins, 'ex' + 'ec')",
    "import sys\nx = list(map(getattr, [sys], ['_get' + 'frame']))",
    "import functools, sys\nx = functools.reduce(getattr, ['f'], sys)",
    "import pickle\nx = pickle.loads(b'csys\\n_getframe\\n.')",
    "x = __import__('pic' + 'kle')",
    "import runpy",
    "import sys\nx = vars(sys)[input()]",
    "import sys\nx = sys.__dict__.get(input())",
    "import sys\nx = [v for k, v in vars(sys).items() if k.endswith('frame')]",
    "import inspect, sys\nx = inspect.getmembers(sys)",
    "import operator\nf = operator.attrgetter(input())",
    "import importlib\nload = importlib.import_module",
    "from importlib import import_module as load",
    "f = object.__getattribute__",
    "x = getattr(globals()['s' + 'ys'], input())",
    "def f(run=exec):\n    run(input())",
    "exec('imp' + 'ort autograder')",
    "import torch\nf = torch.ops.aten.__getattr__(input())",
    "import sys as s\nm = s.modules",
    "import os\nm = os.sys.modules",
    "from sys import modules",
    # assignments into imported objects: what is not a constant, or a private switch
    "import torch\ntorch.backends.cudnn.deterministic = print",
    "import torch\ntorch.fx._symbolic_trace._is_fx_tracing_flag = True",
    "import torch\nsetattr(torch.backends.cudnn, 'deterministic', lambda: True)",
    "import torch\ndel torch.backends.cudnn.deterministic",
    # the interpreter's own state is never configuration: a folder of written modules put back on the import path
    "import sys\nsys.path = ('/home/w1d1',)",
    # red team round 6: a computed name on what holds the machinery (torch: DisableTorchFunction; sys), on what the
    # check cannot resolve (another computed name's result, an alias it cannot follow: B4b), or handed to the
    # student's own code
    "import torch\nwith getattr(torch, input())():\n    pass",
    "import torch\nf = getattr(torch, input())",
    "import torch\ny = (lambda c: c)(getattr(torch, input()))",
    "import sys\nf = getattr(sys, input())",
    "import torch\nf = getattr(getattr(torch.nn.init, input()), input())",
    "import torch\nt = getattr(torch.nn.init, input())\nf = getattr(t, input())",
    "import numpy as np\ndef f(np, n):\n    return getattr(np, n)",
    "import torch\n_lib = [torch][0]\nf = getattr(_lib, input())",
    "import torch\n_lib = (lambda m: m)(torch)\nf = getattr(_lib, input())",
    "import torch\n_lib = next(iter({'m': torch}.values()))\nf = getattr(_lib, input())",
    "import torch\n_lib = torch if input() else None\nf = getattr(_lib, input())",
    "import torch\nf = torch.ops.aten.__getattr__(input())",
    "import torch\ntorch.nn.Module.__setattr__(torch, 'x', print)",
    # red team round 6 (B1): the kernel's objects past the shell's cell API, and the kernel's packages
    "import threading\nget_ipython().kernel.iopub_thread.schedule(print)",
    "ip = get_ipython()\nip.kernel.control_thread.io_loop.add_callback(print)",
    "import IPython\nx = IPython.get_ipython().user_ns",
    "get_ipython().events.register(''.join(reversed('llec_nur_tsop')), print)",
    "from ipykernel.kernelapp import IPKernelApp\nk = IPKernelApp.instance()",
    "import tornado.ioloop",
    # red team round 6 (B3): a module the grading environment lacks is one the notebook wrote at run time
    "import attn_helpers",
    "import importlib\nm = importlib.import_module('attn' + '_helpers')",
    "from attn_helpers import attend",
    # red team round 7 (N1, N2): the shell's getter under other names, IPython's shell class, the output streams' insides
    "from IPython import get_ipython as gi\ngi().display_pub.publish = print",
    "import IPython\nsh = IPython.get_ipython\nsh().display_pub.publish = print",
    "gi = get_ipython\ngi().user_ns",
    "from IPython.core.interactiveshell import InteractiveShell as S\nS.instance().user_ns",
    "import IPython\nIPython.core.interactiveshell.InteractiveShell.instance().user_ns",
    "import sys\nsys.stdout.pub_thread.schedule(print)",
    "import sys\nout = sys.stdout\nout.pub_thread.schedule(print)",
    "from sys import stderr\nstderr.session",
    # ... and what such a name may not do: be called, read, shared with other cells, handed to the student's own code
    "import torch\ndef f(x, name):\n    g = getattr(torch, name)\n    return g(x)",
    "import torch\ndef f(x, name):\n    g = getattr(torch, name)\n    return x.to(g.x)",
    "import torch\ndef f(x, name):\n    global g\n    g = getattr(torch, name)\n    return x.to(g)",
    "import torch\ndef h(v):\n    return v()\ndef f(x, name):\n    g = getattr(torch, name)\n    return h(g)",
    "import torch\ng = getattr(torch, input())\nx = torch.zeros(2).to(g)",
    # red team round 7 (N4): torch where the check cannot tell what an object is (a class attribute, a default, a
    # dict filled by update), then a name computed at run time on it
    "import torch\nclass C:\n    lib = torch\nf = getattr(C.lib, input())",
    "import torch\ndef lib(m=torch):\n    return m\nf = getattr(lib(), input())",
    "import torch\nns = {}\nns.update(lib=torch)\nf = getattr(ns['lib'], input())",
    "import torch\ndef f(name):\n    def g(m=torch):\n        return getattr(m, name)\n    return g()",
    "import torch\nclass H:\n    t = torch\n    def get(self, name):\n        return getattr(self.t, name)",
    "import torch\nns = dict(t=torch)\nf = getattr(ns['t'], input())",
    "import torch\nclass H:\n    t = torch\nf = getattr(vars(H)['t'], input())",
    "def reach(o, n):\n    return getattr(o, n)",
    "def get(o, n):\n    return getattr(o, 'Dis' + n)",
    # red team round 8 (D): `self` counts as the instance only as a method's own first parameter, never rebound
    "import torch\nclass M:\n    def get(self, n):\n        self = torch\n        return getattr(self, n)",
    "class M:\n    @staticmethod\n    def get(self, n):\n        return getattr(self, n)",
    "class M:\n    def get(self, n):\n        for self in (self.t,):\n            return getattr(self, n)",
    "def g(o):\n    for n in ('W_q', 'exec'):\n        getattr(o, n)",
    # ... and only in a method never called with another first argument (the unbound route of round 8)
    _GET + "import torch\nf = M.get(torch, input())",
    _GET + "import torch\nC = M\nf = C.get(torch, input())",
    _GET + "import torch\nf = vars(M)['get'](torch, input())",
    _GET + "import torch\nf = type(M()).get(torch, input())",
    _GET + "import torch, functools\nf = functools.partial(M.get, torch)(input())",
    _GET + "import torch\nm = M()\nf = m.get.__func__(torch, input())",
    _GET + "    g = get\nimport torch\nf = M.g(torch, input())",
    _GET + "    def go(self, n):\n        return self.get(n)\nimport torch\nf = M.go(torch, input())",
    "import torch\n" + _GET.replace("M:", "Meta(type):") + "    def __call__(cls, n):\n        return cls.get(torch, n)",
    "import torch\n" + _GET + "    def __init_subclass__(cls):\n        cls.get(torch, input())",
    "import torch\ndef deco(f):\n    f(torch, input())\n    return f\n" + _GET.replace("    def", "    @deco\n    def"),
    # red team round 9 (B1, B2): a match capture rebinds a name the check read as a constant, `self`, a thread; sys by
    # another name
    "def get(obj, s):\n    for key in ('W_q',):\n        pass\n    match ''.join(reversed(s)):\n        case key:\n"
    "            return getattr(obj, key)",
    "def get(obj, s):\n    for key in ('W_q',):\n        pass\n    match {'a': s}:\n        case {**key}:\n            pass\n"
    "    return getattr(obj, key)",
    "import torch\nclass M:\n    def get(self, n):\n        match torch:\n            case self:\n                return getattr(self, n)",
    "import threading\nmatch threading.enumerate():\n    case [t, *_]:\n        t._target",
    "import os\ns = os.sys\nx = s.modules",
    # red team round 10 (A1): a class pattern reads attributes by the names it spells
    "import torch\nmatch torch._C:\n    case object(DisableTorchFunction=x):\n        pass",
    "import sys\nmatch sys:\n    case object(_getframe=gf):\n        pass",
    "import sys\nmatch sys:\n    case object(modules=m):\n        pass",
    "import threading\nmatch threading.main_thread():\n    case object(_target=t):\n        pass",
    "class M:\n    def deco(f):\n        return getattr(f, input())\n    @deco\n    def get(self):\n        pass",
    "import sys\ns = sys\nx = s.modules['w1d1_student']",
    "for n in 'qkv':\n    pass\nn = input()\nx = getattr(object(), n)",
    # red team round 10 (A2, A9), round 11: what may change a name the check reads as constant strings (a list or dict
    # changed in place or aliased, `globals()`, `exec`, a walrus, `global`, a shadowed builtin, a helper called otherwise)
    "import sys\nPROJ = ['W_q']\nPROJ.append(input())\ndef f(m):\n    return [getattr(m, p) for p in PROJ]\nf(sys)",
    "import sys\nPROJ = ('W_q',)\nglobals()['PROJ'] = (input(),)\ndef f(m):\n    return [getattr(m, p) for p in PROJ]\nf(sys)",
    "import sys\ndef reversed(x):\n    return [input()]\ndef f(m):\n    return [getattr(m, p) for p in reversed(('W_q',))]\nf(sys)",
    "import sys\np = 'W_q'\ndef g():\n    global p\n    p = input()\ndef f(m):\n    return getattr(m, p)\ng()\nf(sys)",
    "import sys\ndef f(m):\n    a, *b = 'W_q', input()\n    return getattr(m, b[0])\nf(sys)",
    "import sys\nSLOT = {'W_q': 0}\nSLOT[input()] = 1\ndef f(m):\n    return [getattr(m, n) for n in SLOT]\nf(sys)",
    "import sys\ndef get(m, n):\n    return getattr(m, n)\nget(sys, 'W_q')\nget(sys, input())",
    "import sys\ndef get(m, n):\n    return getattr(m, n)\nget(sys, 'W_q')\nlist(map(get, [sys], [input()]))",
    "import sys\ndef f(m):\n    return [getattr(m, b) for a, b in zip(('W_q',), input().split())]\nf(sys)",
    "import sys\nPROJ = (['W_q'],)\nPROJ[0].append(input())\ndef f(m):\n    return [getattr(m, p) for p in PROJ[0]]\nf(sys)",
    "import sys\nPROJ = ('W_q',)\nexec('PROJ = (input(),)')\ndef f(m):\n    return [getattr(m, p) for p in PROJ]\nf(sys)",
    'import sys\n(lambda m, p: getattr(m, p))(sys, input())',
    "import sys\nPROJ = ('W_q',)\n[(PROJ := (input(),)) for _ in 'a']\ndef f(m):\n    return [getattr(m, p) for p in PROJ]\nf(sys)",
    "import sys\ndef f(m):\n    for p in ('W_q',):\n        p = input()\n        getattr(m, p)\nf(sys)",
    "import sys\nPROJ = ['W_q']\nA = PROJ\nA.append(input())\ndef f(m):\n    return [getattr(m, p) for p in PROJ]\nf(sys)",
    "import sys\ndef get(m, n='W_q'):\n    return getattr(m, n)\nget(sys)\nget(sys, n=input())",
    "import sys\nclass C:\n    P = ('W_q',)\n    def f(self, m):\n        return [getattr(m, p) for p in P]\nP = [input()]\nC().f(sys)",
    "import sys\np = 'W_q'\nfor p in input().split():\n    pass\ndef f(m):\n    return getattr(m, p)\nf(sys)",
    "import sys\np = 'W_q'\nwith open('x') as p:\n    pass\ndef f(m):\n    return getattr(m, p)\nf(sys)",
    "import sys\np = 'W_q'\nimport os as p\ndef f(m):\n    return getattr(m, p)\nf(sys)",
    "import sys\ndef f(m):\n    return [getattr(m, i) for i, p in enumerate(('W_q',))]\nf(sys)",
    "import sys\nSLOT = {'W_q': input()}\ndef f(m):\n    return [getattr(m, v) for k, v in SLOT.items()]\nf(sys)",
    "import sys\nSLOT = {'W_q': 0}\nSLOT.update({input(): 1})\ndef f(m):\n    return [getattr(m, n) for n in SLOT]\nf(sys)",
    "import sys\ndef get(m, n):\n    return getattr(m, n) if n == 'W_q' else get(m, n)\nget(sys, 'W_q')",
    "import sys\nSLOT = {'W_q': 0}\nSLOT.setdefault(input(), 1)\ndef f(m):\n    return [getattr(m, n) for n in SLOT.keys()]\nf(sys)",
    'import sys\ndef f(m):\n    return [getattr(m, p) for p in sorted(input().split())]\nf(sys)',
    "import sys\ndef f(m):\n    p = 'W_q' if input() else input()\n    return getattr(m, p)\nf(sys)",
    'import sys\ndef f(m):\n    return [getattr(m, p) for p in input().split()[:2]]\nf(sys)',
    # red team round 8 (B): standard-library entry points that run a docstring, a string or a name as code
    "import doctest\ndef f():\n    \"\"\"\n    >>> import sys\n    \"\"\"\ndoctest.run_docstring_examples(f, {})",
    "from doctest import testmod\ntestmod()",
    "import trace\ntrace.Trace().runctx(input(), {}, {})",
    "import pydoc\nf = pydoc.locate(input())",
    "import cProfile\ncProfile.run(input())",
    "from pdb import Pdb\nPdb().run(input())",
    # red team round 10 (A9): a builtin the constant folding reads, rebound by the notebook
    "def chr(i):\n    return input()\nimport sys\nf = getattr(sys, chr(1))",
    "import sys\nclass M:\n    def get(self):\n        repr = lambda x: 'modules'\n        return getattr(sys, repr(1))",
    "import sys\nglobals()['str'] = lambda x: '_getframe'\nf = getattr(sys, str(1))",
    # red team round 10 (A6, A7): the namespace of an object the check cannot resolve; `.modules` on one (not called)
    'import sys\ndef f(m, n):\n    return vars(m)[n]\nf(sys, input())',
    'import sys\ndef f(m, n):\n    return m.__dict__.get(n)\nf(sys, input())',
    "import sys\ndef f(m):\n    return [v for k, v in vars(m).items() if k.endswith('tframe')]\nf(sys)",
    'import inspect, sys\ndef f(m):\n    return inspect.getmembers(m)\nf(sys)',
    'import sys\nclass C:\n    s = sys\nx = C.s.modules',
    "x = __import__('sys').modules",
    "import importlib\nx = importlib.import_module('sys').modules",
    'import sys\ndef f(s=sys):\n    return s.modules\nf()',
    'import sys\nfor s in (sys,):\n    x = s.modules',
    'import sys, contextlib\nwith contextlib.nullcontext(sys) as s:\n    x = s.modules',
    "import sys\ndef f(s):\n    return getattr(s, 'modules')\nf(sys)",
    # red team round 10 (A5): `Cls(…)` that may build another object (`__new__`, an attribute hook, the name rebound);
    # `super()` in a class method
    'import sys\nclass M:\n    def __new__(cls):\n        return sys\n    def get(self, n):\n'
    '        return getattr(self, n)\nf = M().get(input())',
    'import sys\nclass M:\n    def get(self, n):\n        return getattr(self, n)\nclass N:\n'
    '    def __call__(self):\n        return sys\nM = N()\nf = M().get(input())',
    'import sys\nclass B:\n    def get(self, n):\n        return getattr(self, n)\nclass M(B):\n    @classmethod\n'
    '    def go(cls, n):\n        return super().get(sys, n)\nf = M.go(input())',
    'import sys\nclass M:\n    def __getattribute__(self, k):\n        return sys\n    def get(self, n):\n'
    '        return getattr(self, n)\nf = M().get(input())',
    'import sys\nclass B:\n    def __new__(cls):\n        return sys\nclass M(B):\n    def get(self, n):\n'
    '        return getattr(self, n)\nf = M().get(input())',
    # red team round 10 (A8): the kernel's threads taken by name, or handed where the check loses them
    "import threading\nd = {'t': threading.enumerate()}\nd['t'][0]._target",
    'import threading\nf = lambda: threading.main_thread()\nf()._target',
    "import threading\nts = getattr(threading, 'enumerate')()\nts[0]._target",
    "import threading\nts = vars(threading)['enumerate']()\nts[0]._target",
    'import threading\ne = threading.enumerate\nts = e()\nts[0]._target',
    'import threading\ndef f(t):\n    return t._target\nf(threading.main_thread())',
    'import threading\ndef g():\n    return threading.enumerate()\ng()[0]._target',
    'import threading\nfor i, t in enumerate(threading.enumerate()):\n    t._target',
    'import threading\nlist(map(lambda t: t._target, threading.enumerate()))',
    # red team round 11 (F1-F8): a class body read before its binding, a decorated helper, a class namespace read whole, a
    # nested list changed in place, a decorated twin method, a parameter default, import finders and loaders
    "T = {'o': object()}\noff = input()\nclass P:\n    a = getattr(T['o'], off)\n    off = 'W_q'",
    "def deco(fn):\n    def w(o, n):\n        return fn(o, input())\n    return w\n@deco\ndef get(o, n):\n"
    "    return getattr(o, n)\nget(object(), 'W_q')",
    'class B:\n    def part(self, n):\n        return getattr(self, n)\n'
    'f = [f for f in B.__dict__.values() if callable(f)][0]\nimport sys\nf(sys, input())',
    "G = (['W_q'],)\nG[0][0] = input()\ndef f(o):\n    return [getattr(o, n) for n in G[0]]\nf(object())",
    'import sys\ndef tool(fn):\n    fn(sys, input())\n    return fn\nclass A:\n    @tool\n    def part(self, n):\n'
    '        return getattr(self, n)\nclass B:\n    def part(self, n):\n        return n',
    "off = input()\ndef get(o, n=off):\n    off = 'W_q'\n    return getattr(o, n)\nget(object())",
    'import sys, importlib.machinery\nsys.meta_path.insert(0, importlib.machinery.PathFinder)',
    "import importlib.util\nspec = importlib.util.spec_from_file_location('m', 'm.py')",
    # red team round 12 (B1-B4): a walrus in a default, annotation or base of a nested def, lambda or class; a star import;
    # a metaclass's __prepare__; `self` in an autograd.Function method called through apply
    "T = {'o': object()}\nnm = input()\ndef fetch(obj, name):\n    return getattr(obj, name)\nP = 'W_q'\n"
    "def _d(a=(P := nm)):\n    return a\nfetch(T['o'], P)",
    "T = {'o': object()}\nnm = input()\ndef fetch(obj, name):\n    return getattr(obj, name)\nP = 'W_q'\n"
    "class _K(object if (P := nm) else object):\n    pass\nfetch(T['o'], P)",
    "T = {'o': object()}\nnm = input()\ndef fetch(obj, name):\n    return getattr(obj, name)\nP = 'W_q'\n"
    "_f = lambda a=(P := nm): a\nfetch(T['o'], P)",
    "T = {'o': object()}\nnm = input()\ndef fetch(obj, name):\n    return getattr(obj, name)\nP = 'W_q'\ndef g():\n"
    "    Q = 'W_q'\n    def _d(a: (Q := nm) = 0):\n        return a\n    return fetch(T['o'], Q)",
    "import os\nT = {'o': object()}\nenviron = {'q': 'W_q'}\nos.environ['q'] = input()\nfrom os import *\n"
    "def f():\n    return getattr(T['o'], environ['q'])",
    "class Meta(type):\n    @classmethod\n    def __prepare__(m, name, bases):\n        return {'P': input()}\n"
    "class B(metaclass=Meta):\n    pass\nclass C(B):\n    P = 'W_q'\n    x = getattr(object(), P)",
    'import torch\nclass Pick(torch.autograd.Function):\n    def forward(self, name):\n'
    '        return getattr(self, name)\n    @staticmethod\n    def setup_context(ctx, inputs, output):\n'
    '        pass\nPick.apply(torch._C, input())',
    # red team round 13 (F1-F3): names the shell rebinds between cells, a metaclass's fake instance, the kernel's
    # threads handed to a function through filter / sorted(key=)
    "_i = _ii = 'x'\ndef f(o):\n    return getattr(o, _i.split()[0])",
    "_ = 'x'\ndef f(o):\n    return getattr(o, _)",
    "In = ('W_q',)\ndef f(o):\n    return [getattr(o, n) for n in In]",
    "import torch\nclass Meta(type):\n    def __call__(cls, *a):\n        return Reader\nclass Maker(metaclass=Meta):\n"
    "    pass\nclass Reader:\n    def read(self, name):\n        return getattr(self, name)\nr = Maker()\n"
    "r.read(torch._C, input())",
    "import threading\nloops = []\nlist(filter(lambda t: loops.append(t.name), threading.enumerate()))",
    "import threading\nts = sorted(threading.enumerate(), key=lambda t: t._target)",
    "import threading\nts = max(threading.enumerate(), key=id)",
    # red team round 14 (F1): a "public prefix" made by `+` or `%` is the other operand's own method's to make
    "import torch\nclass N(str):\n    def __radd__(self, other):\n        return ''.join(reversed(self))\n"
    "def grab(where, name):\n    return getattr(where, 'W_' + name)\ngrab(torch._C, N('noitcnuFhcroTelbasiD'))",
    "import torch\nclass N(str):\n    def __rmod__(self, other):\n        return ''.join(reversed(self))\n"
    "def grab(where, name):\n    return getattr(where, 'W_%s' % name)\ngrab(torch._C, N('noitcnuFhcroTelbasiD'))",
    "import torch\nclass N:\n    def __radd__(self, other):\n        return input()\n"
    "def grab(where, name):\n    return getattr(where, 'W_' + name)\ngrab(torch._C, N())",
    # the dispatch watch switched off from C++ (open in round 12's notes: no points gain shown, closed by name)
    "import torch\nwith torch._C._DisableTorchDispatch():\n    pass",
    "import torch\nks = torch._C.DispatchKeySet(torch._C.DispatchKey.Python)\nwith torch._C._ExcludeDispatchKeyGuard(ks):\n    pass",
    "import torch\nm = torch._C._unset_dispatch_mode(torch._C._TorchDispatchModeKey.FAKE)",
    # round 12's still-zeroed styles, each with what would make it a route: a class attribute read on `self` (written
    # by name, by text or in a namespace; overridden by another class the method may get; a list changed in place;
    # a decorated class), `map(str, …)` and `str(…)` over computed text, `P = P` beside another binding
    _NAMES_ON_CLASS + "M().PROJ = (input(),)",
    _NAMES_ON_CLASS + "setattr(M, 'PROJ', (input(),))",
    _NAMES_ON_CLASS + "vars(M())['PROJ'] = (input(),)",
    _NAMES_ON_CLASS + "M().__setstate__({'PROJ': (input(),)})",
    _NAMES_ON_CLASS + "class O:\n    PROJ = (input(),)\nM.f(O(), object())",
    _NAMES_ON_CLASS + "E = type('E', (M,), {'PROJ': (input(),)})",
    _NAMES_ON_CLASS.replace("('W_q', 'W_k')", "['W_q', 'W_k']") + "M().PROJ.append(input())",
    "import dataclasses\n@dataclasses.dataclass\n" + _NAMES_ON_CLASS + "M(PROJ=(input(),)).f(object())",
    _NAMES_ON_CLASS + "exec('M.PROJ = (input(),)')",
    "def f(m):\n    return [getattr(m, n) for n in map(str, input().split())]",
    "def str(x):\n    return input()\ndef f(m):\n    return [getattr(m, str(n)) for n in ('W_q',)]",
    "P = ('W_q',)\nP = P\nP = (input(),)\ndef f(m):\n    return [getattr(m, n) for n in P]",
    # red team round 7 (N1): the kernel's own threads, past their public API
    "import threading\nnext(t for t in threading.enumerate() if t.name == 'IOPub')._target.__self__.schedule(print)",
    "import threading\nfor t in threading.enumerate():\n    t._args",
    "from threading import enumerate as e\nts = e()\nts[1].run()",
    "import threading\nx = [t for t in threading.enumerate()][0].__dict__",
    "import threading\nx = vars(threading.main_thread())['_target']",
    "import threading\nx = getattr(threading.current_thread(), '_tstate' + '_lock')",
    "import threading\nx = threading._active",
    # red team round 15 (F1): work queued on the kernel's own threads, reached past get_ipython() and sys.stdout
    "x = input.__self__.iopub_thread.schedule(print)",
    "import getpass\ngetpass.getpass.__self__.iopub_thread.schedule(print)",
    "import sys\nsys.displayhook.pub_socket.io_thread.schedule(print)",
    "import sys\n[sys.stdout][0].pub_thread.schedule(print)",
    "import sys\n(lambda s: s)(sys.stdout).pub_thread.schedule(print)",
    "def f(k):\n    k.io_loop.add_callback(print)",
    "import asyncio\nasyncio.get_event_loop().call_soon_threadsafe(print)",
    "f = print.__self__",
    # red team round 16: attributes written by a library function handed the instance (no name the check watches)
    _NAMES_ON_CLASS + "    def g(self):\n        import functools, argparse\n"
    "        functools.update_wrapper(self, argparse.Namespace(PROJ=(input(),)), assigned=())\n",
    _NAMES_ON_CLASS + "import functools, argparse\nm = M()\nfunctools.update_wrapper(m, argparse.Namespace(PROJ=(input(),)))",
    _NAMES_ON_CLASS + "import functools, argparse\nm = functools.update_wrapper(M(), argparse.Namespace(PROJ=(input(),)))",
    _NAMES_ON_CLASS + "import argparse\ndef h(o):\n    argparse.Namespace.__init__(o, PROJ=(input(),))\nh(M())",
    _NAMES_ON_CLASS + "    def g(self):\n        return [self][0]\n",
    _NAMES_ON_CLASS + "import functools, argparse\nfunctools.update_wrapper(M, M, assigned=('PROJ',))",
    # ... and an instance attribute some store of which is not a constant
    _NORM + "m = M()\nm.norm = input()",
    _NORM + "m = M()\nfor m.norm in (input(),):\n    pass",
    _NORM + "m = M()\nm.norm += input()",
    _NORM.replace("self.norm = 'softmax'", "self.norm = 'softmax' if x else input()"),
])
def test_reference_to_the_checking_machinery_zeroes_every_exercise_of_the_notebook(src):
    """A helper in one answer cell serves the others (red team round 5: a raw thread defined in
    split_merge_heads' cell, used by mha): the reference costs every exercise of the notebook."""
    nb = _notebook({"softmax": "def softmax(x):\n    return x", "self_attention": src})
    for exercise in ("self_attention", "softmax"):
        problems = forbidden_calls.answer_problems(nb, exercise)
        assert len(problems) == 1 and "评分检查机制" in problems[0] and "self_attention" in problems[0], problems
    clean = _notebook({"softmax": "def softmax(x):\n    return x", "self_attention": "y = 1"})
    assert forbidden_calls.answer_problems(clean, "softmax") == []


# ---------------------------------------------------------------- issue 36 §3: star imports, read as Python binds names

def _solution_with(grade_id, src, scratch, where):
    """The real notebook with `src` in the answer cell and a cell of the student's own (no metadata: grading never
    runs it) at `where`: "end", or "before" the answer cell."""
    nb = nbformat.read(SOURCE_DIR / ASSIGNMENT / f"{registry.NOTEBOOK_OF[grade_id]}.ipynb", as_version=4)
    answer = next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)
    if src is not None:
        nb.cells[answer].source = src
    nb.cells.insert(len(nb.cells) if where == "end" else answer, nbformat.v4.new_code_cell(scratch))
    return nb


def _scratch():
    for gid, table in VARIANTS.items():
        for i, scratch in enumerate(table.get("scratch", [])):
            for j, src in enumerate([None, *table["correct"]]):
                for where in ("end", "before"):
                    yield pytest.param(gid, src, scratch, where, id=f"{gid}-scratch{i}-{j}-{where}")


@pytest.mark.parametrize("grade_id,src,scratch,where", list(_scratch()))
def test_a_cell_grading_does_not_run_gives_the_static_check_no_context(grade_id, src, scratch, where):
    """Issue 36 §3: `from torch.nn import *` in a scratch cell made `super(MultiHeadAttention, self)` a use of
    nn.MultiheadAttention (15 -> 3 points)."""
    assert forbidden_calls.answer_problems(_solution_with(grade_id, src, scratch, where), grade_id) == []


def _graded(*cells):
    """A notebook as grading runs it: a locked setup cell, then (grade_id, source) answer cells in this order."""
    setup = nbformat.v4.new_code_cell("import math\nimport torch\nfrom torch import nn\nimport torch.nn.functional as F")
    setup.metadata["nbgrader"] = {"solution": False, "grade": False, "grade_id": "setup", "locked": True}
    nb = _notebook({})
    nb.cells.append(setup)
    for gid, src in cells:
        nb.cells += _notebook({gid: src}).cells
    return nb


OWN_SDPA = "def scaled_dot_product_attention(q, k, v):\n    return torch.softmax(q @ k.mT, -1) @ v\n"
USES_SDPA = "class MultiHeadAttention:\n    def forward(self, q, k, v):\n        return scaled_dot_product_attention(q, k, v)\n"


@pytest.mark.parametrize("cells,what", [
    # the student's helper rebound by a later star import: Python reads torch's from there on
    ([("mha", OWN_SDPA + "from torch.nn.functional import *\ny = scaled_dot_product_attention(1, 2, 3)")],
     "F.scaled_dot_product_attention"),
    ([("mha", OWN_SDPA + "from torch.nn.functional import *\n" + USES_SDPA)], "F.scaled_dot_product_attention"),
    ([("split_merge_heads", OWN_SDPA), ("mha", "from torch.nn.functional import *\n" + USES_SDPA)],
     "F.scaled_dot_product_attention"),
    ([("mha", OWN_SDPA + USES_SDPA), ("split_merge_heads", "from torch.nn.functional import *")],
     "F.scaled_dot_product_attention"),     # the method runs after the star import too
    ([("mha", OWN_SDPA + "if True:\n    from torch.nn.functional import *\n" + USES_SDPA)], "F.scaled_dot_product_attention"),
    ([("mha", OWN_SDPA + "exec('from torch.nn.functional import *')\n" + USES_SDPA)], "F.scaled_dot_product_attention"),
    ([("mha", "%%time\n" + OWN_SDPA + "from torch.nn.functional import *\n" + USES_SDPA)], "F.scaled_dot_product_attention"),
    # a name bound only by the star import; a module it binds (`functional`), however the student names the function
    ([("mha", "from torch.nn.functional import *\nclass M:\n    def f(self, q):\n        return scaled_dot_product_attention(q, q, q)")],
     "F.scaled_dot_product_attention"),
    ([("mha", OWN_SDPA + "from torch.nn import *\nclass M:\n    def f(self, q):\n"
              "        return functional.scaled_dot_product_attention(q, q, q)")], "F.scaled_dot_product_attention"),
    ([("mha", "class MultiheadAttention:\n    pass\n\nfrom torch.nn import *\nm = MultiheadAttention(4, 2)")],
     "nn.MultiheadAttention"),
    ([("mha", "from torch import nn as n\nfrom torch.nn import *\nm = Transformer()")], "nn.Transformer"),
    # a class body reads the module's name until it binds its own
    ([("mha", "from torch.nn.functional import *\nclass M:\n"
              "    scaled_dot_product_attention = staticmethod(scaled_dot_product_attention)\n")],
     "F.scaled_dot_product_attention"),
])
def test_a_star_import_of_torch_counts_where_python_reads_it(cells, what):
    problems = forbidden_calls.answer_problems(_graded(*cells), "mha")
    assert len(problems) >= 1 and all(what in p for p in problems), problems


@pytest.mark.parametrize("cells", [
    # defined after the star import: the student's, however its name reads
    [("mha", "from torch.nn.functional import *\n" + OWN_SDPA + USES_SDPA)],
    [("mha", "from torch.nn import *\nclass MultiheadAttentionX(Module):\n    pass\n\n"
             "class MultiHeadAttention(MultiheadAttentionX):\n    def __init__(self):\n"
             "        super(MultiheadAttentionX, self).__init__()")],
    [("split_merge_heads", "from torch.nn.functional import *"), ("mha", OWN_SDPA + USES_SDPA)],
    # a later star import binds only the names its module exports (torch.nn has no MultiHeadAttention)
    [("mha", "class MultiHeadAttention(nn.Module):\n    def __init__(self):\n"
             "        super(MultiHeadAttention, self).__init__()\n"), ("split_merge_heads", "from torch.nn import *\nfrom torch import *")],
    # names local to a function, and the student's methods, are never the star import's
    [("mha", "from torch.nn.functional import *\nclass M:\n    def f(self, q):\n"
             "        scaled_dot_product_attention = lambda a: a\n        return scaled_dot_product_attention(q)\n"
             "    def g(self, q, scaled_dot_product_attention):\n        return scaled_dot_product_attention(q)\n"
             "    def h(self, q):\n        return self.scaled_dot_product_attention(q)\n"
             "    def scaled_dot_product_attention(self, q):\n        return q\n")],
    [("mha", "from numpy import *\n" + OWN_SDPA + USES_SDPA)],
    # a class body reads what it bound before (its methods)
    [("mha", "class M:\n    def scaled_dot_product_attention(self, q):\n        return q\n"
             "    attend = scaled_dot_product_attention\n")],
    [("mha", "from torch.nn.functional import *\nclass M:\n    def scaled_dot_product_attention(self, q):\n"
             "        return q\n    attend = scaled_dot_product_attention\n")],
])
def test_a_name_the_student_binds_stays_the_students(cells):
    assert forbidden_calls.answer_problems(_graded(*cells), "mha") == []


@pytest.mark.parametrize("src", [
    # red team round 4 (red4), honest styles: configuration by constants, reflection on the student's own objects
    "import torch\ntorch.backends.cudnn.deterministic = True\ntorch.backends.cudnn.benchmark = False",
    "import torch\nsetattr(torch.backends.cudnn, 'deterministic', True)",
    "import matplotlib.pyplot as plt\nplt.rcParams['figure.dpi'] = 100",
    "import numpy as np\nnp.set_printoptions(precision=3)",
    "import torch\ntorch.manual_seed(0)",
    "import warnings\nwarnings.filterwarnings('ignore')",
    "class M:\n    def __init__(self, n):\n        for name in 'qkv':\n            setattr(self, name, n)\n"
    "    def get(self, n):\n        return getattr(self, f'W_{n}'), getattr(self, 'W_' + n)",
    "import torch\nx = getattr(torch, 'float' + '64')",
    "import torch\nm = vars(torch)['ma' + 'tmul']",
    "def f(x, eval=False, compile=None):\n    return x if eval else compile",
    "import torch\nclass M(torch.nn.Module):\n    def f(self):\n        return self.eval",
    "import re\npattern = re.compile('[a-z]+')",
    "x = [getattr(v, 'shape') for v in (1, 2)]",
    "mode, keys = 'eval', {'compile': 1, 'vars': 2}\nprint(hasattr(mode, 'exec'))",
    "def check(x):\n    if x is None:\n        raise ValueError('the ' + 'autograder says: ' + 'no mask')",
    # red team round 6 (H1): a name computed at run time on an object that holds no machinery (its functions,
    # classes and constants: what the run-time watch sees called), a dtype handed to torch, reflection on one's own
    "import torch\ndef init_all(m, how='xavier_uniform_'):\n    for p in m.parameters():\n        getattr(torch.nn.init, how)(p)",
    "import numpy as np\ndef as_dtype(x, name):\n    return x.astype(getattr(np, name))",
    "import torch\ndef as_dtype(x, name='float64'):\n    return x.to(getattr(torch, name))",
    "import torch\nx = torch.zeros(2, dtype=getattr(torch, input()))",
    "import torch.nn.functional as F\ndef act(x, name='relu'):\n    return getattr(F, name)(x)",
    "import torch\ndef op(t, name='softmax'):\n    return getattr(torch.Tensor, name)(t, -1)",
    "import functools\ndef get(m, path):\n    return functools.reduce(getattr, path.split('.'), m)",
    "import torch\ndef reset(m):\n    torch.nn.Module.__setattr__(m, 'W_q', torch.nn.Linear(2, 2))",
    "import torch\nx = torch.zeros(3).to(torch.float64)\nx.data = torch.ones(3)",
    "f_back = None\nprint(f_back)",
    "print('_getframe', 'scaled_dot_product_attention')",
    "ip = get_ipython()\nip.run_line_magic('precision', '3')\nfiles = !ls\n%time y = 1",
    "if get_ipython() is not None:\n    print(type(get_ipython()).__name__)",
    "try:\n    from scipy.special import softmax as fast\nexcept ImportError:\n    fast = None",
    "import math, json, tqdm, matplotlib.pyplot as plt, IPython.display, w1d1_viz",
    "import sys\nsys.stdout.write('x')\nsys.stdout.flush()\nprint(sys.stdout.encoding, file=sys.stderr)",
    "from IPython import get_ipython as gi\ngi().run_line_magic('precision', '3')",
    "import tqdm\ntqdm.tqdm.monitor_interval = 0",
    # red team round 7 (H4): a dtype picked by name in a helper, then handed to the library
    "import torch\ndef cast(x, name='float64'):\n    dtype = getattr(torch, name)\n    return x.to(dtype)",
    "import torch\ndef blank(n, name):\n    dtype = getattr(torch, name)\n    return torch.zeros(n, dtype=dtype)",
    # a computed name on the student's own objects: a public prefix, or a loop over constant names (N4's rule)
    "class M:\n    def get(self, n):\n        return getattr(self, 'W_%s' % n)",
    "class M:\n    def get(self):\n        return [getattr(self, n) for n in ('W_q', 'W_k', 'W_v')]",
    "class M:\n    def get(self):\n        for c in 'qkv':\n            yield getattr(self, c)",
    "name = 'W_o'\nclass M:\n    def get(self):\n        return getattr(self, name), hasattr(self, input())",
    # red team round 8 (D): any name on the instance in its own method (a helper's parameter)
    "class M:\n    def get(self, proj):\n        return getattr(self, proj)",
    # ... called on an instance, however spelled (a method called unbound with `self` is called on it)
    "import torch\nfrom torch import nn\n" + _GET.replace("M:", "M(nn.Module):").replace("    def", "    @torch.no_grad()\n    def")
    + "m = M()\nm.get('W_q')",
    "from torch import nn\n" + _GET.replace("M:", "B(nn.Module):") + "class M(B):\n    def get(self, n):\n        return B.get(self, n)\n"
    "    def both(self, n):\n        return super().get(n), M.get(self, n), M().get(n)",
    # red team round 9 (FP1-FP5): names from a constant tuple bound to a name, a loop variable reused for another
    # loop, enumerate, a helper's parameter every call passes a constant, `self` read by a function nested in a method
    "PROJ = ('W_q', 'W_k')\ndef f(m):\n    return [getattr(m, p) for p in PROJ]\nfor p in range(3):\n    pass",
    "def f(m, t):\n    w = [getattr(m, name) for name in ('W_q', 'W_k')]\n    for name, p in t.named_parameters():\n"
    "        print(name)\n    return w",
    "def f(m):\n    for i, name in enumerate(('W_q', 'W_k')):\n        print(i, getattr(m, name))",
    "def stacked(m, what):\n    return getattr(m.W_q, what), getattr(m.W_k, what)\ndef f(m):\n"
    "    return stacked(m, 'weight'), stacked(m, what='bias')",
    "class M:\n    def forward(self, x):\n        def heads(proj):\n            return getattr(self, proj)(x)\n"
    "        return heads('W_q'), heads(input())",
    "import torch\nfor m in torch.nn.Linear(2, 2).modules():\n    print(m)",
    "class P:\n    __match_args__ = ('x',)\n    def __init__(self):\n        self.x = 1\nmatch P():\n    case P(x=1):\n        pass",
    # round 11: constant names by scope (a tuple unpacked in a function, zip, a conditional, nested tuples)
    "import sys\ndef get(m, n):\n    return getattr(m, n)\nclass M:\n    pass\nget(M(), 'W_q')",
    "class M:\n    pass\ndef f(m, flag):\n    p = 'W_q' if flag else 'W_k'\n    return getattr(m, p)\nf(M(), 1)",
    "class M:\n    pass\ndef f(m):\n    return [getattr(m, b) for a, b in zip(range(2), ('W_q', 'W_k'))]\nf(M())",
    "class M:\n    pass\nPAIRS = (('W_q', 0), ('W_k', 1))\ndef f(m):\n    return [getattr(m, n) for n, i in PAIRS]\nf(M())",
    # round 10 (A6, A7): constant keys of a namespace, the instance's own, nn.Module's modules()
    "class M:\n    pass\ndef f(m):\n    return vars(m)['W_q']\nf(M())",
    "PROJ = ('W_q', 'W_k')\ndef f(m):\n    return [vars(m)[p] for p in PROJ]",
    'class M:\n    def keys(self, n):\n        return vars(self)[n], list(vars(self).items())',
    'def count(model):\n    return sum(1 for m in model.modules())',
    'import torch\nclass M(torch.nn.Module):\n    def n(self):\n        return len(list(self.modules()))',
    'from torch import nn\nx = nn.modules.Linear',
    'from torch.nn.modules import Linear',
    "import torch\nclass M(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
    "        self.W_q = torch.nn.Linear(2, 2)\n    def get(self, n):\n        return getattr(self, n)\n"
    "    def f(self):\n        return super().__call__, self.get('W_q')",
    'import threading\nfor t in threading.enumerate():\n    print(t.name, t.ident, t.is_alive(), t.daemon)',
    'import threading\nprint([t.name for t in threading.enumerate() if t is not threading.main_thread()])',
    'import threading\nprint(threading.current_thread().name)',
    'import threading\nt = threading.Thread(target=print)\nt.start()\nt.join()\nprint(t._started)',
    'import threading\nfor i, t in enumerate(threading.enumerate()):\n    print(i, t.name)',
    'import threading\nn = len(threading.enumerate())',
    'import threading\nts = threading.enumerate()\nnames = [t.name for t in ts]',
    "import threading\nx = next(t for t in threading.enumerate() if t.name == 'MainThread').ident",
    # red team round 11 (FP1-FP4): names built from constants, looked up in constant tuples and dicts
    "def f(m):\n    return [getattr(m, 'W_{}'.format(c)) for c in 'qkv']",
    "def f(m):\n    out = []\n    for c in 'qkv':\n        attr = 'W_' + c\n        out.append(getattr(m, attr))\n    return out",
    "def f(m):\n    NAMES = ('W_q', 'W_k')\n    return [getattr(m, NAMES[i]) for i in range(2)]",
    "def f(m):\n    SLOT = {'q': 'W_q', 'k': 'W_k'}\n    return [getattr(m, SLOT[c]) for c in 'qk']",
    "def f(m):\n    return [getattr(m, f'W_{c}') for c in ('q', 'k')]",
    # red team round 12 (FP): names built by a comprehension, dict(...) with constant keywords, .strip() of split names
    "def f(m):\n    return [getattr(m, n) for n in [f'W_{c}' for c in 'qkv']]",
    "NAMES = [f'W_{c}' for c in 'qkv']\ndef f(m):\n    return [getattr(m, n) for n in NAMES]",
    "PROJ = tuple('W_' + c for c in 'qkv')\ndef f(m):\n    return [getattr(m, n) for n in PROJ]",
    "PROJ = dict(q='W_q', k='W_k', v='W_v')\ndef f(m):\n    return [getattr(m, n) for n in PROJ.values()]",
    "def f(m):\n    return [getattr(m, n.strip()) for n in 'W_q, W_k, W_v'.split(',')]",
    # red team round 13 (P1-P3 and the static-only ones): a lambda mapped over names, zip(strict=), enumerate(start=),
    # an optional import under contextlib.suppress or a find_spec test, dict.get, a list printed, "_".join, attrgetter
    "def f(m, x):\n    return list(map(lambda n: getattr(m, n)(x), ('W_q', 'W_k', 'W_v')))",
    "def f(m):\n    return [getattr(m, n) for c, n in zip('qkv', ('W_q', 'W_k', 'W_v'), strict=True)]",
    "def f(m):\n    return [getattr(m, n) for i, n in enumerate(('W_q', 'W_k'), start=1)]",
    "import contextlib\nwith contextlib.suppress(ImportError):\n    import einops",
    "import importlib.util\nif importlib.util.find_spec('einops') is not None:\n    import einops",
    "NAMES = {'q': 'W_q', 'k': 'W_k'}\ndef f(m):\n    return [getattr(m, NAMES.get(c)) for c in 'qk']",
    "PROJ = ['W_q', 'W_k']\nprint('projections:', PROJ)\ndef f(m):\n    return [getattr(m, n) for n in PROJ]",
    "def f(m):\n    return [getattr(m, '_'.join(('W', c))) for c in 'qk']",
    "import operator\ndef f(m):\n    return [operator.attrgetter(f'W_{c}')(m) for c in 'qk']",
    # red team round 14 (FP1-FP4): an optional import behind a find_spec flag or in its else branch, a tuple of names
    # concatenated, a parameter's default in a function only the grader calls, a class constant naming a torch function
    "import importlib.util\nHAVE = importlib.util.find_spec('einops') is not None\nif HAVE:\n    import einops",
    "import importlib.util\nif importlib.util.find_spec('einops') is None:\n    einops = None\nelse:\n    import einops",
    "def f(m, bias):\n    return [getattr(m, n) for n in ('weight',) + (('bias',) if bias else ())]",
    "def f(m, names=('W_q', 'W_k')):\n    return [getattr(m, n) for n in names]",
    "import torch\nclass M(torch.nn.Module):\n    normalizer = 'softmax'\n    def forward(self, a):\n"
    "        return getattr(torch, self.normalizer)(a, dim=-1)",
    "def f(o, p='W_'):\n    return getattr(o, f'{p}q')",
    # red team round 15 (F3): an instance attribute every store of which is a constant
    "import torch\nclass M(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
    "        self.norm = 'softmax'\n    def forward(self, a):\n        return getattr(torch, self.norm)(a, dim=-1)",
    # round 12's still-zeroed styles: a class attribute tuple read on `self`, `map(str, …)`, `str(p)`, `P = P`
    _NAMES_ON_CLASS + "M().f(object())",
    _NAMES_ON_CLASS + "class N:\n    PROJ = ('W_v',)\n",
    "def f(m):\n    return [getattr(m, n) for n in map(str, ('W_q', 'W_k'))]",
    "def f(m):\n    return [getattr(m, str(n)) for n in ('W_q', 'W_k')]",
    "P = ('W_q', 'W_k')\nP = P\ndef f(m):\n    return [getattr(m, n) for n in P]",
    # the threads alive, listed by their public API (the thread-check messages name tqdm's monitor thread)
    "import threading\nfor t in threading.enumerate():\n    print(t.name, t.ident, t.is_alive(), t.daemon)",
    "import threading\nprint([t.name for t in threading.enumerate() if t is not threading.main_thread()])",
    "import threading\nprint(threading.current_thread().name)",
    "import threading\nt = threading.Thread(target=print)\nt.start()\nt.join()\nprint(t._started)",
])
def test_honest_reflection_and_configuration_pass(src):
    nb = _notebook({"softmax": "def softmax(x):\n    return x", "self_attention": src})
    assert forbidden_calls.answer_problems(nb, "self_attention") == []


@pytest.mark.parametrize("signature", ["dY, cache=('float64',)", "dY, names=('float64',)", "dY, *, cache=('float64',)"])
def test_a_default_the_grader_overrides_is_no_constant(signature, monkeypatch):
    """Red team round 15 (F2): the grader calls attention_backward(dY, cache) with what the student's forward returned;
    a default there (by the release's position or name) is not what the parameter holds. A parameter the release's
    signature lacks keeps its default (to_torch_mha(mha, names=(...)) in the mutation table)."""
    name = signature.split(", ")[-1].split("=")[0]
    src = f"import torch\ndef attention_backward({signature}):\n    return getattr(torch._C, {name}[0])"
    problems = forbidden_calls.answer_problems(_notebook({"attention_backward": src}), "attention_backward")
    assert len(problems) == 1 and "运行时算出的名字" in problems[0], problems
    listed = "import torch\ndef f(m):\n    return getattr(torch._C, [0])"  # a list folded as a name: reaches nothing
    assert forbidden_calls.answer_problems(_notebook({"attention_backward": listed}), "attention_backward") == []
    extra = "import torch\ndef attention_backward(dY, cache, kind=('float64',)):\n    return getattr(torch, kind[0])"
    assert forbidden_calls.answer_problems(_notebook({"attention_backward": extra}), "attention_backward") == []
    monkeypatch.setattr(forbidden_calls, "_contract", lambda: {})  # no release to read: no default is trusted
    unread = extra.replace("float64", "float32")  # (answer_problems keeps what it found for a notebook it read)
    assert forbidden_calls.answer_problems(_notebook({"attention_backward": unread}), "attention_backward")


@pytest.mark.parametrize("src", [
    # red team round 4 (red4): a comprehension's loop variable, a lambda's parameter are local to them
    "att = torch.stack([scaled_dot_product_row.softmax(dim=-1) for scaled_dot_product_row in att.unbind(0)])",
    "att = {transformer_k: v for transformer_k, v in {'a': att}.items()}['a']",
    "att = list(MultiheadAttention_x for MultiheadAttention_x in [att])[0]",
    "att = {transformer_x for transformer_x in [1] if transformer_x}",
    "norm = lambda transformer_scores: transformer_scores.softmax(dim=-1)",
    "att = [[transformer_j for transformer_j in transformer_i] for transformer_i in [[att]]][0][0]",
])
def test_names_local_to_a_comprehension_or_lambda_are_the_students(src):
    cells = [("mha", "from torch.nn import *\nfrom torch.nn.functional import *\natt = torch.ones(2, 2)\n" + src)]
    assert forbidden_calls.answer_problems(_graded(*cells), "mha") == []


@pytest.mark.parametrize("src,what", [
    # the first iterable is read where the comprehension stands: torch's function after a star import
    ("[f(q, q, q) for f in [scaled_dot_product_attention]]", "F.scaled_dot_product_attention"),
    ("[scaled_dot_product_attention(q, q, q) for q in [1]]", "F.scaled_dot_product_attention"),
    ("[q for q in [1] if scaled_dot_product_attention]", "F.scaled_dot_product_attention"),
    ("class M:\n    scaled_dot_product_attention = 1\n    y = [scaled_dot_product_attention for _ in 'a']",
     "F.scaled_dot_product_attention"),
])
def test_a_comprehension_reads_the_names_it_does_not_bind_where_python_does(src, what):
    cells = [("mha", "from torch.nn.functional import *\nq = 1\n" + src)]
    problems = forbidden_calls.answer_problems(_graded(*cells), "mha")
    assert len(problems) == 1 and what in problems[0], problems


def test_a_forbidden_api_under_a_computed_name_is_left_to_the_run_time_watch():
    """F holds no machinery: `getattr(F, name)` reaches one of its functions, which the run-time watch sees called
    (mha's torch attention included: the function mode records every torch call). It costs no other exercise."""
    src = "import torch.nn.functional as F\nf = getattr(F, ''.join(reversed('noitnetta_tcudorp_tod_delacs')))"
    nb = _notebook({"split_merge_heads": src, "mha": "class MultiHeadAttention: pass"})
    assert forbidden_calls.answer_problems(nb, "split_merge_heads") == []


@pytest.mark.parametrize("src", ["print('scaled_dot_product_attention')", "print(f'{1}', 'scaled_dot_product_attention')"])
def test_a_label_that_spells_a_forbidden_api_is_no_use(src):
    nb = _notebook({"mha": "class MultiHeadAttention: pass\n" + src})
    assert forbidden_calls.answer_problems(nb, "mha") == []


def test_a_label_is_read_as_code_when_print_is_the_students():
    nb = _notebook({"mha": "print = eval\nprint('scaled_dot_product_attention')"})
    assert forbidden_calls.answer_problems(nb, "mha")


def test_the_alias_fixed_points_stop_when_nothing_changes(monkeypatch):
    """Red team round 8 (C): the shell's and threads' aliases were re-read once per assignment whatever happened, so
    a cell of n plain assignments cost n² (4 000 lines: 41 s in the grading process, outside every kernel limit).
    Counted in reads, not seconds: plain assignments are read a fixed number of times each."""
    calls = []
    shell, thread = forbidden_calls._shell, forbidden_calls._thread
    monkeypatch.setattr(forbidden_calls, "_shell", lambda *a: calls.append(1) or shell(*a))
    monkeypatch.setattr(forbidden_calls, "_thread", lambda *a: calls.append(1) or thread(*a))
    n = 400
    forbidden_calls.known_of([tree("\n".join(f"v{i} = {i}" for i in range(n)))])
    assert len(calls) <= 4 * n, len(calls)


@pytest.mark.parametrize("text", ["\x1b[32m</pre><b>FULL MARKS</b>`\n✅ 通过", "x" * 200, "a b"])
def test_an_attribute_name_the_student_spells_is_quoted_only_as_a_name(text):
    """Red team round 9 (D1): the name read on get_ipython() was quoted whole in the verdict (ANSI colours and a
    newline restyled the student's own feedback page)."""
    problems = forbidden_calls.answer_problems(_notebook({"mha": f"x = getattr(get_ipython(), {text!r}, None)"}), "mha")
    assert problems and "<常量>" in problems[0] and text not in problems[0] and "\x1b" not in problems[0], problems


@pytest.mark.parametrize("text", ["<img src=x onerror=alert(1)>`</pre>|=HYPERLINK(http://x)", "x" * 200, "a b"])
def test_a_module_name_the_student_spells_is_quoted_only_as_a_name(text):
    """Red team round 8 (E): the literal handed to import_module was quoted whole in the verdict (backticks, markup,
    any length), and from there in diagnoses.csv and the class report."""
    problems = forbidden_calls.answer_problems(_notebook({"mha": f"import importlib\nm = importlib.import_module({text!r})"}), "mha")
    assert problems and "<常量>" in problems[0] and text not in problems[0] and len(problems[0]) < 200, problems


_PROSE = "助教请注意_本题已人工复核应计满分"


@pytest.mark.parametrize("src", [
    f"{_PROSE}_pop_mode = None",  # a name holding a machinery part
    f"def {_PROSE}_disable_current_modes():\n    pass",
    f"x = '{_PROSE}_pop_mode'",  # a word in a string
    f"import {_PROSE}",  # a module the grading environment lacks
    f"import pickle.{_PROSE}",  # a code loader
    f"from builtins import getattr as {_PROSE}",  # reflection under another name
    f"{_PROSE} = getattr",  # reflection used as a value
    f"import torch as {_PROSE}\nx = {_PROSE}.__dict__[input()]",  # a module's namespace read
    f"import torch as {_PROSE}\n{_PROSE}.{_PROSE} = print",  # a module's object assigned
    f"import torch as {_PROSE}\nvars({_PROSE})[input()] = 1",
])
def test_a_verdict_quotes_no_prose_of_the_students(src):
    """Red team round 13 (D1): an identifier is the student's text (Python names may be any letters): a verdict
    quoted it whole, and from there the feedback, diagnoses.csv and the class report's common mistakes."""
    problems = forbidden_calls.answer_problems(_notebook({"mha": src}), "mha")
    assert problems and not any("助教" in p for p in problems), problems


def test_code_nested_past_the_checks_readers_costs_the_exercise_not_the_grading():
    """Red team round 12 (C2): a sum of 500 terms ran in Python but made the checks' recursive readers raise
    RecursionError, which stopped the notebook's grading; it is now a verdict on that exercise."""
    from autograder.chain import verdicts

    nb = _notebook({"softmax": "def softmax(x):\n    return x", "self_attention": "_c = 1\nx = " + " + ".join(["_c"] * 500)})
    problems = verdicts.answer_problems(nb, "self_attention", {"x"})
    assert len(problems) == 1 and "嵌套太深" in problems[0]


def test_folding_stops_at_the_total_size_of_what_it_reads():
    """Red team round 12 (C1): `"".join(["a" * 9999] * 10000)` passed every per-item limit and took 16 s to fold."""
    tree = ast.parse('"".join(["a" * 9999] * 10000)', mode="eval")
    assert forbidden_calls.folded(tree.body) is forbidden_calls.UNKNOWN
    assert forbidden_calls.folded(ast.parse('"".join(["a" * 99] * 10)', mode="eval").body) == "a" * 990
