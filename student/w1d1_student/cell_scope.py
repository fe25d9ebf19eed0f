"""Which cells a grading kernel runs, and a warning at home when an answer leans on any other cell.

Grading runs only the setup cell, the answer cells and the test cells (no demonstrations, none of
the student's own cells). At home `check()` calls `warn_outside` so that an answer which uses a
name defined elsewhere is told so before it loses points.
"""
import ast
import builtins
import dis
import json
import os
import sys
from collections import Counter

from .registry import NOTEBOOK_OF

# cell metadata only the grader writes (intake clears any a student sent): {COPY_KEY: grade_id} marks a
# copy of an answer cell, which runs where it stands, as at home
OWN_KEY = "w1d1"
COPY_KEY = "copy_of"


def _only_definitions(source):
    """A course cell that only imports and defines (functions, classes): cheap, prints nothing."""
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return False
    kinds = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return bool(body) and all(isinstance(node, kinds) for node in body)


def copy_of(cell):
    """The grade_id of the answer this cell is a copy of (marked by intake), or None."""
    own = cell.get("metadata", {}).get(OWN_KEY)
    gid = own.get(COPY_KEY) if isinstance(own, dict) else None
    return gid if isinstance(gid, str) else None


def answer_cells(nb, grade_id):
    """The cells that answer `grade_id`: its answer cell and the copies of it, in notebook order."""
    return [c for c in nb["cells"] if c.get("cell_type") == "code" and (copy_of(c) == grade_id or (
        isinstance(c.get("metadata", {}).get("nbgrader"), dict) and c["metadata"]["nbgrader"].get("solution")
        and c["metadata"]["nbgrader"].get("grade_id") == grade_id))]


def grading_cells(nb):
    """Indices of the cells a grading kernel runs: the first locked code cell of the course (setup),
    locked course cells that only define things (a class the checks use, say), every answer cell
    (copies included) and every test cell of the notebook's own exercises. `nb` is a notebook node
    or the plain JSON dict."""
    run, setup, exercise_of = set(), None, {}
    for i, cell in enumerate(nb["cells"]):
        if cell.get("cell_type") != "code":
            continue
        meta = cell.get("metadata", {}).get("nbgrader")
        if copy_of(cell):
            exercise_of[i] = _notebook_of(copy_of(cell))
            continue
        if not isinstance(meta, dict):
            continue
        if meta.get("solution") or meta.get("grade"):
            exercise_of[i] = _notebook_of(meta.get("grade_id"))
        elif meta.get("locked") and setup is None:
            setup = i
        elif meta.get("locked") and _only_definitions(_source(cell)):
            run.add(i)
    # answer and test cells of this notebook's exercises only: intake makes a cell pasted from another
    # notebook (or with a made-up grade_id) a plain student cell, which grading does not run
    ours = Counter(n for n in exercise_of.values() if n).most_common(1)
    run |= {i for i, n in exercise_of.items() if ours and n == ours[0][0]}
    return run | ({setup} if setup is not None else set())


def _notebook_of(grade_id):
    if not isinstance(grade_id, str):
        return None
    return NOTEBOOK_OF.get(grade_id.removeprefix("test_").removesuffix("__hidden"))


def _source(cell):
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else str(src)


# cell magics that run their body in the notebook's namespace, so its definitions exist afterwards;
# any other (%%timeit runs the body inside a function of its own, %%bash elsewhere) defines nothing
BODY_IN_NAMESPACE = {"time", "capture", "prun"}


def python_in_namespace(source):
    """The code of a cell whose definitions land in the notebook's namespace, as IPython runs it."""
    lines = source.splitlines(keepends=True)
    while lines and not lines[0].strip():
        lines.pop(0)
    if not lines or not lines[0].startswith("%%"):
        return source
    magic = lines[0][2:].split()
    return python_in_namespace("".join(lines[1:])) if magic and magic[0] in BODY_IN_NAMESPACE else ""


def _bound_names(source):
    """Every name a cell binds at top level (def, class, import, assignment, for, with, ...)."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager

        tree = ast.parse(TransformerManager().transform_cell(python_in_namespace(source)))
    except (SyntaxError, ImportError, ValueError):
        return set()
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Global):
            names.update(node.names)
    return names


def names_in_grading_cells(nb):
    cells = nb["cells"]
    names = set()
    for i in grading_cells(nb):
        names |= _bound_names(_source(cells[i]))
    return names


def _codes(obj, depth=0):
    """Code objects behind a definition: decorators unwrapped, methods of a class included."""
    if depth > 5:
        return []
    for attr in ("__wrapped__", "pyfunc", "__func__"):
        inner = getattr(obj, attr, None)
        if inner is not None and inner is not obj:
            return _codes(inner, depth + 1)
    code = getattr(obj, "__code__", None)
    if code is not None:
        return [code]
    if isinstance(obj, type):
        found = []
        for value in vars(obj).values():
            found += _codes(value, depth + 1)
        return found
    return []


def _globals_used(code):
    names = set()
    stack = [code]
    while stack:
        c = stack.pop()
        for ins in dis.get_instructions(c):
            if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME", "STORE_GLOBAL"):
                names.add(ins.argval)
        stack += [k for k in c.co_consts if hasattr(k, "co_code")]
    return names


def used_globals(ns, names):
    """Global names the definitions `names` reach in `ns`, following the student's own helpers."""
    seen, todo = set(), [n for n in names if n in ns]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        obj = ns[name]
        if getattr(obj, "__module__", None) not in ("__main__", None) and not isinstance(obj, type):
            continue
        for code in _codes(obj):
            todo += [n for n in _globals_used(code) if n in ns and n not in seen]
    return seen


def _notebook(ns):
    path = ns.get("__session__") or os.environ.get("JPY_SESSION_NAME")
    if not path or not str(path).endswith(".ipynb") or not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def outside_names(ns, names, nb):
    """Names an answer uses that no setup/answer/test cell of `nb` defines."""
    allowed = names_in_grading_cells(nb) | set(dir(builtins))
    return sorted(n for n in used_globals(ns, names) if n not in allowed and not n.startswith("_"))


def warn_outside(ns, names):
    """At home: say which names of this answer would not exist while grading (silent if the
    notebook file is unknown)."""
    nb = _notebook(ns)
    if nb is None:
        return []
    outside = outside_names(ns, names, nb)
    if outside:
        listed = "、".join(f"`{n}`" for n in outside)
        print(f"⚠️ 你的答案用到了 {listed}，它们不是在准备单元格或答案单元格里定义的。评分时只运行准备单元格、"
              "答案单元格和检查单元格，演示和你自己添加的单元格都不运行，这些名字将不存在、这道题会失分："
              "把需要的定义写进答案单元格。", file=sys.stderr)
    return outside
