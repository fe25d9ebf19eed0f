"""Which cells a grading kernel runs, and a warning at home when an answer leans on any other cell.

Grading runs only the setup cell, the answer cells and the test cells (no demonstrations, none of
the student's own cells). At home `check()` calls `warn_outside` so that an answer which uses a
name defined elsewhere is told so before it loses points.
"""
import ast
import builtins
import dis
import functools
import json
import os
import re
import sys
from collections import Counter

from w1d1_format import copy_of

from .cell_source import tree
from .registry import NOTEBOOK_OF


@functools.lru_cache(maxsize=1024)  # every exercise of a notebook asks again (the static check, per grade_id)
def _only_definitions(source):
    """A course cell that only imports and defines (functions, classes): cheap, prints nothing."""
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return False
    kinds = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return bool(body) and all(isinstance(node, kinds) for node in body)


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


def parse_in_namespace(source):
    """The syntax tree of what a cell runs in the notebook's namespace (IPython's transforms applied,
    the body of %%time and the like); None when that is not Python."""
    return tree(python_in_namespace(source))


class _Binder(ast.NodeVisitor):
    """The names a module's code binds in the module's namespace, as Python's scoping rules bind them."""

    def __init__(self, nested_globals=True):
        self.found = {}
        self.declared = None  # None: module level; else the names a function or class body declares global
        self.nested_globals = nested_globals  # False: only the scope visited binds (a function's own names)

    def bind(self, name, kind):
        if self.declared is None or (self.nested_globals and name in self.declared):
            self.found.setdefault(name, set()).add(kind)

    def in_scope(self, body, declared):
        """A function, lambda or class body: only what it declares `global` reaches the module."""
        outer, self.declared = self.declared, declared
        for node in body:
            self.visit(node)
        self.declared = outer

    def visit_Name(self, node):
        if isinstance(node.ctx, ast.Store):
            self.bind(node.id, "assign")

    def visit_NamedExpr(self, node):  # a walrus binds in the enclosing scope, out of comprehensions too
        self.bind(node.target.id, "assign")
        self.visit(node.value)

    def visit_AnnAssign(self, node):  # `x: int` alone binds nothing
        if node.value is not None:
            self.visit(node.target)
            self.visit(node.value)
        self.visit(node.annotation)

    def visit_FunctionDef(self, node):
        self.bind(node.name, "def")
        for expr in node.decorator_list + [node.args] + ([node.returns] if node.returns else []):
            self.visit(expr)  # decorators, defaults and annotations run in the enclosing scope
        self.in_scope(node.body, _declared_global(node.body))

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node):
        self.bind(node.name, "class")
        for expr in node.decorator_list + node.bases + node.keywords:
            self.visit(expr)
        self.in_scope(node.body, _declared_global(node.body))

    def visit_Lambda(self, node):
        self.visit(node.args)
        self.in_scope([node.body], set())

    def visit_comprehension(self, node):  # its loop variables are the comprehension's own
        self.visit(node.iter)
        for cond in node.ifs:
            self.visit(cond)

    def visit_Import(self, node):
        for alias in node.names:
            self.bind((alias.asname or alias.name).split(".")[0], "import")

    def visit_ImportFrom(self, node):
        for alias in node.names:
            if alias.name != "*":
                self.bind(alias.asname or alias.name, "import")

    def visit_ExceptHandler(self, node):
        if node.name:
            self.bind(node.name, "except")
        self.generic_visit(node)

    def visit_MatchAs(self, node):
        if node.name:
            self.bind(node.name, "match")
        self.generic_visit(node)

    def visit_MatchStar(self, node):
        if node.name:
            self.bind(node.name, "match")

    def visit_MatchMapping(self, node):
        if node.rest:
            self.bind(node.rest, "match")
        self.generic_visit(node)


def _declared_global(body):
    """Names a function or class body declares `global` (its nested scopes declare their own)."""
    names, todo = set(), list(body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Global):
            names.update(node.names)
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            todo += list(ast.iter_child_nodes(node))
    return names


def bindings(source):
    """{name: kinds} for every name running the cell binds in the notebook's namespace, read from its
    source as Python binds names at module level: def, class, import, assignment (augmented, annotated
    with a value, unpacking, walrus anywhere in the cell's own expressions, comprehensions included),
    for and with targets, except ... as, match captures, and what a function or class body declares
    `global` and binds. Kinds: "def", "class", "import", "assign", "except", "match". `del` is ignored.

    Static only: a binding the source does not spell (`globals()["f"] = ...`, exec, setattr on the
    module) is not one. The one answer to this question: the grader's answer check (`defined_names`),
    the home check and the home warning (`names_in_grading_cells`) all read it."""
    tree = parse_in_namespace(source)
    if tree is None:
        return {}
    binder = _Binder()
    binder.visit(tree)
    return binder.found


def local_names(function):
    """The names local to a function or lambda (a FunctionDef, AsyncFunctionDef or Lambda node): its parameters
    and what its body binds, by the rules `bindings` applies to a cell, less what it declares `global`."""
    args = function.args
    names = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg] if a}
    if isinstance(function, ast.Lambda):
        return names
    binder = _Binder(nested_globals=False)
    for node in function.body:
        binder.visit(node)
    return names | (set(binder.found) - _declared_global(function.body))


def bound_names(source):
    return set(bindings(source))


def defined_names(source):
    """The names a cell defines itself: bound other than only by an import (导入或加载现成的实现不算作答)."""
    return {name for name, kinds in bindings(source).items() if kinds != {"import"}}


def missing_message(missing):
    return ("答案单元格里没有定义 " + "、".join(f"`{n}`" for n in missing)
            + "（导入或加载现成的实现不算作答；`globals()[...] = ...`、exec 这类动态写法评分时认不出，"
            "要用 def、class 或赋值写出这个名字）")


def names_in_grading_cells(nb):
    cells = nb["cells"]
    names = set()
    for i in grading_cells(nb):
        names |= bound_names(_source(cells[i]))
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


def _ipython_cell_source(obj):
    """The source of the IPython cell that made `obj` (the code IPython ran, kept for its tracebacks),
    or None when it did not come from a cell of this session."""
    import linecache

    try:
        from IPython import get_ipython

        cells = get_ipython().compile._filename_map
    except Exception:  # no IPython shell (a plain script, a test)
        return None
    for code in _codes(obj):
        entry = linecache.cache.get(code.co_filename)
        if code.co_filename in cells and entry and len(entry) == 4:
            return "".join(entry[2])
    return None


def _saved_definitions(ns, grade_id):
    """What the saved notebook's answer cells of `grade_id` define (as grading reads them), or None."""
    nb = _notebook(ns)
    cells = answer_cells(nb, grade_id) if nb is not None else []
    return set().union(*(defined_names(_source(c)) for c in cells)) if cells else None


def undefined_at_home(ns, grade_id, names):
    """At home, the grader's answer check (`defined_names` on the answer cell): the message of a
    failure, or None. Read on the saved notebook's answer cell (what grading reads); where that cell
    does not define a name but the cell that made its object does, the file is only behind (or the
    definition sits in another cell): a warning. With no notebook file known, a name whose object
    comes from a cell that mentions it without binding it (`globals()["softmax"] = ...`, exec) fails
    as it would while grading."""
    missing, unsaved = [], []
    saved = _saved_definitions(ns, grade_id)
    for name in names:
        if name not in ns:
            continue  # the run itself says so
        cell = _ipython_cell_source(ns[name])
        in_cell = cell is not None and name in defined_names(cell)
        if saved is not None and name not in saved:
            (unsaved if in_cell else missing).append(name)
        elif saved is None and cell is not None and not in_cell and re.search(rf"\b{re.escape(name)}\b", cell):
            missing.append(name)
    if unsaved:
        listed = "、".join(f"`{n}`" for n in unsaved)
        print(f"⚠️ 已保存的笔记本里，这道题的答案单元格没有定义 {listed}。评分读的是保存的文件、只认答案单元格里的定义："
              "把定义写在答案单元格里，并保存笔记本（Ctrl+S）。", file=sys.stderr)
    return missing_message(missing) if missing else None
