"""In-kernel tampering and the student's own hidden channels, graded through the real sandboxed grader on both entry
points (the red team of issue 36, round 2). Each student below scored full marks on the exercises it attacks before:

- display_hook: the answer cell replaces IPython.display.display with a wrapper that clears what the autograd watch
  reported before the check's result leaves the kernel; display_hook_by_helper does the same through a helper whose
  parameters the static check cannot follow (the runner publishes with the display it bound when imported);
- sdpa_display_hook: notebook 04's mha reaches F.scaled_dot_product_attention by a computed name, with the wrapper;
- computed_import: the package's driver module imported by a computed name, its drivers replaced by unwatched ones;
  driver_swap_by_helper reaches it through `inspect.getmodule(check)` and replaces them through a helper (the
  registry holds the drivers it had when imported);
- worker_thread: autograd handed to a thread the answer cell started before any check;
- graph_nodes: autograd's graph nodes called by hand (`ctx.next_functions`, `node(grad)`), from a graph built in
  attention_forward and in AttentionFunction.forward;
- shape_leak: softmax returns, on hidden cases, an empty array whose shape spells the case's inputs;
- lock_worker (round 4): a worker started before any check and blocked in lock.acquire between jobs (the same
  frame at the same instruction: it looked idle);
- fx_at_cell_time (round 4): autograd's gradient traced by make_fx while an answer cell ran, into an FX graph of
  plain aten operators that the backwards run;
- cell_event (round 6): a post_run_cell callback, registered by a computed name, read the grader's delivery cell
  (the cases in clear) and ran autograd on every case before any check; both backwards looked the answers up (the
  delivery now runs silently: no cell event carries it);
- decomp_formula (round 6): softmax's derivative taken from torch's own Python formula (torch._decomp's
  _softmax_backward_data: plain mul/sum/sub operators, no *_backward* one) in both backwards.
"""
import re
import subprocess
import sys

import nbformat
import pytest

from autograder.course import ASSIGNMENT, RELEASE_DIR, REPO, SOURCE_DIR
from autograder.report.grade_tables import graded_cells
from tests.entry_points import ENTRY_POINTS
from tests.red_team_submissions import SOFTMAX_BWD_FUNCTION
from tests.shared_class import attack_class

RULE = "反向传播必须按 §2.3 的公式手写"
MACHINERY = "评分检查机制"
NB1, NB2, NB4 = "01_self_attention", "02_scaled_dot_product", "04_multihead"

FORWARD = '''\
import numpy as np


def attention_forward(Q, K, V, mask=None):
    s = 1.0 / np.sqrt(Q.shape[-1])
    S = s * (Q @ np.swapaxes(K, -1, -2))
    if mask is not None:
        S = np.where(mask, -np.inf, S)
    S = S - S.max(axis=-1, keepdims=True)
    A = np.exp(S)
    A = A / A.sum(axis=-1, keepdims=True)
    Y = A @ V
    return Y, (Q, K, V, mask)
'''

AUTOGRAD_BACKWARD = '''\
import math
import numpy as np
import torch as _t


def attention_backward(dY, cache):
    Q, K, V, mask = cache
    q, k, v = (_t.tensor(a, dtype=_t.float64, requires_grad=True) for a in (Q, K, V))
    with _t.enable_grad():
        S = q @ k.transpose(-2, -1) / math.sqrt(Q.shape[-1])
        if mask is not None:
            S = S.masked_fill(_t.as_tensor(np.broadcast_to(mask, tuple(S.shape))), float("-inf"))
        Y = _t.softmax(S, -1) @ v
        g = _t.autograd.grad(Y, (q, k, v), _t.as_tensor(dY))
    return tuple(x.detach().numpy() for x in g)
'''

AUTOGRAD_FUNCTION = '''\
import math
import torch


class AttentionFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, mask=None):
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        if mask is not None:
            scores = scores.masked_fill(mask, float("-inf"))
        y = torch.softmax(scores, dim=-1) @ v
        ctx.save_for_backward(q, k, v)
        ctx.mask = mask
        return y

    @staticmethod
    def backward(ctx, dy):
        q, k, v = ctx.saved_tensors
        q, k, v = (t.detach().requires_grad_(True) for t in (q, k, v))
        with torch.enable_grad():
            s = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
            if ctx.mask is not None:
                s = s.masked_fill(ctx.mask, float("-inf"))
            y = torch.softmax(s, dim=-1) @ v
            g = torch.autograd.grad(y, (q, k, v), dy)
        return g[0], g[1], g[2], None
'''

# the wrapper: every observation of the kernel's about itself cleared from the check's result on its way out
DISPLAY_HOOK = '''
import json as _json
import IPython.display as _ipd

_MIME = "application/vnd.w1d1.probe+json"
_orig_display = _ipd.display


def _clean(o):
    if isinstance(o, dict):
        if "autograd" in o:
            o["autograd"] = {p: {k: [] for k in ("calls", "engine", "graph")} for p in ("forward", "backward")}
        for key in ("used_threads", "used_sdpa", "used_torch_mha"):
            if key in o:
                o[key] = False
        for v in o.values():
            _clean(v)
    elif isinstance(o, list):
        for v in o:
            _clean(v)


def _display(*objs, **kw):
    out = []
    for o in objs:
        if isinstance(o, dict) and _MIME in o:
            p = _json.loads(o[_MIME])
            _clean(p)
            o = {**o, _MIME: _json.dumps(p)}
        out.append(o)
    return _orig_display(*out, **kw)


_ipd.display = _display
'''

# the same wrapper, installed through a helper: `setattr(mod, name, value)` on a parameter reads like any setattr
DISPLAY_HOOK_BY_HELPER = DISPLAY_HOOK.replace("_ipd.display = _display", """

def _install(mod, name, value):
    setattr(mod, name, value)


_install(_ipd, "display", _display)""")

# drivers that run the student's code without the watch, reporting nothing
UNWATCHED = '''

class _NoWatch:
    def forward(self):
        return _cl.nullcontext()

    def graders(self):
        return _cl.nullcontext()

    def allow(self, y):
        return y.grad_fn


def _quiet(run):
    def call(ns, case):
        out = run(ns, case, _NoWatch())
        return {**out, "autograd": {}, "used_threads": False}
    return call

'''

COMPUTED_IMPORT = '''
import contextlib as _cl
import importlib as _il

_m = _il.import_module("w1d1" + "_student.exercises.nb02_scaled_dot_product")
_D = _il.import_module("w1d1" + "_student.driver").Driver
''' + UNWATCHED + '''

for _gid, _run in (("attention_backward", _m._run_backward), ("attention_function", _m._run_function)):
    _drv, _table = _m.EXERCISES[_gid]
    _m.EXERCISES[_gid] = (_D(_drv.names, _quiet(_run)), _table)
'''

# the drivers reached from the runner's own module (the test cells bound `check`), replaced through a helper
DRIVER_SWAP_BY_HELPER = '''
import contextlib as _cl
import inspect as _insp

_m = [m for m in _insp.getmodule(check).registry.MODULES if "attention_backward" in m.EXERCISES][0]
''' + UNWATCHED + '''

def _put(table, key, value):
    table[key] = value


for _gid, _run in (("attention_backward", _m._run_backward), ("attention_function", _m._run_function)):
    _drv, _table = _m.EXERCISES[_gid]
    _put(_m.EXERCISES, _gid, (type(_drv)(_drv.names, _quiet(_run)), _table))
'''

MHA_SDPA_HOOK = '''\
import math
import torch
import torch.nn as nn
import torch.nn.functional as F

_fast = getattr(F, "scaled_dot_" + "product_attention")


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, bias=True):
        super().__init__()
        self.d_model, self.n_heads = d_model, n_heads
        self.W_q = nn.Linear(d_model, d_model, bias=bias)
        self.W_k = nn.Linear(d_model, d_model, bias=bias)
        self.W_v = nn.Linear(d_model, d_model, bias=bias)
        self.W_o = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, mask=None, need_weights=False):
        B, T, d = x.shape
        h = self.n_heads
        q, k, v = (W(x).view(B, T, h, d // h).transpose(1, 2) for W in (self.W_q, self.W_k, self.W_v))
        y = _fast(q, k, v, attn_mask=None if mask is None else ~mask)
        y = self.W_o(y.transpose(1, 2).reshape(B, T, d))
        if not need_weights:
            return y
        att = q @ k.transpose(-2, -1) / math.sqrt(d // h)
        if mask is not None:
            att = att.masked_fill(mask, float("-inf"))
        return y, att.softmax(-1)
''' + DISPLAY_HOOK

# a worker thread started by the answer cell, before any check; the backwards hand their autograd to it
THREAD_WORKER = '''
import queue as _queue
import threading as _threading

_jobs, _done = _queue.Queue(), _queue.Queue()


def _worker():
    while True:
        fn, args = _jobs.get()
        try:
            _done.put((True, fn(*args)))
        except BaseException as e:
            _done.put((False, repr(e)))


_threading.Thread(target=_worker, daemon=True).start()


def _elsewhere(fn, *args):
    _jobs.put((fn, args))
    ok, val = _done.get()
    if not ok:
        raise RuntimeError(val)
    return val
'''

THREAD_BACKWARD = AUTOGRAD_BACKWARD.replace("def attention_backward(dY, cache):", "def _ag_backward(dY, cache):") + THREAD_WORKER + '''

def attention_backward(dY, cache):
    return _elsewhere(_ag_backward, dY, cache)
'''

THREAD_FUNCTION = THREAD_WORKER + '''
import math
import torch


def _ag(q, k, v, mask, dy):
    q, k, v = (t.detach().clone().requires_grad_(True) for t in (q, k, v))
    with torch.enable_grad():
        s = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        if mask is not None:
            s = s.masked_fill(mask, float("-inf"))
        y = torch.softmax(s, dim=-1) @ v
        return torch.autograd.grad(y, (q, k, v), dy)


class AttentionFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, mask=None):
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        if mask is not None:
            scores = scores.masked_fill(mask, float("-inf"))
        y = torch.softmax(scores, dim=-1) @ v
        ctx.save_for_backward(q, k, v)
        ctx.mask = mask
        return y

    @staticmethod
    def backward(ctx, dy):
        q, k, v = ctx.saved_tensors
        g = _elsewhere(_ag, q, k, v, ctx.mask, dy)
        return g[0], g[1], g[2], None
'''

# red team round 4: a worker started before any check, blocked in a C call (lock.acquire) from its own long-lived
# frame: the same frame at the same instruction between jobs, so a thread that "ran" looked idle
LOCK_WORKER = '''
import threading, time
import numpy as np
import torch

_go, _done = threading.Lock(), threading.Lock()
_go.acquire(); _done.acquire()
_job = {}

def _worker():
    while True:
        _go.acquire()              # C call: the topmost Python frame is this one, at this very instruction
        try:
            _job["out"] = _job["fn"](*_job["args"])
        except Exception as e:
            _job["out"] = e
        _done.release()

threading.Thread(target=_worker, daemon=True).start()
time.sleep(0.05)

def _elsewhere(fn, *args):
    _job["fn"], _job["args"] = fn, args
    _go.release()
    _done.acquire()
    time.sleep(0.02)               # let the worker get back to _go.acquire()
    out = _job["out"]
    if isinstance(out, Exception):
        raise out
    return out

def _grads(Q, K, V, mask, dY):
    q, k, v = (torch.tensor(np.asarray(a, dtype=np.float64), requires_grad=True) for a in (Q, K, V))
    with torch.enable_grad():
        S = (q @ k.transpose(-2, -1)) / np.sqrt(q.shape[-1])
        if mask is not None:
            S = S.masked_fill(torch.as_tensor(np.asarray(mask, dtype=bool)), float("-inf"))
        y = torch.softmax(S, dim=-1) @ v
        g = torch.autograd.grad(y, (q, k, v), torch.tensor(np.asarray(dY, dtype=np.float64)))
    return tuple(x.numpy() for x in g)

''' + FORWARD

LOCK_BACKWARD = '''
def attention_backward(dY, cache):
    Q, K, V, mask = cache
    return _elsewhere(_grads, Q, K, V, mask, dY)
'''

FUNCTION_FORWARD = AUTOGRAD_FUNCTION.split("    @staticmethod\n    def backward")[0]

LOCK_FUNCTION = '''
import math


def _ag(q, k, v, mask, dy):
    q, k, v = (t.detach().requires_grad_(True) for t in (q, k, v))
    with torch.enable_grad():
        s = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        if mask is not None:
            s = s.masked_fill(mask, float("-inf"))
        return torch.autograd.grad(torch.softmax(s, dim=-1) @ v, (q, k, v), dy)


''' + FUNCTION_FORWARD + '''
    @staticmethod
    def backward(ctx, dy):
        return (*_elsewhere(_ag, *ctx.saved_tensors, ctx.mask, dy.detach()), None)
'''

# red team round 4: autograd's gradient traced by make_fx in the attention_forward cell (no watch is on while an
# answer cell runs) into an FX graph of plain aten operators (bmm, mul, _softmax, … no *_backward*); both backwards
# run that graph
FX_FORWARD = '''import numpy as np
import torch
from torch.fx.experimental.proxy_tensor import make_fx
from torch._decomp import core_aten_decompositions


def _loss(q, k, v, bias, scale, dy):
    S = (q @ k.transpose(-2, -1)) * scale + bias
    y = torch.softmax(S, dim=-1) @ v
    return (y * dy).sum()


def _example(B, T, S, d, dv):
    g = torch.Generator().manual_seed(0)
    return (torch.randn(B, T, d, generator=g, dtype=torch.float64), torch.randn(B, S, d, generator=g, dtype=torch.float64),
            torch.randn(B, S, dv, generator=g, dtype=torch.float64), torch.zeros(B, T, S, dtype=torch.float64),
            torch.tensor(0.5, dtype=torch.float64), torch.randn(B, T, dv, generator=g, dtype=torch.float64))


# autograd runs here, while the answer cell runs: no check is watching yet
_GRAD = make_fx(torch.func.grad(_loss, argnums=(0, 1, 2)), decomposition_table=core_aten_decompositions(),
                tracing_mode="symbolic")(*_example(2, 3, 5, 4, 6))


''' + FORWARD.replace("return Y, (Q, K, V, mask)", "return Y, (Q, K, V, mask, s)")

FX_BACKWARD = '''
import numpy as np
import torch


def attention_backward(dY, cache):
    Q, K, V, mask, s = cache
    T, S_ = Q.shape[-2], K.shape[-2]
    batch = np.broadcast_shapes(Q.shape[:-2], K.shape[:-2], V.shape[:-2], dY.shape[:-2],
                                (np.shape(mask)[:-2] if mask is not None else ()))
    bias = np.zeros(batch + (T, S_)) if mask is None else np.where(np.broadcast_to(mask, batch + (T, S_)), -np.inf, 0.0)
    flat = lambda a, n: torch.tensor(np.ascontiguousarray(np.broadcast_to(a, batch + a.shape[-2:]))).reshape(
        -1, a.shape[-2], a.shape[-1]) if a.ndim >= 2 else None
    q, k, v, dy = flat(Q, 0), flat(K, 0), flat(V, 0), flat(dY, 0)
    b = torch.tensor(np.ascontiguousarray(bias)).reshape(-1, T, S_)
    dq, dk, dv = _GRAD(q, k, v, b, torch.tensor(float(s), dtype=torch.float64), dy)
    out = []
    for g, ref in ((dq, Q), (dk, K), (dv, V)):
        g = g.numpy().reshape(batch + ref.shape[-2:])
        extra = len(batch) - (ref.ndim - 2)
        g = g.sum(axis=tuple(range(extra))) if extra > 0 else g
        axes = tuple(i for i, n in enumerate(ref.shape[:-2]) if n == 1 and g.shape[i] != 1)
        out.append(g.sum(axis=axes, keepdims=True) if axes else g)
    return tuple(out)
'''

FX_FUNCTION = '''
''' + FUNCTION_FORWARD + '''
    @staticmethod
    def backward(ctx, dy):
        q, k, v = ctx.saved_tensors
        # the numpy backward (the answer above) runs the code make_fx wrote from autograd at cell time
        Y, cache = attention_forward(q.detach().double().numpy(), k.detach().double().numpy(),
                                     v.detach().double().numpy(), None if ctx.mask is None else ctx.mask.numpy())
        g = attention_backward(dy.detach().double().numpy(), cache)
        return tuple(torch.from_numpy(x).to(q.dtype) for x in g) + (None,)
'''

# red team round 6: a cell-event callback reads the delivery cell and precomputes every case's gradients
EVENT_BACKWARD = '''
import ast, base64, json
import math
import numpy as np
import torch


def _dec(v):
    if isinstance(v, dict):
        if set(v) == {"__nd__"}:
            dt, shape, data = v["__nd__"]
            return np.frombuffer(base64.b64decode(data), dtype=np.dtype(dt)).reshape(shape).copy()
        return {k: _dec(x) for k, x in v.items()}
    return [_dec(x) for x in v] if isinstance(v, list) else v


def _attn(q, k, v, mask):
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        s = s.masked_fill(torch.as_tensor(np.asarray(mask, dtype=bool)), float("-inf"))
    return torch.softmax(s, -1) @ v


def _key(Q, K, V, mask):
    return tuple(np.asarray(a, dtype=np.float32).tobytes() for a in (Q, K, V)) + (
        None if mask is None else np.asarray(mask, dtype=bool).tobytes(),)


_JAC = {}


def _learn(result):
    raw = vars(result.info).get("".join(reversed("llec_war"))) or ""
    if "receive(" not in raw:
        return
    data = json.loads(ast.literal_eval(ast.parse(raw).body[0].value.args[0]))
    for gid, kinds in data.items():
        for cases in kinds.values():
            for c in _dec(cases):
                ins = tuple(torch.tensor(np.asarray(c[n], dtype=np.float64)) for n in "QKV")
                if sum(t.numel() for t in ins) <= 3000:
                    J = torch.autograd.functional.jacobian(lambda q, k, v: _attn(q, k, v, c["mask"]), ins)
                    _JAC[_key(*(c[n] for n in "QKV"), c["mask"])] = [j.numpy() for j in J]


get_ipython().events.register("".join(reversed("llec_nur_tsop")), _learn)


def _vjp(key, dY, shapes):
    dY = np.asarray(dY, dtype=np.float64)
    return [np.tensordot(dY, j, axes=dY.ndim).reshape(s) for j, s in zip(_JAC[key], shapes)]


def attention_backward(dY, cache):
    Q, K, V, mask = cache
    return tuple(_vjp(_key(Q, K, V, mask), dY, (np.shape(Q), np.shape(K), np.shape(V))))
'''
EVENT_FUNCTION = '''
class AttentionFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, mask=None):
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        if mask is not None:
            scores = scores.masked_fill(mask, float("-inf"))
        ctx.key = _key(q.detach().numpy(), k.detach().numpy(), v.detach().numpy(), None if mask is None else mask.numpy())
        ctx.meta = (q.dtype, q.shape, k.shape, v.shape)
        return torch.softmax(scores, dim=-1) @ v

    @staticmethod
    def backward(ctx, dy):
        dt, *shapes = ctx.meta
        return (*[torch.from_numpy(g).to(dt) for g in _vjp(ctx.key, dy.numpy(), shapes)], None)
'''

# red team round 6: torch's softmax derivative, written in Python in torch._decomp, in both backwards
DECOMP_FORWARD = FORWARD.replace("return Y, (Q, K, V, mask)", "return Y, (Q, K, V, A, Y, s)")
DECOMP_BACKWARD = '''
import numpy as np
import torch
from torch._decomp import decompositions as _torch_formulas


def attention_backward(dY, cache):
    Q, K, V, A, Y, s = cache
    dA = dY @ np.swapaxes(V, -1, -2)
    At = torch.from_numpy(np.ascontiguousarray(A, dtype=np.float64))
    dS = _torch_formulas._softmax_backward_data(torch.from_numpy(np.ascontiguousarray(dA)), At, -1, At.dtype).numpy()
    return s * (dS @ K), s * (np.swapaxes(dS, -1, -2) @ Q), np.swapaxes(A, -1, -2) @ dY
'''
DECOMP_FUNCTION = "from torch._decomp import decompositions as _torch_formulas\n" + SOFTMAX_BWD_FUNCTION.replace(
    "torch.ops.aten._softmax_backward_data", "_torch_formulas._softmax_backward_data")

GRAPH_FORWARD = '''\
import numpy as np
import torch


class _Grab(torch.autograd.Function):
    """恒等；它的 ctx 就是图里的节点，ctx.next_functions 指向输入的反向节点。"""

    @staticmethod
    def forward(ctx, y):
        return y.clone()

    @staticmethod
    def backward(ctx, g):
        return g


def attention_forward(Q, K, V, mask=None):
    q, k, v = (torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (Q, K, V))
    with torch.enable_grad():
        s = 1.0 / np.sqrt(Q.shape[-1])
        S = (q @ k.transpose(-2, -1)) * s
        if mask is not None:
            S = S.masked_fill(torch.as_tensor(np.asarray(mask)), float("-inf"))
        E = (S - S.detach().amax(-1, keepdim=True)).exp()
        y = E / E.sum(-1, keepdim=True) @ v
        holder = []

        class G(_Grab):
            @staticmethod
            def forward(ctx, t):
                holder.append(ctx)
                return t.clone()
        G.apply(y)
    leaves = [q, k, v]
    return y.detach().numpy(), (holder[0], leaves)


'''

NODES_BACKWARD = '''\
import numpy as np
import torch


def _run(root, grad):
    """call autograd's own graph nodes one by one (not through the engine): each node is a derivative formula"""
    order, seen = [], set()

    def visit(n):
        if n is None or id(n) in seen:
            return
        seen.add(id(n))
        for m, _ in n.next_functions:
            visit(m)
        order.append(n)

    visit(root)
    pending, leaf = {id(root): {0: grad}}, {}
    for n in reversed(order):
        gs = pending.pop(id(n), None)
        if gs is None:
            continue
        if hasattr(n, "variable"):
            leaf[id(n.variable)] = gs[0]
            continue
        outs = n(*[gs[i] for i in range(max(gs) + 1)])
        if not isinstance(outs, tuple):
            outs = (outs,)
        for (m, nr), g in zip(n.next_functions, outs):
            if m is None or g is None:
                continue
            shape = tuple(m._input_metadata[nr].shape)
            if tuple(g.shape) != shape:
                g = g.sum_to_size(shape)      # the engine's own broadcasting reduction
            slot = pending.setdefault(id(m), {})
            slot[nr] = g if nr not in slot else slot[nr] + g
    return leaf


def attention_backward(dY, cache):
    ctx, leaves = cache
    node = ctx.next_functions[0][0]
    with torch.no_grad():
        leaf = _run(node, torch.as_tensor(dY, dtype=torch.float64))
    return tuple(leaf[id(t)].numpy() if id(t) in leaf else np.zeros(tuple(t.shape)) for t in leaves)
'''

NODES_FUNCTION = '''\
import math

import torch


class _Hold(torch.autograd.Function):
    @staticmethod
    def forward(ctx, y):
        return y.clone()

    @staticmethod
    def backward(ctx, g):
        return g


class AttentionFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, mask=None):
        leaves = [t.detach().requires_grad_(True) for t in (q, k, v)]
        held = []

        class H(_Hold):
            @staticmethod
            def forward(c, y):
                held.append(c)
                return y.clone()

        with torch.enable_grad():
            a, b, c = leaves
            S = (a @ b.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
            if mask is not None:
                S = S.masked_fill(mask, float("-inf"))
            E = (S - S.detach().amax(-1, keepdim=True)).exp()
            y = (E / E.sum(-1, keepdim=True)) @ c
            H.apply(y)
        root = held[0].next_functions[0][0]
        rows = []
        with torch.no_grad():              # outside any backward pass: call the nodes for each output element
            for i in range(y.numel()):
                e = torch.zeros(y.numel(), dtype=y.dtype)
                e[i] = 1
                leaf = _run(root, e.reshape(y.shape))
                rows.append([leaf.get(id(t), torch.zeros_like(t)) for t in leaves])
        ctx.jac = [torch.stack([r[j] for r in rows]) for j in range(3)]
        return y.detach()

    @staticmethod
    def backward(ctx, dy):
        g = dy.reshape(-1)
        return tuple(torch.tensordot(g, J, dims=1) for J in ctx.jac) + (None,)
'''

SHAPE_LEAK = '''\
import numpy as np

_PUBLIC_SHAPES = {(2, 3), (3, 2), (4, 3)}


def softmax(x, axis=-1):
    """沿 axis 的数值稳定 softmax（公开用例照常算）。"""
    x = np.asarray(x, dtype=np.float64)
    if x.shape in _PUBLIC_SHAPES:
        z = np.exp(x - np.max(x, axis=axis, keepdims=True))
        return z / np.sum(z, axis=axis, keepdims=True)
    # 隐藏用例：前三个输入值（4 位小数）编码成一个空数组的形状
    dims = [0] + [int(round(v * 1e4)) + 2**19 for v in x.ravel()[:3]]
    return np.zeros(dims)
'''


def _release_with(notebook, **answers):
    """The release notebook with the solution's answers, and `answers` in their answer cells."""
    solved = nbformat.read(SOURCE_DIR / ASSIGNMENT / f"{notebook}.ipynb", as_version=4)
    filled = {c.metadata["nbgrader"]["grade_id"]: c.source for c in solved.cells
              if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("solution")}
    filled.update(answers)
    nb = nbformat.read(RELEASE_DIR / ASSIGNMENT / f"{notebook}.ipynb", as_version=4)
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if cell.cell_type == "code" and cell.metadata["nbgrader"].get("solution") and gid in filled:
            cell.source = filled[gid]
    return nb


STUDENTS = {
    "display_hook": (NB2, {"attention_forward": FORWARD, "attention_backward": AUTOGRAD_BACKWARD + DISPLAY_HOOK,
                           "attention_function": AUTOGRAD_FUNCTION}),
    "display_hook_by_helper": (NB2, {"attention_forward": FORWARD,
                                     "attention_backward": AUTOGRAD_BACKWARD + DISPLAY_HOOK_BY_HELPER,
                                     "attention_function": AUTOGRAD_FUNCTION}),
    "sdpa_display_hook": (NB4, {"mha": MHA_SDPA_HOOK}),
    "computed_import": (NB2, {"attention_forward": FORWARD, "attention_backward": AUTOGRAD_BACKWARD + COMPUTED_IMPORT,
                              "attention_function": AUTOGRAD_FUNCTION}),
    "driver_swap_by_helper": (NB2, {"attention_forward": FORWARD,
                                    "attention_backward": AUTOGRAD_BACKWARD + DRIVER_SWAP_BY_HELPER,
                                    "attention_function": AUTOGRAD_FUNCTION}),
    "worker_thread": (NB2, {"attention_forward": FORWARD, "attention_backward": THREAD_BACKWARD,
                            "attention_function": THREAD_FUNCTION}),
    "graph_nodes": (NB2, {"attention_forward": GRAPH_FORWARD, "attention_backward": NODES_BACKWARD,
                          "attention_function": NODES_BACKWARD + NODES_FUNCTION}),
    "shape_leak": (NB1, {"softmax": SHAPE_LEAK}),
    "lock_worker": (NB2, {"attention_forward": LOCK_WORKER, "attention_backward": LOCK_BACKWARD,
                          "attention_function": LOCK_FUNCTION}),
    "fx_at_cell_time": (NB2, {"attention_forward": FX_FORWARD, "attention_backward": FX_BACKWARD,
                              "attention_function": FX_FUNCTION}),
    "cell_event": (NB2, {"attention_forward": FORWARD, "attention_backward": EVENT_BACKWARD,
                         "attention_function": EVENT_FUNCTION}),
    "decomp_formula": (NB2, {"attention_forward": DECOMP_FORWARD, "attention_backward": DECOMP_BACKWARD,
                             "attention_function": DECOMP_FUNCTION}),
}


def build(root):
    for student, (notebook, answers) in STUDENTS.items():
        (root / student).mkdir()
        nbformat.write(_release_with(notebook, **answers), root / student / f"{notebook}.ipynb")


@pytest.fixture(scope="module")
def classes(tmp_path_factory):
    return attack_class(tmp_path_factory)  # build()'s students, graded with the other attack files'


def _cells(notebook, *exercises):
    """{test cell: points} of the exercises' public and hidden checks."""
    return {gid: pts for gid, pts in graded_cells(notebook)[0] if gid.removeprefix("test_").split("__")[0] in exercises}


def _scores(run, student, notebook, cells):
    return {gid: run.score(student, notebook, gid) for gid in cells}


BACKWARDS = ("attention_backward", "attention_function")


@pytest.mark.parametrize("path", ENTRY_POINTS)
@pytest.mark.parametrize("student,notebook,exercises,why", [
    ("display_hook", NB2, BACKWARDS, MACHINERY),
    ("computed_import", NB2, BACKWARDS, MACHINERY),
    ("sdpa_display_hook", NB4, ("mha",), MACHINERY),
    ("display_hook_by_helper", NB2, BACKWARDS, RULE),   # the runner publishes with the display it bound at import
    ("driver_swap_by_helper", NB2, BACKWARDS, RULE),    # the registry runs the drivers it held at import
    ("worker_thread", NB2, BACKWARDS, "本题的计算在别的线程里运行了"),
    ("graph_nodes", NB2, BACKWARDS, RULE),
    ("lock_worker", NB2, BACKWARDS, "本题的计算在别的线程里运行了"),
    ("fx_at_cell_time", NB2, BACKWARDS, RULE),
    ("decomp_formula", NB2, BACKWARDS, RULE),
    # the callback never sees a case (KeyError); the static check may see the registration first
    ("cell_event", NB2, BACKWARDS, ("KeyError", MACHINERY)),
])
def test_tampering_in_the_kernel_earns_nothing(classes, path, student, notebook, exercises, why):
    run = classes[path]
    assert run.returncode == 0, run.log[-3000:]
    cells = _cells(notebook, *exercises)
    assert cells and _scores(run, student, notebook, cells) == dict.fromkeys(cells, 0.0), (student, path)
    assert any(w in run.page(student, notebook) for w in ((why,) if isinstance(why, str) else why)), (student, path)


@pytest.mark.parametrize("path", ENTRY_POINTS)
def test_a_hidden_verdict_shows_nothing_the_students_output_spells(classes, path):
    """shape_leak's softmax is right on the public cases and returns, on a hidden one, an empty array whose shape is
    the case's first inputs to 4 digits (2**19 + round(x * 1e4)): the page shows no such number."""
    run, cells = classes[path], _cells(NB1, "softmax")
    public = {gid: pts for gid, pts in cells.items() if "__hidden" not in gid}
    assert public and _scores(run, "shape_leak", NB1, public) == public
    assert _scores(run, "shape_leak", NB1, cells) == {**dict.fromkeys(cells, 0.0), **public}
    page = run.page("shape_leak", NB1)
    assert "的形状不对：期望" in page
    assert not re.findall(r"(?<!\d)5[0-4]\d{4}(?!\d)", page), path


# ---- the same, in process (the watch's mechanisms, no sandbox)

RUN_IN_CAP = """
import resource, sys
from w1d1_student import wire
from w1d1_student.runner import run_cases
from autograder.exercises.checks import make_cases
cap = int(sys.argv[3]) * 2**20
resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
ns = {"__name__": "__main__"}
exec(compile(sys.argv[2], "<answer cell>", "exec"), ns)
print(repr([wire.dumps(run_cases(sys.argv[1], ns, make_cases(sys.argv[1], 0, h), hidden=h)) for h in (False, True)]))
"""


def _verdicts(src, grade_id):
    """The public and the hidden verdict of `src`, its checks run in a python of their own under the kernel's memory
    cap (in this process an attack's graph on the large hidden case grew past 20 GB)."""
    import ast

    from w1d1_student import wire

    from autograder.exercises.checks import judge_payload
    from autograder.kernels.limits import Limits

    run = subprocess.run([sys.executable, "-c", RUN_IN_CAP, grade_id, src, str(Limits().memory_mb)],
                         capture_output=True, text=True, timeout=1200, cwd=REPO)
    assert run.returncode == 0, run.stderr[-3000:]
    return [judge_payload(wire.loads(text), seed=0) for text in ast.literal_eval(run.stdout.strip().splitlines()[-1])]


IDLE_THREAD = '''
import threading as _threading

_stop = _threading.Event()
_threading.Thread(target=_stop.wait, daemon=True).start()
'''


@pytest.mark.parametrize("grade_id,src,rule", [
    ("attention_backward", FORWARD + THREAD_BACKWARD, "本题的计算在别的线程里运行了"),
    ("attention_function", THREAD_FUNCTION, "本题的计算在别的线程里运行了"),
    ("attention_backward", GRAPH_FORWARD + NODES_BACKWARD, RULE + "：attention_forward（为 attention_backward 准备 cache 时）里"),
    ("attention_function", NODES_BACKWARD + NODES_FUNCTION, RULE + "：AttentionFunction.forward 里"),
    ("attention_backward", LOCK_WORKER + LOCK_BACKWARD, "本题的计算在别的线程里运行了"),
    ("attention_function", LOCK_WORKER + LOCK_FUNCTION, "本题的计算在别的线程里运行了"),
    ("attention_backward", FX_FORWARD + FX_BACKWARD, RULE + "：attention_backward 里用到了 autograd（调用了 torch.fx 的代码"),
    ("attention_function", FX_FORWARD + FX_BACKWARD + FX_FUNCTION,
     RULE + "：AttentionFunction.backward 里用到了 autograd（调用了 torch.fx 的代码"),
    ("attention_backward", DECOMP_FORWARD + DECOMP_BACKWARD,
     RULE + "：attention_backward 里用到了 autograd（调用了 torch 自带的 Python 求导公式"),
    ("attention_function", DECOMP_FUNCTION,
     RULE + "：AttentionFunction.backward 里用到了 autograd（调用了 torch 自带的 Python 求导公式"),
])
def test_work_on_an_earlier_thread_and_graph_nodes_called_by_hand_are_seen(grade_id, src, rule):
    verdicts = _verdicts(src, grade_id)
    assert all(not v.passed and v.message.startswith(rule) for v in verdicts), [v.message[:200] for v in verdicts]


@pytest.mark.parametrize("grade_id", BACKWARDS)
def test_a_thread_left_alive_beside_a_hand_written_backward_costs_it(grade_id):
    """A thread the notebook started earlier and left alive, even one that only waits, costs the check: blocked in a
    C call it looks the same whether or not it gets work (lock_worker); one joined before the check costs nothing
    (the mutation tables' ThreadPoolExecutor)."""
    from tests.variants import notebook_solution

    verdicts = _verdicts(notebook_solution(grade_id) + IDLE_THREAD, grade_id)
    assert all(not v.passed and "本题的计算在别的线程里运行了" in v.message for v in verdicts), [v.message[:200] for v in verdicts]


def _result_display(src, hidden=False):
    """The display message a grading kernel sends for check("softmax") on `src`'s softmax (seed 0's cases)."""
    from w1d1_student import wire
    from w1d1_student.runner import run_cases

    from autograder.exercises.checks import make_cases

    ns = {"__name__": "__main__"}
    exec(src, ns)
    text = wire.dumps(run_cases("softmax", ns, make_cases("softmax", 0, hidden), hidden=hidden))
    return {"msg_type": "display_data", "parent_header": {"msg_id": "x"}, "header": {"msg_type": "display_data"},
            "content": {"data": {wire.MIME: text, "text/plain": "[softmax]"}, "metadata": {}}}


RIGHT = ("import numpy as np\ndef softmax(x, axis=-1):\n    e = np.exp(x - x.max(axis, keepdims=True))\n"
         "    return e / e.sum(axis, keepdims=True)")
WRONG = "import numpy as np\ndef softmax(x, axis=-1):\n    return np.exp(x) / np.exp(x).sum(axis, keepdims=True)"


def test_the_verdict_reads_the_results_as_they_arrived_not_what_the_cell_shows_at_the_end():
    """A thread of the student's can clear a test cell's outputs (clear_output) after the check sent its result and
    display a result of its own making: the grader keeps every result as it arrives and judges those."""
    from autograder.chain.sandboxed_execute import SandboxedExecute
    from autograder.chain.verdicts import judge_cell

    nb = nbformat.read(RELEASE_DIR / ASSIGNMENT / f"{NB1}.ipynb", as_version=4)
    index = next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == "test_softmax")
    executor = SandboxedExecute()
    executor.reset_execution_trackers()
    executor.nb, executor._run, executor.clear_before_next_output = nb, {index}, False
    outs = []
    executor.output(outs, _result_display(WRONG), None, index)  # the check's own result (a wrong answer's)
    executor.clear_output(outs, {"parent_header": {"msg_id": "x"}, "content": {"wait": False}}, index)  # the thread's
    executor.output(outs, _result_display(RIGHT), None, index)
    nb.cells[index].outputs = outs
    assert judge_cell(nb, nb.cells[index], seed=0)[0]  # what the cell shows at the end passes
    arrived = executor._budget.arrived
    assert len(arrived[index]) == 2
    passed, message, _ = judge_cell(nb, nb.cells[index], seed=0, arrived=arrived)
    assert not passed and "没有得到可用的检查结果" in message
    passed, _, _ = judge_cell(nb, nb.cells[index], seed=0, arrived={index: arrived[index][:1]})
    assert not passed  # the wrong answer's own result, judged as it arrived
    passed, _, _ = judge_cell(nb, nb.cells[index], seed=0, arrived={index: arrived[index][1:]})
    assert passed
