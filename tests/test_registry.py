"""One registry: the exercises of w1d1_student.registry are exactly the test cells of solutions/w1d1/*.ipynb,
and each has its driver, its cases, its answers and its verdict table under its notebook's name."""
import ast
import re
from pathlib import Path

import nbformat
from w1d1_student import registry
from w1d1_student.engine import bug_table

from autograder.course import ASSIGNMENT, SOURCE_DIR, available_notebooks

STUDENT = Path(registry.__file__).resolve().parent


def _test_cells():
    found = {}
    for name in available_notebooks():
        nb = nbformat.read(SOURCE_DIR / ASSIGNMENT / f"{name}.ipynb", as_version=4)
        for cell in nb.cells:
            meta = cell.metadata.get("nbgrader", {})
            gid = meta.get("grade_id", "")
            if cell.cell_type == "code" and meta.get("grade") and gid.startswith("test_") and not gid.endswith("__hidden"):
                found[gid[len("test_"):]] = name
    return found


def test_registry_is_the_notebooks_test_cells():
    assert available_notebooks() and set(registry.NOTEBOOK_OF.values()) == set(available_notebooks())
    assert _test_cells() == registry.NOTEBOOK_OF


def test_every_exercise_has_driver_cases_answers_and_judge():
    from autograder import exercises

    grader = {module.__name__.rsplit(".", 1)[1]: module for module in exercises.NOTEBOOKS}
    for gid in registry.NOTEBOOK_OF:
        topic = registry.topic(gid)
        assert registry.driver(gid).names, gid
        assert callable(registry.verdict_table(gid)), gid
        assert gid in grader[topic].CASES and gid in grader[topic].ANSWERS, gid


def test_each_side_has_one_module_per_notebook_named_after_it():
    """The student module of a notebook declares it (NOTEBOOK) and is named after it, and so is the grader's
    module of the same exercises: one notebook, one module on each side, the same exercises in both."""
    from w1d1_student.registry import MODULES

    from autograder import exercises

    student = {module.__name__.rsplit(".", 1)[1]: module for module in MODULES}
    grader = {module.__name__.rsplit(".", 1)[1]: module for module in exercises.NOTEBOOKS}
    assert sorted(student) == sorted(grader) == ["nb" + name for name in available_notebooks()]
    for topic, module in student.items():
        assert topic == "nb" + module.NOTEBOOK
        assert sorted(module.EXERCISES) == sorted(grader[topic].CASES) == sorted(grader[topic].ANSWERS), topic
    on_disk = sorted(p.stem for p in (STUDENT / "exercises").glob("nb*.py"))
    assert on_disk == sorted(student), "a module under exercises/ that MODULES does not list is never registered"


def _names_in(tree):
    """(patterns of the answer names a verdict table asks for, every string it holds): `known("x")`,
    `known(f"layout_{order}_{tr}")` (a pattern), `answer="x"`, the names that open a `bug_table`'s lines."""
    def pattern(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return re.escape(node.value)
        if isinstance(node, ast.JoinedStr):
            return "".join(re.escape(v.value) if isinstance(v, ast.Constant) else ".+" for v in node.values)
        return None

    asked, strings = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "known" and node.args:
            asked.add(pattern(node.args[0]))
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "bug_table":  # a name opens each line
            names = {re.escape(bug.name) for _, bug in bug_table(node.args[0].value)}
            asked |= names
            strings |= names
        if isinstance(node, ast.Call):
            asked |= {pattern(kw.value) for kw in node.keywords if kw.arg == "answer"}
        if isinstance(node, (ast.Constant, ast.JoinedStr)) and pattern(node):
            strings.add(pattern(node))
    return asked - {None}, strings


def test_every_bug_a_verdict_table_names_is_reproduced_and_every_reproduction_is_named():
    """A misspelt name would name no bug (the answer key treats an unknown name as a bug that does not
    apply); a reproduction no verdict table names is dead code that looks like a check."""
    from autograder import exercises

    for module in exercises.NOTEBOOKS:
        topic = module.__name__.rsplit(".", 1)[1]
        asked, strings = _names_in(ast.parse((STUDENT / "exercises" / f"{topic}.py").read_text(encoding="utf-8")))
        keys = {name for table in module.ANSWERS.values() for name in table}
        assert not [p for p in asked if not any(re.fullmatch(p, k) for k in keys)], (topic, asked)
        unnamed = [k for k in keys - {"ref"} if not any(re.fullmatch(p, k) for p in strings)]
        assert not unnamed, (topic, unnamed)


def test_a_bug_table_reads_one_bug_a_line_in_order():
    rows = bug_table("""
mem_T        A 的形状是 B×h×T×T：要乘 T²，不是 T。
mem_gib      返回的是 GiB，题目要字节数（不要除以 2**30）。
""")
    assert [(message, bug.name) for message, bug in rows] == [
        ("A 的形状是 B×h×T×T：要乘 T²，不是 T。", "mem_T"), ("返回的是 GiB，题目要字节数（不要除以 2**30）。", "mem_gib")]
    assert rows[0][1]({"_oracle": {"mem_T": 5}}) == 5
