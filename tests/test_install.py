"""Set-up: pinned requirements agree with environment.yml; the Makefile offers the README's commands."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _pins(lines):
    pins = {}
    for line in lines:
        line = line.split("#")[0].strip().lstrip("- ").strip()
        m = re.fullmatch(r"([A-Za-z0-9_.\-]+)==([^\s]+)", line)
        if m:
            pins[m.group(1).lower().replace("_", "-")] = m.group(2)
    return pins


def test_requirements_pin_every_line():
    lines = [l.strip() for l in (ROOT / "requirements.txt").read_text().splitlines() if l.strip() and not l.startswith("#")]
    assert lines and all("==" in l for l in lines), lines
    assert _pins(lines)["torch"] == "2.13.0"
    assert _pins(lines)["nbgrader"] == "0.9.6"


def test_environment_yml_matches_requirements():
    req = _pins((ROOT / "requirements.txt").read_text().splitlines())
    env_text = (ROOT / "environment.yml").read_text()
    pip_section = env_text.split("- pip:", 1)[1].splitlines()
    env = _pins(pip_section)
    assert env == req
    assert re.search(r"python=3\.11", env_text)


def test_installed_versions_match_pins():
    from importlib.metadata import version

    for name, pin in _pins((ROOT / "requirements.txt").read_text().splitlines()).items():
        assert version(name).split("+")[0] == pin.split("+")[0], name


def test_readme_quick_start_is_two_commands():
    readme = (ROOT / "README.md").read_text()
    quick = readme.split("## 快速开始", 1)[1].split("```")[1]
    commands = [l.split("#")[0].strip() for l in quick.splitlines() if l.strip() and not l.startswith("bash")]
    assert commands == ["make lab", "make test"]
    makefile = (ROOT / "Makefile").read_text()
    for target in ("lab:", "test:", "release:", "grade:", "bench:", "html:"):
        assert re.search(rf"^{target}", makefile, re.M), target
    assert (ROOT / ".ci" / "run").read_text().strip().endswith("make test")


def test_gitignore_keeps_build_output_out():
    ignored = (ROOT / ".gitignore").read_text()
    for entry in (".venv/", "gradebook.db", "/autograded/", "/submitted/", "/feedback/"):
        assert entry in ignored


def test_nbgrader_starts_without_building_uri_parsers():
    """jsonschema from 4.25 imports rfc3987-syntax where it is installed, and that builds 38 lark parsers as it
    loads (1.1 s of every nbgrader process's start): the pin keeps nbgrader's imports clear of it."""
    import subprocess
    import sys

    probe = "import sys, nbgrader.apps; print(sorted(m for m in ('lark', 'rfc3987_syntax') if m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip() == "[]"
