"""Which torch functions the student's code calls while a driver runs it.

A `TorchFunctionMode` sees every call of a torch function however the function was reached (an
alias, `functools.partial`, a default argument, a module's forward), and a `TorchDispatchMode` sees
the operators below it. Nothing is patched. The context manager is made in a closure when this
module is imported and the drivers import it by value, so rebinding an attribute of this module (or
of a driver) from a notebook afterwards does not switch the detection off.

`AutogradUse` watches the same way for autograd reached by the student's code (nb02's hand-written
backwards). It does not use torch.autograd.graph.saved_tensors_hooks: torch.func's transforms refuse to
run under them (an error instead of a verdict), and they would change how tensors saved in a Function's
forward are checked for in-place changes; a torch call returning a tensor with a grad_fn shows a graph
being built instead.
"""
import contextlib
import os
import sys
import threading
import time

from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode


def _make_watching():
    class _Watch:
        def __init__(self, needles, seen):
            super().__init__()
            self._needles, self._seen = needles, seen

        def _call(self, name, func, args, kwargs):
            kwargs = kwargs or {}
            if any(n in name for n in self._needles):
                self._seen(name, args, kwargs)
            return func(*args, **kwargs)

    class _Functions(_Watch, TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return self._call(str(getattr(func, "__name__", "") or func), func, args, kwargs)

    class _Operators(_Watch, TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return self._call(str(func), func, args, kwargs)

    @contextlib.contextmanager
    def watching(needles, seen, operators=False):
        """While active, `seen(name, args, kwargs)` is called for every torch function (and, with
        `operators`, every aten operator) whose name contains one of `needles`."""
        with contextlib.ExitStack() as stack:
            stack.enter_context(_Functions(tuple(needles), seen))
            if operators:
                stack.enter_context(_Operators(tuple(needles), seen))
            yield

    return watching


watching = _make_watching()


def _make_autograd_watch():
    import torch
    from torch._ops import OperatorBase, OpOverloadPacket
    from torch.autograd import _make_grads, _tensor_or_tensors_to_tuple
    from torch.autograd.graph import _engine_run_backward
    from torch.overrides import _get_current_function_mode_stack
    from torch.utils._device import DeviceContext
    from torch.utils._python_dispatch import _len_torch_dispatch_stack

    task_id, current_node = torch._C._current_graph_task_id, torch._C._current_autograd_node
    grad_api, grad_fn_of, plain = torch.autograd.grad, torch._C.TensorBase.grad_fn.__get__, (torch.Tensor, torch.nn.Parameter)
    # what the function mode names autograd's own entry points: torch.autograd.grad, torch.autograd.backward,
    # Tensor.backward (by qualified name); forward-mode AD's dual tensors (torch.autograd.forward_ad,
    # torch.func.jvp / jacfwd); reading a tensor's grad_fn / grad (a graph node can be called directly)
    api = {"grad": "torch.autograd.grad", "backward": "torch.autograd.backward", "Tensor.backward": "Tensor.backward()"}
    dual = {"_make_dual": "torch.autograd.forward_ad", "_unpack_dual": "torch.autograd.forward_ad"}
    attributes = {"grad_fn": "Tensor.grad_fn", "_grad_fn": "Tensor.grad_fn", "grad": "Tensor.grad"}
    # the other names a report holds (a fixed vocabulary: a report carries no text of the student's)
    derivative, engine, graph = "torch 自带的求导算子（aten 的 *_backward）", "反向传播", "带 grad_fn 的结果"
    subclass, preset = "Tensor 子类自己的 __torch_function__ / __torch_dispatch__", "检查开始前就已启用的 torch 模式"
    # an aten operator called directly (torch.ops.aten.*: what make_fx's graphs and their code call; torch's eager
    # API reaches the operators from C++), and code of torch.fx among a torch call's callers (`_torch_code`)
    aten, fx = "torch.ops 的 aten 算子（make_fx 等从 autograd 得到的图所调用的）", "torch.fx 的代码（图模块生成的代码或它的解释器）"
    # torch's derivative formulas written in Python (torch._decomp / torch._refs: _softmax_backward_data …)
    formula = "torch 自带的 Python 求导公式（torch._decomp / torch._refs 里的 *backward*）"
    operators = (OperatorBase, OpOverloadPacket)
    safe_callables = tuple(type(f) for f in (grad_api, torch.matmul, torch.Tensor.add, torch.Tensor.__add__,
                                             torch._C.TensorBase.grad_fn.__get__))

    def _name(func):
        if not any(type(func) is t for t in safe_callables):  # not one of torch's callables: nothing of it is read
            return None
        owner = getattr(func, "__self__", None)
        if type(owner).__name__ == "getset_descriptor":  # a tensor attribute read: Tensor.grad_fn.__get__
            return attributes.get(getattr(owner, "__name__", ""))
        return api.get(getattr(func, "__qualname__", None) or "") or dual.get(getattr(func, "__name__", None) or "")

    def _with_grad_fn(out):
        items = out if type(out) is tuple or type(out) is list else (out,)
        with torch._C.DisableTorchFunction():
            return any(_tensor_type(type(t)) and grad_fn_of(t) is not None for t in items)

    def _tensor_type(kind):
        return any(kind is p for p in plain)

    def _foreign(types):
        return not all(_tensor_type(t) for t in types)

    def _modes_on():
        """Whether a torch mode of the student's is on (torch.set_default_device's own is torch's code)."""
        return _len_torch_dispatch_stack() or any(type(m) is not DeviceContext for m in _get_current_function_mode_stack())

    # torch.fx running a graph: its graph modules' generated code (named "<eval_with_key>.N"), its interpreter;
    # torch's derivative formulas in Python: the *backward* functions of torch._decomp and torch._refs
    generated, interpreter = "<eval_with_key>", torch.fx.interpreter.__file__
    formulas = tuple(os.path.join(os.path.dirname(torch.__file__), part, "") for part in ("_decomp", "_refs"))
    kinds = {}  # id(code) -> (code, fx / formula / None); the code is kept so that its id stays its own

    def _kind(code):
        known = kinds.get(id(code))
        if known is None:
            name = code.co_filename
            kind = (fx if name.startswith(generated) or name == interpreter
                    else formula if name.startswith(formulas) and "backward" in code.co_name else None)
            known = kinds[id(code)] = (code, kind)
        return known[1]

    def _torch_code(use, frame):
        """Notes torch.fx's code or a derivative formula of torch's in Python among the callers of a torch call,
        up to the frame the watch started in."""
        while frame is not None and frame is not use.outer:
            kind = _kind(frame.f_code)
            if kind:
                use.note("calls", kind)
            frame = frame.f_back

    derivatives = {}  # operator -> whether it is one of torch's derivative formulas (aten.*_backward*)

    def _derivative(func):
        if func not in derivatives:
            derivatives[func] = "_backward" in str(func)
        return derivatives[func]

    def _grad_directly(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, only_inputs=True,
                       allow_unused=None, is_grads_batched=False, materialize_grads=False):
        """torch.autograd.grad of tensors, without its look for torch function modes: the engine it starts keeps
        the modes on for every node, hook and callback it runs."""
        if is_grads_batched:
            raise NotImplementedError("is_grads_batched")
        outputs = (outputs,) if isinstance(outputs, torch.Tensor) else tuple(outputs)
        inputs = (inputs,) if isinstance(inputs, torch.Tensor) else tuple(inputs)
        allow_unused = materialize_grads if allow_unused is None else allow_unused
        grads = _make_grads(outputs, _tensor_or_tensors_to_tuple(grad_outputs, len(outputs)), is_grads_batched=False)
        result = _engine_run_backward(outputs, grads, create_graph if retain_graph is None else retain_graph,
                                      create_graph, inputs, allow_unused, accumulate_grad=False)
        if materialize_grads:
            result = tuple(torch.zeros_like(i) if r is None else r for r, i in zip(result, inputs))
        return result

    class _Functions(TorchFunctionMode):
        def __init__(self, use):
            super().__init__()
            self._use = use

        def __torch_function__(self, func, types, args=(), kwargs=None):
            use, kwargs = self._use, kwargs or {}
            _torch_code(use, sys._getframe(1))
            if _foreign(types):
                use.note("calls", subclass)
            if func is grad_api and use.own:
                return use.run_own(_grad_directly, args, kwargs)
            name = _name(func)
            if name:
                use.note("calls", name)
            elif isinstance(func, operators) and not (use.forwarding and func is use.forwarding[-1]):
                use.note("calls", aten)  # (our dispatch mode's own call of the operator it passes on is not)
            out = func(*args, **kwargs)
            if (task_id() != -1 or use.graph or use.part == "forward") and _with_grad_fn(out):
                use.note("graph", graph)
            return out

    class _Operators(TorchDispatchMode):
        def __init__(self, use):
            super().__init__()
            self._use = use

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            use = self._use
            _torch_code(use, sys._getframe(1))
            if task_id() != -1 and not use.allowed(current_node()):  # an operator of a backward pass not the grader's
                use.note("engine", engine)
            elif _derivative(func):  # a derivative formula of torch's (aten._softmax_backward_data …) called by hand
                use.note("calls", derivative)
            if _foreign(types):
                use.note("calls", subclass)
            use.forwarding.append(func)
            try:
                return func(*args, **(kwargs or {}))
            finally:
                use.forwarding.pop()

    class AutogradUse:
        """What of autograd the student's code reached while the watch is on, on this thread, by part (`part`:
        "forward" while `forward()` is active, else "backward"):

        calls   autograd's entry points called (torch.autograd.grad / backward, Tensor.backward, forward-mode
                AD's dual tensors, grad_fn or grad read), or one of torch's own derivative operators
                (aten.*_backward*) called directly; an aten operator called through torch.ops, or torch.fx's code
                among the callers of a torch call: an autograd-made graph run (make_fx at cell time, while no watch is
                on), or one of torch's derivative formulas written in Python (torch._decomp's *backward*) among them
                (`_torch_code`); or a way around
                the watch (a tensor subclass's own handler, a torch mode already on when the watch started);
        engine  an operator run by a backward pass that is not the grader's (torch.autograd.grad, .backward(),
                torch.func.vjp / grad, torch.autograd.functional, the engine reached any other way);
        graph   a torch call returned a tensor with a grad_fn: a graph is being built inside a backward pass, or in
                the student's forward (a Function's forward runs with grad off: only the student turns it on), or
                (graph=True) anywhere in the case. A graph's nodes can be called by hand (`ctx.next_functions`,
                `node(grad)`), outside autograd's engine: without a graph of the student's there is none to call.

        The watch is on from start() to stop() (`with use:`): a driver keeps it on for the whole case, from before
        the student's first call until the results are plain data, so whatever runs in between — the student's
        functions, the hooks and callbacks autograd's engine runs, finalizers — runs watched (driver.py calls no
        method of a returned object). The grader's own autograd is told apart by what it is: torch.autograd.grad
        called inside `graders()` (and not from the student's code, `forward()` or a backward pass) runs the engine
        directly, with the watch's modes on for every node it runs; and an operator inside a backward pass is the
        grader's only while the engine evaluates a node `allow()`ed (the student's Function's node on the
        grader's own output, whose backward is the student's code, watched)."""

        KINDS = ("calls", "engine", "graph")

        def __init__(self, graph=True):
            self.graph, self.part, self.own = graph, "backward", False
            self.seen = {part: {kind: [] for kind in self.KINDS} for part in ("forward", "backward")}
            self._nodes, self._modes, self.forwarding, self.outer = [], (), [], None

        def note(self, kind, name):
            seen = self.seen[self.part][kind]
            if name not in seen and len(seen) < 8:
                seen.append(name)

        def start(self, outer=None):
            """Turns the watch on; `outer`: the frame it is started from (the caller's: what calls it is not watched)."""
            self.outer = outer or sys._getframe(1)
            if _modes_on():  # the student's own mode would run while ours forwards a call
                self.note("calls", preset)
            self._modes = (_Functions(self), _Operators(self))
            for mode in self._modes:
                mode.__enter__()

        def stop(self):
            for mode in reversed(self._modes):
                mode.__exit__(None, None, None)
            self._modes, self.outer = (), None

        def __enter__(self):
            self.start(sys._getframe(1))
            return self

        def __exit__(self, *exc):
            self.stop()

        @contextlib.contextmanager
        def _as(self, part, own):
            saved = self.part, self.own
            self.part, self.own = part, own
            try:
                yield
            finally:
                self.part, self.own = saved

        def forward(self):
            """While active: the student's forward runs (notes go to "forward"; none of it is the grader's)."""
            return self._as("forward", False)

        def graders(self):
            """While active: torch.autograd.grad called here (by the grader or gradcheck) is the grader's own."""
            return self._as(self.part, True)

        def run_own(self, grad, args, kwargs):
            """The grader's torch.autograd.grad, run by `grad` under a fresh layer of the watch (this mode is off
            while its handler runs); what the engine runs in it is the student's."""
            layer = _Functions(self)
            with self._as("backward", False):
                layer.__enter__()
                try:
                    return grad(*args, **kwargs)
                finally:
                    layer.__exit__(None, None, None)

        def allow(self, output):
            """The node of a tensor the grader made (its grad_fn, read without a note): an operator that autograd's
            engine runs while evaluating it is not the student's autograd. Returns the node."""
            with torch._C.DisableTorchFunction():
                node = grad_fn_of(output)
            if node is not None:
                self._nodes.append(node)
            return node

        def allowed(self, node):
            return node is not None and any(node is n for n in self._nodes)

        def report(self):
            """Plain data: per part, the kinds seen, each a short list of words (empty when none)."""
            return {part: {kind: list(names) for kind, names in kinds.items()} for part, kinds in self.seen.items()}

    AutogradUse.WORDS = frozenset([*api.values(), *dual.values(), *attributes.values(), derivative, engine, graph,
                                   subclass, preset, aten, fx, formula, "forward", "backward", *AutogradUse.KINDS])
    return AutogradUse


AutogradUse = _make_autograd_watch()


def _thread_states():
    """A function returning how many thread states the interpreter has made so far, counting the one it makes to
    ask (CPython numbers each new thread state: every Python thread, however started, gets one)."""
    import ctypes

    api = ctypes.PyDLL(None)  # functions of our own (not ctypes.pythonapi's, whose restype a notebook can set)
    new, number, clear, delete = api.PyThreadState_New, api.PyThreadState_GetID, api.PyThreadState_Clear, api.PyThreadState_Delete
    api.PyInterpreterState_Get.restype = new.restype = ctypes.c_void_p
    new.argtypes, number.argtypes, number.restype = [ctypes.c_void_p], [ctypes.c_void_p], ctypes.c_uint64
    clear.argtypes = delete.argtypes = [ctypes.c_void_p]
    interpreter = api.PyInterpreterState_Get()

    def made_so_far():
        state = new(interpreter)
        try:
            return number(state)
        finally:
            clear(state)
            delete(state)

    return made_so_far


def _make_threads_started():
    """threads_started, and kernel_threads_at_first_cell, sharing the kernel's own threads (held in their closure)."""
    import torch

    made_so_far = _thread_states()

    by_os = []  # [True] in a grading kernel: /proc/self/task is readable and torch ran on one thread at its first cell

    def alive(os_list):
        """(the process's threads, this one): by the OS's ids (/proc/self/task: every thread, however started), else
        by Python's (the threads that can run Python code: torch's and numpy's own pools are not among them)."""
        if os_list:
            return {int(t) for t in os.listdir("/proc/self/task")}, threading.get_native_id()
        return set(sys._current_frames()), threading.get_ident()

    def helpers_started():
        """Starts the helper threads a kernel starts by itself later: pyzmq's garbage collector (a Python thread and
        its context's two), on the kernel's first large output. Returns the threads alive then, both ways."""
        from zmq.utils.garbage import gc

        if not gc.is_alive():
            gc.start()
        return {True: alive(True)[0] if by_os else set(), False: alive(False)[0]}

    ipython = sys.modules.get("IPython")
    in_kernel = ipython is not None and getattr(ipython.get_ipython(), "kernel", None) is not None
    # at home: the threads alive when the package is imported (in a notebook's kernel: with its helpers)
    kernel, armed = helpers_started() if in_kernel else {True: set(), False: alive(False)[0]}, []

    def kernel_threads_at_first_cell(shell):
        """The kernel's own threads are those alive when its first cell starts, with its helpers (a grading kernel's
        start-up line calls this; the kernel starts some of its threads after that line, and pyzmq's garbage
        collector on a first large output, started here). Only
        the first call counts: a later one (a notebook's) would take its own threads for the kernel's. They are
        counted both ways; a check uses the OS's list where it can be read and torch runs on one thread (a grading
        kernel: OMP_NUM_THREADS=1, unless the student's torch.set_num_threads changed it): elsewhere torch and numpy
        start their thread pools on a first large operation, whenever that comes (warming them up here instead would
        hang a process forked afterwards, as the grader's workers are)."""
        if armed:
            return True
        armed.append(True)

        def mark(*args):
            if torch.get_num_threads() == 1 and os.access("/proc/self/task", os.R_OK):
                by_os.append(True)
            kernel.update(helpers_started())
            shell.events.unregister("pre_run_cell", mark)

        shell.events.register("pre_run_cell", mark)
        return True

    def host_threads():
        """In a plain Python process (a script, a test run: no kernel), the threads alive now are the host's: a test
        runner's own, left by earlier work (an event loop's executor), are not an answer's. A kernel ignores this: its
        own threads are those of its first cell."""
        if not in_kernel:
            kernel[False] = alive(False)[0]

    @contextlib.contextmanager
    def threads_started(flags):
        """flags["used_threads"]: a thread other than the kernel's own and this one was alive when the block started
        or ended (an answer cell's worker, idle or not; in a grading kernel the OS's list: started any way), or one
        was started meanwhile: the interpreter made a thread state (`made_so_far`: every Python thread, however
        started, makes one). The torch modes see this thread only."""
        # the OS's list while torch runs on one thread (a student's torch.set_num_threads(2) starts torch's pool,
        # whose threads run no Python: Python's list then)
        os_list = bool(by_os) and torch.get_num_threads() == 1
        ids, me = alive(os_list)
        early = ids - kernel[os_list] - {me}
        for _ in range(20):  # a joined thread's OS thread outlives its join by a moment: one ending now is not counted
            if not early:
                break
            time.sleep(0.005)
            early &= alive(os_list)[0]

        made = made_so_far()
        try:
            yield
        finally:
            late = alive(os_list)[0] - kernel[os_list] - {me}
            flags["used_threads"] = bool(early or late or made_so_far() != made + 1)

    return threads_started, kernel_threads_at_first_cell, host_threads


threads_started, kernel_threads_at_first_cell, host_threads = _make_threads_started()
