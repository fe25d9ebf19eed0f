"""One class for the attack tests, graded once per test run through both entry points.

Each attack file puts its own students in (BUILDERS) and reads its students' results back. The seed
only picks the grading command's hidden cases: plain nbgrader draws its own, and the tests hold for both.
The command grades two students at a time (nbgrader's own path runs beside it, one at a time)."""
import importlib

from tests.entry_points import grade_both
from tests.run_cache import once

SEED = 7
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


def attack_class(tmp_path_factory):
    """{entry point: Graded} for the whole attack class, graded at most once per test run."""
    return once(tmp_path_factory, "attack-class", lambda folder: grade_both(build(folder / "class"), folder, seed=SEED, jobs=2))
