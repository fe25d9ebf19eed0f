"""Answer-cell variants per exercise for the grader's mutation suite.

Each module `exNN.py` defines VARIANTS = {grade_id: {"solution": src, "correct": [src, ...],
"buggy": [(src, diagnosis_substring), ...]}}. Every src is a complete answer cell (imports included).
"""

_TRACED = '''
import functools
import torch


def _traced(fn):
    @functools.wraps(fn)
    def inner(*args, **kwargs):
        return fn(*args, **kwargs)
    return inner
'''


def decorated(src, name, decorator="@_traced"):
    """The same answer with `def name` decorated: a correct style the grader must accept."""
    assert f"\ndef {name}(" in src, name
    return _TRACED + src.replace(f"\ndef {name}(", f"\n{decorator}\ndef {name}(", 1)
