"""Build nbgrader source notebooks from Python (authoring aid; the .ipynb files are the source of truth).

Usage in a builder script:
    from tools.nbbuild import Notebook
    nb = Notebook("01_self_attention")
    nb.md("# 标题 ...")
    nb.code("import numpy as np")                       # ordinary (locked) demo cell
    nb.answer("softmax", "def softmax(x, axis=-1):\n    ### BEGIN SOLUTION\n    ...\n    ### END SOLUTION")
    nb.test("test_softmax", 'check("softmax")', points=2)
    nb.test("test_softmax__hidden", hidden='check("softmax", hidden=True)', points=2)
    nb.manual("q_selfattn_1", "**问题** ...", "模型答案 ...", points=1)
    nb.write()   # -> solutions/w1d1/01_self_attention.ipynb, no outputs, stable cell ids

An exercise is its answer cell and its two test cells, spelled once:
    nb.exercise("softmax", "def softmax(x, axis=-1):\n    ...", points=(1, 1))

Adding an exercise to a notebook that exists: open it, say where the new cells go, add them, write it back.
The new cells get cell ids and nbgrader grade_ids that none of its cells has (a grade_id you name that is taken
is an error); the other cells are written back as they were.
    nb = Notebook.open("03_masks").after("test_leftpad_safe__hidden")
    nb.md("## 新的练习 ...")
    nb.exercise("new_mask", "def new_mask(...):\n    ### BEGIN SOLUTION\n    ...\n    ### END SOLUTION", points=(1, 2))
    nb.write()
"""
import re
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
SOURCE_DIR = ROOT / "solutions" / "w1d1"
CHECK_IMPORT = "from w1d1_student import check"


def _meta(grade_id, *, grade, solution, locked, points=None):
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": 3,
            "solution": solution, "task": False}
    if points is not None:
        meta["points"] = points
    return {"nbgrader": meta}


def _grade_id(cell):
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


class Notebook:
    def __init__(self, name, cells=(), metadata=None):
        self.name = name
        self.cells = list(cells)
        self.metadata = metadata
        self._n = 0
        self._at = None  # where the next cell goes: None at the end

    @classmethod
    def open(cls, name, directory=SOURCE_DIR):
        """The notebook as it is on disk, to add cells to."""
        nb = nbformat.read(Path(directory) / f"{name}.ipynb", as_version=4)
        return cls(name, nb.cells, nb.metadata)

    def after(self, key):
        """Put the next cells after the cell whose grade_id or cell id is `key` (each after the one added before)."""
        for i, cell in enumerate(self.cells):
            if key in (cell.get("id"), _grade_id(cell)):
                self._at = i + 1
                return self
        raise KeyError(f"{self.name}: no cell with grade_id or id {key!r}")

    def _add(self, cell):
        if self._at is None:
            self.cells.append(cell)
        else:
            self.cells.insert(self._at, cell)
            self._at += 1
        return cell

    def _grade_ids(self):
        return {_grade_id(c) for c in self.cells} - {None}

    def _id(self, grade_id=None):
        """A cell id no cell has: the grade_id's (cleaned) where one is given, else the next free c###."""
        ids = {c.get("id") for c in self.cells}
        if grade_id is not None:
            if grade_id in self._grade_ids():
                raise ValueError(f"{self.name}: grade_id {grade_id!r} is taken")
            base = re.sub(r"[^A-Za-z0-9_-]", "-", grade_id)[:60]
            fresh, k = base, 1
            while fresh in ids:
                k += 1
                fresh = f"{base}-{k}"
            return fresh
        while True:  # demo cells and prompts take grade_ids made from their ids: those must be free too
            self._n += 1
            fresh = f"c{self._n:03d}"
            if fresh not in ids and f"demo_{fresh}" not in self._grade_ids():
                return fresh

    def md(self, text):
        cell = nbformat.v4.new_markdown_cell(text.strip("\n"))
        cell.id = self._id()
        return self._add(cell)

    def code(self, src, *, locked=True):
        """A demonstration cell. Locked cells are restored from the source when grading."""
        cell = nbformat.v4.new_code_cell(src.strip("\n"))
        cell.id = self._id()
        if locked:
            cell.metadata.update(_meta(f"demo_{cell.id}", grade=False, solution=False, locked=True))
        return self._add(cell)

    def answer(self, grade_id, src):
        cell = nbformat.v4.new_code_cell(src.strip("\n"))
        cell.id = self._id(grade_id)
        cell.metadata.update(_meta(grade_id, grade=False, solution=True, locked=False))
        return self._add(cell)

    def test(self, grade_id, public=None, *, hidden=None, points=1):
        """An autograded test cell: public lines run at home; hidden lines only when grading."""
        lines = [CHECK_IMPORT, ""]
        if public:
            lines.append(public.strip("\n"))
        if hidden:
            if not public:
                lines.append("# 隐藏检查：只在评分时运行。")
            lines += ["### BEGIN HIDDEN TESTS", hidden.strip("\n"), "### END HIDDEN TESTS"]
        cell = nbformat.v4.new_code_cell("\n".join(lines))
        cell.id = self._id(grade_id)
        cell.metadata.update(_meta(grade_id, grade=True, solution=False, locked=True, points=points))
        cell.metadata["tags"] = ["raises-exception"]  # a failing check does not stop Run All
        return self._add(cell)

    def exercise(self, grade_id, src, *, points=(1, 1)):
        """An exercise's three cells: its answer cell, its public test cell and its hidden one (points: public, hidden)."""
        public, hidden = points
        return (self.answer(grade_id, src),
                self.test(f"test_{grade_id}", f'check("{grade_id}")', points=public),
                self.test(f"test_{grade_id}__hidden", hidden=f'check("{grade_id}", hidden=True)', points=hidden))

    def manual(self, grade_id, question, model_answer, *, points=1):
        """A §C question: the prompt (locked markdown) and a manually graded answer cell."""
        if f"{grade_id}_prompt" in self._grade_ids():
            raise ValueError(f"{self.name}: grade_id {grade_id + '_prompt'!r} is taken")
        q = self.md(question)
        q.metadata.update(_meta(f"{grade_id}_prompt", grade=False, solution=False, locked=True))
        cell = nbformat.v4.new_markdown_cell(f"### BEGIN SOLUTION\n{model_answer.strip()}\n### END SOLUTION")
        cell.id = self._id(grade_id)
        cell.metadata.update(_meta(grade_id, grade=True, solution=True, locked=False, points=points))
        return self._add(cell)

    def write(self, directory=SOURCE_DIR):
        nb = nbformat.v4.new_notebook()
        nb.cells = self.cells
        nb.metadata = self.metadata or {
            "kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
            "language_info": {"name": "python"}}
        for what, keys in (("cell ids", [c.id for c in nb.cells]), ("grade_ids", list(filter(None, map(_grade_id, nb.cells))))):
            if len(set(keys)) != len(keys):
                raise ValueError(f"duplicate {what} in {self.name}")
        nbformat.validate(nb)
        path = Path(directory) / f"{self.name}.ipynb"
        nbformat.write(nb, path)
        return path
