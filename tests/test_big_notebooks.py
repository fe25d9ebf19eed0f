"""An honest notebook is never lost for its size: over 20 MB it is graded without its saved outputs (outputs are never
graded), on both paths, with a note that says so; what stays over the bound without its outputs (a huge source,
JSON nested past the bound, a file over 256 MB) is refused with a note that says why. Read in bounded memory
(w1d1_student.lean_notebook); the submit side is tests/test_exchange_faults.py."""
import base64
import io
import json
import os
import random
import subprocess
import sys

import nbformat
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from w1d1_student import lean_notebook
from w1d1_student.exchange import lean_notebooks
from w1d1_student.lean_notebook import TooBig, without_outputs

from autograder.chain.intake_chain import MAX_FILE_BYTES, MAX_NOTEBOOK_BYTES, notebook_bytes
from autograder.course import REPO
from autograder.report.grade_tables import graded_cells
from tests import grading_class as gc
from tests.entry_points import ENTRY_POINTS, grade_both

FULL = sum(p for _, p in graded_cells(gc.NB)[0])
MB = 2**20


def with_outputs(nb, mb):
    """`nb` with about `mb` MB of saved outputs: a big inline image and a long printed loop, as a student's notebook
    that plotted and printed a lot."""
    image = base64.b64encode(random.Random(0).randbytes(int(mb * MB * 0.45))).decode()
    lines = [f"step {i}: loss {1 / (i + 1):.8f}\n" for i in range(int(mb * MB * 0.4 / 28))]
    code = [c for c in nb.cells if c.cell_type == "code"]  # plain dicts: nbformat would validate megabytes
    code[0].outputs = [nbformat.from_dict({"output_type": "display_data", "metadata": {},
                                           "data": {"image/png": image, "text/plain": "<Figure>"}})]
    code[-1].outputs = [nbformat.from_dict({"output_type": "stream", "name": "stdout", "text": lines})]
    return nb


def no_outputs(data):
    nb = json.loads(data)
    for c in nb["cells"]:
        if c["cell_type"] == "code":
            c["outputs"] = []
    return nb


def build(root):
    """A class of one honest notebook with 25 MB of outputs and three that stay too big without theirs."""
    def put(student, text):
        (root / student).mkdir(parents=True)
        (root / student / f"{gc.NB}.ipynb").write_bytes(text if isinstance(text, bytes) else text.encode())

    put("big_outputs", nbformat.writes(with_outputs(gc.solved(), 25)))
    put("big_source", nbformat.writes(gc.added(with_outputs(gc.solved(), 1), "softmax", "# x = 1\n" * (3 * MB))))
    data = json.loads(nbformat.writes(with_outputs(gc.solved(), 25)))
    data["metadata"]["deep"] = json.loads("[" * 300 + "]" * 300)
    put("deep_and_big", json.dumps(data))
    (root / "huge_file").mkdir()
    with open(root / "huge_file" / f"{gc.NB}.ipynb", "wb") as fh:  # sparse: no disk, never read
        fh.truncate(MAX_NOTEBOOK_BYTES + 1)
    return root


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """{entry point: Graded} of the class."""
    root = tmp_path_factory.mktemp("big")
    return grade_both(build(root / "class"), root, jobs=2)


@pytest.mark.parametrize("path", ENTRY_POINTS)
def test_a_notebook_over_20_mb_is_graded_without_its_outputs(graded, path):
    run = graded[path]
    assert run.points("big_outputs", gc.NB) == FULL, run.log[-3000:]
    page = run.page("big_outputs", gc.NB)
    assert "超过 20 MB 的上限" in page and "删掉了保存的输出" in page, page[:3000]


REFUSALS = {"big_source": "去掉输出以后仍超过 20.0 MB", "deep_and_big": "JSON 嵌套超过 256 层", "huge_file": "超过 256 MB"}


@pytest.mark.parametrize("path", ENTRY_POINTS)
@pytest.mark.parametrize("student", sorted(REFUSALS))
def test_what_stays_too_big_is_refused_with_its_reason(graded, path, student):
    run = graded[path]
    assert run.points(student, gc.NB) == 0
    page = run.page(student, gc.NB) or ""
    assert REFUSALS[student] in page and "0 分" in page, page[:3000]


def test_a_notebook_over_20_mb_is_read_in_bounded_memory(tmp_path):
    """A 60 MB notebook (outputs) is read without holding it: the peak is about the kept part plus one chunk."""
    path, lean = tmp_path / "n.ipynb", tmp_path / "lean.json"
    nb = gc.solved()
    path.write_text(json.dumps(with_outputs(nb, 60)))
    measure = ("import resource, sys; from autograder.chain.intake_chain import notebook_bytes; "
               "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss; data, note = notebook_bytes(sys.argv[1]); "
               "grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before; "
               "open(sys.argv[2], 'wb').write(data); print(grown); print(note)")
    run = subprocess.run([sys.executable, "-c", measure, str(path), str(lean)], capture_output=True, text=True,
                         check=True, cwd=REPO)
    grown_kb, note = run.stdout.splitlines()
    assert os.path.getsize(path) > 55 * MB and lean.stat().st_size < MB and "删掉了保存的输出" in note
    assert int(grown_kb) * 1024 < 16 * MB, grown_kb
    for c in nb.cells:
        if c.cell_type == "code":
            c.outputs = []
    assert json.loads(lean.read_bytes()) == json.loads(json.dumps(nb))


def test_a_notebook_under_the_limit_is_read_as_it_is(tmp_path):
    path = tmp_path / "n.ipynb"
    path.write_text(nbformat.writes(with_outputs(gc.solved(), 1)))
    assert notebook_bytes(path) == (path.read_bytes(), None)
    assert MAX_FILE_BYTES == 20 * MB


def _notebook_json(outputs, texts):
    nb = gc.release_nb()
    code = [c for c in nb.cells if c.cell_type == "code"]
    for c, out in zip(code, outputs):
        c.outputs = [nbformat.v4.new_output("stream", text=t) for t in out]
    nb.metadata["note"] = texts
    return nbformat.writes(nb)


TEXT = st.text(alphabet=st.sampled_from(list('ab"\\\n\t{}[],: 中\u2028') + ["\x00", "\ud7ff"]), max_size=40)


@settings(max_examples=60, deadline=None)
@given(outputs=st.lists(st.lists(TEXT, max_size=4), max_size=6), texts=st.lists(TEXT, max_size=4),
       chunk=st.integers(1, 64), indent=st.sampled_from([None, 0, 1]))
def test_outputs_are_dropped_and_nothing_else_whatever_the_chunks(outputs, texts, chunk, indent):
    """Strings with quotes, backslashes, brackets and escapes that fall across chunk boundaries anywhere."""
    data = json.dumps(json.loads(_notebook_json(outputs, texts)), indent=indent, ensure_ascii=indent is None)
    saved, lean_notebook.CHUNK = lean_notebook.CHUNK, chunk
    try:
        lean = without_outputs(io.BytesIO(data.encode()), 10 * MB)
    finally:
        lean_notebook.CHUNK = saved
    assert json.loads(lean) == no_outputs(data.encode())


def test_the_bounds_hold_and_say_which(tmp_path):
    big = nbformat.writes(with_outputs(gc.solved(), 2)).encode()
    with pytest.raises(TooBig, match="去掉输出以后仍超过"):
        without_outputs(io.BytesIO(big), len(big) // 100)
    with pytest.raises(TooBig, match="文件超过"):
        without_outputs(io.BytesIO(big), 10 * MB, max_bytes=MB)
    deep = big[:-2] + b', "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    with pytest.raises(TooBig, match="嵌套超过"):
        without_outputs(io.BytesIO(deep), 10 * MB)
    # nesting inside outputs is dropped, never counted
    nested = json.loads(big)
    next(c for c in nested["cells"] if c["cell_type"] == "code")["outputs"] = "PLACEHOLDER"
    text = json.dumps(nested).replace('"PLACEHOLDER"', "[" * 100_000 + "]" * 100_000)
    assert json.loads(without_outputs(io.BytesIO(text.encode()), 10 * MB)) == no_outputs(big)


def test_submit_takes_a_notebook_over_the_limit_without_outputs(tmp_path):
    """What ClearSubmit copies in place of a notebook nbgrader would leave out (the exchange test submits one)."""
    folder = tmp_path / "w1d1"
    (folder / ".ipynb_checkpoints").mkdir(parents=True)
    big = nbformat.writes(with_outputs(gc.solved(), 3))
    (folder / f"{gc.NB}.ipynb").write_text(big)
    (folder / ".ipynb_checkpoints" / f"{gc.NB}-checkpoint.ipynb").write_text(big)
    (folder / "02_scaled_dot_product.ipynb").write_text("{}")
    lean = lean_notebooks(str(folder), 2 * MB, exclude=[".ipynb_checkpoints"])
    assert list(lean) == [f"{gc.NB}.ipynb"] and lean[f"{gc.NB}.ipynb"][0] == len(big.encode())
    assert json.loads(lean[f"{gc.NB}.ipynb"][1]) == no_outputs(big.encode())
    (folder / f"{gc.NB}.ipynb").write_text(nbformat.writes(gc.added(gc.solved(), "softmax", "#" * (3 * MB))))
    with pytest.raises(TooBig, match=f"提交没有完成：`{gc.NB}.ipynb` 有 3.1 MB，去掉输出以后仍超过 2.0 MB"):
        lean_notebooks(str(folder), 2 * MB, exclude=[".ipynb_checkpoints"])
