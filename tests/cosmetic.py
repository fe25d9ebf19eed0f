"""Edits of an answer's source that change nothing it does (red team, round 4: a copy with `;` after every
statement paired at 0.47 with its original). Each takes source and returns source; positions come from the syntax
tree, so every edit lands where Python allows it."""
import ast


def _inserted(src, edits):
    """`src` with each (line, byte column, text) of `edits` inserted (columns are UTF-8 byte offsets, as ast's)."""
    lines = src.splitlines(keepends=True)
    raw = [line.encode("utf-8") for line in lines]
    for line, col, text in sorted(edits, reverse=True):
        raw[line - 1] = raw[line - 1][:col] + text.encode("utf-8") + raw[line - 1][col:]
    return b"".join(raw).decode("utf-8")


def _simple(tree):
    return [n for n in ast.walk(tree) if isinstance(n, ast.stmt) and not hasattr(n, "body")]


def semicolons(src):
    """`;` after every simple statement."""
    return _inserted(src, [(n.end_lineno, n.end_col_offset, ";") for n in _simple(ast.parse(src))])


def parentheses(src):
    """The value of every assignment, return and expression statement in (redundant) parentheses."""
    values = [n.value for n in _simple(ast.parse(src)) if isinstance(n, (ast.Assign, ast.Return, ast.Expr)) and n.value]
    return _inserted(src, [e for v in values for e in ((v.lineno, v.col_offset, "("), (v.end_lineno, v.end_col_offset, ")"))])


def trailing_commas(src):
    """A comma after the last argument of every call with arguments (not a lone generator: `f(x for x in y,)` is
    no Python)."""
    edits = []
    for n in ast.walk(ast.parse(src)):
        if isinstance(n, ast.Call) and (n.args or n.keywords) and not (len(n.args) == 1 and not n.keywords
                                                                      and isinstance(n.args[0], ast.GeneratorExp)):
            last = max([*n.args, *n.keywords], key=lambda a: (a.end_lineno, a.end_col_offset))
            edits.append((last.end_lineno, last.end_col_offset, ","))
    return _inserted(src, edits)


def annotations(src):
    """`: object` on every assignment to a single name and `-> object` on every function."""
    tree = ast.parse(src)
    edits = [(n.targets[0].end_lineno, n.targets[0].end_col_offset, ": object") for n in ast.walk(tree)
             if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)]
    for n in ast.walk(tree):
        if isinstance(n, ast.FunctionDef) and n.returns is None:
            lines = src.splitlines()[n.lineno - 1:n.body[0].lineno - 1]
            at = max(i for i, line in enumerate(lines) if line.rstrip().endswith(":"))  # the def's own `:`
            edits.append((n.lineno + at, len(lines[at].rstrip().encode("utf-8")) - 1, " -> object"))
    return _inserted(src, edits)


def continuations(src):
    """Every assignment broken after its `=` with a backslash."""
    edits = []
    for n in _simple(ast.parse(src)):
        if isinstance(n, ast.Assign) and n.value.lineno == n.lineno:
            edits.append((n.lineno, n.value.col_offset, "\\\n" + " " * (n.col_offset + 8)))
    return _inserted(src, edits)


EDITS = {"semicolons": semicolons, "parentheses": parentheses, "trailing commas": trailing_commas,
         "annotations": annotations, "continuations": continuations}


def every_edit(src):
    """All of EDITS, one after the other."""
    for edit in EDITS.values():
        src = edit(src)
    return src
