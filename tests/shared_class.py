"""One class for the attack tests, graded once per test run through both entry points.

Each attack file puts its own students in (BUILDERS) and reads its students' results back. The seed
only picks the grading command's hidden cases: plain nbgrader draws its own, and the tests hold for both.
The command grades two students at a time (nbgrader's own path runs beside it, one at a time).
A cell's limit is CELL_LIMIT on both paths, as an instructor may set it: a cell that runs out costs that cell only
whatever the limit (test_attacks_unmeasured); the course's 120 s against numerical differentiation is measured
by bench/numerical_backward.py."""
import importlib
import subprocess
import sys
from pathlib import Path

from autograder.course import REPO
from tests.entry_points import grade_both
from tests.run_cache import once

SEED = 7
CELL_LIMIT = 45  # s; every honest cell of the class needs a few
# "module:function" of each file's builder; function(root) writes that file's student folders into root
BUILDERS = ("tests.test_attacks_intake:build", "tests.test_attacks_on_the_pipeline:build",
            "tests.test_attacks_sandbox_checks:build", "tests.test_backward_by_hand:build",
            "tests.test_sandbox_processes:build", "tests.test_attacks_star_imports:build",
            "tests.test_copies_in_the_report:build", "tests.test_verdict_text:build", "tests.test_attacks_in_kernel:build",
            "tests.test_attacks_unmeasured:build")


def build(root):
    """Each builder writes into a folder of its own, moved into `root`: no file's student can replace another's."""
    root.mkdir(parents=True)
    for i, spec in enumerate(BUILDERS):
        module, name = spec.split(":")
        part = root.parent / f"part-{i}"
        part.mkdir()
        getattr(importlib.import_module(module), name)(part)
        for student in part.iterdir():
            assert not (root / student.name).exists(), (spec, student.name)
            student.rename(root / student.name)
    return root


def grade_class(folder):
    return grade_both(build(folder / "class"), folder, seed=SEED, jobs=2, timeout=CELL_LIMIT)


def attack_class(tmp_path_factory):
    """{entry point: Graded} for the whole attack class, graded at most once per test run."""
    return once(tmp_path_factory, "attack-class", grade_class)


def start_ahead(run):
    """Grade the class in a process of its own as the run starts (conftest), so that no worker sits waiting for
    it halfway through; a test that needs it first takes the lock and waits, or grades it itself."""
    (run / "attack-class").mkdir(exist_ok=True)
    log = open(run / "attack-class" / "ahead.log", "w")
    return subprocess.Popen([sys.executable, "-c", AHEAD, str(run)], cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)


def needed_by(args):
    """Whether a pytest run of `args` (paths, node ids) collects a file whose tests read the class."""
    files = [REPO / (module.split(":")[0].replace(".", "/") + ".py") for module in BUILDERS]
    for arg in args or ["."]:
        path = Path(arg.split("::")[0]).resolve()
        if any(f == path or path in f.parents for f in files):
            return True
    return False


AHEAD = "import sys; from pathlib import Path; from tests import shared_class as s, run_cache as r; " \
        "r.once_in(Path(sys.argv[1]), 'attack-class', s.grade_class)"
