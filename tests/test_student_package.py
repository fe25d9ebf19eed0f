"""The student wheel carries no answers and is all a student's Jupyter needs.

The wheel is built fresh (`autograder.student_package.build`) and then
- every file in it is read: no solution cell, no grader function, no hidden case, no grader import;
- every solution notebook runs top to bottom in a kernel that sees ONLY the unpacked wheel plus the
  third-party packages (`import autograder` fails there), as at home: no errors, every public check passes
  and, with the seed-0 cases and the grader's answers (W1D1_CASES), every hidden one; no glyph warnings;
  every figure fits the notebook's width and labels its axes; every explorer's draw function also works as a
  plain call (the solution's locked cells are the release's: tests/test_release.py);
- every buggy variant of the mutation tables fails its public check in that kernel with exactly the
  message the grader gives for the same cases.

Isolation: the kernel runs `python -S` (no site-packages, no .pth files: neither the repo nor the
venv's own copy of the package is on its path) with PYTHONPATH = the unpacked wheel, then a folder
of links to the venv's third-party packages (w1d1 modules left out), and a working folder outside
the repo. A fresh `python -m venv` with pip installs would prove the same but costs minutes and a
network here; the import path the kernel ends up with is asserted, so the shortcut cannot hide a
leak.
"""
import ast
import base64
import json
import re
import struct
import sys
import sysconfig
import zipfile
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from w1d1_student import registry, wire
from w1d1_student.cell_source import check_calls
from w1d1_student.runner import CASES_ENV

from autograder.course import ASSIGNMENT, REPO, SOURCE_DIR, available_notebooks
from autograder.exercises.checks import case_file_data, judge_payload, make_cases
from autograder.student_package import build
from tests.explorer_calls import explorer_calls
from tests.test_mutations import VARIANTS

OWN_MODULES = ("w1d1_student", "w1d1_format", "w1d1_viz", "w1day1_checks")
KERNEL = "w1d1-wheel-only"
HOME_KERNEL = "w1d1-wheel-only-home"  # the same, drawing inline and reading W1D1_CASES as a student's would
MAX_FIGURE_PX = 1000  # 10 inches at the inline backend's 100 dpi: no figure is shrunk in the notebook


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    return build(tmp_path_factory.mktemp("dist"))


@pytest.fixture(scope="module")
def wheel_files(wheel):
    with zipfile.ZipFile(wheel) as zf:
        return {name: zf.read(name).decode("utf-8") for name in zf.namelist()}


def _solution_blocks():
    blocks = []
    for name in available_notebooks():
        nb = nbformat.read(SOURCE_DIR / ASSIGNMENT / f"{name}.ipynb", as_version=4)
        for cell in nb.cells:
            m = re.search(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", cell.source, re.S)
            if m and cell.cell_type == "code":
                blocks.append((cell.metadata["nbgrader"]["grade_id"], m.group(1)))
    return blocks


def _grader_functions():
    names = set()
    for path in (REPO / "autograder" / "exercises").glob("*.py"):
        names |= {n.name for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.FunctionDef)}
    return names - {"__init__", "__getitem__", "__iter__", "__len__"}


def test_wheel_holds_the_package_the_helpers_and_nothing_else(wheel_files):
    tops = {name.split("/")[0] for name in wheel_files if ".dist-info/" not in name}
    assert tops == {"w1d1_student", "w1d1_format.py", "w1d1_viz.py", "w1day1_checks.py"}
    assert wheel_files["w1d1_format.py"] == (REPO / "student" / "w1d1_format.py").read_text(encoding="utf-8")
    assert wheel_files[next(n for n in wheel_files if n.endswith("top_level.txt"))].split() == [
        "w1d1_student", "w1d1_viz", "w1day1_checks", "w1d1_format"]
    for module in ("w1d1_viz.py", "w1day1_checks.py"):  # built from the one source in solutions/w1d1
        assert wheel_files[module] == (SOURCE_DIR / ASSIGNMENT / module).read_text(encoding="utf-8")


def test_no_file_of_the_wheel_holds_an_answer(wheel_files):
    texts = {name: text for name, text in wheel_files.items() if ".dist-info/" not in name}
    squeeze = {name: re.sub(r"\s+", "", text) for name, text in texts.items()}
    for name, text in texts.items():
        assert "BEGIN SOLUTION" not in text and "BEGIN HIDDEN TESTS" not in text, name
    for grade_id, block in _solution_blocks():  # no solution cell, in any file
        body = re.sub(r"\s+", "", block)
        assert len(body) > 20, grade_id
        assert not any(body in text for text in squeeze.values()), grade_id
    grader = _grader_functions()
    assert {"backward_ref", "mha_ref", "central", "leftpad_ref"} <= grader  # the list below is not empty
    for name, text in texts.items():
        if not name.startswith("w1d1_student/") or not name.endswith(".py"):
            continue
        tree = ast.parse(text)
        defined = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        assert not defined & grader, (name, sorted(defined & grader))  # no reference, no case generator
        imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imported |= {(n.module or "").split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level == 0}
        assert not imported & {"autograder", "solutions", "tests", "w1d1_attention"}, name


def test_the_data_are_the_public_cases_only(wheel_files):
    data = wire.decode(json.loads(wheel_files["w1d1_student/data/public_cases.json"]))
    assert sorted(data) == sorted(registry.NOTEBOOK_OF)
    code = "\n".join(text for name, text in wheel_files.items() if name.endswith(".py"))
    for grade_id, cases in data.items():
        public = make_cases(grade_id, 0, hidden=False)
        assert [c["stage"] for c in cases] == [c["stage"] for c in public], grade_id
        assert any(c["_oracle"] for c in cases), grade_id  # the expected values travel with the cases
        only_hidden = {c["stage"] for c in make_cases(grade_id, 0, hidden=True)} - {c["stage"] for c in public}
        assert only_hidden, grade_id
        assert not [s for s in only_hidden if len(s) > 8 and s in code], grade_id  # no hidden case generator


def test_the_classes_in_the_wheel_answer_no_exercise(wheel_files):
    """mha_selfcheck's public cases carry classes under test as source text: each is PyTorch's own attention
    behind the four projections, which exercise `mha` forbids, so none earns a point of `mha` (or of any
    exercise of its notebook) when it stands in for the answer."""
    from tests.test_mutations import verdicts

    data = wire.decode(json.loads(wheel_files["w1d1_student/data/public_cases.json"]))
    sources = {case["source"] for cases in data.values() for case in cases if isinstance(case.get("source"), str)}
    assert len(sources) == 3
    for source in sources:
        assert "multi_head_attention_forward" in source
        for grade_id in ("mha", "split_merge_heads"):
            assert not any(v.passed for v in verdicts(source, grade_id)), grade_id


# ------------------------------------------------------------------ a kernel with only the wheel


@pytest.fixture(scope="module")
def isolated(wheel, tmp_path_factory):
    """(kernel name, working folder): a kernelspec whose python sees only the wheel and third-party packages."""
    root = tmp_path_factory.mktemp("wheel_only")
    unpacked = root / "wheel"
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(unpacked)
    third_party = root / "third_party"
    third_party.mkdir()
    site = Path(sysconfig.get_paths()["purelib"])
    for entry in site.iterdir():
        if entry.name.startswith(OWN_MODULES) or entry.suffix == ".pth":
            continue
        (third_party / entry.name).symlink_to(entry)
    path = f"{unpacked}:{third_party}"
    for name, env in ((KERNEL, {"PYTHONPATH": path, "MPLBACKEND": "agg", "W1D1_CASES": "", "W1D1_GRADING": ""}),
                      (HOME_KERNEL, {"PYTHONPATH": path, "W1D1_GRADING": ""})):
        spec = root / "jupyter" / "kernels" / name
        spec.mkdir(parents=True)
        (spec / "kernel.json").write_text(json.dumps({
            "argv": [sys.executable, "-S", "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": name, "language": "python", "env": env}))
    work = root / "home"
    work.mkdir()
    return KERNEL, work, root / "jupyter", unpacked


def _run(nb, isolated, monkeypatch, kernel=KERNEL, timeout=300):
    _, work, jupyter_path, _ = isolated
    monkeypatch.setenv("JUPYTER_PATH", str(jupyter_path))
    if kernel == KERNEL:
        monkeypatch.delenv("W1D1_CASES", raising=False)
    NotebookClient(nb, timeout=timeout, kernel_name=kernel, resources={"metadata": {"path": str(work)}},
                   allow_errors=True).execute()
    return nb


def test_the_kernel_sees_only_the_wheel(isolated, monkeypatch):
    _, work, _, unpacked = isolated
    probe = """
import sys, json, importlib.util
import w1d1_student, w1d1_viz, w1day1_checks
print(json.dumps({"path": sys.path, "files": [m.__file__ for m in (w1d1_student, w1d1_viz, w1day1_checks)],
                  "autograder": importlib.util.find_spec("autograder") is not None,
                  "tests": importlib.util.find_spec("tests") is not None}))
"""
    nb = _run(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(probe),
                                              nbformat.v4.new_code_cell("import autograder")]), isolated, monkeypatch)
    seen = json.loads(nb.cells[0].outputs[0].text)
    assert not seen["autograder"] and not seen["tests"]
    assert all(f.startswith(str(unpacked)) for f in seen["files"]), seen["files"]
    assert not any(p.startswith(str(REPO)) for p in seen["path"]), seen["path"]
    assert nb.cells[1].outputs[0].ename == "ModuleNotFoundError"


def png_width(data):
    return struct.unpack(">I", base64.b64decode(data)[16:20])[0]


def _with_probes(path):
    """The notebook with every explorer's draw function called plainly after it, between a cell that
    installs tests/figure_probe.py (the repo on the path for that import only) and one that prints what it saw."""
    nb = nbformat.read(path, as_version=4)
    calls = [call for c in nb.cells if c.cell_type == "code" for call in explorer_calls(c.source)]
    nb.cells += [nbformat.v4.new_code_cell(f"{call}\nplt.show()", metadata={"explorer_call": call}) for call in calls]
    probe = nbformat.v4.new_code_cell(f"import sys\nsys.path.insert(0, {str(REPO)!r})\nfrom tests import figure_probe\n"
                                      "figure_probe.install()\nsys.path.pop(0)", metadata={"probe": 1})
    report = nbformat.v4.new_code_cell("import json\nprint(json.dumps(figure_probe.UNLABELLED))", metadata={"probe": 1})
    nb.cells = [probe] + nb.cells + [report]
    return nb


@pytest.fixture(scope="module")
def case_file(tmp_path_factory):
    """The cases of seed 0 with the grader's answers: the hidden checks can be judged in the kernel too."""
    path = tmp_path_factory.mktemp("cases") / "cases.json"
    path.write_text(json.dumps(case_file_data(0, answers=True)), encoding="utf-8")
    return path


@pytest.mark.parametrize("name", available_notebooks())
def test_solution_notebook_runs_clean_on_the_wheel(name, isolated, case_file, monkeypatch):
    monkeypatch.setenv(CASES_ENV, str(case_file))
    monkeypatch.delenv("MPLBACKEND", raising=False)  # the kernel's inline backend draws the figures
    # 60 s a cell (ten times the slowest): the cell after an explorer widget sometimes starts only when the
    # timeout runs out (tools/build_site.py: 311 s in CI with 300 s here)
    nb = _run(_with_probes(SOURCE_DIR / ASSIGNMENT / f"{name}.ipynb"), isolated, monkeypatch, kernel=HOME_KERNEL,
              timeout=60)
    unlabelled = json.loads(nb.cells[-1].outputs[0].text)
    assert unlabelled == [], f"{name}: axes without labels: {unlabelled}"
    public = 0
    for i, cell in enumerate(nb.cells, start=-1):  # i: the index in the notebook, without the probe cell in front
        if cell.cell_type != "code" or "probe" in cell.metadata:
            continue
        for out in cell.outputs:
            assert out.output_type != "error", f"{name} cell {i}: {out.get('ename')}: {out.get('evalue')}"
            text = out.get("text", "")
            assert "Glyph" not in text and "missing from font" not in text, f"cell {i}: {text[:300]}"
            assert not (out.output_type == "stream" and out.get("name") == "stderr" and "Warning" in text), text[:300]
            if "image/png" in out.get("data", {}):
                width = png_width(out.data["image/png"])
                assert width <= MAX_FIGURE_PX, f"{name}: cell {i} draws a figure {width} px wide"
        printed = "".join(o.get("text", "") for o in cell.outputs)
        for grade_id, hidden in check_calls(cell.source):
            kind = "隐藏检查" if hidden else "公开检查"
            assert f"✅ {kind}通过：{grade_id}" in printed, f"{name}: {grade_id} ({kind}) did not pass"
            public += not hidden
    assert public == sum(1 for nb_name in registry.NOTEBOOK_OF.values() if nb_name == name)
    for i, cell in enumerate(nb.cells, start=-1):  # the static default stands in for the widget; the plain call draws too
        if cell.cell_type == "code" and (explorer_calls(cell.source) or "explorer_call" in cell.metadata):
            assert any("image/png" in o.get("data", {}) for o in cell.outputs), f"{name}: cell {i} drew no figure"
    figures = sum("image/png" in o.get("data", {}) for c in nb.cells for o in c.get("outputs", []))
    assert figures >= 1, f"{name}: no figure was drawn"


def _grader_message(grade_id, src):
    """The grader's verdict on the public cases (seed 0), as the student saw it before this package."""
    from w1d1_student.runner import run_cases

    ns = {"__name__": "__main__"}
    exec(compile(src, "<answer cell>", "exec"), ns)
    payload = run_cases(grade_id, ns, make_cases(grade_id, 0, False))
    return judge_payload(wire.loads(wire.dumps(payload)), seed=0)


def test_buggy_variants_get_the_graders_diagnosis_at_home(isolated, monkeypatch):
    cases = []
    for gid, table in sorted(VARIANTS.items()):
        for i, (src, diagnosis) in enumerate(table["buggy"]):
            verdict = _grader_message(gid, src)
            if not verdict.passed:  # some bugs only show on the hidden cases
                # a variant that leaves weights at their random init prints other numbers each run:
                # then the first line (stage and diagnosis) is what must agree
                whole = verdict.message == _grader_message(gid, src).message
                cases.append({"id": f"{gid}-{i}", "gid": gid, "src": src, "want": verdict.message, "diag": diagnosis,
                              "whole": whole})
    assert len(cases) > 100
    driver = f"""
import json
from w1d1_student import CheckFailed, check
got = {{}}
for case in json.loads({json.dumps(json.dumps([{k: c[k] for k in ("id", "gid", "src")} for c in cases]))}):
    ns = {{"__name__": "__main__", "check": check}}
    try:
        exec(case["src"], ns)
        exec(f"check({{case['gid']!r}})", ns)
        got[case["id"]] = None
    except CheckFailed as exc:
        got[case["id"]] = str(exc)
print(json.dumps(got))
"""
    nb = _run(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(driver)]), isolated, monkeypatch)
    out = nb.cells[0].outputs
    assert out and out[-1].output_type == "stream", out
    got = json.loads(out[-1].text)
    for case in cases:
        if case["whole"]:
            assert got[case["id"]] == case["want"], case["id"]
        else:
            assert got[case["id"]].splitlines()[0] == case["want"].splitlines()[0], case["id"]
        if case["diag"] in case["want"]:
            assert case["diag"] in got[case["id"]], case["id"]


def test_the_companion_answers_no_check_at_home(isolated, monkeypatch):
    """While grading, the companion script is a stub (an answer that uses it gets 0); at home its functions raise
    the same error while a check runs, however the answer reached them, and work again after."""
    from tests.test_attacks_sandbox import REACH, WRAPPER

    ways = {"from_import": "from w1day1_checks import softmax as _s\n_W = type('W', (), {'softmax': staticmethod(_s)})",
            **{k: REACH[k] for k in ("resolve_name", "getattr_import", "importlib")}}
    driver = f"""
import json
from w1d1_student import CheckFailed, check
import w1day1_checks
got = {{}}
for way, src in json.loads({json.dumps(json.dumps(ways))}).items():
    ns = {{"__name__": "__main__", "check": check}}
    exec(src + {WRAPPER!r}, ns)
    try:
        exec("check('softmax')", ns)
        got[way] = "passed"
    except CheckFailed as exc:
        got[way] = str(exc)
got["after"] = float(w1day1_checks.softmax(__import__("numpy").zeros((1, 4))).sum())
print(json.dumps(got))
"""
    nb = _run(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(driver)]), isolated, monkeypatch)
    out = nb.cells[0].outputs
    assert out and out[-1].output_type == "stream", out
    got = json.loads(out[-1].text)
    assert got.pop("after") == pytest.approx(1.0)
    assert set(got) == {"from_import", "resolve_name", "getattr_import", "importlib"}
    for way, message in got.items():
        assert "评分时 w1day1_checks 不可用（用到了 `softmax`）" in message, (way, message)
