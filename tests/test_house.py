"""The shape of the grader's code: imports point one way, the report needs none of the code that runs
a notebook, and no function takes more than a handful of parameters."""
import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "autograder"
MAX_PARAMETERS = 6
# what runs or judges a notebook: the report (`make report`) loads none of it
EXECUTION = ("torch", "zmq", "jupyter_client", "nbconvert", "nbgrader", "w1d1_student", "autograder.kernels.kernel_manager",
             "autograder.kernels.bwrap", "autograder.kernels.kernel_view", "autograder.chain.sandboxed_execute",
             "autograder.chain.verdicts", "autograder.exercises", "autograder.exercises.checks")


def _modules(root=PACKAGE):
    """{dotted name: path} of every module of the package."""
    out = {}
    for path in root.rglob("*.py"):
        parts = path.relative_to(root.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _imported(name, path, modules):
    """The package's modules that module `name` imports, at the top or inside a function."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name in modules}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([node.module] if node.module else []))
            for a in node.names:
                whole = f"{base}.{a.name}"
                found |= {whole} if whole in modules else ({base} if base in modules else set())
    return found - {name}


def _cycle(graph):
    """One import cycle of `graph` as a list of modules, or None."""
    done, path = set(), []

    def visit(node):
        if node in path:
            return path[path.index(node):] + [node]
        if node in done:
            return None
        path.append(node)
        for nxt in sorted(graph[node]):
            if cycle := visit(nxt):
                return cycle
        path.pop()
        done.add(node)
        return None

    return next((c for c in map(visit, sorted(graph)) if c), None)


def test_the_graders_imports_point_one_way():
    modules = _modules()
    graph = {name: _imported(name, path, modules) for name, path in modules.items()}
    assert sum(map(len, graph.values())) > 50  # the reading found the imports
    assert _cycle(graph) is None, " → ".join(_cycle(graph))
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_nbgrader_config_is_an_import_of_the_chain_not_a_file_the_chain_reads():
    """nbgrader_config.py applies autograder/chain/nbgrader_chain.py; nothing of autograder reads the file back."""
    assert "from autograder.chain.nbgrader_chain import configure" in (ROOT / "nbgrader_config.py").read_text()
    readers = [p.name for p in PACKAGE.rglob("*.py") if "PyFileConfigLoader" in p.read_text(encoding="utf-8")]
    assert readers == []


def test_the_report_loads_no_code_that_runs_a_notebook():
    code = ("import sys, autograder.report.class_report, autograder.cli\n"
            f"print(sorted(m for m in sys.modules if m.split('.')[0] in {EXECUTION!r} or m in {EXECUTION!r}"
            " or m.startswith(tuple(e + '.' for e in " + repr(EXECUTION) + "))))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout[:2000]
    # the probe sees what it looks for: the execution step loads all of it
    chain = code.replace("autograder.report.class_report", "autograder.chain.sandboxed_execute")
    loaded = subprocess.run([sys.executable, "-c", chain], cwd=ROOT, capture_output=True, text=True, check=True)
    assert {"torch", "zmq", "autograder.kernels.kernel_manager", "w1d1_student"} <= set(ast.literal_eval(loaded.stdout))


def _parameters(fn):
    args = fn.args
    names = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]
    count = len(names) + (args.vararg is not None) + (args.kwarg is not None)
    return count - (names[:1] in (["self"], ["cls"]))


def test_no_function_of_the_grader_takes_more_than_six_parameters():
    wide = [f"{path.relative_to(ROOT)}:{fn.lineno} {fn.name}() takes {_parameters(fn)}"
            for path in sorted(PACKAGE.rglob("*.py"))
            for fn in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and _parameters(fn) > MAX_PARAMETERS]
    assert wide == [], "\n".join(wide)
    probe = ast.parse("def f(self, a, b, c, d, e, g, *h): pass").body[0]
    assert _parameters(probe) == 7


def test_no_code_of_the_grader_dresses_a_process_up_as_another():
    """Every path starts its kernels alike (kernels/kernel_manager.py): nothing rewrites a process's command line,
    environment or sys.orig_argv to look started otherwise."""
    disguises = ("PR_SET_MM", "prctl", "orig_argv")
    found = [f"{path.relative_to(ROOT)}: {word}" for path in sorted(PACKAGE.rglob("*.py"))
             for word in disguises if word in path.read_text(encoding="utf-8")]
    assert found == []
