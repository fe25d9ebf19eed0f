"""What the student wheel is built from, and whether the installed one was built from what is here now.

The wheel (autograder/student_package.py) carries the digest of its inputs in its .dist-info (INPUTS_DIGEST); the
tests compare it with the repo's at session start (tests/conftest.py), so a stale install stops the run with one
line instead of failing tests with diffs of the old package. The inputs (the Makefile's STUDENT_INPUTS: it runs
this file): the package's source and w1d1_format.py, the grader's exercise modules (they make the public cases it
ships), the two helper modules of the notebooks, and the builder (student_package.py and this module).
"""
import hashlib
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DIST = "w1d1_student"
STAMP = "INPUTS_DIGEST"
STALE = "the installed w1d1_student is older than student/: run make venv"
MISSING = "w1d1_student is not installed in this environment: run make venv"


def inputs(root=REPO):
    """The wheel's input files under `root`, sorted."""
    root = Path(root)
    found = [p for top in ("student", "autograder/exercises") for p in (root / top).rglob("*")
             if p.suffix in (".py", ".toml") and p.is_file() and "__pycache__" not in p.parts]
    found += [root / "autograder" / name for name in ("student_package.py", "wheel_inputs.py")]
    found += [root / "solutions" / "w1d1" / "w1d1_viz.py",
              root / "solutions" / "w1d1" / "w1day1_checks.py"]
    return sorted(found, key=lambda p: p.relative_to(root).as_posix())


def digest(root=REPO):
    """sha256 over the inputs' paths and bytes."""
    h = hashlib.sha256()
    for path in inputs(root):
        data = path.read_bytes()
        h.update(f"{path.relative_to(root).as_posix()}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()


def installed_digest():
    """The digest stamped into the installed wheel: None where it has none (built before the stamp), MISSING where
    no w1d1_student is installed."""
    try:
        return (metadata.distribution(DIST).read_text(STAMP) or "").strip() or None
    except metadata.PackageNotFoundError:
        return MISSING


_INSTALLED = object()


def stale_install(root=REPO, stamped=_INSTALLED):
    """None when the installed wheel (or `stamped`, a digest) was built from `root`'s inputs as they are now, else
    the one line to stop on."""
    stamped = installed_digest() if stamped is _INSTALLED else stamped
    if stamped == MISSING:
        return MISSING
    return None if stamped == digest(root) else STALE


if __name__ == "__main__":  # the Makefile's STUDENT_INPUTS, before any venv exists (standard library only)
    print("\n".join(p.relative_to(REPO).as_posix() for p in inputs()))
