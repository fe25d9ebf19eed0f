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


class Notebook:
    def __init__(self, name):
        self.name = name
        self.cells = []
        self._n = 0

    def _id(self, grade_id=None):
        self._n += 1
        base = grade_id or f"c{self._n:03d}"
        return re.sub(r"[^A-Za-z0-9_-]", "-", base)[:64]

    def md(self, text):
        cell = nbformat.v4.new_markdown_cell(text.strip("\n"))
        cell.id = self._id()
        self.cells.append(cell)
        return cell

    def code(self, src, *, locked=True):
        """A demonstration cell. Locked cells are restored from the source when grading."""
        cell = nbformat.v4.new_code_cell(src.strip("\n"))
        cell.id = self._id()
        if locked:
            cell.metadata.update(_meta(f"demo_{cell.id}", grade=False, solution=False, locked=True))
        self.cells.append(cell)
        return cell

    def answer(self, grade_id, src):
        cell = nbformat.v4.new_code_cell(src.strip("\n"))
        cell.id = self._id(grade_id)
        cell.metadata.update(_meta(grade_id, grade=False, solution=True, locked=False))
        self.cells.append(cell)
        return cell

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
        self.cells.append(cell)
        return cell

    def manual(self, grade_id, question, model_answer, *, points=1):
        """A §C question: the prompt (locked markdown) and a manually graded answer cell."""
        q = self.md(question)
        q.metadata.update(_meta(f"{grade_id}_prompt", grade=False, solution=False, locked=True))
        cell = nbformat.v4.new_markdown_cell(f"### BEGIN SOLUTION\n{model_answer.strip()}\n### END SOLUTION")
        cell.id = self._id(grade_id)
        cell.metadata.update(_meta(grade_id, grade=True, solution=True, locked=False, points=points))
        self.cells.append(cell)
        return cell

    def write(self, directory=SOURCE_DIR):
        nb = nbformat.v4.new_notebook()
        nb.cells = self.cells
        nb.metadata = {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
                       "language_info": {"name": "python"}}
        ids = [c.id for c in nb.cells]
        if len(set(ids)) != len(ids):
            raise ValueError(f"duplicate cell ids in {self.name}")
        nbformat.validate(nb)
        path = Path(directory) / f"{self.name}.ipynb"
        nbformat.write(nb, path)
        return path
