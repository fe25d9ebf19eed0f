"""One parse per cell: the syntax tree of a cell's source, read once and shared by every question asked of it
(what it binds: cell_scope; which forbidden names it reaches: the grader's forbidden_calls; which checks a
test cell asks for: check_calls).

Trees are cached by source and only read, never changed."""
import ast
import functools


@functools.cache
def _transformer():
    from IPython.core.inputtransformer2 import TransformerManager

    return TransformerManager()


@functools.lru_cache(maxsize=4096)
def tree(source, ipython=True):
    """The syntax tree of `source` (IPython's transforms applied unless ipython=False); None when it is not
    Python (it does not run either), or when it needs IPython's transforms and IPython is not installed."""
    try:
        return ast.parse(_transformer().transform_cell(source) if ipython else source)
    except (SyntaxError, ValueError, ImportError):
        return None


def check_calls(source):
    """The (grade_id, hidden) pairs a test cell's `check("…", hidden=…)` calls ask for, in order."""
    calls = []
    for node in ast.walk(tree(source) or ast.Module(body=[], type_ignores=[])):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "check" and node.args:
            if isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                hidden = any(k.arg == "hidden" and getattr(k.value, "value", False) for k in node.keywords)
                calls.append((node.args[0].value, bool(hidden)))
    return calls
