"""Each `viz.explorer(draw, **controls)` of a notebook, turned into a plain call of `draw` with
every control moved away from its default: what a reader without a widget front-end can type."""
import ast


def _away_from_default(node):
    """Source of a value the control can take other than its default."""
    if isinstance(node, ast.Tuple):                       # (lo, hi[, step]) slider: the upper end
        return ast.unparse(node.elts[1])
    if isinstance(node, ast.Constant) and isinstance(node.value, bool):
        return repr(not node.value)
    if isinstance(node, ast.Call):
        kwargs = {k.arg: k.value for k in node.keywords}
        if "max" in kwargs:                               # widgets.IntSlider(value=.., min=.., max=..)
            return ast.unparse(kwargs["max"])
        if "options" in kwargs:                           # widgets.Dropdown(options=.., value=..)
            return f"list({ast.unparse(kwargs['options'])})[-1]"
    return f"list({ast.unparse(node)})[-1]"               # a list of choices: the last one


def explorer_calls(source):
    """Plain calls (source text) of the draw functions passed to `viz.explorer` in `source`."""
    calls = []
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "explorer"
                and node.args):
            args = ", ".join(f"{k.arg}={_away_from_default(k.value)}" for k in node.keywords)
            calls.append(f"{ast.unparse(node.args[0])}({args})")
    return calls
