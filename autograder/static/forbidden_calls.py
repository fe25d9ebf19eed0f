"""Static check of the answer cells, run in the grader's process: what no code in the kernel can change.

The kernel reports flags about itself (the torch calls it saw, whether the custom backward ran);
code in the same process could forge them. This check reads the notebook's answer cells here:
a direct use of an API that an exercise forbids, or any reference to the checking machinery (the
student package, the grader, `pkgutil.resolve_name`, `sys.modules`, switching torch's function
modes off), and the exercise gets 0 with a reason. It sees what is written, with every constant expression
folded to its value (`"_get" + "frame"` reads as `_getframe`); what it cannot read counts as a reference itself:
a name computed at run time on an imported object that holds the machinery (holds_machinery: `torch`, `sys`) or on
one it cannot resolve, the reflection builtins used as values, code loaded from data, a module the grading
environment lacks (one the notebook wrote, or a file of the student's that a submission does not carry), the
kernel's objects past the shell's cell API. A computed name on an object that holds none (`getattr(nn.init, how)`)
reaches its functions: the run-time detection (w1d1_student/torch_calls.py) sees them called, and covers the rest.

Whose a name is (torch's or the student's) it reads only in the cells grading runs (cell_scope.grading_cells), in
the order they run, by Python's binding rules (cell_scope's): a star import of torch binds only the names its module
exports, and only until the student binds them again; a cell grading never runs (a scratch cell) tells nothing.
"""
import ast
import collections
import contextvars
import functools
import importlib.machinery
import itertools
import keyword
import math
import os
import re
import sys
import types
import typing

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
                   # the dispatch watch switched off from C++: a mode unset, its key excluded for a block
                   "_DisableTorchDispatch", "_unset_dispatch_mode", "_set_dispatch_mode", "ExcludeDispatchKeyGuard",
                   "_ExcludeDispatchKeyGuard", "_SetExcludeDispatchKeyGuard", "_ForceDispatchKeyGuard",
                   "_dispatch_tls_set_dispatch_key_excluded", "_dispatch_tls_set_dispatch_key_included",
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
                   "setprofile", "addaudithook",
                   # importing what the notebook wrote (the working folder is off the path): finders and loaders
                   "meta_path", "path_hooks", "path_importer_cache", "FileFinder", "PathFinder", "SourceFileLoader",
                   "SourcelessFileLoader", "ExtensionFileLoader", "spec_from_file_location", "spec_from_loader",
                   "module_from_spec", "exec_module", "load_module",
                   # work handed to the kernel's own threads (no watch looks at them; red team round 15 F1): the
                   # object a builtin method is bound to (`input.__self__` is the kernel), the kernel's threads and
                   # sockets by their attributes, and the calls that queue a callable on another thread's loop
                   "__self__", "iopub_thread", "pub_thread", "io_thread", "control_thread", "shell_channel_thread",
                   "pub_socket", "iopub_socket", "io_loop", "asyncio_loop", "displayhook", "schedule", "add_callback",
                   "add_callback_from_signal", "spawn_callback", "add_timeout", "call_soon", "call_soon_threadsafe",
                   "call_later", "call_at", "run_coroutine_threadsafe")
# attributes of frames, functions and generators: a variable of that name (`f_back = None`) holds none of them
ATTRIBUTES_ONLY = frozenset({"__globals__", "__closure__", "cell_contents", "f_locals", "f_globals", "f_back",
                             "f_builtins", "tb_frame", "gi_frame", "cr_frame", "ag_frame", "__self__"})
# parts of a name: every torch function that pushes, pops or reads the function and dispatch mode stacks
MACHINERY_PARTS = ("_pop_mode", "_push_mode", "function_mode", "dispatch_mode", "_torch_function_stack",
                   "_torch_dispatch_stack", "_disable_current_modes")

# what a constant expression folds to when nothing in it is known (`"_get" + name`)
UNKNOWN = object()
_STR_METHODS = {"join", "format", "replace", "upper", "lower", "strip", "lstrip", "rstrip", "removeprefix",
                "removesuffix", "title", "capitalize", "swapcase", "casefold", "encode", "decode", "zfill", "center",
                "ljust", "rjust", "format_map", "split", "rsplit", "splitlines"}
_CONVERTERS = {"str": str, "bytes": bytes, "chr": chr, "bytearray": bytes, "repr": repr, "ascii": ascii}
_FOLD_LIMIT = 10_000  # characters: a longer constant is built by no honest cell and folded by no one


def _small(*values):
    """Whether an operation on these values builds nothing large before folded() could refuse its result: no number,
    length or width in a format (`"%99999s"`, `"{:>99999}"`) above _FOLD_LIMIT."""
    flat, total = list(values), 0
    while flat:
        v = flat.pop()
        if isinstance(v, (tuple, list)):
            flat += v
        size = abs(v) if isinstance(v, int) else len(v) if isinstance(v, (str, bytes, tuple, list)) else 0
        total += size if not isinstance(v, int) else 0  # what an operation on them reads or joins, all together
        if size > _FOLD_LIMIT or total > _FOLD_LIMIT or isinstance(v, (str, bytes)) and re.search(
                rb"\d{5}" if isinstance(v, bytes) else r"\d{5}", v):
            return False
    return True


# the builtins of _CONVERTERS the notebook binds itself (`def chr(i): ...`): a call of one folds to nothing
_SHADOWED = contextvars.ContextVar("shadowed", default=frozenset())


def folded(node):
    """The value a constant expression has whatever runs (strings and bytes built from literals: `"_get" + "frame"`,
    f-strings, `%` and `.format` of literals, `"".join([...])`, slices, str methods, `chr(95)`), or UNKNOWN."""
    return _folded(node, _SHADOWED.get())


@functools.lru_cache(maxsize=4096)  # keyed by the node itself (held while cached): each subtree folds once
def _folded(node, shadowed):
    try:
        value = _fold(node)
    except Exception:  # any error of the operation itself: Python would raise it too, no value reaches anything
        return UNKNOWN
    if isinstance(value, (str, bytes, tuple, list)) and len(value) > _FOLD_LIMIT:
        return UNKNOWN
    return value


def _fold(node):
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.Tuple, ast.List)):
        items = [folded(e) for e in node.elts]
        return UNKNOWN if any(i is UNKNOWN for i in items) else (tuple if isinstance(node, ast.Tuple) else list)(items)
    if isinstance(node, ast.JoinedStr):
        parts = [folded(v) for v in node.values]
        return UNKNOWN if any(p is UNKNOWN for p in parts) else "".join(parts)
    if isinstance(node, ast.FormattedValue):
        value, spec = folded(node.value), "" if node.format_spec is None else folded(node.format_spec)
        if value is UNKNOWN or spec is UNKNOWN:
            return UNKNOWN
        value = {-1: value, 115: str(value), 114: repr(value), 97: ascii(value)}[node.conversion]
        return format(value, spec) if _small(value, spec) else UNKNOWN
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(folded(node.operand), (int, float)):
        return -folded(node.operand)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod, ast.Mult)):
        left, right = folded(node.left), folded(node.right)
        if left is UNKNOWN or right is UNKNOWN or not _small(left, right):
            return UNKNOWN
        if isinstance(node.op, ast.Mult) and max(len(x) for x in (left, right) if isinstance(x, (str, bytes, tuple, list))) * max(
                x for x in (left, right) if isinstance(x, int)) > _FOLD_LIMIT:
            return UNKNOWN
        return left + right if isinstance(node.op, ast.Add) else left % right if isinstance(node.op, ast.Mod) else left * right
    if isinstance(node, ast.Subscript):
        value = folded(node.value)
        key = (slice(*(None if b is None else folded(b) for b in (node.slice.lower, node.slice.upper, node.slice.step)))
               if isinstance(node.slice, ast.Slice) else folded(node.slice))
        return UNKNOWN if value is UNKNOWN or UNKNOWN in (getattr(key, a, key) for a in ("start", "stop", "step")) else value[key]
    if isinstance(node, ast.Call) and not node.keywords:
        args = [folded(a) for a in node.args]
        if any(a is UNKNOWN for a in args) or not _small(*args):
            return UNKNOWN
        if isinstance(node.func, ast.Attribute) and node.func.attr in _STR_METHODS:
            owner = folded(node.func.value)
            if isinstance(owner, (str, bytes)) and _small(owner, *args) and (  # a separator repeated, bounded too
                    node.func.attr not in ("join", "replace") or len(owner) * len(args[-1]) <= 10 * _FOLD_LIMIT):
                return getattr(owner, node.func.attr)(*args)
        if isinstance(node.func, ast.Name) and node.func.id in _CONVERTERS.keys() - _SHADOWED.get() and all(
                isinstance(a, (str, bytes, int, tuple, list)) for a in args):
            return _CONVERTERS[node.func.id](*args)
    return UNKNOWN


def _text(value):
    """A folded value as the text the check reads: a string as it is; bytes are data, never prose, so each identifier
    in them on a line of its own (`b"csys\\n_getframe\\n."`, a pickle that imports `sys._getframe`)."""
    if not isinstance(value, (bytes, bytearray)):
        return value
    words = re.findall(r"[A-Za-z_][A-Za-z0-9_]*", value.decode("latin-1"))
    return "\n".join(w for w in words if not keyword.iskeyword(w))


def _strings(tree, own=None):
    """(line, text) of the strings that may be code: each string literal and each largest expression that folds to a
    string or bytes (folded()), not statements by themselves (docstrings), nor text only shown (an argument of
    `print`, where `print` is not one of `own`, the student's names: output reaches nothing)."""
    inert = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
    if own is not None and "print" not in own:
        inert |= {id(a) for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                  and n.func.id == "print" for a in n.args}
    inner = {id(c) for n in ast.walk(tree) if isinstance(n, ast.expr) and _stringlike(folded(n))
             for c in ast.iter_child_nodes(n)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.expr) and id(node) not in inert and not isinstance(node, ast.FormattedValue) and (
                isinstance(node, ast.Constant) or id(node) not in inner):
            value = _text(node.value if isinstance(node, ast.Constant) else folded(node))
            if isinstance(value, str):
                found.append((node.lineno, value))
    return found


def _stringlike(value):
    return isinstance(value, (str, bytes))


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
    elif isinstance(node, ast.MatchClass):  # `case object(DisableTorchFunction=x)` reads the attribute by its name
        yield from node.kwd_attrs


def _parsed(source, ipython):
    """The cell's tree; for code held in a string (ipython=None) plain Python first, so prose ending in `name?`
    is no help request, and IPython's transforms when it is not plain Python (a `%%time` body with a line
    magic runs in the kernel all the same)."""
    if ipython is None:
        return _tree(source, ipython=False) or _tree(source, ipython=True)
    return _tree(source, ipython)


# roots of the kernel's own objects that no import binds: the shell (its display publisher, events), the builtins,
# the notebook's namespace (which holds the imported modules)
KERNEL_ROOTS = frozenset({"get_ipython", "__builtins__", "__import__", "__loader__", "__spec__", "globals", "locals"})
# calls whose first argument names the module, the code or the attribute they reach (`__getattribute__`,
# `getattr_static`: the attribute's name comes after the object too)
_IMPORTS, _CODE = {"__import__", "import_module"}, {"exec", "eval", "compile"}
_ATTRIBUTES = {"getattr", "hasattr", "getattr_static", "__getattribute__", "__getattr__"}
_NAMED_LATER = {"attrgetter", "methodcaller"}  # the name first, the object when the result is called
_MUTATORS = {"setattr", "delattr", "__setattr__", "__delattr__"}
_MEMBERS = {"getmembers", "getmembers_static"}  # every attribute of an object, by names the check cannot read
# what reaches attributes, modules or code by a name computed at run time: used as a value (aliased, passed to
# `map`, stored), not called where it stands, the check cannot follow where it is called
REFLECTION = frozenset(_IMPORTS | _CODE | _ATTRIBUTES | _NAMED_LATER | _MUTATORS | _MEMBERS | {"vars"})
# what a cell may use of the kernel's shell (get_ipython()): its cell API, which IPython's own transforms of a cell
# write (`%time` -> run_line_magic, `!ls` -> system, `x = !ls` -> getoutput). The rest (`.kernel` and its threads,
# io loops, sessions and streams, `.events`, `.user_ns`, `.display_pub`) is the machinery that runs the grader's cells.
SHELL_API = frozenset({"run_line_magic", "run_cell_magic", "system", "getoutput", "magic"})
# the kernel's output streams: their file API; the rest (`sys.stdout.pub_thread`, `.session`) is the kernel's machinery
STREAMS = frozenset({"sys.stdout", "sys.stderr", "sys.__stdout__", "sys.__stderr__"})
STREAM_API = frozenset({"write", "writelines", "flush", "isatty", "fileno", "encoding", "errors", "name", "closed",
                        "readable", "writable", "seekable", "mode", "newlines", "line_buffering"})
# the threads alive in the kernel (the kernel's own: IOPub, Control, Heartbeat, Shell channel): what a cell may read of
# one; the rest (`._target`, `._args`, `.run`) schedules work on a thread no watch looks at
THREAD_GETTERS = frozenset({"threading.enumerate", "threading.main_thread", "threading.current_thread",
                            "threading.currentThread"})
THREAD_API = frozenset({"name", "getName", "ident", "native_id", "is_alive", "daemon", "isDaemon", "join"})
# the kernel's own packages: reached from a cell, they lead to the kernel's objects (IPKernelApp.instance().kernel)
KERNEL_PACKAGES = ("ipykernel", "zmq", "tornado", "jupyter_client", "traitlets", "comm", "debugpy")
# modules that run code or import a name given as data (a pickle names `sys._getframe` in bytes)
CODE_LOADERS = ("pickle", "_pickle", "marshal", "runpy", "shelve", "copyreg", "dill", "cloudpickle", "code", "codeop",
                "doctest", "trace", "pdb", "bdb", "pydoc", "cProfile", "profile")  # docstrings, strings, names as code
_REACH, _FOLLOW = _IMPORTS | {"get_ipython", "getmodule", "resolve_name", "globals", "locals"}, {"getattr", "vars", "type"}


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


class Known(typing.NamedTuple):
    """What the check knows of the cells that run: the names that hold an imported object or one reached from it
    (module_bindings), the dotted path a name holds for certain (import_paths: ((name, path), ...)), the student's own
    names (own_names)."""
    modules: frozenset
    paths: tuple = ()
    own: frozenset = frozenset()
    shells: frozenset = frozenset({"get_ipython"})  # names bound to the shell (`ip = get_ipython()`), and its getter
    threads: frozenset = frozenset()  # names bound to the kernel's threads (`for t in threading.enumerate()`)
    strings: "Strings" = None  # what a name holding only constant strings may hold where it is read
    loose: frozenset = None  # the student's methods that may run with any first argument (loose_methods)

    def __or__(self, other):  # paths, names and loose methods: the cells' (read over all of them), else one cell's
        return Known(self.modules | other.modules, self.paths or other.paths, self.own | other.own,
                     self.shells | other.shells, self.threads | other.threads,
                     other.strings if self.strings is None else self.strings, other.loose if self.loose is None else self.loose)


def known_of(trees):
    paths = import_paths(trees)
    # the shell's getter under any name (`from IPython import get_ipython as gi`, `gi = IPython.get_ipython`), and
    # IPython's shell class (`InteractiveShell.instance()`)
    shells = {"get_ipython"} | {name for name, path in paths if path.startswith("IPython")
                                and path.rsplit(".", 1)[-1] in ("get_ipython", "InteractiveShell")}
    assigns = [n for tree in trees for n in ast.walk(tree) if isinstance(n, (ast.Assign, ast.NamedExpr))]
    for _ in range(len(assigns) + 1):  # until nothing changes: one or two passes for code as written
        more = {t.id for n in assigns if _shell(n.value, shells) or isinstance(n.value, ast.Name) and n.value.id in shells
                for t in (n.targets if isinstance(n, ast.Assign) else [n.target]) if isinstance(t, ast.Name)}
        if more <= shells:
            break
        shells |= more
    threads, links = set(), [(n.targets if isinstance(n, ast.Assign) else [n.target], n.value) for n in assigns] + [
        ([n.target], n.iter) for tree in trees for n in ast.walk(tree) if isinstance(n, (ast.For, ast.AsyncFor))] + [
        ([ast.Name(id=name) for case in n.cases for p in ast.walk(case.pattern) for name in _binds(p)], n.subject)
        for tree in trees for n in ast.walk(tree) if isinstance(n, ast.Match)]  # `match threading.enumerate(): case [t, *_]:`
    for _ in range(len(links) + 1):
        more = {t.id for targets, value in links if _thread(value, threads, paths)
                for target in targets for t in ast.walk(target) if isinstance(t, ast.Name)}
        if more <= threads:
            break
        threads |= more
    loose = loose_methods(trees, paths)
    return Known(frozenset(module_bindings(trees, paths)), paths, frozenset(own_names(trees)), frozenset(shells),
                 frozenset(threads), Strings(trees, loose), loose)


# decorators that call a method with the arguments it was given (`self` stays the instance)
PASSING_DECORATORS = frozenset({"property", "torch.no_grad", "torch.inference_mode", "torch.enable_grad"})
# methods whose first parameter Python binds to the class, never to an instance
CLASS_FIRST = frozenset({"__new__", "__init_subclass__", "__class_getitem__"})


def loose_methods(trees, paths):
    """Names of the student's methods whose function may run with another first argument than an instance of its
    class: read from the class (`Cls.method(torch, name)`, `type(m).method`, `vars(Cls)["method"]`, `m.method` kept
    for `.__func__`), named as a value or a string, decorated by the student's code, defined in a class of classes
    (bases not the student's or torch's), or called as `self.method(…)` inside one of these; a method read on an
    instance without a call (`map(self.m, …)`) stays bound to it unless the notebook reads `__func__`. In the others, `self`
    is the instance (_own_instance); a method a cell calls on an instance (`m.method(…)`, `self.method(…)`,
    `super().method(…)`, `Base.method(self, …)`) stays one."""
    nodes = [n for tree in trees for n in ast.walk(tree)]
    parents = {id(child): node for node in nodes for child in ast.iter_child_nodes(node)}
    classes = {n.name: n for n in nodes if isinstance(n, ast.ClassDef)}
    defs = [(c, f) for c in classes.values() for f in c.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))]
    methods = {f.name for _, f in defs}  # by name: a method is loose when any definition of that name is
    resolved = {name: {p} for name, p in paths}

    def plain(cls, seen=()):  # bases the student's or torch's, no metaclass
        return not cls.keywords and all(
            isinstance(b, ast.Name) and (b.id == "object" or b.id in classes and b.id not in seen and plain(classes[b.id], (*seen, b.id)))
            or (_path(b, resolved) or "").startswith("torch.nn.") and not (_path(b, resolved) or "").startswith(
                "torch.nn.functional") for b in cls.bases)  # autograd.Function's methods take any first argument

    loose = {f.name for cls, f in defs if f.name in CLASS_FIRST or not plain(cls) or any(
        (_path(d.func if isinstance(d, ast.Call) else d, resolved) or _spelled(d)) not in PASSING_DECORATORS for d in f.decorator_list)}
    loose |= {n.value for n in nodes if isinstance(n, ast.Constant) and n.value in methods}
    loose |= {n.id for n in nodes if isinstance(n, ast.Name) and n.id in methods and _in_class_body(n, parents)}
    bound = collections.Counter(b for n in nodes for b in _binds(n))

    def built_here(cls, seen=()):  # `Cls(…)` is an instance of this class: no metaclass (its `__call__` may return
        # anything), no `__new__` or attribute hook, bound once
        return plain(cls) and bound[cls.name] == 1 and not any(isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f.name in (
            "__new__", "__getattr__", "__getattribute__") for f in cls.body) and all(
            built_here(classes[b.id], (*seen, b.id)) for b in cls.bases if isinstance(b, ast.Name) and b.id in classes
            and b.id not in seen)

    classes = {name: cls for name, cls in classes.items() if built_here(cls)}
    built = collections.Counter(n.targets[0].id for n in nodes if isinstance(n, ast.Assign) and len(n.targets) == 1
                                and isinstance(n.targets[0], ast.Name) and _builds(n.value, classes))
    stores = collections.Counter(n.id if isinstance(n, ast.Name) else n.arg for n in nodes
                                 if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load) or isinstance(n, ast.arg))
    instances = {name for name, k in built.items() if stores[name] == k}

    def instance(node):  # `MHA(…)`, a name bound only to one, `super()` in a plain method, `self` in one not loose
        return _builds(node, classes) or isinstance(node, ast.Name) and node.id in instances or isinstance(
            node, ast.Call) and _spelled(node.func) == "super" and not node.args and _instance_method(node, parents, loose) or (
            _own_instance(node, parents, loose))

    reads = [n for n in nodes if isinstance(n, ast.Attribute) and n.attr in methods]
    calls = {id(n): parents[id(n)] for n in reads if isinstance(parents.get(id(n)), ast.Call) and parents[id(n)].func is n}
    # a method read on an instance and not called is bound to it (`map(self._heads, names)`, a hook), unless the
    # notebook takes a function out of a bound method (`.__func__`)
    unbinds = any(n.attr == "__func__" if isinstance(n, ast.Attribute) else isinstance(
        n, (ast.Constant, ast.BinOp, ast.JoinedStr, ast.Call)) and isinstance(folded(n), str) and "__func__" in folded(n)
        for n in nodes)
    # a class's namespace read whole (`vars(Cls).values()`, `type(m).__dict__`): any method may come out of it unnamed
    spaces = [n.args[0] for n in nodes if isinstance(n, ast.Call) and _called(n) in _MEMBERS | {"vars"} and n.args] + [
        n.value for n in nodes if isinstance(n, ast.Attribute) and n.attr == "__dict__"]
    for _ in range(len(methods) + 1):  # until nothing changes: `self.m(…)` in a loose method makes m loose
        more = {n.attr for n in reads if not instance(n.value) and not (  # `Base.m(self, …)`: called on an instance
            id(n) in calls and calls[id(n)].args and instance(calls[id(n)].args[0])) or id(n) not in calls and unbinds}
        more |= methods if not all(map(instance, spaces)) else set()
        if more <= loose:
            break
        loose |= more
    return frozenset(loose)


_THREAD_PASSING = ("next", "iter", "list", "tuple", "sorted", "reversed", "min", "max", "filter", "set", "enumerate", "zip")


def _thread_read(node, parents):
    """Whether a thread object (or a list of them: _thread) is used where the check follows it: an attribute read
    (THREAD_API), iterated, indexed, compared, assigned to a name (known_of follows it), handed to a builtin that
    passes it on (another _thread node) or to `len`, `print`, `repr`, `str`, an f-string. Anywhere else (a dict, a
    lambda, a return, a function of the student's) the check loses it."""
    parent = parents.get(id(node))
    if isinstance(parent, (ast.Attribute, ast.Subscript)) and parent.value is node or isinstance(parent, (
            ast.Compare, ast.FormattedValue, ast.Expr, ast.BoolOp, ast.UnaryOp)):
        return True
    if isinstance(parent, (ast.For, ast.AsyncFor, ast.comprehension)) and parent.iter is node:
        return True
    if isinstance(parent, ast.Assign) and parent.value is node and all(
            isinstance(t, ast.Name) or isinstance(t, ast.Tuple) and all(isinstance(e, ast.Name) for e in t.elts) for t in parent.targets):
        return True
    if isinstance(parent, (ast.ListComp, ast.GeneratorExp, ast.SetComp)) and parent.elt is node:
        return True  # the comprehension itself is a _thread node, checked in turn
    return isinstance(parent, ast.Call) and parent.func is not node and _called(parent) in (
        *_THREAD_PASSING, "len", "print", "repr", "str", "id", "isinstance") and all(
        k.arg == "reverse" for k in parent.keywords) and not (  # `key=f`, `filter(f, …)`: f gets every thread
        _called(parent) == "filter" and not (isinstance(parent.args[0], ast.Constant) and parent.args[0].value is None))


def _instance_method(node, parents, loose):
    """Whether the function a node is in is a method whose first argument is an instance (`super()` in it reads
    the instance's): defined in a class body, not static or a class method, not loose (loose_methods)."""
    function = parents.get(id(node))
    while function is not None and not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        function = parents.get(id(function))
    return isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) and isinstance(
        parents.get(id(function)), ast.ClassDef) and bool(function.args.args) and function.name not in loose and not any(
        _spelled(d) in ("staticmethod", "classmethod") for d in function.decorator_list)


def _in_class_body(node, parents):
    """Whether a name is read in a class body itself (`g = get`, `staticmethod(get)`), where a method's name is the
    function, a decorator's and a default's included (they run where the def stands); anywhere else the name is
    another binding's (the release's own `heads(...)` helper)."""
    while id(node) in parents:
        scope = parents[id(node)]
        outside = [*getattr(scope, "decorator_list", ()), *getattr(scope, "bases", ()), *getattr(scope, "keywords", ()),
                   getattr(scope, "args", None)]
        if not any(node is o for o in outside) and isinstance(scope, (
                ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.ListComp, ast.SetComp, ast.GeneratorExp,
                ast.DictComp)):
            return isinstance(scope, ast.ClassDef)
        node = scope
    return False


def _builds(node, classes):
    """Whether an expression is a call of one of the student's classes (`MultiHeadAttention(16, 4)`)."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in classes


def _thread(node, threads, paths):
    """Whether an expression may be a thread alive in the kernel, or hold some: a call of THREAD_GETTERS, a name bound
    to one, an item of one (`threading.enumerate()[0]`, `next(t for t in threading.enumerate() if ...)`)."""
    if isinstance(node, ast.Name):
        return node.id in threads
    if isinstance(node, (ast.Subscript, ast.Starred, ast.NamedExpr)):
        return _thread(node.value, threads, paths)
    if isinstance(node, (ast.IfExp, ast.BoolOp, ast.Tuple, ast.List)):
        return any(_thread(c, threads, paths) for c in ast.iter_child_nodes(node))
    if isinstance(node, (ast.GeneratorExp, ast.ListComp, ast.SetComp)):
        inner = threads | {t.id for g in node.generators if _thread(g.iter, threads, paths)
                           for t in ast.walk(g.target) if isinstance(t, ast.Name)}
        return _thread(node.elt, inner, paths)
    if isinstance(node, ast.Call):
        return _path(node.func, {n: {p} for n, p in paths}) in THREAD_GETTERS or _called(node) in _THREAD_PASSING and any(
            _thread(a, threads, paths) for a in node.args)
    return False


class _List(tuple):
    """A list's value (folded to a tuple): a name bound to one holds it only while nothing changes it in place."""


class _Mapping(tuple):
    """A dict display's value, as its (key, value) pairs: iterating it gives the keys."""


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.ListComp, ast.SetComp, ast.GeneratorExp,
           ast.DictComp)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)
_SAME_ITEMS = {"reversed", "sorted", "list", "tuple", "set", "frozenset", "iter"}  # what iterating their result gives
_PURE_READS = _SAME_ITEMS | {"enumerate", "zip", "len", "print"}  # calls that read a list or dict without changing it
_VIEWS = {"items", "keys", "values"}
_ITEMS_LIMIT = 1000
# names IPython binds in the notebook's namespace around every cell (the last inputs and outputs: `_i`, `_ii`, `_3`,
# `In`, `Out`): at a check they hold whatever the shell last stored, not what a cell assigned
_SHELL_SET = re.compile(r"_+|_i+|_i?\d+|_ih|_oh|_dh|In|Out")
_REFLECTED = {"__radd__", "__rmod__"}
# what writes an attribute by a name or into a namespace, or builds a class at run time
_WRITERS = _MUTATORS | {"__dict__", "vars", "new_class", "__class__", "__bases__", "__getattr__", "__getattribute__",
                        "__set_name__", "__init_subclass__", "__prepare__", "SimpleNamespace", "__setstate__", "__reduce__",
                        "__reduce_ex__", "_reconstruct"}


def _hashable(value):
    if isinstance(value, dict):
        return _Mapping((k, _hashable(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return (_List if isinstance(value, list) else tuple)(_hashable(v) for v in value)
    return value


# builtins that read an object without writing its attributes
_INSPECTORS = frozenset({"getattr", "hasattr", "isinstance", "type", "id", "len", "print", "repr", "str"})


class Strings:
    """What a name may hold where a cell reads it, when every binding that can reach the read gives it a constant:
    the strings in `getattr(mha, p)` for `for p in ("W_q", "W_k")`, `for p in "W_q W_k".split()`, `for p in
    reversed(PROJ)`, `PROJ[:2]`, `for i, p in enumerate(PROJ)`, `for p, i in SLOT.items()`, `q, k = "W_q", "W_k"`,
    a parameter every call of its function passes such a value (`_lin(mha, p)` in such a loop). Names are resolved
    by Python's scopes (a function's, a comprehension's, a class body's, the notebook's): a name the student binds
    to anything else in the same scope, a list or dict changed in place (or handed to code that may change it), a
    module-level name in a notebook that writes names dynamically (`globals()`, `exec`), a shadowed `reversed` or
    `enumerate`: not constant. `trees`: the cells that run."""

    def __init__(self, trees, loose=frozenset()):
        self.loose = loose  # loose_methods: where `self` may be any object
        self.nodes = [n for tree in trees for n in ast.walk(tree)]
        self.trees = trees
        self.parents = {id(c): n for n in self.nodes for c in ast.iter_child_nodes(n)}
        self.bound = collections.Counter(b for n in self.nodes for b in _binds(n))
        self.declared = {name for n in self.nodes if isinstance(n, (ast.Global, ast.Nonlocal)) for name in n.names}
        self.dynamic = any(isinstance(n, ast.Name) and n.id in ("globals", "locals", "exec", "eval") or isinstance(n, ast.Call)
                           and _spelled(n.func) == "vars" and not n.args for n in self.nodes)  # names bound by text
        self.memo = {}
        self.stars = any(isinstance(n, ast.alias) and n.name == "*" for n in self.nodes)  # binds names unseen
        self.loads = collections.defaultdict(list)
        for n in self.nodes:
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                self.loads[n.id].append(n)
        # attributes the notebook writes: stored or deleted by name, or any, where it writes them by text, builds
        # classes at run time or reaches a namespace (`setattr`, `vars`, `__dict__`, `type(name, bases, ns)`)
        self.written = {n.attr for n in self.nodes if isinstance(n, ast.Attribute) and not isinstance(n.ctx, ast.Load)}
        # an object's own `+` or `%` on a string (`"W_" + n` calls n.__radd__ when str's fails or n is a str subclass)
        self.reflected = any(_REFLECTED & {_spelled(n), getattr(n, "name", None), getattr(n, "value", None)} or isinstance(
            n, ast.ClassDef) and n.keywords for n in self.nodes)  # a metaclass may add the method
        if self.dynamic or any(_WRITERS & {_spelled(n), getattr(n, "name", None), getattr(n, "value", None)} or isinstance(
                n, ast.Call) and _spelled(n.func) == "type" and len(n.args) != 1 for n in self.nodes):
            self.written, self.reflected = None, True
        elif self._handed_on():
            self.written = None

    def _handed_on(self):
        """Whether one of the notebook's classes or an instance of one is handed to code as a value: the class's
        name, a method's first parameter, a name bound to `Cls(…)` or `Cls(…)` itself, read other than as an
        attribute's object, a call's callee, an argument of super() or of one of _INSPECTORS, or a class's base;
        handed to a helper function of the notebook's, the helper's parameter is read the same way
        (`functools.update_wrapper(self, ns)` writes attributes by names no cell spells; red team round 16)."""
        classes = [c for c in self.nodes if isinstance(c, ast.ClassDef)]
        names = {c.name for c in classes}
        instances = {t.id for n in self.nodes if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call)
                     and _spelled(n.value.func) in names for t in n.targets if isinstance(t, ast.Name)}
        helpers = {n.name: n for n in self.nodes if isinstance(n, ast.FunctionDef) and not n.decorator_list
                   and self.bound[n.name] == 1 and not isinstance(self.parents.get(id(n)), ast.ClassDef)}
        reads = [n for n in self.nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in instances | names
                 or isinstance(n, ast.Call) and _spelled(n.func) in names and not (  # `Cls(…)` itself, unless named
                     isinstance(self.parents.get(id(n)), ast.Assign) and self.parents[id(n)].value is n)]
        scopes = [(m, (m.args.posonlyargs + m.args.args)[:1]) for c in classes for m in c.body
                  if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))]
        done = set()
        while scopes or reads:
            for function, params in scopes:
                for param in params:
                    reads += [n for n in ast.walk(function) if isinstance(n, ast.Name) and n.id == param.arg
                              and isinstance(n.ctx, ast.Load)]
            scopes = []
            read = reads.pop() if reads else None
            if read is None:
                break
            parent = self.parents.get(id(read))
            if isinstance(parent, ast.Attribute) and parent.value is read or isinstance(parent, ast.Call) and (
                    parent.func is read or _spelled(parent.func) == "super" or self._builtin(parent.func, _INSPECTORS)) or (
                    isinstance(parent, ast.ClassDef) and read in parent.bases):
                continue
            helper = helpers.get(parent.func.id) if isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) else None
            if helper is None or read not in parent.args:
                return True
            params = helper.args.posonlyargs + helper.args.args
            position = parent.args.index(read)
            if position >= len(params):
                return True
            if (helper.name, position) not in done:
                done.add((helper.name, position))
                scopes.append((helper, [params[position]]))
        return False

    def of(self, node, parents):
        """The strings an expression may give where it stands ({...}), or None. `parents`: its tree's (a cell's)."""
        values = self._values(node, _Parents(parents, self.parents), frozenset())
        return set(values) if values is not None and all(isinstance(v, str) for v in values) else None

    def _plain(self, cls):
        """A class whose body's names are plain (no metaclass: no keywords, bases `object` or nn's `Module`)."""
        return not cls.keywords and all(_spelled(b) in ("object", "Module") and not self.bound[_spelled(b)] for b in cls.bases)

    def _builtin(self, node, names):
        return isinstance(node, ast.Name) and node.id in names and not self.bound[node.id] and not self.dynamic

    def _values(self, node, up, seen):
        value = folded(node)
        if value is not UNKNOWN:
            return {_hashable(value)}
        if isinstance(node, ast.Dict) and None not in node.keys:
            keys, values = [folded(k) for k in node.keys], [folded(v) for v in node.values]
            if any(v is UNKNOWN for v in (*keys, *values)):
                return None
            return {_Mapping(zip(map(_hashable, keys), map(_hashable, values)))}
        if isinstance(node, ast.Name):
            return self._name(node, up, seen)
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
            return self._class_constant(node, up, seen)
        if isinstance(node, ast.Call) and self._builtin(node.func, {"str"}) and len(node.args) == 1 and not node.keywords:
            values = self._values(node.args[0], up, seen)  # `str(p)` of a string
            return values if values is not None and all(isinstance(v, str) for v in values) else None
        if isinstance(node, ast.IfExp):
            a, b = self._values(node.body, up, seen), self._values(node.orelse, up, seen)
            return None if a is None or b is None else a | b
        if isinstance(node, ast.Subscript) and not isinstance(node.slice, ast.Slice):  # `NAMES[i]`, `SLOT[c]`
            owners, key = self._values(node.value, up, seen), folded(node.slice)
            if owners is None or not all(isinstance(o, (str, tuple)) for o in owners):
                return None
            items = [dict(o) if isinstance(o, _Mapping) else o for o in owners]
            try:
                return {o[key] for o in items} if key is not UNKNOWN else {
                    v for o in items for v in (o.values() if isinstance(o, dict) else o)}
            except (LookupError, TypeError):
                return None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "join" and len(
                node.args) == 1 and isinstance(node.args[0], (ast.Tuple, ast.List)) and isinstance(folded(
                node.func.value), str) and not node.keywords and not any(isinstance(e, ast.Starred) for e in node.args[0].elts):
            parts = [node.func.value] * (2 * len(node.args[0].elts) - 1)  # `"_".join(("W", c))`: the items, joined
            parts[::2] = node.args[0].elts
            return self._joined(parts, up, seen)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" and len(
                node.args) == 1 and not node.keywords:  # `SLOT.get(c)` of a constant dict
            owners, keys = self._values(node.func.value, up, seen), self._values(node.args[0], up, seen)
            if owners is None or keys is None or not all(isinstance(o, _Mapping) for o in owners):
                return None
            return {dict(o).get(k) for o in owners for k in keys}  # a missing key gives None: no name
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):  # `("weight",) + (("bias",) if b else ())`
            a, b = self._values(node.left, up, seen), self._values(node.right, up, seen)
            if a is not None and b is not None and all(type(v) in (tuple, _List) for v in (*a, *b)) and len(a) * len(b) <= (
                    _ITEMS_LIMIT):
                return {type(x)(x + y) for x in a for y in b if type(x) is type(y)} if all(
                    type(x) is type(y) for x in a for y in b) else None
        parts = (list(node.values) if isinstance(node, ast.JoinedStr) else [node.left, node.right] if isinstance(
            node, ast.BinOp) and isinstance(node.op, ast.Add) else None)
        if parts is not None:  # `"W_" + c`, `f"W_{c}"`: each part's strings, joined
            return self._joined([p.value if isinstance(p, ast.FormattedValue) and p.conversion in (-1, 115)
                                 and p.format_spec is None else p for p in parts], up, seen)
        if isinstance(node, (ast.ListComp, ast.GeneratorExp, ast.SetComp)) or isinstance(node, ast.Call) and self._builtin(
                node.func, {"list", "tuple", "set", "frozenset"}) and len(node.args) == 1 and not node.keywords:
            items = self._values(node.elt, up, seen) if not isinstance(node, ast.Call) else self._items(node.args[0], up, seen)
            if items is None or not all(isinstance(i, str) for i in items):
                return None  # what it holds: these strings, in some order (`[f"W_{c}" for c in "qkv"]`)
            return {(_List if isinstance(node, ast.ListComp) or _spelled(getattr(node, "func", None)) == "list" else tuple)(
                sorted(items))}
        if isinstance(node, ast.Call) and self._builtin(node.func, {"dict"}) and not node.args and all(
                k.arg for k in node.keywords):  # `dict(q="W_q", k="W_k")`
            values = [self._values(k.value, up, seen) for k in node.keywords]
            if any(v is None or len(v) != 1 for v in values):
                return None
            return {_Mapping((k.arg, next(iter(v))) for k, v in zip(node.keywords, values))}
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _STR_METHODS - {
                "format", "join"} and not node.keywords and all(folded(a) is not UNKNOWN for a in node.args):
            owners = self._values(node.func.value, up, seen)  # `c.strip()` over the strings c holds
            if owners is None or not all(isinstance(o, str) for o in owners):
                return None
            try:
                return {_hashable(getattr(o, node.func.attr)(*map(folded, node.args))) for o in owners}
            except (TypeError, ValueError, LookupError):
                return None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format" and not (
                node.keywords) and isinstance(folded(node.func.value), str):  # `"W_{}".format(c)`
            args = [self._values(a, up, seen) for a in node.args]
            if any(a is None or not all(isinstance(v, str) for v in a) for a in args) or math.prod(map(len, args)) > _ITEMS_LIMIT:
                return None
            try:
                return {folded(node.func.value).format(*combo) for combo in itertools.product(*args)}
            except (IndexError, KeyError, ValueError):
                return None
        return None

    def _joined(self, parts, up, seen):
        found = {""}
        for part in parts:
            values = self._values(part, up, seen)
            if values is None or not all(isinstance(v, str) for v in values) or len(found) * len(values) > _ITEMS_LIMIT:
                return None
            found = {a + b for a in found for b in values}
        return found

    def _items(self, node, up, seen):
        """What iterating an expression may give, or None."""
        if isinstance(node, ast.Call) and self._builtin(node.func, _SAME_ITEMS) and len(node.args) == 1:
            return self._items(node.args[0], up, seen)
        if isinstance(node, ast.Call) and self._builtin(node.func, {"enumerate"}) and node.args and all(
                k.arg == "start" for k in node.keywords):
            items = self._items(node.args[0], up, seen)
            return None if items is None else {(UNKNOWN, item) for item in items}
        if isinstance(node, ast.Call) and self._builtin(node.func, {"zip"}) and node.args and all(
                k.arg == "strict" for k in node.keywords):
            columns = [self._items(a, up, seen) or {UNKNOWN} for a in node.args]
            if all(c == {UNKNOWN} for c in columns) or math.prod(map(len, columns)) > _ITEMS_LIMIT:
                return None
            return set(itertools.product(*columns))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _VIEWS and not node.args:
            owners = self._values(node.func.value, up, seen)
            if owners is None or not all(isinstance(o, _Mapping) for o in owners):
                return None
            at = {"items": slice(None), "keys": 0, "values": 1}[node.func.attr]
            return {pair[at] if isinstance(at, int) else pair for o in owners for pair in o}
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
            return self._items(node.value, up, seen)
        if isinstance(node, ast.Call) and self._builtin(node.func, {"map"}) and len(node.args) == 2 and not (
                node.keywords) and self._builtin(node.args[0], {"str"}):  # `map(str, PROJ)` over strings
            items = self._items(node.args[1], up, seen)
            return items if items is not None and all(isinstance(i, str) for i in items) else None
        values = self._values(node, up, seen)
        if values is None or not all(isinstance(v, (str, tuple)) for v in values):
            return None
        return {item[0] if isinstance(v, _Mapping) else item for v in values for item in v}

    def _name(self, name, up, seen):
        scope = _scope_of(name, up)
        while scope is not None and name.id not in _scope_locals(scope):
            scope = _scope_of(scope, up)
            while isinstance(scope, ast.ClassDef):  # a class body's names are not its methods'
                scope = _scope_of(scope, up)
        key = (scope, name.id)
        if key not in self.memo:
            self.memo[key] = self._held(name, scope, up, seen)
        if isinstance(scope, ast.ClassDef) and not _bound_before(name, scope, up):  # else the enclosing namespace's
            outer = _scope_of(scope, up)
            while outer is not None and name.id not in _scope_locals(outer):
                outer = _scope_of(outer, up)
            inner, rest = self.memo[key], self._held(name, outer, up, seen) if outer is None else None
            return None if inner is None or rest is None else inner | rest
        return self.memo[key]

    def _held(self, name, scope, up, seen):
        """What a name bound in `scope` (None: the notebook's namespace) may hold: what each of its bindings gives."""
        key = (id(scope), name.id)
        if key in seen or name.id in self.declared or scope is None and (self.dynamic or self.stars or _SHELL_SET.fullmatch(
                name.id)):
            return None
        if isinstance(scope, ast.ClassDef) and not self._plain(scope):  # a metaclass's namespace may answer anything
            return None
        bindings = [n for root in (self.trees if scope is None else [scope]) for n in _scope_walk(root)
                    if name.id in _binds(n) and not (_same_name(n, up) and not isinstance(scope, ast.ClassDef))]
        found = set()
        for binding in bindings:
            values = self._binding(binding, up, seen | {key})
            if values is None:
                return None
            found |= values
        nested = any(isinstance(v, tuple) and any(map(_mutable, v)) for v in found)
        if any(map(_mutable, found)) and not all(self._pure(n, nested) for n in self.loads[name.id]):
            return None
        return found if bindings else None

    def _class_constant(self, node, up, seen):
        """What `self.A` may hold in a method of the student's class when class bodies bind A to constant strings:
        `self` an instance (_own_instance) of one of the notebook's classes (`Base.m(other, …)` hands it any of
        them), each plain (no student base, no metaclass) and undecorated (`@dataclass` writes attributes), each class
        body that binds A giving a tuple or string, and each store of A (`self.A = "softmax"`, on any object) one."""
        classes = [c for c in self.nodes if isinstance(c, ast.ClassDef)]
        if self.written is None or node.attr.startswith("__") or not _own_instance(
                node.value, up, self.loose) or not all(self._plain(c) and not c.decorator_list for c in classes):
            return None
        found = set()
        if node.attr in self.written:  # `self.norm = "softmax"`: every store of the name, on any object, a constant
            stores = [n for n in self.nodes if isinstance(n, ast.Attribute) and n.attr == node.attr and not isinstance(
                n.ctx, ast.Load)]
            for store in stores:
                assign = up(store)
                if not (isinstance(assign, ast.Assign) and assign.targets == [store] or isinstance(
                        assign, ast.AnnAssign) and assign.target is store and assign.value is not None):
                    return None
                values = self._values(assign.value, up, seen)
                if values is None or any(map(_mutable, values)):
                    return None
                found |= values
        for cls in (c for c in classes if any(node.attr in _binds(n) for n in _scope_walk(c))):
            values = self._held(ast.Name(id=node.attr), cls, up, seen)
            if values is None or any(map(_mutable, values)):  # `self.PROJ.append(…)`
                return None
            found |= values
        return found or None

    def _mapped(self, param, function, up, seen):
        """The values a lambda's positional parameter gets from `map(lambda p: …, ITER)`: the items of its iterable."""
        call, params = up(function), function.args.args
        if not (isinstance(call, ast.Call) and self._builtin(call.func, {"map"}) and call.args and call.args[0] is function
                and not call.keywords and param in params and len(call.args) == len(params) + 1) or any(
                isinstance(a, ast.Starred) for a in call.args) or function.args.defaults:
            return None
        items = self._items(call.args[params.index(param) + 1], up, seen)
        return items if items is not None and all(isinstance(i, str) for i in items) else None

    def _pure(self, load, nested=False):
        """Whether a read of a name leaves a list or dict it holds unchanged: iterated, indexed, measured, viewed; an
        item of a nested one (`X[i]`) is read the same way in turn."""
        parent = self.parents.get(id(load))
        if nested and isinstance(parent, ast.Subscript) and parent.value is load:
            return isinstance(parent.ctx, ast.Load) and self._pure(parent, nested)
        if isinstance(parent, (ast.For, ast.AsyncFor, ast.comprehension)) and parent.iter is load:
            return True
        if isinstance(parent, ast.Subscript) and parent.value is load and isinstance(parent.ctx, ast.Load):
            return True
        if isinstance(parent, ast.Call) and self._builtin(parent.func, _PURE_READS) and load in parent.args:
            return True
        return (isinstance(parent, ast.Attribute) and parent.attr in _VIEWS | {"index", "count", "get"}
                and isinstance(self.parents.get(id(parent)), ast.Call) and self.parents[id(parent)].func is parent)

    def _binding(self, node, up, seen):
        if isinstance(node, ast.arg):
            return self._parameter(node, up, seen)
        if not isinstance(node, ast.Name):
            return None
        top = node
        while isinstance(up(top), (ast.Tuple, ast.List)):
            top = up(top)
        statement = up(top)
        if isinstance(statement, ast.Assign) and any(top is t for t in statement.targets):
            return self._unpack(node, top, statement.value, up, seen)
        if isinstance(statement, ast.AnnAssign) and statement.value is not None and top is statement.target:
            return self._values(statement.value, up, seen)
        if isinstance(statement, ast.NamedExpr):
            return self._values(statement.value, up, seen)
        if isinstance(statement, (ast.For, ast.AsyncFor, ast.comprehension)) and top is statement.target:
            items = self._items(statement.iter, up, seen)
            return None if items is None else _select(node, top, items)
        return None

    def _unpack(self, name, target, value, up, seen):
        """The values `name` gets from `target = value` (`q, k = "W_q", "W_k"`)."""
        while target is not name:
            if not isinstance(value, (ast.Tuple, ast.List)) or len(value.elts) != len(target.elts) or any(
                    isinstance(e, ast.Starred) for e in (*value.elts, *target.elts)):
                values = self._values(value, up, seen)
                return None if values is None else _select(name, target, values)
            k = next(i for i, e in enumerate(target.elts) if any(n is name for n in ast.walk(e)))
            target, value = target.elts[k], value.elts[k]
        return self._values(value, up, seen)

    def _parameter(self, param, up, seen):
        """The values a parameter of a function (not a method or lambda) gets from every call of it, by position or
        by name (its default when a call leaves it out); the function called only by its name, bound once."""
        function = up(up(param))
        if isinstance(function, ast.Lambda):
            return self._mapped(param, function, up, seen)
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) or isinstance(up(function), ast.ClassDef) or (
                self.dynamic or function.decorator_list):  # called from text, or by a wrapper
            return None
        args = function.args
        params = args.posonlyargs + args.args
        if param not in params and param not in args.kwonlyargs or self.bound[function.name] != 1:
            return None
        calls = [n for n in self.nodes if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == function.name]
        defaults = {p.arg: d for p, d in zip(reversed(params), reversed(args.defaults))} | {
            a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None}
        if not self.loads[function.name] and param.arg in defaults and not _grader_passes(function, param):
            return self._values(defaults[param.arg], up, seen)  # only the grader calls it, and leaves it out
        if not calls or len(calls) != len(self.loads[function.name]):
            return None
        found = set()
        for call in calls:
            if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
                return None
            position = next((i for i, p in enumerate(params) if p is param), None)
            by_name = [k.value for k in call.keywords if k.arg == param.arg]
            given = (call.args[position] if position is not None and position < len(call.args) else
                     by_name[0] if by_name else defaults.get(param.arg))
            values = None if given is None else self._values(given, up, seen)
            if values is None:
                return None
            found |= values
        return found


@functools.lru_cache(maxsize=1)
def _contract():
    """{function name: its parameters} for every function an answer cell of the release defines (what the grader
    calls, by position or by name)."""
    import nbformat

    from autograder.course import ASSIGNMENT, RELEASE_DIR

    out = {}
    for path in sorted((RELEASE_DIR / ASSIGNMENT).glob("*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("solution"):
                for node in ast.walk(ast.parse(cell.source)):
                    if isinstance(node, ast.FunctionDef):
                        args = node.args
                        out[node.name] = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]
    return out


def _grader_passes(function, param):
    """Whether the grader may pass `param` of a top-level answer function: a parameter at a position of the release's
    signature, or of one of its names (its value is then the grader's data, or what the student's own code returned)."""
    if function.name not in _contract():
        return not _contract()  # no release to read: any parameter may be passed
    given = _contract()[function.name]
    positional = function.args.posonlyargs + function.args.args
    return param.arg in given or any(p is param for p in positional[:len(given)])


class _Parents(collections.ChainMap):
    """A node's parent, `up(node)`, from the first of the trees' maps (`{id(child): parent}`) that holds it."""

    def __call__(self, node):
        return self.get(id(node))


def _same_name(node, up):
    """Whether a name is bound by `X = X`, which leaves it as it was."""
    statement = up(node)
    return isinstance(statement, ast.Assign) and len(statement.targets) == 1 and statement.targets[0] is node and (
        isinstance(statement.value, ast.Name) and statement.value.id == node.id)


def _mutable(value):
    return isinstance(value, (_List, _Mapping)) or isinstance(value, tuple) and any(map(_mutable, value))


def _select(name, target, values):
    """The values `name` takes when `target` (a name, or a tuple of targets holding it) is bound to each of `values`."""
    if target is name:
        return set(values)
    k = next(i for i, e in enumerate(target.elts) if any(n is name for n in ast.walk(e)))
    if any(isinstance(e, ast.Starred) for e in target.elts):
        return None
    parts = [v[k] for v in values if isinstance(v, tuple) and not isinstance(v, _Mapping) and len(v) == len(target.elts)]
    if not parts or len(parts) != len(values) or any(p is UNKNOWN for p in parts):
        return None
    return _select(name, target.elts[k], parts)


def _bound_before(name, cls, up):
    """Whether a class body surely binds `name` (_sure) in a statement before the one that reads it."""
    statement = name
    while statement is not None and up(statement) is not cls:
        statement = up(statement)
    body = [id(b) for b in cls.body]
    k = body.index(id(statement)) if id(statement) in body else 0
    return any(name.id in _sure(b) for b in cls.body[:k])


def _scope_of(node, up):
    """The nearest function, lambda, class body or comprehension whose own code holds `node` (a decorator, a base,
    a parameter's default or annotation and a comprehension's first iterable run outside), or None for the
    notebook's namespace."""
    grandchild, child, parent = None, node, up(node)
    outside_next = False
    while parent is not None and not isinstance(parent, ast.Module):
        outside = [*getattr(parent, "decorator_list", ()), *getattr(parent, "bases", ()), *getattr(parent, "keywords", ())]
        first = isinstance(parent, _COMPREHENSIONS) and child is parent.generators[0] and grandchild is child.iter
        if isinstance(parent, ast.arguments) and any(child is d for d in (*parent.defaults, *parent.kw_defaults)) or (
                isinstance(parent, ast.arg) and child is parent.annotation):
            outside_next = True  # evaluated where the def stands
        elif isinstance(parent, _SCOPES) and not first and not any(child is o for o in outside) and not (
                outside_next or child is getattr(parent, "returns", None)):
            return parent
        elif isinstance(parent, _SCOPES):
            outside_next = False
        grandchild, child, parent = child, parent, up(parent)
    return None


def _scope_locals(scope):
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        return local_names(scope)
    if isinstance(scope, _COMPREHENSIONS):
        return {t.id for g in scope.generators for t in ast.walk(g.target) if isinstance(t, ast.Name)}
    return {b for n in _scope_walk(scope) for b in _binds(n)}


def _outside(node):
    """The parts of a def, lambda or class statement that run where it stands."""
    args = getattr(node, "args", None)
    params = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg] if args else []
    return [n for n in (*getattr(node, "decorator_list", ()), *getattr(node, "bases", ()), *getattr(node, "keywords", ()),
                        *(args.defaults if args else ()), *(d for d in (args.kw_defaults if args else ()) if d is not None),
                        *(p.annotation for p in params if p is not None and p.annotation is not None),
                        getattr(node, "returns", None)) if n is not None]


def _scope_walk(root):
    """The nodes of a scope's own code (a function's parameters among them), and the nested functions and classes
    themselves (their names bind here), not what runs in them; a walrus in a nested comprehension binds here."""
    todo = collections.deque(ast.iter_child_nodes(root))
    while todo:
        node = todo.popleft()
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            todo += _outside(node)  # its decorators, defaults, annotations and bases run here
            continue
        if isinstance(node, _COMPREHENSIONS):
            todo += [n for n in ast.walk(node) if isinstance(n, ast.NamedExpr)]
            continue
        todo += ast.iter_child_nodes(node)


def _binds(node):
    """The names one node binds, by any of Python's forms (assignment, del, parameter, def, class, import, except,
    match capture, global and nonlocal declarations)."""
    if isinstance(node, ast.Name):
        return [node.id] if not isinstance(node.ctx, ast.Load) else []
    if isinstance(node, ast.arg):
        return [node.arg]
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, ast.alias):
        return [(node.asname or node.name).split(".")[0]]
    if isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)):
        return [node.name] if node.name else []
    if isinstance(node, ast.MatchMapping):
        return [node.rest] if node.rest else []
    if isinstance(node, (ast.Global, ast.Nonlocal)):
        return list(node.names)
    return []


def _shell(node, shells):
    """Whether an expression is the kernel's shell: `get_ipython()` (`IPython.get_ipython()`, a getter under another
    name), `InteractiveShell.instance()`, a name bound to it."""
    if isinstance(node, ast.Call) and not node.args:
        return _called(node) in shells or _called(node) == "instance" and (
            _root(node.func) in shells or _spelled(node.func.value) == "InteractiveShell")
    return isinstance(node, ast.Name) and node.id in shells and node.id != "get_ipython"


def import_paths(trees):
    """((name, dotted path), ...) for each name every binding of which is an import or an alias of a chain of
    attributes (`import torch.nn.functional as F`, `from torch import nn`, `G = F`, `init = nn.init`): what the
    name holds whatever runs. A name bound any other way too holds what the check cannot tell."""
    paths, aliases, stores = collections.defaultdict(set), [], collections.Counter()
    for node in (n for tree in trees for n in ast.walk(tree)):
        if isinstance(node, ast.Import):
            for a in node.names:
                paths[a.asname or a.name.split(".")[0]].add(a.name if a.asname else a.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in (a for a in node.names if a.name != "*"):
                paths[a.asname or a.name].add(f"{node.module}.{a.name}")
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) and (
                isinstance(_chain_root(node.value), ast.Name)):
            aliases.append((node.targets[0].id, node.value))
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load) or isinstance(node, ast.arg):
            stores[getattr(node, "id", None) or node.arg] += 1
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            stores[node.name] += 1
    for _ in range(len(aliases) + 1):  # until nothing changes
        size = sum(map(len, paths.values()))
        for name, value in aliases:
            paths[name].add(_path(value, paths))  # None: an alias of what the check cannot tell
        if sum(map(len, paths.values())) == size:
            break
    counts = collections.Counter(name for name, _ in aliases)
    return tuple(sorted((name, next(iter(p))) for name, p in paths.items()
                        if len(p) == 1 and None not in p and stores[name] <= counts[name]))


def _chain_root(node):
    while isinstance(node, ast.Attribute):
        node = node.value
    return node


def _path(node, paths):
    """The dotted path a chain of attributes spells from a name of `paths` (a dict of sets), or None."""
    chain = []
    while isinstance(node, ast.Attribute):
        chain.append(node.attr)
        node = node.value
    held = paths.get(node.id, ()) if isinstance(node, ast.Name) else ()
    return ".".join([next(iter(held)), *reversed(chain)]) if len(held) == 1 and None not in held else None


def _resolve(node, known, local=frozenset()):
    """The object a chain of attributes from an imported name holds in the grader (the grading kernel runs the same
    packages), or UNKNOWN: a name local to a function, bound otherwise too, or of a module not loaded here (no module
    a student names is imported here: torch, and what it loads, only)."""
    if _root(node) in local:
        return UNKNOWN
    path = _path(node, {name: {p} for name, p in known.paths})  # one path a name, at most (import_paths)
    return UNKNOWN if path is None else _loaded(tuple(path.split(".")))


@functools.lru_cache(maxsize=256)
def _loaded(path):
    try:
        import torch  # noqa: F401
    except ImportError:
        return UNKNOWN
    value = sys.modules.get(path[0], UNKNOWN)
    for k in range(1, len(path)):
        value = sys.modules.get(".".join(path[:k + 1])) or getattr(value, path[k], UNKNOWN)
        if value is UNKNOWN:
            return UNKNOWN
    return value


def _reflectors():
    import builtins
    import importlib
    import inspect
    import operator
    import pkgutil

    return [getattr(builtins, n) for n in ("getattr", "setattr", "delattr", "vars", "exec", "eval", "compile",
                                           "__import__", "globals", "locals")] + [
        importlib.import_module, operator.attrgetter, operator.methodcaller, inspect.getattr_static,
        inspect.getmembers, pkgutil.resolve_name, sys._getframe]


_HELD = {}  # id -> (object, whether it holds the machinery); the object is kept so that its id stays its own
# names every object of a kind has, not a sign that it holds the machinery: Tensor's own handlers (they run with the
# modes on), a builtin's `__self__` (counted where a cell reads it)
BASE_HANDLERS = frozenset({"__torch_function__", "__torch_dispatch__", "__self__"})


def _text_in(value, names):
    """Whether a folded value is one of these names (a folded value may be any constant: `getattr(m, [0])`)."""
    return isinstance(value, str) and value in names


def holds_machinery(value):
    """Whether an object holds, under some name, the checking machinery or a way to reach anything: a name of it
    (MACHINERY_NAMES: `torch.DisableTorchFunction`, `sys._getframe`), or one of the functions that reach
    attributes, modules or code by a name given as data (`builtins.getattr`, `importlib.import_module`).
    A name computed at run time on an object that holds none of these reaches one of its functions, classes or
    constants, or a module, whose further reach is read like any other."""
    if id(value) not in _HELD:
        try:
            names = dir(value)
            spaces = [vars(value)] if isinstance(value, types.ModuleType) else [
                vars(k) for k in getattr(value, "__mro__", ()) if hasattr(k, "__dict__")]
        except Exception:
            names, spaces = ["_getframe"], []  # what cannot be listed may hold anything
        if hasattr(type(value), "__getattr__"):
            names = ["_getframe"]  # attributes made on demand (`torch.ops.aten`): dir() does not list them
        reflectors = _reflectors()
        _HELD[id(value)] = (value, any(_machinery_name(n) and n not in BASE_HANDLERS for n in names) or any(
            any(v is r for r in reflectors) for space in spaces for v in list(space.values())))
    return _HELD[id(value)][1]


def module_bindings(trees, paths=()):
    """Names that hold an imported object or one reached from it, over the given cells: every name an import
    binds, the kernel's roots (KERNEL_ROOTS), and any name bound to an expression that may be one of these
    (_reaches: `d = IPython.display`, `ip = get_ipython()`, `for m in (IPython.display,)`, `with ... as m`,
    `_lib = [torch][0]`)."""
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
        known = Known(frozenset(bound), paths)
        more = {t.id for targets, value in links if _reaches(value, known)
                for target in targets for t in ast.walk(target) if isinstance(t, ast.Name)}
        if more <= bound:
            return bound
        bound |= more


def _reaches(node, known):
    """Whether an expression may be an object reached from a name of `known.modules`: a chain from one (_root), a
    display, conditional or `or` that holds one, a subscript of these (`[torch][0]`), or a call the check cannot
    follow handed a module whole, or a method of what holds one (`(lambda m: m)(torch)`, `next(iter([torch]))`,
    `{"m": torch}.values()`): what it returns may be that module."""
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_reaches(e, known) for e in node.elts)
    if isinstance(node, ast.Dict):
        return any(_reaches(e, known) for e in node.values)
    if isinstance(node, ast.IfExp):
        return _reaches(node.body, known) or _reaches(node.orelse, known)
    if isinstance(node, ast.BoolOp):
        return any(_reaches(e, known) for e in node.values)
    if isinstance(node, (ast.NamedExpr, ast.Starred, ast.Await)):
        return _reaches(node.value, known)
    if isinstance(node, ast.Subscript) and _reaches(node.value, known):
        return True
    if isinstance(node, ast.Call) and _root(node) is None and _root(node.func) not in known.modules:
        return any(_whole(a, known) for a in [*node.args, *(k.value for k in node.keywords)]) or (
            isinstance(node.func, ast.Attribute) and _whole(node.func.value, known))  # `{"m": torch}.values()`
    return _root(node) in known.modules


def _whole(node, known):
    """Whether an argument may be a module itself (not `torch.float64`)."""
    if isinstance(node, (ast.Name, ast.Attribute)):
        if _root(node) not in known.modules:
            return False
        value = _resolve(node, known)
        return value is UNKNOWN or isinstance(value, types.ModuleType)
    return _reaches(node, known)


def _called(node):
    return node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")


def _constant(value):
    """Whether a folded value is a plain constant: None, a bool, a number, a string, bytes, or a tuple of them."""
    if isinstance(value, tuple):
        return all(map(_constant, value))
    return value is None or isinstance(value, (bool, int, float, complex, str, bytes))


def _configures(node, target):
    """Whether an assignment to `target` (an attribute) only sets public configuration: a constant (folded()) into
    an attribute spelled from its root by public names (`torch.backends.cudnn.deterministic = True`). A constant
    carries no code, and torch's private switches (`torch._C…`, `…._is_fx_tracing_flag`) stay out, as does the
    interpreter's own state (`sys.path = (…,)` puts a folder of written modules on the import path)."""
    value = getattr(node, "value", None)
    if value is None or not _constant(folded(value)):
        return False
    while isinstance(target, ast.Attribute):
        if target.attr.startswith("_"):
            return False
        target = target.value
    return isinstance(target, ast.Name) and target.id not in ("sys", "builtins")


def _reach(node):
    """(object, name) of a call that reads an attribute by name: `getattr(o, n)`, `o.__getattribute__(n)`,
    `type(o).__getattribute__(o, n)`, `inspect.getattr_static(o, n)`; None for any other call."""
    name = _called(node)
    if name not in _ATTRIBUTES:
        return None
    if name.startswith("__") and len(node.args) == 1 and isinstance(node.func, ast.Attribute):
        return node.func.value, node.args[0]
    return (node.args[0], node.args[1]) if len(node.args) > 1 else None


def _reflection(node, local, known):
    """Whether a name or attribute is one of REFLECTION: a builtin no local name of the student's hides; a method of
    a module (`importlib.import_module`, `builtins.exec`: torch.compile is no exec) or a dunder (`object.__getattribute__`)."""
    if isinstance(node, ast.Name):
        return node.id in REFLECTION and node.id not in local
    if node.attr not in REFLECTION:
        return False
    if node.attr in _CODE:
        return _root(node) in ("builtins", "__builtins__")
    return node.attr.startswith("__") or _reaches(node.value, known)


def _attribute_read(node):
    """(object, name) where a node reads an attribute by a name the check can read: `o.name`, `getattr(o, "na" + "me")`
    and the like (_reach), `vars(o)["name"]`, `o.__dict__["name"]`; (None, None) for any other node."""
    if isinstance(node, ast.Attribute):
        return node.value, node.attr
    reach = _reach(node) if isinstance(node, ast.Call) else None
    if reach is None and isinstance(node, ast.Subscript):
        space = node.value
        reach = (space.value if isinstance(space, ast.Attribute) and space.attr == "__dict__" else
                 space.args[0] if isinstance(space, ast.Call) and _called(space) == "vars" and space.args else None,
                 node.slice)
    name = folded(reach[1]) if reach and reach[0] is not None else None
    return (reach[0], name) if isinstance(name, str) else (None, None)


def _computed(node):
    return folded(node) is UNKNOWN


def hidden_uses(tree, known):
    """[(line, what)] for code whose reach the check cannot read, or that changes code it did not write:
    - an import, code or attribute whose name or text is computed at run time: `importlib.import_module(name)`,
      `exec(text)`, `getattr(F, name)` or `vars(F)[name]` (F reached from an import); what folds to a constant
      (folded(): `"_get" + "frame"`) is read as that constant instead (machinery_uses reads every string);
    - the functions that do so (REFLECTION) used as a value (`g = getattr`, `map(getattr, …)`), where a local name
      of the student's does not hide them, or reached by name (`getattr(builtins, "exec")`); a module that loads
      code or imports names given as data (CODE_LOADERS); a module's whole namespace read (`vars(sys).items()`,
      `inspect.getmembers(sys)`);
    - an assignment to (or deletion of) an attribute of an imported object or of one reached from it
      (`IPython.display.display = …`, `setattr(mod, …)`, `vars(mod)[…] = …`), except public configuration
      (_configures: `torch.backends.cudnn.deterministic = True`).
    An honest answer does none of these. `known`: known_of() the cells that run."""
    found, streams = [], {name: {path} for name, path in known.paths}
    calls = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    parents = {id(c): n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}
    keyed = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Subscript) and not _computed(n.slice)
             and folded(n.slice) not in REFLECTION}
    for node, local, _ in (found_ for statement in tree.body for found_ in _scoped(statement)):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Call):
            name, reach = _called(node), _reach(node)
            code = name in _CODE and (isinstance(node.func, ast.Name) or _root(node.func) in ("builtins", "__builtins__"))
            first = folded(node.args[0]) if node.args else UNKNOWN
            if (name in _IMPORTS or code or name in _NAMED_LATER) and first is UNKNOWN and not (
                    name in _NAMED_LATER and node.args and _plain_names(node.args[0], known, parents)):
                found.append((line, f"{name}(<运行时算出的名字或代码>)"))
            elif name in _IMPORTS and isinstance(first, str) and (first.split(".")[0] in CODE_LOADERS + KERNEL_PACKAGES or (
                    first and not installed(first.split(".")[0]) and not _optional(node, parents))):
                found.append((line, f"{name}({_module_name(first)})"))
            elif reach and _computed(reach[1]) and (name != "hasattr" or _reaches(reach[0], known)) and not _blind_reach_ok(
                    node, reach[0], known, local, parents):
                what = "<模块>" if _reaches(reach[0], known) else "<检查认不出的对象>"
                found.append((line, f"{name}({what}, <运行时算出的名字>)"))
            elif reach and name != "hasattr" and _text_in(folded(reach[1]), REFLECTION) or name in _NAMED_LATER and _text_in(
                        first, REFLECTION):
                found.append((line, f"{name}(…, {folded(reach[1]) if reach else first!r})"))
            elif name in _MEMBERS and node.args and _reaches(node.args[0], known):
                found.append((line, f"{name}(<模块>)"))
            elif name in _MUTATORS and ((node.args and _reaches(node.args[0], known)) or (
                    isinstance(node.func, ast.Attribute) and name.startswith("__") and _reaches(node.func.value, known)
                    and not isinstance(_resolve(node.func.value, known, local), type))) and not (
                    name == "setattr" and len(node.args) == 3 and isinstance(folded(node.args[1]), str)
                    and not folded(node.args[1]).startswith("_") and _constant(folded(node.args[2]))):
                found.append((line, f"{name}(<模块或其中的对象>, …)"))
        elif isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Load) and id(node) not in calls:
            if _reflection(node, local, known) and not _handed_objects(node, known, parents):
                found.append((line, f"把 `{_plain(getattr(node, 'id', None) or node.attr)}` 当作值使用"))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            loaded = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            found += [(line, f"import {_plain(m)}") for m in loaded if m.split(".")[0] in CODE_LOADERS + KERNEL_PACKAGES]
            found += [(line, f"import {_plain(m)}（评分环境里没有这个模块，检查读不到它的代码）") for m in loaded
                      if m and not getattr(node, "level", 0) and not installed(m.split(".")[0]) and not _optional(node, parents)]
            found += [(line, f"import {a.name} as {_plain(a.asname)}") for a in node.names  # an alias of REFLECTION
                      if isinstance(node, ast.ImportFrom) and a.name in REFLECTION and a.asname not in (None, a.name)]
        owner, attribute = _attribute_read(node)
        if owner is not None and _shell(owner, known.shells) and attribute not in SHELL_API:
            found.append((line, f"get_ipython().{_plain(attribute)}（内核的内部对象）"))
        elif owner is not None and attribute not in THREAD_API and _thread(owner, known.threads, known.paths):
            found.append((line, f"线程对象的 .{_plain(attribute)}（内核自己的线程可能在其中）"))
        elif owner is not None and attribute.startswith("_") and _path(owner, streams) == "threading":
            found.append((line, f"threading.{_plain(attribute)}（threading 的内部对象）"))
        elif owner is not None and not isinstance(node, ast.Attribute) and f"{_path(owner, streams)}.{attribute}" in THREAD_GETTERS:
            found.append((line, f"threading.{_plain(attribute)} 按名字取出"))  # `getattr(threading, "enumerate")`
        elif owner is not None and attribute not in STREAM_API and _path(owner, streams) in STREAMS:
            found.append((line, f"{_path(owner, streams)}.{_plain(attribute)}（内核输出流的内部对象）"))
        if isinstance(getattr(node, "ctx", ast.Load()), ast.Load) and _thread(node, known.threads, known.paths) and not _thread_read(
                node, parents) or (
                _path(node, streams) in THREAD_GETTERS and id(node) not in calls):
            found.append((line, "线程对象交给了检查跟不过去的地方（只能就地取名字、遍历、比较）"))
        if _namespace(node, known) and id(node) not in keyed and not isinstance(getattr(node, "ctx", None), ast.Store):
            found.append((line, f"读取 `{_plain(_root(node))}` 的命名空间（<运行时算出的名字>）"))
        elif _blind_namespace(node, known, local, parents):
            found.append((line, "读取<检查认不出的对象>的命名空间"))
        targets = (node.targets if isinstance(node, (ast.Assign, ast.Delete)) else
                   [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else [])
        for target in (t for top in targets for t in ast.walk(top)):
            if (isinstance(target, ast.Attribute) and isinstance(target.ctx, (ast.Store, ast.Del))
                    and _reaches(target.value, known) and not _configures(node, target)):
                found.append((line, f"给 `{_plain(_root(target))}` 里的对象赋值（{_plain(target.attr)}）"))
            elif isinstance(target, ast.Subscript) and isinstance(target.ctx, (ast.Store, ast.Del)) and _namespace(target.value, known):
                found.append((line, f"改写 `{_plain(_root(target))}` 的命名空间"))
    return found


@functools.lru_cache(maxsize=512)
def installed(top):
    """Whether the grading kernel finds module `top` before any cell runs: built into Python, or on the library path
    (the standard library, the installed packages: the course's own modules among them). Its working folder holds
    only the release's files, and no folder of the student's is on its path: any other module a cell imports is one
    it wrote at run time, code the check cannot read. The library path is this interpreter's (the folders of
    sys.path inside its prefixes, as the sandbox shows them): never a folder a grading process added, such as the
    working folder or the course's, so every entry point reads the same."""
    if top in sys.builtin_module_names or importlib.machinery.FrozenImporter.find_spec(top) is not None:
        return True
    prefixes = {os.path.join(os.path.abspath(p), "") for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)}
    paths = [p for p in sys.path if os.path.isabs(p) and os.path.join(p, "").startswith(tuple(prefixes))]
    return importlib.machinery.PathFinder.find_spec(top, paths) is not None


_IMPORT_FAILURES = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}


def _optional(node, parents):
    """Whether an import sits where its failure is taken: in a `try` whose handler takes it (`except ImportError`),
    a `with contextlib.suppress(ImportError)`, or under an `if` that asks `importlib.util.find_spec` first: an
    optional package the grading environment lacks (`scipy`), with a fallback."""
    while id(node) in parents:
        node, child = parents[id(node)], node
        if isinstance(node, ast.Try) and child in node.body:
            caught = [h.type for h in node.handlers]
            names = {_spelled(e) for t in caught if t is not None for e in (t.elts if isinstance(t, ast.Tuple) else [t])}
            if None in caught or names & _IMPORT_FAILURES:
                return True
        if isinstance(node, ast.With) and child in node.body and any(
                isinstance(i.context_expr, ast.Call) and _spelled(i.context_expr.func) == "suppress"
                and {_spelled(a) for a in i.context_expr.args} & _IMPORT_FAILURES for i in node.items):
            return True
        if isinstance(node, ast.If) and child in (*node.body, *node.orelse) and _asks_find_spec(node.test, node, parents):
            return True
    return False


def _asks_find_spec(test, node, parents):
    """Whether an `if` test calls `importlib.util.find_spec`, or reads a name its cell binds to such a call
    (`HAVE_X = find_spec("x") is not None`)."""
    while id(node) in parents:
        node = parents[id(node)]
    asks = {t.id for n in ast.walk(node) if isinstance(n, ast.Assign) and _calls_find_spec(n.value)
            for t in n.targets if isinstance(t, ast.Name)}
    return _calls_find_spec(test) or any(isinstance(n, ast.Name) and n.id in asks for n in ast.walk(test))


def _calls_find_spec(node):
    return any(isinstance(n, ast.Call) and _spelled(n.func) == "find_spec" for n in ast.walk(node))


def _plain_names(node, known, parents):
    """The constant strings a name computed at run time holds (Strings) when none of them names the machinery or
    reflection, dotted parts included (`attrgetter(f"W_{c}")`); else None."""
    held = known.strings.of(node, parents) if known.strings else None
    return held if held and _harmless(held) else None


def _harmless(names):
    return all(not _machinery_name(p) and p not in REFLECTION | KERNEL_ROOTS | {"modules"} for v in names for p in v.split("."))


def _blind_reach_ok(node, owner, known, local, parents):
    """Whether an attribute read by a name computed at run time (`getattr(nn.init, how)`) reaches nothing of the
    machinery: it reads an object the check resolves (_resolve) that holds none (holds_machinery), or one that does
    (`getattr(torch, dtype_name)`: torch holds DisableTorchFunction) handed straight to a call of the library's
    (`x.to(getattr(torch, name))`, or through a local name: _local_handed_on), which takes it as data. What it
    returns is read like any other object: a further name computed on it reaches what the check cannot resolve."""
    value = _resolve(owner, known, local)
    if value is UNKNOWN and _own_instance(owner, parents, known.loose or frozenset()):
        return True
    if value is UNKNOWN:  # torch in a class attribute, a default, a dict, an argument: what it is, no one can tell
        name = _reach(node)[1]
        held = known.strings.of(name, parents) if known.strings else None
        return _harmless(held) if held else _public_prefix(name, known)
    if not holds_machinery(value) or _handed_to_library(node, known, parents):
        return True
    name = _reach(node)[1]  # `getattr(torch, self.normalizer)`: names held as constants, each of them harmless there
    held = _plain_names(name, known, parents)
    return bool(held) and all(not holds_machinery(getattr(value, v, None)) for v in held)


def _plain(text):
    """A name a cell spells, as a verdict may quote it: a dotted name of at most 60 ASCII characters, else a
    placeholder (the text is the student's: no markup, control characters, backticks or prose reaches a page or the
    class report)."""
    return text if isinstance(text, str) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]{0,59}", text) else "<常量>"


def _module_name(text):
    """A module name a cell spells, quoted for a verdict (_plain)."""
    return repr(text) if _plain(text) == text else "<常量>"


def _own_instance(owner, parents, loose):
    """Whether `owner` is `self` in a method of the student's class (`getattr(self, proj)` in a helper): the first
    parameter of a function defined in a class body, neither static nor a class method, never rebound in it, and
    the method none that may run with another first argument (`loose`, loose_methods). It holds the instance's own
    attributes; machinery stored on it is read where it is stored. A function nested in the method reads the
    method's `self` (`def heads(proj): return getattr(self, proj)(x)` in forward)."""
    if not isinstance(owner, ast.Name):
        return False
    function = owner
    while True:  # the function whose name `owner` is: the nearest that binds it
        function = parents.get(id(function))
        while function is not None and not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            function = parents.get(id(function))
        if function is None:
            return False
        if owner.id in local_names(function):
            break
    if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) or not (
            isinstance(parents.get(id(function)), ast.ClassDef) and function.args.args) or function.name in loose:
        return False
    first = function.args.args[0].arg
    if owner.id != first or any(_spelled(d) in ("staticmethod", "classmethod") for d in function.decorator_list):
        return False
    return not any(first in _binds(n) for n in ast.walk(function) if n is not function.args.args[0])


def _prefix(node, operators=True):
    """The text every value of a string expression starts with (`"W_" + n`, `f"W_{n}"`, `"W_%s" % n`), or "".
    Not through `+` and `%` (`operators` False) where the notebook may define `__radd__` or `__rmod__`: n's own
    method then makes the whole text (red team round 14); an f-string and `.format` keep their literal's text."""
    value = folded(node)
    if isinstance(value, str):
        return value
    if isinstance(node, ast.JoinedStr) and node.values:
        return _prefix(node.values[0]) if isinstance(node.values[0], ast.Constant) else ""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and operators:
        return _prefix(node.left, operators)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and isinstance(folded(node.left), str) and operators:
        return folded(node.left).split("%")[0]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format" and isinstance(
            folded(node.func.value), str):
        return folded(node.func.value).split("{")[0]
    return ""


def _public_prefix(node, known):
    """Whether a name computed at run time starts with a public text (`"W_" + n`) that starts no name of the
    machinery, of the reflection builtins or of the kernel's roots: it reaches none of them, whatever it reads from."""
    prefix = _prefix(node, operators=not (known.strings and known.strings.reflected))
    return prefix[:1].isalpha() and not any(n.startswith(prefix) for n in (
        *MACHINERY_NAMES, *MACHINERY_MODULES, *REFLECTION, *KERNEL_ROOTS, "modules"))


def _handed_to_library(node, known, parents):
    parent = parents.get(id(node))
    parent = parents.get(id(parent)) if isinstance(parent, ast.keyword) else parent
    if isinstance(parent, ast.Assign) and parent.value is node and len(parent.targets) == 1 and isinstance(
            parent.targets[0], ast.Name):
        return _local_handed_on(parent.targets[0].id, parent, known, parents)
    return (isinstance(parent, ast.Call) and parent.func is not node and not isinstance(parent.func, ast.Lambda)
            and _called(parent) not in known.own | REFLECTION)


def _local_handed_on(name, assign, known, parents):
    """Whether a function's local name, bound once to such an object (`dtype = getattr(torch, name)`), is only ever
    handed to calls of the library's (`x.to(dtype)`): no other cell sees a local name."""
    scope = assign
    while id(scope) in parents and not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        scope = parents[id(scope)]
    if not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    nodes = list(ast.walk(scope))
    if any(isinstance(n, (ast.Global, ast.Nonlocal)) and name in n.names for n in nodes):
        return False
    uses = [n for n in nodes if isinstance(n, ast.Name) and n.id == name]
    loads = [n for n in uses if isinstance(n.ctx, ast.Load)]
    return len(uses) == len(loads) + 1 and bool(loads) and all(_handed_to_library(n, known, parents) for n in loads)


def _handed_objects(node, known, parents):
    """Whether a function that reads attributes by name (getattr) is handed to a call with the objects it reads
    (`functools.reduce(getattr, path.split("."), model)`) and none of them may be an imported object: it reaches what
    `getattr(model, name)` reaches."""
    call = parents.get(id(node))
    name = getattr(node, "id", None) or node.attr
    return (name in _ATTRIBUTES and not name.startswith("__") and isinstance(call, ast.Call) and call.func is not node
            and not any(_reaches(a, known) for a in [*call.args, *(k.value for k in call.keywords)] if a is not node))


def _namespace(node, known):
    """Whether an expression is the namespace of an imported object (`mod.__dict__`, `vars(mod)`)."""
    if isinstance(node, ast.Attribute) and node.attr == "__dict__":
        return _reaches(node.value, known)
    return isinstance(node, ast.Call) and _called(node) == "vars" and bool(node.args) and _reaches(node.args[0], known)


def _blind_namespace(node, known, local, parents):
    """Whether an expression reads the namespace of an object the check cannot resolve (`vars(x)`, `x.__dict__`,
    `inspect.getmembers(x)`: x an argument, a class attribute, a default) other than at a key it reads as constant
    strings (`vars(m)["W_q"]`, `vars(m)[p]` for p in PROJ): x may be a module of the machinery's. The student's own
    instance (`vars(self)` in a method) is exempt."""
    if isinstance(node, ast.Attribute) and node.attr == "__dict__" and isinstance(node.ctx, ast.Load):
        owner = node.value
    elif isinstance(node, ast.Call) and _called(node) in _MEMBERS | {"vars"} and node.args:
        owner = node.args[0]
    else:
        return False
    if _reaches(owner, known) or _resolve(owner, known, local) is not UNKNOWN or _own_instance(
            owner, parents, known.loose or frozenset()):
        return False  # an import's namespace: _namespace; a resolved object holds what the grader sees
    parent = parents.get(id(node))
    call = parents.get(id(parent))
    key = (parent.slice if isinstance(parent, ast.Subscript) and parent.value is node else
           call.args[0] if isinstance(parent, ast.Attribute) and parent.attr == "get" and isinstance(call, ast.Call)
           and call.func is parent and call.args else None)
    if key is None or isinstance(node, ast.Call) and _called(node) in _MEMBERS:
        return True
    held = known.strings.of(key, parents) if known.strings else None
    return not held or any(_machinery_name(v) or v in REFLECTION | KERNEL_ROOTS | {"modules"} for v in held)


def _machinery_name(name):
    return name in MACHINERY_MODULES or name in MACHINERY_NAMES or any(part in name for part in MACHINERY_PARTS)


def _machinery_word(name):
    """The grader's word a machinery name matched, as a verdict quotes it (the rest of a name is the student's)."""
    return name if name in MACHINERY_MODULES or name in MACHINERY_NAMES else next(p for p in MACHINERY_PARTS if p in name)


def machinery_uses(source, ipython=True, known=None):
    """[(line, what)] for each reference of a cell to the checking machinery. A string counts when it is
    code that makes one (`"w1d1_student.runner"`, `"import autograder"`, a magic's argument), not when
    prose mentions the grader (a docstring, an error message). Code the check cannot read counts too
    (hidden_uses; `known`: known_of() the cells that run, default this cell alone)."""
    if ipython is None and source.isidentifier():  # a word in a string: a name of the machinery, or nothing
        return [(1, _machinery_word(source))] if _machinery_name(source) else []
    tree = _parsed(source, ipython)
    if tree is None:
        return []
    known = known_of([tree]) if known is None else known | known_of([tree])
    found = [(line, what) for line, text in _strings(tree, known.own) for _, what in machinery_uses(text, ipython=None, known=known)[:1]]
    found += hidden_uses(tree, known)
    systems = {"sys"} | {a.asname for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names if a.name == "sys"}
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    parents = {id(c): n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        found += [(line, _machinery_word(name)) for name in _names(node) if _machinery_name(name)
                  and not (isinstance(node, ast.Name) and name in ATTRIBUTES_ONLY)]
        owner, name = _attribute_read(node)
        if name == "modules":  # `model.modules()` is nn.Module's; on anything else the check cannot resolve, it may be sys's
            plain = _spelled(owner) in systems or _resolve(owner, known) is sys
            if plain or id(node) not in called and _resolve(owner, known) is UNKNOWN and not _own_instance(
                    owner, parents, known.loose or frozenset()):
                found.append((line, "sys.modules" if plain else "<检查认不出的对象>.modules"))
        if isinstance(node, ast.ImportFrom) and node.module == "sys" and any(a.name == "modules" for a in node.names):
            found.append((line, "sys.modules"))
        if isinstance(node, ast.MatchClass) and any(a == "modules" or a.startswith("_") and not a.startswith("__")
                                                     for a in node.kwd_attrs):
            found.append((line, "case …(<内部属性>=…)（类模式按名字读取属性）"))
    return found


def _spelled(node):
    """The last identifier of a name or attribute chain (`os.sys` -> sys), else None."""
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None


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
    targets = list(statement.targets) if isinstance(statement, ast.Assign) else (
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
        self.known = known_of([t for t in trees if t is not None])
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
    what its earlier statements bound (its methods do not); a comprehension's targets are its own."""
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
        elif isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            # its loop variables are its own, with the enclosing functions' names (not a class body's); its first
            # iterable is evaluated where it stands
            first = node.generators[0]
            inner = functions | {t.id for g in node.generators for t in ast.walk(g.target) if isinstance(t, ast.Name)}
            todo.append((first.iter, local, functions, later))
            todo += [(c, inner, functions, later) for c in ast.iter_child_nodes(node) if c is not first]
            todo += [(c, inner, functions, later) for c in ast.iter_child_nodes(first) if c is not first.iter]
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
        for line, text in _strings(statement, context.own):
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


@functools.lru_cache(maxsize=64)
def _machinery_of(source, known):
    """The first three of machinery_uses() of an answer cell, in line order, one per finding: every exercise of a
    notebook reads the same ones."""
    found = []
    for line, what in sorted(machinery_uses(source, known=known), key=lambda f: f[0]):
        if what not in (w for _, w in found):
            found.append((line, what))
    return tuple(found[:3])


def answer_problems(nb, grade_id):
    """Why exercise `grade_id` scores 0 whatever its checks report ([] when nothing is found).
    A reference to the checking machinery in any answer cell costs every exercise of the notebook (a helper
    defined in one cell serves the others); a forbidden API costs the exercise that forbids it in any
    answer cell that runs before the exercise's last check (cells run in notebook order while grading; one
    after the checks cannot reach them: mha_selfcheck's answer compares with SDPA after mha's checks)."""
    run = sorted(grading_cells(nb))  # the cells grading runs, in order: no other cell tells what a name is
    sources = tuple(nb.cells[i].source for i in run)
    token = _SHADOWED.set(_shadowed(sources))
    try:
        return _problems(nb, grade_id, run, sources)
    finally:
        _SHADOWED.reset(token)


@functools.lru_cache(maxsize=16)
def _shadowed(sources):
    """The builtins of _CONVERTERS a notebook may rebind: those any of its cells binds, in any scope; all of them
    where a cell writes names by text (`globals()`, `exec`)."""
    trees = [t for t in (parse_in_namespace(s) for s in sources) if t is not None]
    names = {n.id if isinstance(n, ast.Name) else None for tree in trees for n in ast.walk(tree)}
    if names & {"globals", "locals", "exec", "eval", "__builtins__", "builtins"}:
        return frozenset(_CONVERTERS)
    return frozenset(_CONVERTERS).intersection(b for tree in trees for n in ast.walk(tree) for b in _binds(n))


def _problems(nb, grade_id, run, sources):
    problems = []
    context = _context_of(sources)
    order = {id(nb.cells[i]): k for k, i in enumerate(run)}
    last = _last_check(nb, grade_id)
    for cell in _answer_cells(nb):
        found = _machinery_of(cell.source, context.known)  # any answer cell: its helpers serve every exercise
        if found:
            (line, what), rest = found[0], "".join(f"；第 {n} 行 `{w}`" for n, w in found[1:])
            problems.append(f"{_where(cell, line)}引用了评分检查机制或绕过它的接口（`{what}`{rest}）：答案不能读取、改动或绕过"
                            "检查代码，本题计 0 分")
        if last is not None and _index(nb, cell) > last:
            continue
        for line, api in forbidden_uses(cell.source, grade_id, context, at=context.at(order.get(id(cell))))[:1]:
            problems.append(f"本题要求手写，{_where(cell, line)}直接用到了 `{api}`，本题计 0 分")
    return problems
