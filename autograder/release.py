"""Regenerate the student release (notebooks/w1d1) from solutions/w1d1 with nbgrader."""
import shutil
import sys
import tempfile
from pathlib import Path

from autograder.chain.nbgrader_chain import api
from autograder.course import ASSIGNMENT, RELEASE_DIR


def generate(dest_root):
    """Run nbgrader generate_assignment into dest_root/w1d1 (with a throw-away gradebook)."""
    with tempfile.TemporaryDirectory() as work:
        result = api(work, release_dir=str(Path(dest_root).resolve())).generate_assignment(ASSIGNMENT, force=True)
        if not result["success"]:
            raise RuntimeError((result.get("error") or result.get("log") or "")[-3000:])
    return Path(dest_root) / ASSIGNMENT


def release(to=None):
    dest = Path(to) if to else RELEASE_DIR
    target = dest / ASSIGNMENT
    with tempfile.TemporaryDirectory() as tmp:
        built = generate(tmp)
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(built, target, ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints"))
    print(f"已生成 {target}", file=sys.stderr)
    return 0
