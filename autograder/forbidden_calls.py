"""Static check of the answer cells, run in the grader's process: what no code in the kernel can change.

The kernel reports flags about itself (the torch calls it saw, whether the custom backward ran);
code in the same process could forge them. This check reads the notebook's answer cells here:
a direct use of an API that an exercise forbids, or any reference to the checking machinery (the
student package, the grader, `pkgutil.resolve_name`, `sys.modules`, switching torch's function
modes off), and the exercise gets 0 with a reason. It sees what is written, not what obfuscated
code computes at run time; the run-time detection (w1d1_student/drivers/torch_calls.py) covers the rest.
"""
import ast

from IPython.core.inputtransformer2 import TransformerManager

# grade_id -> {name seen in the source: how the course calls it}
FORBIDDEN_APIS = {
    "mha": {
        "scaled_dot_product_attention": "F.scaled_dot_product_attention",
        "multi_head_attention_forward": "F.multi_head_attention_forward",
        "_native_multi_head_attention": "torch._native_multi_head_attention",
        "MultiheadAttention": "nn.MultiheadAttention",
    },
}
MACHINERY_MODULES = ("w1d1_student", "autograder")
MACHINERY_NAMES = ("resolve_name", "DisableTorchFunction", "DisableTorchFunctionSubclass", "_pop_mode",
                   "_pop_torch_function_stack", "_pop_torch_dispatch_stack", "_disable_current_modes",
                   "_len_torch_function_stack", "_get_current_dispatch_mode_stack")

_transformer = TransformerManager()


def _tree(source):
    try:
        return ast.parse(_transformer.transform_cell(source))
    except (SyntaxError, ValueError):
        return None  # it does not run either: the check finds nothing to grade


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


def machinery_uses(source):
    """[(line, what)] for each reference of a cell to the checking machinery. A string counts when it is
    code that makes one (`"w1d1_student.runner"`, `"import autograder"`, a magic's argument), not when
    prose mentions the grader (a docstring, an error message)."""
    tree = _tree(source)
    found = []
    for node in ast.walk(tree) if tree is not None else ():
        line = getattr(node, "lineno", 0)
        for name in _names(node):
            if name in MACHINERY_MODULES or name in MACHINERY_NAMES:
                found.append((line, name))
        if isinstance(node, ast.Constant) and isinstance(node.value, str):  # shorter than its source: ends
            found += [(line, what) for _, what in machinery_uses(node.value)[:1]]
        if (isinstance(node, ast.Attribute) and node.attr == "modules" and isinstance(node.value, ast.Name)
                and node.value.id == "sys"):
            found.append((line, "sys.modules"))
    return found


def _torch_names(tree):
    """Names a cell binds to torch or one of its parts: by importing (`torch`, `F`, `nn`, …) or by
    assigning something reached from such a name (`G = F`, `fn = torch.nn.functional`)."""
    bound = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            bound |= {(a.asname or a.name).split(".")[0] for a in node.names if a.name.split(".")[0] == "torch"}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "torch":
            bound |= {a.asname or a.name for a in node.names}
    assigns = [n for n in ast.walk(tree) if isinstance(n, ast.Assign)]
    while True:
        more = {t.id for n in assigns if _root(n.value) in bound for t in n.targets if isinstance(t, ast.Name)}
        if more <= bound:
            return bound
        bound |= more


def _root(node):
    """The name an attribute chain starts from; "" when it starts from an expression (a call, …)."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else ""


def _star_from_torch(tree):
    return any(isinstance(n, ast.ImportFrom) and (n.module or "").split(".")[0] == "torch"
               and any(a.name == "*" for a in n.names) for n in ast.walk(tree))


def forbidden_uses(source, grade_id):
    """[(line, api)] for each direct use in a cell of an API that exercise `grade_id` forbids: imported
    from torch, an attribute of a name bound to torch (`F.…`, `torch.nn.…`) or of an expression
    (`__import__("torch").…`), or named in a string. A function or method of the student's own
    (`self.…`, a name they defined) that happens to share the name is not one."""
    apis = FORBIDDEN_APIS.get(grade_id)
    tree = _tree(source) if apis else None
    if tree is None:
        return []
    torch_names, star = _torch_names(tree), _star_from_torch(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "torch":
            names = [a.name for a in node.names]
        elif isinstance(node, ast.Attribute) and (_root(node) in torch_names or _root(node) == ""):
            names = [node.attr]
        elif isinstance(node, ast.Name) and star:
            names = [node.id]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names = [node.value]
        else:
            names = []
        found += [(getattr(node, "lineno", 0), apis[n]) for n in names if n in apis]
    return found


def _answer_cells(nb):
    from nbgrader import utils

    return [c for c in nb.cells if c.cell_type == "code" and utils.is_solution(c)]


def _where(cell, line):
    gid = cell.metadata.get("nbgrader", {}).get("grade_id", "?")
    return f"答案单元格 {gid} 第 {line} 行"


def answer_problems(nb, grade_id):
    """Why exercise `grade_id` scores 0 whatever its checks report ([] when nothing is found).
    A reference to the checking machinery costs the exercise whose answer cell holds it; a forbidden
    API costs the exercise that forbids it in any answer cell of the notebook (every one runs while grading)."""
    problems = []
    for cell in _answer_cells(nb):
        own = cell.metadata.get("nbgrader", {}).get("grade_id") == grade_id
        for line, what in machinery_uses(cell.source)[:1] if own else ():
            problems.append(f"{_where(cell, line)}引用了评分检查机制（`{what}`）：答案不能读取或改动检查代码，本题计 0 分")
        for line, api in forbidden_uses(cell.source, grade_id)[:1]:
            problems.append(f"本题要求手写，{_where(cell, line)}直接用到了 `{api}`，本题计 0 分")
    return problems
