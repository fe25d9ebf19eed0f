"""`make html`: a browsable static site of the student notebooks for self-learners.

Every student notebook is executed as released (the demonstration cells draw every figure; an
exercise cell shows its `NotImplementedError` stub until the reader writes it) and exported to
HTML with the plots inline, plus an index page.
"""
import argparse
import html
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
from nbconvert import HTMLExporter

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from autograder.course import ASSIGNMENT, RELEASE_DIR, available_notebooks  # noqa: E402


def title_of(nb, fallback):
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("#"):
                    return line.lstrip("#").strip()
    return fallback


def execute_release(name):
    """The student notebook as released, run top to bottom past its stub errors (no widget front-end).

    It runs in a fresh Python process: in a process that already runs an event loop (the browser
    tests drive Playwright) nbclient's blocking wrapper now and then waited for a reply that never came.
    Even so, now and then the next cell after an explorer widget starts only when the cell timeout runs out
    (18.5 s late with 20 s, 300 s late with 300 s; no error): the timeout is 60 s, ten times the slowest cell (5.8 s)."""
    src = RELEASE_DIR / ASSIGNMENT / f"{name}.ipynb"
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / f"{name}.ipynb"
        run = subprocess.run([sys.executable, "-m", "nbconvert", "--to", "notebook", "--execute", "--allow-errors",
                              "--ExecutePreprocessor.timeout=60", "--ExecutePreprocessor.kernel_name=python3",
                              "--output", str(out), str(src)], capture_output=True, text=True)
        if run.returncode != 0:
            raise RuntimeError(f"运行 {name} 失败：\n{run.stderr[-3000:]}")
        return nbformat.read(out, as_version=4)


def figure_cells(nb):
    """Index of every cell that shows a figure, once per figure."""
    return [i for i, c in enumerate(nb.cells) for o in c.get("outputs", []) if "image/png" in o.get("data", {})]


def build(out):
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    exporter = HTMLExporter()
    entries = []
    for name in available_notebooks():
        nb = execute_release(name)
        body, _ = exporter.from_notebook_node(nb)
        (out / f"{name}.html").write_text(body, encoding="utf-8")
        figures = len(figure_cells(nb))
        entries.append((name, title_of(nb, name), figures))
        print(f"{name}: {figures} 张图", file=sys.stderr)
    items = "\n".join(f'<li><a href="{n}.html">{html.escape(t)}</a>（{f} 张图）</li>' for n, t, f in entries)
    (out / "index.html").write_text(
        "<!DOCTYPE html><html lang=\"zh-CN\"><head><meta charset=\"utf-8\"><title>W1D1 自注意力与多头注意力</title></head>"
        f"<body><h1>第 1 周 · Day 1：自注意力与多头注意力</h1><p>练习单元格显示的是未作答时的提示（NotImplementedError）；"
        f"想自己动手，请用 <code>make lab</code> 打开笔记本。</p><ol>{items}</ol></body></html>", encoding="utf-8")
    return entries


def main(argv=None):
    parser = argparse.ArgumentParser(description="构建自学用的静态网站")
    parser.add_argument("--out", default=str(ROOT / "site"))
    build(parser.parse_args(argv).out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
