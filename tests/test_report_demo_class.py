"""The report's demo class (tools/report_demo_class.py) is what its EXPECTED table says, checked in-process.

Each student's answer cells run here as the kernel would run them (the notebook's course definitions and
the answers above, then the cell), through the public and the hidden check: no grading, no sandbox.
"""
import io
import itertools

import nbformat
import pytest
from w1d1_student import wire
from w1d1_student.exercises import nb02_scaled_dot_product as j02
from w1d1_student.exercises import nb04_multihead as j04
from w1d1_student.registry import NOTEBOOK_OF
from w1d1_student.runner import run_cases

from autograder.exercises.checks import judge_payload, make_cases
from tests.variants import _definitions
from tools import report_demo_class as demo

SEEDS = range(5)
OUTCOMES = ("full", "zero", "unanswered", "mistakes", "named_error", "unrecognised", "public_only")


def _bug_messages():
    """{bug name of the answer key: its diagnosis}, read from the verdict tables."""
    out = {}
    tables = [j04.SPLIT_BUGS, j04.MERGE_BUGS, j04.MHA_DIAGNOSES, j02.FORWARD_BUGS, j02.BACKWARD_BUGS, j02.INIT_BUGS]
    for message, fn in itertools.chain(*tables):
        name = getattr(fn, "name", None) or fn.__closure__[0].cell_contents  # known(name): an object or a closure
        out.setdefault(name, message)
    for message, name in j02.NUMGRAD_BUGS:
        out.setdefault(name, message)
    return out


BUG_MESSAGES = _bug_messages()


@pytest.fixture(scope="module")
def notebooks():
    every = demo.answers()
    return {s: {nb: demo.notebook_of(s, nb, filled) for nb, filled in every[s].items()} for s in demo.STUDENTS}


def program(nb, grade_id):
    """What the kernel has run when `grade_id`'s check runs: the course cells' definitions and every answer
    cell up to `grade_id`'s."""
    parts = []
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type != "code":
            continue
        if meta.get("solution"):
            parts.append(cell.source)
            if meta["grade_id"] == grade_id:
                return "\n\n".join(parts) + "\n"
        elif not meta.get("grade"):
            parts.append(_definitions(cell.source))
    raise KeyError(grade_id)


def verdict(src, grade_id, hidden, seed=0):
    ns = {"__name__": "__main__"}
    exec(compile(src, "<notebook>", "exec"), ns)
    payload = run_cases(grade_id, ns, make_cases(grade_id, seed, hidden), hidden=hidden)
    return judge_payload(wire.loads(wire.dumps(payload)), seed=seed)


def first_failure(src, grade_id):
    for hidden in (False, True):
        v = verdict(src, grade_id, hidden)
        if not v.passed:
            return v
    return None


def _cases():
    out = []
    for gid, table in demo.EXPECTED.items():
        for kind in OUTCOMES:
            entry = table[kind]
            items = entry.items() if isinstance(entry, dict) else [(None, entry)]
            for detail, ids in items:
                out += [pytest.param(s, gid, kind, detail, id=f"{gid}-{s}-{kind}") for s in ids]
    return out


@pytest.mark.parametrize("student,grade_id,kind,detail", _cases())
def test_outcome(notebooks, student, grade_id, kind, detail):
    nb = notebooks[student][NOTEBOOK_OF[grade_id]]
    if kind == "unanswered":
        stub = next(c.source for c in demo.release(NOTEBOOK_OF[grade_id]).cells
                    if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)
        assert next(c.source for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id) == stub
        return
    src = program(nb, grade_id)
    if kind == "full":
        assert first_failure(src, grade_id) is None
    elif kind == "public_only":
        for seed in SEEDS:
            assert verdict(src, grade_id, False, seed).passed, seed
            assert not verdict(src, grade_id, True, seed).passed, seed
    else:
        failed = first_failure(src, grade_id)
        assert failed is not None, f"{student} passes {grade_id}"
        if kind == "mistakes":
            assert BUG_MESSAGES[detail] in failed.message, failed.message
        elif kind == "named_error":
            assert detail in failed.message, failed.message
        elif kind == "zero":
            assert "计 0 分" in failed.message, failed.message
        else:  # unrecognised: no known bug of the answer key is named
            assert not any(m in failed.message for m in BUG_MESSAGES.values()), failed.message


def test_every_student_has_one_outcome_per_exercise():
    for gid, table in demo.EXPECTED.items():
        ids = [s for kind in OUTCOMES for s in (itertools.chain(*table[kind].values())
                                                 if isinstance(table[kind], dict) else table[kind])]
        assert sorted(ids) == sorted(s for s in demo.STUDENTS if NOTEBOOK_OF[gid] in demo.NOTEBOOKS[s]), gid
        for bug in table["mistakes"]:
            assert bug in BUG_MESSAGES, bug


def test_the_class(tmp_path):
    demo.write(tmp_path)
    folders = sorted(p for p in tmp_path.iterdir())
    assert [p.name for p in folders] == sorted(demo.STUDENTS) and len(folders) == 30
    assert all(p.name.replace("_", "").isalnum() and p.name.isascii() and p.name.islower() for p in folders)
    with_02 = [p.name for p in folders if any("02_scaled" in f.name for f in p.iterdir())]
    assert len(with_02) == 8
    assert all(any("04_multihead" in f.name for f in p.iterdir()) for p in folders)
    assert sorted(f.name for p in folders for f in p.iterdir() if not f.name.startswith(("02_", "04_"))) == []
    assert (tmp_path / "liang_chen" / "04_multihead (1).ipynb").exists()
    releases = {name: demo.release(name) for name in (demo.NB02, demo.NB04)}
    for path in tmp_path.glob("*/*.ipynb"):
        nb = nbformat.read(path, as_version=4)
        ref = releases[demo.NB02 if path.name.startswith("02") else demo.NB04]
        assert len(nb.cells) == len(ref.cells)
        for mine, theirs in zip(nb.cells, ref.cells):
            assert mine.metadata == theirs.metadata and mine.cell_type == theirs.cell_type
            if not theirs.metadata.get("nbgrader", {}).get("solution"):
                assert mine.source == theirs.source, path


def test_only_the_planted_copies_look_copied(notebooks):
    """With copydetect (when installed), the planted mha copy scores far above every honest pair."""
    copydetect = pytest.importorskip("copydetect")
    k, win = 25, 1
    stub = next(c.source for c in demo.release(demo.NB04).cells if c.metadata.get("nbgrader", {}).get("grade_id") == "mha")
    boiler = list(copydetect.CodeFingerprint("stub.py", k, 1, fp=io.StringIO(stub), language="python").hashes)
    srcs = {s: next(c.source for c in notebooks[s][demo.NB04].cells
                    if c.metadata.get("nbgrader", {}).get("grade_id") == "mha") for s in demo.STUDENTS}
    srcs = {s: src for s, src in srcs.items() if src != stub}
    prints = {s: copydetect.CodeFingerprint(f"{s}.py", k, win, boilerplate=boiler, fp=io.StringIO(src), language="python")
              for s, src in srcs.items()}
    planted = {frozenset(p[1:]) for p in demo.PLANTED_COPIES}
    scores = {}
    for a, b in itertools.combinations(sorted(prints), 2):
        _, (s1, s2), _ = copydetect.compare_files(prints[a], prints[b])
        scores[frozenset((a, b))] = min(s1, s2)
    honest = max(v for p, v in scores.items() if p not in planted)
    copied = scores[frozenset(("zhao_min", "feng_rui"))]
    assert copied > 0.8 and honest < 0.5, (copied, honest)
