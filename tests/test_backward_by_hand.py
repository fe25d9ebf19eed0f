"""Notebook 02's backwards are hand-written (§2.3): autograd reached by the student's code costs the exercise,
through the real sandboxed grader by both entry points. The watch is on for the whole of each case (the driver's
own torch.autograd.grad and gradcheck are told apart: they run the student's backward, watched, on the thread
autograd's engine runs it on), and leaves no mode behind; the student's objects act only inside it (issue 36:
a dunder of a returned tuple, a node pre-hook ahead of the grader's). The mutation tables
(tests/variants/nb02_scaled_dot_product.py) hold every way of reaching autograd tried; this file proves the
mechanism and the real grading path."""
import threading

import nbformat
import pytest
import torch
from torch.utils._python_dispatch import _len_torch_dispatch_stack
from w1d1_student import wire
from w1d1_student.runner import run_cases
from w1d1_student.torch_calls import AutogradUse, host_threads

from autograder.course import ASSIGNMENT, RELEASE_DIR, SOURCE_DIR
from autograder.exercises.checks import judge_payload, make_cases
from tests.entry_points import ENTRY_POINTS
from tests.shared_class import attack_class
from tests.variants import nb02_scaled_dot_product as v02
from tests.variants import notebook_solution

NB = "02_scaled_dot_product"
RULE = "反向传播必须按 §2.3 的公式手写"
BACKWARD_CELLS = ("test_attention_backward", "test_attention_backward__hidden")
FUNCTION_CELLS = ("test_attention_function", "test_attention_function__hidden")


def _way(cheats, way):
    return cheats[list(v02.AUTOGRAD_WAYS).index(way)][0]


def _modes_on_stack():
    return torch._C._len_torch_function_stack(), _len_torch_dispatch_stack()


def _payloads(src, grade_id):
    ns = {"__name__": "__main__"}
    exec(compile(src, "<answer cell>", "exec"), ns)
    return [run_cases(grade_id, ns, make_cases(grade_id, 0, h), hidden=h) for h in (False, True)], ns


def _verdicts(payloads):
    return [judge_payload(wire.loads(wire.dumps(p)), seed=0) for p in payloads]


# ---------------------------------------------------------------------------------------------
# the watch, in process
# ---------------------------------------------------------------------------------------------

def test_the_drivers_own_autograd_is_not_the_students():
    """The solutions: the driver's torch.autograd.grad and gradcheck run, and nothing is reported."""
    for grade_id in ("attention_backward", "attention_function"):
        payloads, _ = _payloads(notebook_solution(grade_id), grade_id)
        outs = [res["out"] for p in payloads for res in p["results"]]
        assert outs and all(res["ok"] for p in payloads for res in p["results"]), grade_id
        for out in outs:
            assert not out["used_threads"]
            assert all(seen == {"calls": [], "engine": [], "graph": []} for seen in out["autograd"].values()), out
        assert all(vd.passed for vd in _verdicts(payloads)), grade_id
    assert any(c["gradcheck"] for h in (False, True) for c in make_cases("attention_function", 0, h))


RECORDING = v02.FUNCTION.replace(
    "        q, k, v, A, y = ctx.saved_tensors\n",
    "        q, k, v, A, y = ctx.saved_tensors\n"
    "        SEEN.append((threading.get_ident(), torch._C._len_torch_function_stack(), torch.is_grad_enabled()))\n",
).replace("import torch\n", "import threading\nimport torch\nSEEN = []\n", 1)


def test_threads_the_host_runs_are_not_the_answers():
    """In a plain process (this test run), a thread alive beside the check is an answer's unless the host declared
    it its own (host_threads: conftest does so before each test, for what earlier tests left running)."""
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait, daemon=True)
    thread.start()
    try:
        def used():
            payloads, _ = _payloads(notebook_solution("attention_backward"), "attention_backward")
            return {res["out"]["used_threads"] for p in payloads for res in p["results"]}

        assert used() == {True}
        host_threads()
        assert used() == {False}
    finally:
        stop.set()
        thread.join()


JOINED_THREADS = {
    # _thread's own start function: threading's profile hook never runs in it
    "_thread": "import _thread\n"
               "def _elsewhere(work):\n"
               "    box, done = [], _thread.allocate_lock()\n"
               "    done.acquire()\n"
               "    _thread.start_new_thread(lambda: (box.append(work()), done.release()), ())\n"
               "    done.acquire()\n"
               "    return box[0]\n",
    # threading with its profile hook switched off first (red team round 2, F3)
    "threading": "import threading\n"
                 "def _elsewhere(work):\n"
                 "    box = []\n"
                 "    threading.setprofile(None)\n"
                 "    t = threading.Thread(target=lambda: box.append(work()))\n"
                 "    t.start()\n"
                 "    t.join()\n"
                 "    return box[0]\n",
}


@pytest.mark.parametrize("way", JOINED_THREADS)
def test_autograd_in_a_thread_started_and_joined_inside_the_check_is_seen(way):
    """A thread started and joined while the check runs (alive neither at its start nor at its end) is seen however
    it was started: the interpreter made a thread state meanwhile (torch_calls.threads_started)."""
    cheat = _way(v02.NUMPY_CHEATS, "torch.autograd.grad")
    src = JOINED_THREADS[way] + cheat.replace(
        "    dy = torch.tensor(dY)\n",
        "    dy = torch.tensor(dY)\n"
        "    return _elsewhere(lambda: _backward_here(q, k, v, mask, dy))\n\n\n"
        "def _backward_here(q, k, v, mask, dy):\n")
    payloads, _ = _payloads(src, "attention_backward")
    outs = [res["out"] for p in payloads for res in p["results"] if res.get("ok")]
    assert outs and all(out["used_threads"] for out in outs)
    assert all(seen == {"calls": [], "engine": [], "graph": []} for out in outs for seen in out["autograd"].values())
    assert all(not v.passed and "本题的计算在别的线程里运行了" in v.message for v in _verdicts(payloads))


def test_a_progress_bars_monitor_thread_counts_unless_switched_off():
    """Red team round 7 (H3): a tqdm bar leaves its monitor thread alive, which costs the check (the message says how to
    switch it off); with `tqdm.tqdm.monitor_interval = 0`, set as the message says, the bar costs nothing."""
    import tqdm

    def verdicts(setting):
        src = notebook_solution("attention_backward") + f"import tqdm\n{setting}\nfor _ in tqdm.tqdm(range(3)):\n    pass\n"
        return _verdicts(_payloads(src, "attention_backward")[0])

    try:
        left = verdicts("")
        assert all(not v.passed and "tqdm.tqdm.monitor_interval = 0" in v.message for v in left), [v.message for v in left]
        tqdm.tqdm.monitor.exit()
        host_threads()
        assert all(v.passed for v in verdicts("tqdm.tqdm.monitor_interval = 0"))
    finally:
        if tqdm.tqdm.monitor is not None:
            tqdm.tqdm.monitor.exit()
        tqdm.tqdm.monitor_interval, tqdm.tqdm.monitor = 10, None


def test_the_watch_runs_on_the_engines_thread_around_the_students_backward_only():
    """autograd's engine runs a CPU graph on the thread that asked for it; the pre-hook pushes the modes
    there (one function mode on the stack while the student's backward runs) and nothing stays pushed."""
    assert _modes_on_stack() == (0, 0)
    payloads, ns = _payloads(RECORDING, "attention_function")
    assert all(vd.passed for vd in _verdicts(payloads))
    assert ns["SEEN"], "the student's backward never ran"
    assert {ident for ident, _, _ in ns["SEEN"]} == {threading.get_ident()}
    assert {depth for _, depth, _ in ns["SEEN"]} == {1}
    assert not any(grad for _, _, grad in ns["SEEN"])  # the engine runs backward without grad mode
    assert _modes_on_stack() == (0, 0)


RAISING = v02.function_cheat(v02.AUTOGRAD_WAYS["torch.autograd.grad"] + "\nraise RuntimeError('after autograd')")
HONEST_RAISING = v02.FUNCTION.replace("        q, k, v, A, y = ctx.saved_tensors\n",
                                      "        q, k, v, A, y = ctx.saved_tensors\n        raise RuntimeError('plain bug')\n")


@pytest.mark.parametrize("src,rule", [(RAISING, True), (HONEST_RAISING, False)], ids=["autograd-then-raise", "plain-raise"])
def test_a_backward_that_raises_leaves_no_mode_behind(src, rule):
    """A raising backward skips the post-hook: autograd's engine restores the thread's mode stacks, and
    the use of autograd before the error is still the verdict (a plain error stays an error)."""
    payloads, _ = _payloads(src, "attention_function")
    assert _modes_on_stack() == (0, 0)
    first = _verdicts(payloads)[0]
    assert not first.passed
    assert (RULE in first.message) == rule, first.message
    assert rule or "plain bug" in first.message


def test_autograd_use_starts_and_stops_balanced():
    use = AutogradUse()
    with use:
        x = torch.ones(2, requires_grad=True)
        (x * x).sum().backward()
    assert _modes_on_stack() == (0, 0)
    seen = use.report()
    assert "Tensor.backward()" in seen["backward"]["calls"] and seen["backward"]["engine"] and seen["backward"]["graph"], seen
    quiet = AutogradUse()
    with quiet, torch.no_grad():
        (x * x).sum()
    assert quiet.report() == {part: {"calls": [], "engine": [], "graph": []} for part in ("forward", "backward")}


class _Double(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad * 2


def test_the_graders_own_autograd_runs_the_students_code_watched():
    """torch.autograd.grad called inside graders() on an allowed node is not the student's; a hook of the student's
    it runs, reaching autograd, is (and runs with the watch's function mode on: the engine started under it)."""
    depth = []

    def student_hook(grad):
        depth.append(torch._C._len_torch_function_stack())
        z = torch.ones(2, requires_grad=True)
        with torch.enable_grad():
            torch.autograd.grad((z * z).sum(), z)
        return grad

    use = AutogradUse(graph=False)
    with use:
        x = torch.ones(2, requires_grad=True)
        for hook in (None, student_hook):
            if hook:
                x.register_hook(hook)
            y = _Double.apply(x)
            use.allow(y)
            with use.graders():
                (dx,) = torch.autograd.grad(y, x, torch.ones(2))
            assert dx.tolist() == [2.0, 2.0]
            if not hook:
                assert use.report()["backward"] == {"calls": [], "engine": [], "graph": []}
    assert depth == [1] and _modes_on_stack() == (0, 0)
    seen = use.report()["backward"]
    assert seen["calls"] == ["torch.autograd.grad"] and seen["engine"], seen


def test_a_torch_mode_of_the_students_on_before_the_check_counts():
    """A function mode the student left on would run, unwatched, whenever the watch's own mode passes a call on:
    one on when the watch starts is reported; torch.set_default_device's mode is torch's own and is not."""
    from torch.overrides import TorchFunctionMode

    class Left(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    seen = {}
    for name, on, off in (("student's", lambda: Left().__enter__(), torch._C._pop_torch_function_stack),
                          ("default device", lambda: torch.set_default_device("cpu"), lambda: torch.set_default_device(None))):
        on()
        try:
            with AutogradUse() as use:
                torch.ones(2) * 2
        finally:
            off()
        seen[name] = use.report()["backward"]["calls"]
    assert _modes_on_stack() == (0, 0)
    assert seen == {"student's": ["检查开始前就已启用的 torch 模式"], "default device": []}, seen


def test_the_verdict_names_the_rule_and_where():
    (fn, _), (bw, _) = (_payloads(_way(v02.FUNCTION_CHEATS, "torch.func.vjp"), "attention_function"),
                        _payloads(_way(v02.NUMPY_CHEATS, "Tensor.backward()"), "attention_backward"))
    fn_msg, bw_msg = _verdicts(fn)[0].message, _verdicts(bw)[0].message
    assert fn_msg.startswith(RULE + "：AttentionFunction.backward 里用到了 autograd"), fn_msg
    assert bw_msg.startswith(RULE + "：attention_backward 里用到了 autograd"), bw_msg
    assert "Tensor.backward()" in bw_msg and "本题计 0 分" in bw_msg


# ---------------------------------------------------------------------------------------------
# the real grader, both entry points
# ---------------------------------------------------------------------------------------------

def _solutions():
    src = nbformat.read(SOURCE_DIR / ASSIGNMENT / f"{NB}.ipynb", as_version=4)
    return {c.metadata["nbgrader"]["grade_id"]: c.source for c in src.cells
            if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("solution")}


def _full_marks():
    src = nbformat.read(SOURCE_DIR / ASSIGNMENT / f"{NB}.ipynb", as_version=4)
    return {c.metadata["nbgrader"]["grade_id"]: float(c.metadata["nbgrader"]["points"]) for c in src.cells
            if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("grade")}


def _release_with(**answers):
    nb = nbformat.read(RELEASE_DIR / ASSIGNMENT / f"{NB}.ipynb", as_version=4)
    filled = {**_solutions(), **answers}
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if cell.cell_type == "code" and cell.metadata["nbgrader"].get("solution") and gid in filled:
            cell.source = filled[gid]
    return nb


CLASS = {
    "honest": {},
    # the report's cheat (a): AttentionFunction.backward re-runs the forward under enable_grad
    "grad_in_function": {"attention_function": _way(v02.FUNCTION_CHEATS, "torch.autograd.grad")},
    # the report's cheat (b): numpy attention_backward rebuilds the forward in torch and calls autograd
    "grad_in_numpy": {"attention_backward": _way(v02.NUMPY_CHEATS, "torch.autograd.grad")},
    # torch.func in one, a helper defined elsewhere in the cell in the other; a hand-written numpy round trip
    "func_and_helper": {"attention_function": _way(v02.FUNCTION_CHEATS, "torch.func.grad"),
                        "attention_backward": _way(v02.NUMPY_CHEATS, "helper")},
    "numpy_round_trip": {"attention_function": v02.FUNCTION_NUMPY},
    # issue 36: the Jacobian computed by a dunder of what the forward returns (the driver unpacked it between the
    # watches); a pre-hook of the node registered in forward, ahead of the grader's (both full marks before)
    "unpacked_jacobian": {"attention_backward": v02.lazy_pair("__iter__")},
    "early_prehook": {"attention_function": v02.HOOK_CHEATS["pre-hook"]},
}


def build(subs):
    for student, answers in CLASS.items():
        (subs / student).mkdir()
        nbformat.write(_release_with(**answers), subs / student / f"{NB}.ipynb")


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    return attack_class(tmp_path_factory)  # build()'s students, graded with the other attack files'


@pytest.mark.parametrize("path", ENTRY_POINTS)
def test_hand_written_backwards_keep_full_marks(graded, path):
    g, full = graded[path], _full_marks()
    assert g.returncode == 0, g.log[-3000:]
    for student in ("honest", "numpy_round_trip"):
        lost = {gid: g.score(student, NB, gid) for gid in full if g.score(student, NB, gid) != full[gid]}
        assert not lost, (student, lost)


@pytest.mark.parametrize("path", ENTRY_POINTS)
def test_autograd_inside_backward_scores_zero(graded, path):
    g, full = graded[path], _full_marks()
    zero = {"grad_in_function": FUNCTION_CELLS, "grad_in_numpy": BACKWARD_CELLS,
            "func_and_helper": FUNCTION_CELLS + BACKWARD_CELLS, "unpacked_jacobian": BACKWARD_CELLS,
            "early_prehook": FUNCTION_CELLS}
    for student, cells in zero.items():
        assert {gid: g.score(student, NB, gid) for gid in cells} == dict.fromkeys(cells, 0.0), student
        kept = {gid: g.score(student, NB, gid) for gid in full if gid not in cells}
        assert kept == {gid: full[gid] for gid in kept}, student  # nothing else lost
        assert g.points(student, NB) == sum(full.values()) - sum(full[gid] for gid in cells)
    for student, where in (("grad_in_function", "AttentionFunction.backward"), ("grad_in_numpy", "attention_backward"),
                           ("func_and_helper", "AttentionFunction.backward"), ("early_prehook", "AttentionFunction.backward")):
        page = g.page(student, NB)
        assert page and f"{RULE}：{where} 里用到了 autograd" in page, (student, path)


def test_both_entry_points_agree(graded):
    mine = {path: {k: v for k, v in graded[path].scores.items() if k[0] in CLASS} for path in ENTRY_POINTS}
    assert mine["command"] and mine["command"] == mine["nbgrader"]
