"""Point the notebooks' test cells at the student package: `from w1d1_student import check`.

Re-runnable: rewrites only that import line in solutions/w1d1/*.ipynb (the JSON text, so nothing
else of a notebook changes). Run `make release` afterwards to regenerate notebooks/w1d1.
"""
import sys
from pathlib import Path

SOURCE_DIR = Path(__file__).resolve().parents[1] / "solutions" / "w1d1"
OLD = '"from autograder.kernel import check\\n"'
NEW = '"from w1d1_student import check\\n"'


def rewrite(folder=SOURCE_DIR):
    changed = []
    for path in sorted(Path(folder).glob("*.ipynb")):
        text = path.read_text(encoding="utf-8")
        if OLD in text:
            path.write_text(text.replace(OLD, NEW), encoding="utf-8")
            changed.append(path.name)
    return changed


if __name__ == "__main__":
    for name in rewrite(Path(sys.argv[1]) if len(sys.argv) > 1 else SOURCE_DIR):
        print(f"updated {name}")
