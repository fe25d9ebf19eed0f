"""One pipeline: the grading command and plain `nbgrader autograde` / `generate_feedback` with the
repo's config (as the hub's instructor runs them, formgrader's buttons included) repair, grade and
render the same submissions the same way: same scores per test cell, same notes, a page with the CSP
for every notebook. The class holds what used to stop nbgrader (a duplicated answer cell, test cells
that lost their flag or were renamed, an SVG attachment) and text that used to stop the run."""
import copy
import html
import json
import os
import re
from urllib.parse import unquote

import nbformat
import pytest

from autograder.chain.nbgrader_chain import nbgrader_config
from autograder.course import ASSIGNMENT, REPO
from autograder.notes import stored_in
from autograder.page_policy import CSP_META
from autograder.report.grade_tables import graded_cells
from tests import grading_class as gc
from tests.entry_points import ENTRY_POINTS, course_config, grade_both

pytestmark = pytest.mark.filterwarnings("ignore::nbformat.warnings.DuplicateCellId")
FULL = sum(p for _, p in graded_cells(gc.NB)[0])
FORGED = "honest6,100,0,0,100,"
NO_NORM = "import numpy as np\n\ndef softmax(x, axis=-1):\n    return np.exp(x - x.max(axis=axis, keepdims=True))\n"
SVG = "<svg xmlns='http://www.w3.org/2000/svg'><script>alert(1)</script></svg>"


def _copy_after_tests(source, cell_id):
    nb = gc.solved()
    c = copy.deepcopy(gc.cell(nb, "softmax"))
    c.id, c.source = cell_id, source
    nb.cells.insert(gc.index(nb, "test_softmax__hidden") + 1, c)
    return nb


def _first_grade_meta(data):
    return next(c for c in data["cells"] if "nbgrader" in c["metadata"])["metadata"]["nbgrader"]


def build(root):
    """{student: expected auto points} for a class of notebook-01 submissions."""
    expected = {}

    def put(student, nb, points):
        (root / student).mkdir(parents=True)
        text = nb if isinstance(nb, str) else nbformat.writes(nb)
        (root / student / f"{gc.NB}.ipynb").write_text(text, encoding="utf-8")
        expected[student] = points

    put("honest", gc.solved(), FULL)
    softmax_points = sum(p for gid, p in graded_cells(gc.NB)[0] if gid.startswith("test_softmax"))
    put("no_norm", gc.solved(softmax=NO_NORM), FULL - softmax_points)  # a named mistake on both paths
    # a copy of the answer cell after its checks: an experiment, or half-written code (issue: 3/7, 2/7)
    put("copy_experiment", _copy_after_tests("def softmax(x, axis=-1):\n    return x  # 试验\n", "copy-a"), FULL)
    put("copy_syntax_error", _copy_after_tests("def softmax(x, axis=-1:\n", "copy-b"), FULL)
    nb = gc.solved()
    gc.cell(nb, "test_softmax").metadata["nbgrader"]["grade"] = False
    put("lost_flag", nb, FULL)
    nb = gc.solved()
    gc.cell(nb, "test_softmax").metadata["nbgrader"]["grade_id"] = "test_mine"
    put("renamed_test", nb, FULL)
    nb = gc.solved()
    for c in nb.cells:
        c.metadata.pop("nbgrader", None)
    put("stripped", nb, FULL)  # Colab: metadata gone, ids intact
    nb = gc.solved()
    for c in nb.cells:
        c.metadata.pop("nbgrader", None)
        c.id = "x" + os.urandom(6).hex()
    put("stripped_no_ids", nb, FULL)  # recognised by signature line and check call
    nb = gc.solved()
    written = next(c for c in nb.cells if c.cell_type == "markdown" and c.metadata.get("nbgrader", {}).get("solution"))
    written.source, written["attachments"] = "见图 ![x](attachment:a.svg)", {"a.svg": {"image/svg+xml": SVG}}
    put("svg_attachment", nb, FULL)
    data = json.loads(nbformat.writes(gc.solved()))
    _first_grade_meta(data)["\ud800k"] = 1
    put("surrogate_key", json.dumps(data), FULL)
    data = json.loads(nbformat.writes(gc.solved()))
    _first_grade_meta(data)["x\n" + FORGED] = 1
    put("newline_key", json.dumps(data), FULL)
    data = json.loads(nbformat.writes(gc.solved()))
    data["nbformat"] = "\ud800"
    put("surrogate_nbformat", json.dumps(data), 0)
    return expected


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pipeline")
    expected = build(tmp / "class")
    return expected, grade_both(tmp / "class", tmp, seed=97)


def test_nbgrader_grades_every_student_and_makes_every_page(graded):
    _, runs = graded
    assert runs["nbgrader"].returncode == 0, runs["nbgrader"].log[-3000:]
    assert runs["command"].returncode == 0, runs["command"].log[-3000:]


@pytest.mark.parametrize("path", ENTRY_POINTS)
def test_each_student_gets_what_home_gave(graded, path):
    expected, runs = graded
    got = {s: runs[path].points(s) for s in expected}
    assert got == expected


def test_both_paths_give_the_same_score_to_every_test_cell(graded):
    _, runs = graded
    assert runs["command"].scores == runs["nbgrader"].scores
    ours = [k for k in runs["command"].scores if k[1] == gc.NB]
    assert len(ours) == len(graded[0]) * len(graded_cells(gc.NB)[0])


@pytest.mark.parametrize("path", ENTRY_POINTS)
def test_every_page_carries_the_csp_and_no_live_markup(graded, path):
    expected, runs = graded
    for student in expected:
        page = runs[path].page(student, gc.NB)
        assert page is not None, (path, student)
        assert CSP_META in page and "<script>alert" not in page, (path, student)


def _chain_notes(run, student):
    nb = nbformat.read(run.root / ("nbgrader" if run.path == "command" else ".") / "autograded" / student / ASSIGNMENT
                       / f"{gc.NB}.ipynb", as_version=4)
    return stored_in(nb)


@pytest.mark.parametrize("student, says", [
    ("copy_experiment", "原来的位置运行"), ("stripped", "单元格 id"), ("stripped_no_ids", "函数签名"),
    ("surrogate_key", "元数据被改坏"), ("newline_key", "元数据被改坏"), ("surrogate_nbformat", "0 分"),
    ("renamed_test", "本笔记本没有的题目")])
def test_both_paths_repair_alike_and_say_so_on_the_page(graded, student, says):
    _, runs = graded
    notes = {path: _chain_notes(runs[path], student) for path in ENTRY_POINTS}
    assert notes["command"] == notes["nbgrader"]
    assert any(says in n for n in notes["command"]), notes["command"]
    for path in ENTRY_POINTS:
        page = runs[path].page(student, gc.NB)
        assert all(n.replace("`", "") in page.replace("<code>", "").replace("</code>", "") or n[:20] in page
                   for n in notes[path] if says in n), (path, student)


def _verdicts(run, student):
    root = run.root / "nbgrader" if run.path == "command" else run.root
    nb = nbformat.read(root / "autograded" / student / ASSIGNMENT / f"{gc.NB}.ipynb", as_version=4)
    return {c.metadata["nbgrader"]["grade_id"]: c.metadata["w1d1"]["verdicts"]
            for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade") and c.cell_type == "code"}


def test_both_paths_store_the_same_verdicts_as_data(graded):
    """The class report reads what nbgrader's chain stored: the same on both paths, mistakes named."""
    expected, runs = graded
    for student in expected:
        assert _verdicts(runs["command"], student) == _verdicts(runs["nbgrader"], student), student
    mine = _verdicts(runs["command"], "no_norm")["test_softmax"]
    assert [r["passed"] for r in mine] == [False] and mine[0]["grade_id"] == "softmax"
    assert [key for key, _ in mine[0]["mistakes"]] == ["no_norm"]
    assert all(r["passed"] for r in _verdicts(runs["command"], "honest")["test_softmax"])


def test_both_paths_give_the_same_class_report(graded, tmp_path):
    """`report --course` over the hub's course folder counts what the grading command's report counts."""
    from autograder.report import class_report

    _, runs = graded
    class_report.for_course(runs["nbgrader"].root, tmp_path)
    for name in ("diagnoses.csv", "exercise_stats.csv", "similarity.csv"):
        assert (tmp_path / name).read_text(encoding="utf-8") == (runs["command"].root / name).read_text(encoding="utf-8"), name
    assert "no_norm" in (tmp_path / "diagnoses.csv").read_text(encoding="utf-8")
    links = [unquote(html.unescape(h)) for h in re.findall(r'href="([^"]+)"', (tmp_path / "report.html").read_text(encoding="utf-8"))]
    assert links and all((tmp_path / link).resolve().is_file() for link in links), links   # feedback pages beside it
    assert any(link.endswith(f"no_norm/{ASSIGNMENT}/{gc.NB}.html") for link in links), links


def test_student_text_forges_no_line_in_the_csv_or_the_log(graded):
    _, runs = graded
    out = runs["command"].root
    for name in ("totals.csv", "grades.csv", "manual_grades.csv"):
        lines = (out / name).read_text(encoding="utf-8").splitlines()
        assert not any(line.startswith(FORGED) for line in lines), name
    assert (out / "totals.csv").read_text(encoding="utf-8").count("\n") == len(graded[0]) + 1
    assert not any(line.startswith(FORGED) for line in runs["command"].log.splitlines())


def test_the_command_runs_the_very_chain_nbgrader_runs(tmp_path):
    """The grading command's nbgrader configuration and the instructor's (deploy/) hold one chain."""
    from traitlets.config.loader import PyFileConfigLoader

    (tmp_path / "nbgrader_config.py").write_text(course_config(tmp_path, tmp_path / "exchange"))
    hub = PyFileConfigLoader("nbgrader_config.py", path=str(tmp_path)).load_config()
    ours = nbgrader_config(tmp_path / "run")
    for section, key in [("Autograde", "exporter_class"), ("Autograde", "sanitize_preprocessors"),
                         ("Autograde", "autograde_preprocessors"), ("GenerateFeedback", "preprocessors"),
                         ("GenerateFeedback", "exporter_class")]:
        assert ours[section][key] == hub[section][key], (section, key)


def test_loading_the_chain_loads_no_step_and_every_step_it_names_exists():
    """nbgrader loads the repo's config for every command: the steps go by name, so generate_assignment and
    generate_feedback start without torch and the exercises; each name is one of our steps."""
    import subprocess
    import sys

    from nbconvert.preprocessors import Preprocessor
    from traitlets.utils.importstring import import_item

    from autograder.chain import nbgrader_chain

    probe = ("import sys, runpy; runpy.run_path('nbgrader_config.py', {'get_config': lambda: __import__('traitlets')"
             ".config.Config()}); print(sorted(m for m in ('torch', 'w1d1_student', 'autograder.exercises') if m in sys.modules))")
    loaded = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "[]", loaded.stdout + loaded.stderr
    names = [nbgrader_chain.SUBMISSION_READER, nbgrader_chain.REPAIR, nbgrader_chain.EXECUTE, nbgrader_chain.JUDGE,
             nbgrader_chain.PAGE, nbgrader_chain.PAGE_OUTPUTS]
    steps = [import_item(name) for name in names]
    assert [s.__name__ for s in steps] == [n.rsplit(".", 1)[1] for n in names]
    assert all(issubclass(s, Preprocessor) for s in (steps[1], steps[2], steps[3], steps[5]))


def test_every_nbgrader_run_draws_its_own_seed(tmp_path):
    """Plain nbgrader draws one seed per run and hands it to the kernels and the verdicts alike."""
    from traitlets.config.loader import PyFileConfigLoader

    (tmp_path / "nbgrader_config.py").write_text(course_config(tmp_path, tmp_path / "exchange"))
    seeds = []
    for _ in range(2):
        cfg = PyFileConfigLoader("nbgrader_config.py", path=str(tmp_path)).load_config()
        assert cfg.SandboxKernelManager.grader_seed == cfg.JudgeProbes.seed
        seeds.append(cfg.JudgeProbes.seed)
    assert seeds[0] != seeds[1]


def _stamped_version(db):
    import sqlite3

    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT version_num FROM alembic_version").fetchall()


def test_both_paths_stamp_the_gradebook_with_nbgrader_s_migration_head(graded):
    """Both read the head in their own process (nbgrader_chain.alembic_head), and it is what `alembic heads` says."""
    import subprocess

    from nbgrader.dbutil import _temp_alembic_ini

    from autograder.chain.nbgrader_chain import alembic_head
    from tests.entry_points import VENV_BIN

    _, runs = graded
    ours = _stamped_version(runs["command"].root / "nbgrader" / "gradebook.db")
    assert ours == _stamped_version(runs["nbgrader"].root / "gradebook.db") == [(alembic_head(),)]
    with _temp_alembic_ini("sqlite:////tmp/gradebook.db") as ini:
        asked = subprocess.run([str(VENV_BIN / "alembic"), "-c", ini, "heads"], capture_output=True, text=True, check=True)
    assert asked.stdout.split()[0] == alembic_head()
