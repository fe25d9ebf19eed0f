"""Static check of the answer cells, run in the grader's process: what no code in the kernel can change.

The kernel reports flags about itself (the torch calls it saw, whether the custom backward ran);
code in the same process could forge them. This check reads the notebook's answer cells here:
a direct use of an API that an exercise forbids, or any reference to the checking machinery (the
student package, the grader, `pkgutil.resolve_name`, `sys.modules`, switching torch's function
modes off), and the exercise gets 0 with a reason. It sees what is written, not what obfuscated
code computes at run time; the run-time detection (w1d1_student/torch_calls.py) covers the rest.
"""
import ast
import functools

from w1d1_student.cell_scope import copy_of
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


def machinery_uses(source, ipython=True):
    """[(line, what)] for each reference of a cell to the checking machinery. A string counts when it is
    code that makes one (`"w1d1_student.runner"`, `"import autograder"`, a magic's argument), not when
    prose mentions the grader (a docstring, an error message)."""
    tree = _parsed(source, ipython)
    if tree is None:
        return []
    found = [(line, what) for line, text in _strings(tree) for _, what in machinery_uses(text, ipython=None)[:1]]
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
    """(names bound to torch or a part of it, whether `from torch… import *` occurs) over the given cells:
    imported (`torch`, `F`, `nn`, …) or assigned from such a name (`G = F`)."""
    bound, star, assigns = set(), False, []
    for node in (n for tree in trees for n in ast.walk(tree)):
        if isinstance(node, ast.Import):
            bound |= {(a.asname or a.name).split(".")[0] for a in node.names if _is_torch(a.name)}
        elif isinstance(node, ast.ImportFrom) and _is_torch(node.module):
            bound |= {a.asname or a.name for a in node.names}
            star = star or any(a.name == "*" for a in node.names)
        elif isinstance(node, ast.Assign):
            assigns.append(node)
    while True:
        more = {t.id for n in assigns if _reaches_torch(n.value, bound) for t in n.targets if isinstance(t, ast.Name)}
        if more <= bound:
            return bound, star
        bound |= more


def _reaches_torch(node, bound):
    """Whether an attribute chain starts from torch: a bound name, or an import made on the spot."""
    while isinstance(node, ast.Attribute):
        node = node.value
    if isinstance(node, ast.Name):
        return node.id in bound
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


def notebook_context(trees):
    """What the check needs to know of the whole notebook: names bound to torch (the setup cell's `torch`,
    `nn`, `F` count in every answer cell), whether torch is star-imported, and the student's own names."""
    return (*torch_bindings(trees), own_names(trees))


@functools.lru_cache(maxsize=16)
def _context_of(sources):
    """notebook_context() of a notebook's code cells, by their sources: every exercise of a notebook
    reads the same one (only read, never changed)."""
    return notebook_context([t for t in map(_tree, sources) if t is not None])


def forbidden_uses(source, grade_id, context=None, ipython=True):
    """[(line, api)] for each direct use in a cell of an API that exercise `grade_id` forbids: a torch name
    holding one of its parts (imported from torch, or an attribute or name that is not one the student
    defined: `F.…`, `nn_.…` however `nn_` was bound, `__import__("torch").…`), an identifier written as a
    string, or code held in a string (a `%%time` body). The student's own function of the same name
    (`self.…`, `super().…`, `type(self).…`) is not one unless it is reached from torch.
    `context`: notebook_context() of the notebook (default: this cell's)."""
    apis = FORBIDDEN_APIS.get(grade_id)
    tree = _parsed(source, ipython) if apis else None
    if tree is None:
        return []
    bound, star, own = context if context is not None else notebook_context([tree])
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and _is_torch(node.module):
            names = [node.module] + [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names if _is_torch(a.name)]
        elif isinstance(node, ast.Attribute):
            names = [node.attr] if node.attr not in own or _reaches_torch(node.value, bound) else []
        elif isinstance(node, ast.Name):
            names = [node.id] if node.id not in own or star else []
        else:
            names = []
        found += [(getattr(node, "lineno", 0), api) for api in map(lambda n: _forbidden(n, apis), names) if api]
    for line, text in _strings(tree):
        if text.isidentifier():
            found += [(line, api) for api in [_forbidden(text, apis)] if api]
        else:
            found += [(line, api) for _, api in forbidden_uses(text, grade_id, (bound, star, own), ipython=None)[:1]]
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
    context = _context_of(tuple(c.source for c in nb.cells if c.cell_type == "code"))
    last = _last_check(nb, grade_id)
    for cell in _answer_cells(nb):
        for line, what in machinery_uses(cell.source)[:1]:  # any answer cell: its helpers serve every exercise
            problems.append(f"{_where(cell, line)}引用了评分检查机制或绕过它的接口（`{what}`）：答案不能读取、改动或绕过"
                            "检查代码，本题计 0 分")
        if last is not None and _index(nb, cell) > last:
            continue
        for line, api in forbidden_uses(cell.source, grade_id, context)[:1]:
            problems.append(f"本题要求手写，{_where(cell, line)}直接用到了 `{api}`，本题计 0 分")
    return problems
