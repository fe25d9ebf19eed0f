"""A stale installed wheel stops the tests with one line (tests/conftest.py): the installed w1d1_student carries the
digest of what it was built from, and any byte changed in those inputs since makes it stale."""
import shutil
import subprocess
import sys
import zipfile

from autograder import wheel_inputs
from autograder.course import REPO


def _copy_inputs(dest):
    for path in wheel_inputs.inputs(REPO):
        target = dest / path.relative_to(REPO)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    return dest


def test_one_byte_changed_in_an_input_makes_the_install_stale(tmp_path):
    root = _copy_inputs(tmp_path / "repo")
    stamped = wheel_inputs.digest(REPO)
    assert wheel_inputs.digest(root) == stamped and wheel_inputs.stale_install(root, stamped) is None
    module = root / "student" / "w1d1_student" / "exercises" / "nb03_masks.py"
    text = module.read_bytes()
    module.write_bytes(text[:-1] + bytes([text[-1] ^ 1]))
    assert wheel_inputs.stale_install(root, stamped) == wheel_inputs.STALE
    module.write_bytes(text)
    assert wheel_inputs.stale_install(root, stamped) is None
    (root / "autograder" / "exercises" / "nb07_new.py").write_text("CASES = {}\n")  # a new module counts too
    assert wheel_inputs.stale_install(root, stamped) == wheel_inputs.STALE
    assert wheel_inputs.stale_install(root, None) == wheel_inputs.STALE  # a wheel built before the stamp
    assert wheel_inputs.stale_install(root, wheel_inputs.MISSING) == wheel_inputs.MISSING


def test_the_wheel_carries_the_digest_of_its_inputs(tmp_path):
    from autograder import student_package

    with zipfile.ZipFile(student_package.build(tmp_path)) as zf:
        stamp = next(n for n in zf.namelist() if n.endswith(f".dist-info/{wheel_inputs.STAMP}"))
        assert zf.read(stamp).decode().strip() == wheel_inputs.digest(REPO)
    assert wheel_inputs.installed_digest() == wheel_inputs.digest(REPO)  # what this run imports


def test_a_stale_install_stops_pytest_with_one_line(tmp_path):
    """The conftest's check, in a pytest run whose installed digest is forged: one line, nothing collected."""
    plugin = tmp_path / "forged_stamp.py"
    plugin.write_text("from autograder import wheel_inputs\nwheel_inputs.installed_digest = lambda: 'f' * 64\n")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "forged_stamp", str(REPO / "tests" / "test_lint.py")],
                          cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": f"{tmp_path}:{REPO}", "PATH": "/usr/bin:/bin"})
    lines = [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
    assert proc.returncode == 4 and lines == [f"ERROR: {wheel_inputs.STALE}"], (proc.returncode, lines)
