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
import sys
import threading

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

    task_id = torch._C._current_graph_task_id
    # what the function mode names autograd's own entry points: torch.autograd.grad, torch.autograd.backward,
    # Tensor.backward (by qualified name); forward-mode AD's dual tensors (torch.autograd.forward_ad,
    # torch.func.jvp / jacfwd); reading a tensor's grad_fn / grad (a graph node can be called directly)
    api = {"grad": "torch.autograd.grad", "backward": "torch.autograd.backward", "Tensor.backward": "Tensor.backward()"}
    dual = {"_make_dual": "torch.autograd.forward_ad", "_unpack_dual": "torch.autograd.forward_ad"}
    attributes = {"grad_fn": "Tensor.grad_fn", "_grad_fn": "Tensor.grad_fn", "grad": "Tensor.grad"}

    def _name(func):
        owner = getattr(func, "__self__", None)
        if type(owner).__name__ == "getset_descriptor":  # a tensor attribute read: Tensor.grad_fn.__get__
            return attributes.get(getattr(owner, "__name__", ""))
        return api.get(getattr(func, "__qualname__", None) or "") or dual.get(getattr(func, "__name__", None) or "")

    def _with_grad_fn(out):
        items = out if isinstance(out, (tuple, list)) else (out,)
        return any(isinstance(t, torch.Tensor) and t.grad_fn is not None for t in items)

    class _Functions(TorchFunctionMode):
        def __init__(self, use):
            super().__init__()
            self._use = use

        def __torch_function__(self, func, types, args=(), kwargs=None):
            name = _name(func)
            if name:
                self._use.note("calls", name)
            out = func(*args, **(kwargs or {}))
            if self._use.graph and _with_grad_fn(out):
                self._use.note("graph", str(getattr(func, "__name__", func)))
            return out

    class _Operators(TorchDispatchMode):
        def __init__(self, use, task):
            super().__init__()
            self._use, self._task = use, task

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if task_id() != self._task:  # an operator of a backward pass the student started
                self._use.note("engine", str(func))
            elif "_backward" in str(func):  # a derivative formula of torch's (aten._softmax_backward_data …) called by hand
                self._use.note("calls", str(func))
            return func(*args, **(kwargs or {}))

    class AutogradUse:
        """What of autograd the student's code reached between `start()` and `stop()`, on this thread:

        calls   autograd's entry points called (torch.autograd.grad / backward, Tensor.backward, forward-mode
                AD's dual tensors, grad_fn or grad read), or one of torch's own derivative operators
                (aten.*_backward*) called directly;
        engine  an operator run by a backward pass started inside (its graph task is not the one at start:
                torch.autograd.grad, .backward(), torch.func.vjp / grad, torch.autograd.functional, the engine
                reached any other way);
        graph   (with graph=True) a torch call returned a tensor with a grad_fn: a graph is being built.

        start() pushes a torch function mode and a dispatch mode (plain objects, no generator), stop() pops
        them. Inside a Function's backward, call start() from a pre-hook of its node and stop() from its
        post-hook: autograd's engine restores the thread's mode stacks when the node raises."""

        def __init__(self, graph=True):
            self.graph = graph
            self.seen = {"calls": [], "engine": [], "graph": []}
            self._modes = ()

        def note(self, kind, name):
            if name not in self.seen[kind] and len(self.seen[kind]) < 8:
                self.seen[kind].append(name)

        def start(self):
            self._modes = (_Functions(self), _Operators(self, task_id()))
            for mode in self._modes:
                mode.__enter__()

        def stop(self):
            for mode in reversed(self._modes):
                mode.__exit__(None, None, None)
            self._modes = ()

        def report(self):
            """Plain data: the kinds seen, each a short list of names (empty when none)."""
            return {kind: list(names) for kind, names in self.seen.items()}

    return AutogradUse


AutogradUse = _make_autograd_watch()


@contextlib.contextmanager
def threads_started(flags):
    """flags["used_threads"]: the student's code started a Python thread (the torch modes above see the
    calling thread only). Seen by threading's profile hook, and by threads still alive afterwards."""
    before, started = set(sys._current_frames()), []

    def hook(*args):
        started.append(True)
        sys.setprofile(None)

    previous = threading.getprofile()
    threading.setprofile(hook)
    try:
        yield
    finally:
        threading.setprofile(previous)
        flags["used_threads"] = bool(started or set(sys._current_frames()) - before)
