"""What every exercise driver provides, and small helpers drivers share."""
from dataclasses import dataclass
from typing import Callable

import numpy as np


@dataclass(frozen=True)
class Driver:
    """`names`: the definitions the answer cell must hold.
    `run(ns, case)`: runs the student's code from namespace `ns` on one case (a dict of plain data
    the grader made) and returns a dict of plain outputs (numpy arrays, numbers, strings)."""
    names: tuple
    run: Callable


class MissingDefinition(NameError):
    pass


def lookup(ns, name):
    if name not in ns:
        raise MissingDefinition(f"没有找到 `{name}` 的定义：先运行你的答案单元格")
    return ns[name]


def to_numpy(x):
    """Bring a student's output back as a float64/bool numpy array (torch or numpy or nested lists)."""
    if hasattr(x, "detach") and hasattr(x, "cpu"):
        x = x.detach().cpu()
        if str(x.dtype) == "torch.bfloat16":
            x = x.float()
        x = x.numpy()
    arr = np.asarray(x)
    if arr.dtype.kind == "b":
        return arr.copy()
    if arr.dtype.kind not in "iuf":
        raise TypeError(f"期望数值数组，得到 dtype={arr.dtype}（类型 {type(x).__name__}）")
    return arr.astype(np.float64)


def dtype_name(x):
    """'float32', 'float64', 'bool', ... for a torch tensor or numpy array."""
    return str(getattr(x, "dtype", type(x).__name__)).replace("torch.", "")
