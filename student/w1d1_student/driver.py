"""What every exercise driver provides, and small helpers drivers share.

A driver touches what the student's code returned only through the functions here, which read it by its
exact type: `to_numpy` (arrays, tensors, numbers), `items` (a returned tuple), `type_name` and `dtype_name`
(names from a fixed vocabulary). None of them calls a method of the student's object (no `__iter__`,
`__len__`, `__array__`, `__torch_function__`, `__repr__` …), so nothing the student returns can act
outside the checks' watch, and no text of the student's reaches a result: a result holds numbers, arrays,
flags and the words of `WORDS` (plus each exercise module's own `WORDS`), nothing else.
"""
import sys
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from .working_folder import ClosedPathError


@dataclass(frozen=True)
class Driver:
    """`names`: the definitions the answer cell must hold.
    `run(ns, case)`: runs the student's code from namespace `ns` on one case (a dict of plain data
    the grader made) and returns a dict of plain outputs (numpy arrays, numbers, words of the vocabulary)."""
    names: tuple
    run: Callable


class MissingDefinition(NameError):
    pass


def lookup(ns, name):
    if name not in ns:  # the cell that failed last (IPython keeps it) may have stopped at the closed path
        stopped = isinstance(getattr(sys, "last_value", None), ClosedPathError)
        raise MissingDefinition(f"没有找到 `{name}` 的定义：先运行你的答案单元格" + (
            "（评分时它在修改 sys.path 的那一行停了下来：评分内核的 sys.path 不能修改，删掉那一行）" if stopped else ""))
    return ns[name]


OTHER = "其他类型"
# the types a driver names, each by its own name: Python's, numpy's, torch's and torch.nn's modules (any other: OTHER)
_NUMPY_NUMBERS = tuple(t for t in set(np.sctypeDict.values()) if np.dtype(t).kind in "biufc")
_NN_MODULES = tuple(t for t in vars(torch.nn).values() if isinstance(t, type) and issubclass(t, torch.nn.Module))
_TYPES = tuple((t, t.__name__) for t in (bool, int, float, complex, str, bytes, type(None), list, tuple, dict, set,
                                         np.ndarray, torch.Tensor, torch.nn.Parameter, *_NUMPY_NUMBERS, *_NN_MODULES))
_TORCH_DTYPES = tuple({d: str(d).replace("torch.", "") for d in vars(torch).values() if isinstance(d, torch.dtype)}.items())
_NUMPY_DTYPES = frozenset(np.dtype(t).name for t in _NUMPY_NUMBERS)
_SCALARS = (bool, int, float, *_NUMPY_NUMBERS)
WORDS = frozenset([OTHER, *(name for _, name in _TYPES), *(name for _, name in _TORCH_DTYPES), *_NUMPY_DTYPES])

# torch's own methods, bound now (a grading kernel imports this module before the first cell): a student who
# later rebinds torch.Tensor.detach or the like changes nothing here
_TENSOR_TYPES = (torch.Tensor, torch.nn.Parameter)
_BASE = torch._C.TensorBase
_DETACH, _TO, _CPU, _NUMPY, _DTYPE = _BASE.detach, _BASE.to, _BASE.cpu, _BASE.numpy, _BASE.dtype.__get__
_NO_NUMPY = (torch.bfloat16, torch.float16)


def _one_of(kind, types):
    return any(kind is t for t in types)


def is_tensor(x):
    """Whether x is a torch tensor (exactly: a subclass's methods would run in the driver)."""
    return _one_of(type(x), _TENSOR_TYPES)


def type_name(x):
    """The name of x's type: Python's, numpy's or torch's own name, OTHER for any other type."""
    kind = type(x)
    return next((name for t, name in _TYPES if t is kind), OTHER)


def dtype_name(x):
    """'float32', 'float64', 'bool', … of a torch tensor, a numpy array or number; else its type_name."""
    if is_tensor(x):
        dtype = _DTYPE(x)
        return next((name for d, name in _TORCH_DTYPES if d is dtype), OTHER)
    if type(x) is np.ndarray or _one_of(type(x), _NUMPY_NUMBERS):
        return x.dtype.name if x.dtype.name in _NUMPY_DTYPES else OTHER
    return type_name(x)


def described(x):
    """x's type as a message shows it: its type_name, with the length of a tuple or list."""
    for base in (tuple, list):
        if issubclass(type(x), base):
            return f"长度为 {base.__len__(x)} 的 {base.__name__}"
    return type_name(x)


def items(x, n, what):
    """The n values of a tuple or list the student's function returned (a subclass, e.g. a namedtuple, read
    through the base type: none of its own methods runs). `what`: the contract, e.g. "f 应返回 (a, b) 两个值"."""
    for base in (tuple, list):
        if issubclass(type(x), base) and base.__len__(x) == n:
            return [base.__getitem__(x, i) for i in range(n)]
    raise TypeError(f"{what}，得到 {described(x)}")


def _tensor_numpy(t):
    t = _DETACH(t)
    if _one_of(_DTYPE(t), _NO_NUMPY):
        t = _TO(t, torch.float32)
    return _NUMPY(_CPU(t))


def to_numpy(x):
    """A student's output as a float64 (or bool) numpy array of its own: from a numpy array, a torch tensor, a
    Python or numpy number, or a list or tuple of these (exact types; a subclass, e.g. of ndarray or Tensor,
    is refused: its methods would run here)."""
    kind = type(x)
    if kind is np.ndarray:
        arr = x
    elif is_tensor(x):
        arr = _tensor_numpy(x)
    elif _one_of(kind, _SCALARS):
        arr = np.asarray(x)
    elif kind is list or kind is tuple:
        arr = np.array([to_numpy(v) for v in x])
    else:
        raise TypeError(f"期望 numpy 数组或 torch.Tensor，得到 {type_name(x)}"
                        + ("（它们的子类也不行：请返回普通的数组或张量）" if type_name(x) == OTHER else ""))
    if arr.dtype.kind == "b":
        return arr.copy()
    if arr.dtype.kind not in "iuf":
        raise TypeError(f"期望数值数组，得到 dtype={dtype_name(arr)}（类型 {type_name(x)}）")
    return arr.astype(np.float64)
