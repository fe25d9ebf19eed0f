"""Which torch functions the student's code calls while a driver runs it.

A `TorchFunctionMode` sees every call of a torch function however the function was reached (an
alias, `functools.partial`, a default argument, a module's forward), and a `TorchDispatchMode` sees
the operators below it. Nothing is patched. The context manager is made in a closure when this
module is imported and the drivers import it by value, so rebinding an attribute of this module (or
of a driver) from a notebook afterwards does not switch the detection off.
"""
import contextlib

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
