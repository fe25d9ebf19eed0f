"""Static check of the answer cells, run in the grader's process: what no code in the kernel can change.

The kernel reports flags about itself (the torch calls it saw, whether the custom backward ran);
code in the same process could forge them. This check reads the notebook's answer cells here:
a direct use of an API that an exercise forbids, or any reference to the checking machinery (the
student package, the grader, `pkgutil.resolve_name`, `sys.modules`, switching torch's function
modes off), and the exercise gets 0 with a reason. It sees what is written, not what obfuscated
code computes at run time; the run-time detection (w1d1_student/torch_calls.py) covers the rest.

Whose a name is (torch's or the student's) it reads only in the cells grading runs (cell_scope.grading_cells), in
the order they run, by Python's binding rules (cell_scope's): a star import of torch binds only the names its module
exports, and only until the student binds them again; a cell grading never runs (a scratch cell) tells nothing.
"""
import ast
import collections
import functools
import sys

from w1d1_student.cell_scope import (
    bound_names,
    copy_of,
    grading_cells,
    local_names,
    parse_in_namespace,
    python_in_namespace,
)
from w1d1_student.cell_source import tree as _tree

# grade_id -> [(part of a torch name, how the course calls that API)]: every torch name holding the part
# counts (`_scaled_dot_product_attention_math`, `_native_multi_head_attention`, …)
FORBIDDEN_APIS = {
    "mha": [("scaled_dot_product", "F.scaled_dot_product_attention"),
            ("multi_head_attention", "F.multi_head_attention_forward"),
            ("MultiheadAttention", "nn.MultiheadAttention"),
            ("Transformer", "nn.Transformer…（其中的 self_attn 就是 nn.MultiheadAttention）"),
            ("flex_attention", "flex_attention"), ("math_attention", "flex_attention 的 math_attention"),
            ("_higher_order_ops", "torch._higher_order_ops（flex_attention 等现成的注意力）")],
}
MACHINERY_MODULES = ("w1d1_student", "autograder")
MACHINERY_NAMES = ("resolve_name", "DisableTorchFunction", "DisableTorchFunctionSubclass", "_pop_mode",
                   "_pop_torch_function_stack", "_pop_torch_dispatch_stack", "_disable_current_modes",
                   "_len_torch_function_stack", "_get_current_dispatch_mode_stack",
                   # ways around it: a tensor subclass's handler runs with the modes off; a raw thread
                   "__torch_function__", "__torch_dispatch__", "_thread", "start_new_thread", "_start_new_thread",
                   # reaching the checking code's objects without naming its modules: a function's module
                   # globals (`check.__globals__`), the callers' frames and their locals, closures, the heap
                   "__globals__", "__closure__", "cell_contents", "_getframe", "currentframe", "_current_frames",
                   "f_locals", "f_globals", "f_back", "f_builtins", "tb_frame", "gi_frame", "cr_frame", "ag_frame",
                   "getouterframes", "getinnerframes", "getargvalues", "get_referrers", "get_referents", "get_objects",
                   "AutogradUse",
                   # making later cells read differently here than they run in the kernel
                   "input_transformers_cleanup", "input_transformers_post", "input_transformer_manager",
                   "ast_transformers",
                   # code that runs when the grader's own cells run (the cases are delivered in one)
                   "pre_run_cell", "pre_execute", "post_run_cell", "post_execute", "raw_cell", "settrace",
                   "setprofile", "addaudithook")
# parts of a name: every torch function that pushes, pops or reads the function and dispatch mode stacks
MACHINERY_PARTS = ("_pop_mode", "_push_mode", "function_mode", "dispatch_mode", "_torch_function_stack",
                   "_torch_dispatch_stack", "_disable_current_modes")

def _strings(tree):
    """(line, text) of the strings that may be code: not statements by themselves (docstrings)."""
    inert = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in inert]


def _names(node):
    """Identifiers a node spells out: names, attributes, imported modules and names."""
    if isinstance(node, ast.Name):
        yield node.id
    elif isinstance(node, ast.Attribute):
        yield node.attr
    elif isinstance(node, ast.Import):
        for alias in node.names:
            yield from alias.name.split(".")
    elif isinstance(node, ast.ImportFrom):
        yield from (node.module or "").split(".")
        for alias in node.names:
            yield alias.name
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        yield node.name


def _parsed(source, ipython):
    """The cell's tree; for code held in a string (ipython=None) plain Python first, so prose ending in `name?`
    is no help request, and IPython's transforms when it is not plain Python (a `%%time` body with a line
    magic runs in the kernel all the same)."""
    if ipython is None:
        return _tree(source, ipython=False) or _tree(source, ipython=True)
    return _tree(source, ipython)


# roots of the kernel's own objects that no import binds: the shell (its display publisher, events), the builtins
KERNEL_ROOTS = frozenset({"get_ipython", "__builtins__", "__import__", "__loader__", "__spec__"})
# calls whose first argument names the module, the attribute or the code they reach
_IMPORTS, _CODE, _ATTRIBUTES = {"__import__", "import_module"}, {"exec", "eval", "compile"}, {"getattr"}
_MUTATORS = {"setattr", "delattr", "__setattr__", "__delattr__"}
_REACH, _FOLLOW = _IMPORTS | {"get_ipython", "getmodule", "resolve_name"}, {"getattr", "vars", "type"}


def _root(node):
    """The name (or None) an expression starts from, through attributes, subscripts and the calls that hand back
    an object that already exists: `IPython.display` -> IPython, `get_ipython().display_pub` -> get_ipython,
    `inspect.getmodule(f).x` -> inspect, `getattr(F, n)` / `vars(m)` / `type(m)` -> their argument's; any other
    call makes a new object (`torch.tensor(x).grad`: None)."""
    while True:
        if isinstance(node, (ast.Attribute, ast.Subscript, ast.Starred)):
            node = node.value
        elif isinstance(node, ast.Call) and _called(node) in _REACH:
            node = node.func
        elif isinstance(node, ast.Call) and _called(node) in _FOLLOW and node.args:
            node = node.args[0]
        elif isinstance(node, ast.Name):
            return node.id
        else:
            return None


def module_bindings(trees):
    """Names that hold an imported object or one reached from it, over the given cells: every name an import
    binds, the kernel's roots (KERNEL_ROOTS), and any name bound to an expression that starts from one of these
    (`d = IPython.display`, `ip = get_ipython()`, `for m in (IPython.display,)`, `with ... as m`)."""
    bound, links = set(KERNEL_ROOTS), []
    for node in (n for tree in trees for n in ast.walk(tree)):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            bound |= {(a.asname or a.name).split(".")[0] for a in node.names if a.name != "*"}
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
            links.append((node.targets if isinstance(node, ast.Assign) else [node.target], node.value))
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            links.append(([node.target], node.iter))
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            links.append(([node.optional_vars], node.context_expr))
    while True:
        more = {t.id for targets, value in links if _reaches(value, bound)
                for target in targets for t in ast.walk(target) if isinstance(t, ast.Name)}
        if more <= bound:
            return bound
        bound |= more


def _reaches(node, modules):
    """Whether an expression starts from a name of `modules` (a tuple or list: any of its items)."""
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_reaches(e, modules) for e in node.elts)
    return _root(node) in modules


def _literal(args):
    return bool(args) and isinstance(args[0], ast.Constant) and isinstance(args[0].value, str)


def _called(node):
    return node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")


def hidden_uses(tree, modules):
    """[(line, what)] for code whose reach the check cannot read, or that changes code it did not write: an
    import, attribute or code computed at run time (`importlib.import_module("w1d1" + …)`, `getattr(F, a + b)`,
    `exec(text)`), and an assignment to (or deletion of) an attribute of an imported object or of one reached from
    it (`IPython.display.display = …`, `setattr(mod, …)`, `vars(mod)[…] = …`): an honest answer does neither.
    `modules`: module_bindings() of the cells that run."""
    found = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Call):
            name = _called(node)
            code = name in _CODE and (isinstance(node.func, ast.Name) or _root(node.func) in ("builtins", "__builtins__"))
            if (name in _IMPORTS or code) and not _literal(node.args):
                found.append((line, f"{name}(<运行时算出的名字或代码>)"))
            elif name in _ATTRIBUTES and len(node.args) > 1 and _reaches(node.args[0], modules) and not _literal(node.args[1:]):
                found.append((line, f"{name}(<模块>, <运行时算出的名字>)"))
            elif name in _MUTATORS and ((node.args and _reaches(node.args[0], modules)) or (
                    isinstance(node.func, ast.Attribute) and name.startswith("__") and _reaches(node.func.value, modules))):
                found.append((line, f"{name}(<模块或其中的对象>, …)"))
        targets = (node.targets if isinstance(node, (ast.Assign, ast.Delete)) else
                   [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else [])
        for target in (t for top in targets for t in ast.walk(top)):
            if isinstance(target, ast.Attribute) and isinstance(target.ctx, (ast.Store, ast.Del)) and _reaches(target.value, modules):
                found.append((line, f"给 `{_root(target)}` 里的对象赋值（{target.attr}）"))
            elif isinstance(target, ast.Subscript) and isinstance(target.ctx, (ast.Store, ast.Del)) and _namespace(target.value, modules):
                found.append((line, f"改写 `{_root(target)}` 的命名空间"))
    return found


def _namespace(node, modules):
    """Whether an expression is the namespace of an imported object (`mod.__dict__`, `vars(mod)`)."""
    if isinstance(node, ast.Attribute) and node.attr == "__dict__":
        return _reaches(node.value, modules)
    return isinstance(node, ast.Call) and _called(node) == "vars" and bool(node.args) and _reaches(node.args[0], modules)


def machinery_uses(source, ipython=True, modules=None):
    """[(line, what)] for each reference of a cell to the checking machinery. A string counts when it is
    code that makes one (`"w1d1_student.runner"`, `"import autograder"`, a magic's argument), not when
    prose mentions the grader (a docstring, an error message). Code the check cannot read counts too
    (hidden_uses; `modules`: module_bindings() of the cells that run, default this cell's)."""
    tree = _parsed(source, ipython)
    if tree is None:
        return []
    modules = module_bindings([tree]) if modules is None else modules | module_bindings([tree])
    found = [(line, what) for line, text in _strings(tree) for _, what in machinery_uses(text, ipython=None, modules=modules)[:1]]
    found += hidden_uses(tree, modules)
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        for name in _names(node):
            if name in MACHINERY_MODULES or name in MACHINERY_NAMES or any(part in name for part in MACHINERY_PARTS):
                found.append((line, name))
        if (isinstance(node, ast.Attribute) and node.attr == "modules" and isinstance(node.value, ast.Name)
                and node.value.id == "sys"):
            found.append((line, "sys.modules"))
    return found


def _is_torch(module):
    return (module or "").split(".")[0] == "torch"


def torch_bindings(trees):
    """Names bound to torch or a part of it over the given cells: imported (`torch`, `F`, `nn`, …) or assigned
    from such a name (`G = F`)."""
    bound, assigns = set(), []
    for node in (n for tree in trees for n in ast.walk(tree)):
        if isinstance(node, ast.Import):
            bound |= {(a.asname or a.name).split(".")[0] for a in node.names if _is_torch(a.name)}
        elif isinstance(node, ast.ImportFrom) and _is_torch(node.module):
            bound |= {a.asname or a.name for a in node.names if a.name != "*"}
        elif isinstance(node, ast.Assign):
            assigns.append(node)
    while True:
        more = {t.id for n in assigns if _reaches_torch(n.value, bound) for t in n.targets if isinstance(t, ast.Name)}
        if more <= bound:
            return bound
        bound |= more


def _reaches_torch(node, bound, star=lambda name: False):
    """Whether an attribute chain starts from torch: a bound name, a name `star(name)` says a star import of
    torch may have bound, or an import made on the spot."""
    while isinstance(node, ast.Attribute):
        node = node.value
    if isinstance(node, ast.Name):
        return node.id in bound or star(node.id)
    if isinstance(node, ast.Call):
        called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        return called in ("__import__", "import_module")
    return False


def _forbidden(name, apis):
    return next((api for part, api in apis if part.lower() in name.lower()), None)


def own_names(trees):
    """Names the student defines: functions, classes, parameters, assigned names and attributes, modules
    imported from outside torch."""
    own = set()
    for node in (n for tree in trees for n in ast.walk(tree)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            own.add(node.name)
        elif isinstance(node, ast.arg):
            own.add(node.arg)
        elif isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Store):
            own.add(node.id if isinstance(node, ast.Name) else node.attr)
        elif isinstance(node, ast.Import):
            own |= {(a.asname or a.name).split(".")[0] for a in node.names if not _is_torch(a.name)}
        elif isinstance(node, ast.ImportFrom) and not _is_torch(node.module):
            own |= {a.asname or a.name for a in node.names}
    return own


def _sure(statement):
    """The names a top-level statement binds whatever happens: a def, a class, an import, an assignment's targets
    (not a walrus inside it, not what a block may bind)."""
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {statement.name}
    if isinstance(statement, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in statement.names if a.name != "*"}
    targets = statement.targets if isinstance(statement, ast.Assign) else (
        [statement.target] if isinstance(statement, (ast.AugAssign, ast.AnnAssign)) and getattr(statement, "value", None)
        else [])
    names = set()
    while targets:
        t = targets.pop()
        if isinstance(t, ast.Name):
            names.add(t.id)
        elif isinstance(t, (ast.Tuple, ast.List)):
            targets += t.elts
        elif isinstance(t, ast.Starred):
            targets.append(t.value)
    return names


def _stars(statement):
    """The torch modules a statement star-imports (`from torch.nn import *`), itself or in code it holds in a string."""
    found = [n.module for n in ast.walk(statement) if isinstance(n, ast.ImportFrom) and _is_torch(n.module)
             and any(a.name == "*" for a in n.names)]
    for _, text in _strings(statement):
        inner = _parsed(text, None)
        found += [m for s in (inner.body if inner else []) for m in _stars(s)]
    return tuple(found)


@functools.lru_cache(maxsize=None)
def _star_names(module):
    """The names `from module import *` binds, as torch itself has them (`__all__`, else the public names), for a
    module torch loads when imported; None for any other (no module a student names is imported here). torch is
    imported here only when a star import of it decides whether a name is the student's."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return None
    loaded = sys.modules.get(module)
    if loaded is None:
        return None
    names = getattr(loaded, "__all__", None)
    names = [n for n in vars(loaded) if not n.startswith("_")] if names is None else names
    return frozenset(n for n in names if isinstance(n, str))


def _star_binds(module, name):
    names = _star_names(module)
    return names is None or name in names


class Context:
    """What the check knows of the cells that run while grading (cell_scope.grading_cells), read in the order they
    run: names bound to torch, the student's names (functions, parameters, attributes: `self.x` is the student's
    when `x` is), the names the cells bind in the notebook's namespace (cell_scope.bound_names), and for each
    top-level statement the names it binds for certain and the torch modules it star-imports."""

    def __init__(self, sources):
        trees = [parse_in_namespace(s) for s in sources]
        self.bound = torch_bindings([t for t in trees if t is not None])
        self.own = own_names([t for t in trees if t is not None])
        self.modules = module_bindings([t for t in trees if t is not None])
        self.names = set().union(*map(bound_names, sources))
        self.steps, self.starts = [], []
        for source, tree in zip(sources, trees):
            self.starts.append((len(self.steps), python_in_namespace(source) != source))
            self.steps += [(_sure(s), _stars(s)) for s in (tree.body if tree else [])]

    def at(self, k):
        """(index of the first step, whether its statements are not those of the steps) of the k-th cell, or the end
        (a cell that does not run)."""
        return self.starts[k] if k is not None else (len(self.steps), True)

    def star_binds(self, name, step, later):
        """Whether a star import of torch may have bound `name` where a statement at `step` reads it, by Python's
        rules: the last statement before that binds it decides, a statement that may not run (a block) decides
        nothing; `later`: the read runs at any time after its statement (a function body), so any later star
        import counts too."""
        steps = self.steps
        window = steps[step:] if later else steps[step:step + 1]
        if any(_star_binds(m, name) for _, stars in window for m in stars):
            return True
        if later and step < len(steps) and name in steps[step][0]:
            return False
        for sure, stars in reversed(steps[:step]):
            if any(_star_binds(m, name) for m in stars):
                return True
            if name in sure:
                return False
        return False

    def may_be_torch(self, name, step, later):
        """Whether a global name read at `step` may be torch's rather than the student's: bound to torch, bound
        by no cell that runs (star-imported, or nothing), or star-imported after the student's binding."""
        return name in self.bound or name not in self.names or self.star_binds(name, step, later)


def _scoped(statement):
    """(node, names local to where it runs, whether it runs after its statement) for each node of a statement,
    in the order of ast.walk: a function's or lambda's body runs when called and its own names are local
    (cell_scope.local_names); its decorators, defaults and annotations run where it stands; a class body reads
    what its earlier statements bound (its methods do not)."""
    todo = collections.deque([(statement, frozenset(), frozenset(), False)])
    while todo:
        node, local, functions, later = todo.popleft()  # functions: the enclosing functions' names
        yield node, local, later
        body = getattr(node, "body", [])
        body = {id(n) for n in (body if isinstance(body, list) else [body])}
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            inner = functions | local_names(node)
            todo += [(c, inner, inner, True) if id(c) in body else (c, local, functions, later)
                     for c in ast.iter_child_nodes(node)]
        elif isinstance(node, ast.ClassDef):
            seen = set(local)
            for c in ast.iter_child_nodes(node):
                todo.append((c, frozenset(seen), functions, later) if id(c) in body else (c, local, functions, later))
                seen |= _sure(c) if id(c) in body else set()
        else:
            todo += [(c, local, functions, later) for c in ast.iter_child_nodes(node)]


@functools.lru_cache(maxsize=16)
def _context_of(sources):
    """Context() of the cells of a notebook that run while grading, by their sources: every exercise of a
    notebook reads the same one (only read, never changed)."""
    return Context(sources)


def forbidden_uses(source, grade_id, context=None, ipython=True, at=None):
    """[(line, api)] for each direct use in a cell of an API that exercise `grade_id` forbids: a torch name
    holding one of its parts (imported from torch, or an attribute or name that is not one the student
    defined: `F.…`, `nn_.…` however `nn_` was bound, `__import__("torch").…`), an identifier written as a
    string, or code held in a string (a `%%time` body). The student's own function of the same name
    (`self.…`, `super().…`, `type(self).…`) is not one unless it is reached from torch; a name the student
    binds is the student's unless, by Python's rules, a star import of torch rebinds it before it is read.
    `context`: Context() of the cells that run (default: this cell alone); `at`: Context.at() of this cell."""
    apis = FORBIDDEN_APIS.get(grade_id)
    tree = _parsed(source, ipython) if apis else None
    if tree is None:
        return []
    if context is None:
        context, at = Context((source,)), (0, python_in_namespace(source) != source)
    start, whole = at if at is not None else context.at(None)
    found = []
    for k, statement in enumerate(tree.body):
        step = start if whole else start + k
        for node, local, later in _scoped(statement):
            later = later or whole
            if isinstance(node, ast.ImportFrom) and _is_torch(node.module):
                names = [node.module] + [a.name for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names if _is_torch(a.name)]
            elif isinstance(node, ast.Attribute) and _forbidden(node.attr, apis):
                names = [node.attr] if node.attr not in context.own or _reaches_torch(
                    node.value, context.bound, lambda name: name not in local and context.star_binds(name, step, later)) else []
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and _forbidden(node.id, apis):
                names = [node.id] if node.id not in local and context.may_be_torch(node.id, step, later) else []
            else:
                names = []
            found += [(getattr(node, "lineno", 0), api) for api in map(lambda n: _forbidden(n, apis), names) if api]
        for line, text in _strings(statement):
            if text.isidentifier():
                found += [(line, api) for api in [_forbidden(text, apis)] if api]
            else:
                found += [(line, api) for _, api in forbidden_uses(text, grade_id, context, None, (step, True))[:1]]
    return found


def _answer_cells(nb):
    """Every code cell that answers an exercise: answer cells and their copies."""
    from nbgrader import utils

    return [c for c in nb.cells if c.cell_type == "code" and (utils.is_solution(c) or copy_of(c))]


def _answer_of(cell):
    return copy_of(cell) or cell.metadata.get("nbgrader", {}).get("grade_id", "?")


def _index(nb, cell):
    return next(i for i, c in enumerate(nb.cells) if c is cell)


def _where(cell, line):
    return f"答案单元格 {_answer_of(cell)} 第 {line} 行"


def _last_check(nb, grade_id):
    """The index of the last test cell that checks `grade_id` (None when there is none)."""
    from nbgrader import utils
    from w1d1_student.cell_source import check_calls

    found = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and utils.is_grade(c) and not utils.is_solution(c)
             and any(gid == grade_id for gid, _ in check_calls(c.source))]
    return found[-1] if found else None


def answer_problems(nb, grade_id):
    """Why exercise `grade_id` scores 0 whatever its checks report ([] when nothing is found).
    A reference to the checking machinery in any answer cell costs every exercise of the notebook (a helper
    defined in one cell serves the others); a forbidden API costs the exercise that forbids it in any
    answer cell that runs before the exercise's last check (cells run in notebook order while grading; one
    after the checks cannot reach them: mha_selfcheck's answer compares with SDPA after mha's checks)."""
    problems = []
    run = sorted(grading_cells(nb))  # the cells grading runs, in order: no other cell tells what a name is
    context = _context_of(tuple(nb.cells[i].source for i in run))
    order = {id(nb.cells[i]): k for k, i in enumerate(run)}
    last = _last_check(nb, grade_id)
    for cell in _answer_cells(nb):
        for line, what in machinery_uses(cell.source, modules=context.modules)[:1]:  # any answer cell: its helpers serve every exercise
            problems.append(f"{_where(cell, line)}引用了评分检查机制或绕过它的接口（`{what}`）：答案不能读取、改动或绕过"
                            "检查代码，本题计 0 分")
        if last is not None and _index(nb, cell) > last:
            continue
        for line, api in forbidden_uses(cell.source, grade_id, context, at=context.at(order.get(id(cell))))[:1]:
            problems.append(f"本题要求手写，{_where(cell, line)}直接用到了 `{api}`，本题计 0 分")
    return problems
