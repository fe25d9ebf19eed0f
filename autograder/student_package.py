"""`python -m autograder student-package`: build the wheel students install (dist/w1d1_student-*.whl).

The wheel holds student/w1d1_student (check(), drivers, the comparison and diagnosis engine),
student/w1d1_format.py (the metadata keys and message type the grader reads too), the public cases
of every exercise with the grader's answers precomputed as data, and the two helper modules of the
notebooks, built from their one source each in solutions/w1d1/. Nothing else from
solutions/ and nothing of the grader goes in.
"""
import base64
import hashlib
import json
import shutil
import tempfile
import tomllib
import zipfile
from pathlib import Path

from w1d1_student import registry
from w1d1_student.runner import PUBLIC_DATA

from autograder import wheel_inputs
from autograder.course import REPO
from autograder.exercises.checks import answered, as_data, make_cases
from autograder.exercises.private import for_kernel

STUDENT_SRC = REPO / "student"
# top-level modules beside the package: the notebooks' two helpers, and the formats the grader reads too
TOP_LEVEL_MODULES = (REPO / "solutions" / "w1d1" / "w1d1_viz.py", REPO / "solutions" / "w1d1" / "w1day1_checks.py",
                     STUDENT_SRC / "w1d1_format.py")
PUBLIC_SEED = 0


def public_cases():
    """{grade_id: [case with every answer that applies to it]} for the public checks."""
    return {gid: for_kernel(answered(gid, make_cases(gid, PUBLIC_SEED, hidden=False))) for gid in registry.NOTEBOOK_OF}


def stage(dest):
    """The package's source tree with its data and top-level modules: what goes into the wheel."""
    dest = Path(dest)
    shutil.copytree(STUDENT_SRC / "w1d1_student", dest / "w1d1_student",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "data"))
    for module in TOP_LEVEL_MODULES:
        shutil.copy2(module, dest / module.name)
    (dest / "w1d1_student" / "data").mkdir()
    text = json.dumps(as_data(public_cases()), separators=(",", ":"))
    (dest / "w1d1_student" / "data" / PUBLIC_DATA).write_text(text, encoding="utf-8")
    return dest


def _metadata():
    project = tomllib.loads((STUDENT_SRC / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    lines = ["Metadata-Version: 2.1", f"Name: {project['name']}", f"Version: {project['version']}",
             f"Summary: {project['description']}", f"Requires-Python: {project['requires-python']}"]
    lines += [f"Requires-Dist: {dep}" for dep in project.get("dependencies", [])]
    return project, "\n".join(lines) + "\n"


def _record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def build(out=REPO / "dist"):
    """Write the wheel (a zip with its .dist-info, as PEP 427 says) into `out`; returns its path.
    Built here rather than by pip/setuptools: nothing to install, and the same bytes every time."""
    project, metadata = _metadata()
    dist = f"{project['name'].replace('-', '_')}-{project['version']}"
    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        src = stage(Path(tmp) / "src")
        files = {p.relative_to(src).as_posix(): p.read_bytes() for p in sorted(src.rglob("*")) if p.is_file()}
    files[f"{dist}.dist-info/METADATA"] = metadata.encode()
    files[f"{dist}.dist-info/WHEEL"] = (b"Wheel-Version: 1.0\nGenerator: autograder.student_package\n"
                                        b"Root-Is-Purelib: true\nTag: py3-none-any\n")
    top_level = ["w1d1_student", *(module.stem for module in TOP_LEVEL_MODULES)]
    files[f"{dist}.dist-info/top_level.txt"] = "".join(f"{name}\n" for name in top_level).encode()
    files[f"{dist}.dist-info/{wheel_inputs.STAMP}"] = (wheel_inputs.digest() + "\n").encode()  # tests/conftest.py
    record = [_record_line(name, data) for name, data in files.items()] + [f"{dist}.dist-info/RECORD,,"]
    files[f"{dist}.dist-info/RECORD"] = ("\n".join(record) + "\n").encode()
    for old in out.glob("w1d1_student-*.whl"):
        old.unlink()
    target = out / f"{dist}-py3-none-any.whl"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            zf.writestr(info, data, zipfile.ZIP_DEFLATED)
    return target


def main(out):
    print(build(out))
    return 0
