"""Build a class of notebook-01 submissions: honest, stub, and one student per attack."""
import json
import uuid
from pathlib import Path

import nbformat

from autograder.course import ASSIGNMENT, RELEASE_DIR, REPO, SOURCE_DIR
from tests.variants import exercises_of, notebook_solution

NB = "01_self_attention"
EXERCISES = exercises_of(NB)
MARKER = Path("/tmp") / f"w1d1-pwned-{uuid.uuid4().hex[:8]}"
ANSWERS = {}


def _answers():
    """Self-contained correct answers: each cell defines all it uses, so replacing one cell leaves the others whole
    (the mutation table's short ones where it has one, else the solution with what the notebook defines before it)."""
    if not ANSWERS:
        from tests.variants.nb01_self_attention import DIAG, SELF_ATTENTION, SOFTMAX

        short = {"softmax": SOFTMAX, "self_attention": SELF_ATTENTION, "score_diagnostics": DIAG}
        ANSWERS.update({gid: short.get(gid) or notebook_solution(gid) for gid in EXERCISES})
    return ANSWERS


def release_nb():
    return nbformat.read(RELEASE_DIR / ASSIGNMENT / f"{NB}.ipynb", as_version=4)


def cell(nb, grade_id):
    return next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def index(nb, grade_id):
    return next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def solved(**overrides):
    """The release with every answer filled in (overrides: grade_id -> source)."""
    nb = release_nb()
    answers = {**_answers(), **overrides}
    for gid, src in answers.items():
        cell(nb, gid).source = src
    return nb


def added(nb, after, src):
    """Insert a student-added code cell after the cell with grade_id `after`."""
    nb.cells.insert(index(nb, after) + 1, nbformat.v4.new_code_cell(src))
    return nb


WRONG_SOFTMAX = "import numpy as np\ndef softmax(x, axis=-1):\n    return np.ones_like(x) / x.shape[axis]\n"


def build(root):
    """Write one folder per student; returns {student: what we expect}."""
    root = Path(root)
    students = {}

    def put(name, nb, extra_files=None):
        folder = root / name
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / f"{NB}.ipynb")
        for fname, text in (extra_files or {}).items():
            (folder / fname).write_text(text)
        students[name] = nb

    put("honest", solved())
    put("stub", release_nb())
    # patch comparison functions, the checks, IPython's traceback display; wrong answer
    # (answer cells run while grading; the student's own cells do not)
    put("patcher", solved(softmax=WRONG_SOFTMAX + """
import numpy as np, sys, builtins
np.allclose = lambda *a, **k: True
np.testing.assert_allclose = lambda *a, **k: None
import w1d1_student, w1d1_student.runner as r
w1d1_student.check = lambda *a, **k: print("✅ 公开检查通过")
r.check = w1d1_student.check
r.run_cases = lambda gid, ns, cases, hidden=False: {"grade_id": gid, "hidden": hidden, "results": []}
get_ipython().showtraceback = lambda *a, **k: None
sys.excepthook = lambda *a: None
"""))
    # an output object that claims equality with anything
    put("liar", solved(softmax="""
import numpy as np
class Yes(np.ndarray):
    def __eq__(self, other): return True
    def __array_finalize__(self, obj): pass
def softmax(x, axis=-1):
    return np.zeros_like(x).view(Yes)
"""))
    # loading the reference / another file instead of answering
    put("importer", solved(softmax="""
import sys
sys.path.insert(0, "/work/main/solutions"); sys.path.insert(0, "../../../../solutions")
from w1d1_attention import softmax
""", score_diagnostics="""
from mydiag import self_argmax_rate, asymmetry
"""), extra_files={"mydiag.py": _answers()["score_diagnostics"]})
    # wrap a function from a sibling file
    put("wrapper", solved(softmax="""
import importlib.util, numpy as np
spec = importlib.util.spec_from_file_location("w", "helper.py")
def softmax(x, axis=-1):
    return np.asarray(x)
"""), extra_files={"helper.py": _answers()["softmax"]})
    # reading solutions / gradebook, writing outside, network
    put("snoop", solved(softmax=_answers()["softmax"] + f"""
import os, glob
found = []
for pattern in ["/work/*/solutions/*.py", "/work/*/gradebook.db", "/root/*/*", "/work/*/*/gradebook.db",
                "../../../gradebook.db", "../../../../solutions/w1d1_attention.py", {str(REPO / "*")!r},
                {str(REPO / "solutions" / "*")!r}]:
    found += glob.glob(pattern)
print("FOUND", found)
open({str(MARKER)!r}, "w").write("x")  # a private /tmp: must not reach the grader's /tmp
import sys
for target in [sys.prefix + "/pwned", "../../../pwned", "/work/pwned"]:
    try:
        open(target, "w").write("x"); print("WROTE_OUTSIDE", target)
    except OSError as e:
        print("WRITE_BLOCKED", e)
import socket
try:
    socket.create_connection(("127.0.0.1", 22), timeout=1); print("NET_OPEN")
except OSError as e:
    print("NET_BLOCKED", e)
"""))
    # a loop that swallows KeyboardInterrupt inside one answer
    put("looper", solved(self_attention="""
import numpy as np
while True:
    try:
        pass
    except KeyboardInterrupt:
        pass
"""))
    # os._exit inside a graded function
    put("exiter", solved(score_diagnostics=_answers()["score_diagnostics"].replace(
        "def asymmetry(S):\n", "def asymmetry(S):\n    import os; os._exit(3)\n")))
    # floods output, exhausts memory
    put("flooder", solved(softmax=_answers()["softmax"] + "for i in range(200_000):\n    print('flood' * 20)",
                          self_attention=_answers()["self_attention"]
                          + "import numpy as np\nbig = np.ones((1 << 34,), dtype=np.uint8)\nbig[::4096] = 2"))
    # tampered test cells: deleted, edited, duplicated, retyped
    nb = solved(softmax=WRONG_SOFTMAX)
    cell(nb, "test_self_attention").source = "print('passed')"
    dup = json.loads(json.dumps(cell(nb, "test_score_diagnostics")))
    nb.cells.insert(index(nb, "test_score_diagnostics"), nbformat.from_dict(dup))
    del nb.cells[index(nb, "test_softmax")]
    c = cell(nb, "test_softmax__hidden")
    c.cell_type = "markdown"
    c.pop("outputs", None)
    c.pop("execution_count", None)
    put("tamperer", nb)
    # a warning printed by correct code must not cost points
    put("warner", solved(softmax="import warnings\n" + _answers()["softmax"].replace(
        "    z = x", "    warnings.warn('just a warning')\n    import sys; print('note', file=sys.stderr)\n    z = x")))
    return students


def test_cell_ids(name):
    src = nbformat.read(SOURCE_DIR / ASSIGNMENT / f"{name}.ipynb", as_version=4)
    return [c.metadata["nbgrader"]["grade_id"] for c in src.cells
            if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("grade")]
