"""Float64 building blocks of every reference (grader side only)."""
import numpy as np


def swap(x):
    """Swap the last two axes."""
    return np.swapaxes(x, -1, -2)


def softmax(s, axis=-1):
    """Stable softmax; a slice that is all -inf comes out NaN (0/0), as in torch."""
    with np.errstate(all="ignore"):
        m = np.max(s, axis=axis, keepdims=True)
        e = np.exp(s - np.where(np.isfinite(m), m, 0.0))
        return e / e.sum(axis=axis, keepdims=True)


def naive_softmax(s, axis=-1):
    """The known bug: exp without subtracting the maximum (a score above ~709 overflows to inf/inf = NaN)."""
    with np.errstate(all="ignore"):
        e = np.exp(s)
        return e / e.sum(axis=axis, keepdims=True)


def triu(T, S=None, k=1):
    """Course convention causal mask: True (blocked) where key index - query index >= k."""
    return np.triu(np.ones((T, T if S is None else S), dtype=bool), k)
