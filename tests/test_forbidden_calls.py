"""The grader's static check of answer cells (autograder/forbidden_calls.py): direct uses of forbidden
APIs and references to the checking machinery cost the exercise; no correct variant is touched."""
import nbformat
import pytest
from w1d1_student import registry

from autograder import forbidden_calls
from autograder.course import ASSIGNMENT, SOURCE_DIR
from tests.test_mutations import VARIANTS


def _notebook(answer_sources):
    nb = nbformat.v4.new_notebook()
    for gid, src in answer_sources.items():
        cell = nbformat.v4.new_code_cell(src)
        cell.metadata["nbgrader"] = {"solution": True, "grade": False, "grade_id": gid, "locked": False}
        nb.cells.append(cell)
    return nb


def _correct():
    for gid, table in VARIANTS.items():
        for i, src in enumerate([table["solution"], *table["correct"]]):
            yield pytest.param(gid, src, id=f"{gid}-{i}")


@pytest.mark.parametrize("grade_id,src", list(_correct()))
def test_correct_answers_pass_the_static_check(grade_id, src):
    """In the real notebook: with its setup cell's imports and every other answer cell solved."""
    nb = nbformat.read(SOURCE_DIR / ASSIGNMENT / f"{registry.NOTEBOOK_OF[grade_id]}.ipynb", as_version=4)
    next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id).source = src
    assert forbidden_calls.answer_problems(nb, grade_id) == []


@pytest.mark.parametrize("src,what", [
    ("y = nn.functional.multi_head_attention_forward", "F.multi_head_attention_forward"),
    ("m = nn.MultiheadAttention(4, 2)", "nn.MultiheadAttention"),
    ("y = torch._scaled_dot_product_attention_math", "F.scaled_dot_product_attention"),
    ("y = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu", "F.scaled_dot_product_attention"),
    ("%%time\ny = F.scaled_dot_product_attention(q, k, v)", "F.scaled_dot_product_attention"),
])
def test_torch_imported_by_the_setup_cell_counts_in_answer_cells(src, what):
    """Red team, issue 12 round 3: `torch`, `nn`, `F` come from the setup cell, not the answer cell."""
    nb = _notebook({"mha": src})
    nb.cells.insert(0, nbformat.v4.new_code_cell("import torch\nfrom torch import nn\nimport torch.nn.functional as F"))
    problems = forbidden_calls.answer_problems(nb, "mha")
    assert len(problems) == 1 and what in problems[0], problems


@pytest.mark.parametrize("call", ["type(self).scaled_dot_product_attention", "super().scaled_dot_product_attention",
                                  "self.scaled_dot_product_attention", "scaled_dot_product_attention"])
def test_the_students_own_function_of_that_name_is_no_forbidden_use(call):
    own = ("import torch\n\ndef scaled_dot_product_attention(q, k, v):\n    return torch.softmax(q @ k.T, -1) @ v\n\n"
           f"class M:\n    def forward(self, q, k, v):\n        return {call}(q, k, v)\n")
    nb = _notebook({"mha": own})
    nb.cells.insert(0, nbformat.v4.new_code_cell("import torch\nfrom torch import nn"))
    assert forbidden_calls.answer_problems(nb, "mha") == []


@pytest.mark.parametrize("src,what", [
    ("import torch.nn.functional as F\ny = F.scaled_dot_product_attention", "F.scaled_dot_product_attention"),
    ("from torch.nn.functional import multi_head_attention_forward as f", "F.multi_head_attention_forward"),
    ("import functools, torch\nf = functools.partial(torch.nn.MultiheadAttention, 4, 2)", "nn.MultiheadAttention"),
    ("import torch\nf = getattr(torch.nn.functional, 'scaled_dot_product_attention')", "F.scaled_dot_product_attention"),
    ("from torch.nn.functional import *\ny = scaled_dot_product_attention", "F.scaled_dot_product_attention"),
    ("import torch as t\nm = t.nn.MultiheadAttention(4, 2)", "nn.MultiheadAttention"),
    ("y = __import__('torch').nn.functional.scaled_dot_product_attention", "F.scaled_dot_product_attention"),
    ("import torch.nn.functional as F\nG = F\nH = G\ny = H.scaled_dot_product_attention", "F.scaled_dot_product_attention"),
])
def test_forbidden_api_in_any_answer_cell_zeroes_mha(src, what):
    nb = _notebook({"split_merge_heads": src, "mha": "class MultiHeadAttention: pass"})
    problems = forbidden_calls.answer_problems(nb, "mha")
    assert len(problems) == 1 and what in problems[0] and "计 0 分" in problems[0], problems
    assert forbidden_calls.answer_problems(nb, "split_merge_heads") == []  # only mha forbids them


@pytest.mark.parametrize("src", [
    "import w1d1_student.drivers.nb04_multihead as k\nk._tripwires = None",
    "from autograder.judge import judge_payload",
    "import pkgutil\nk = pkgutil.resolve_name('x.y')",
    "import sys\nk = sys.modules['w1d1_' + 'student']",
    "import importlib\nk = importlib.import_module('w1d1_student.runner')",
    "import torch\nwith torch._C.DisableTorchFunction():\n    pass",
    "from torch.overrides import _pop_mode",
    "%time import w1d1_student",
    "exec('import autograder')",
])
def test_reference_to_the_checking_machinery_zeroes_its_exercise(src):
    nb = _notebook({"softmax": "def softmax(x):\n    return x", "self_attention": src})
    problems = forbidden_calls.answer_problems(nb, "self_attention")
    assert len(problems) == 1 and "评分检查机制" in problems[0], problems
    assert forbidden_calls.answer_problems(nb, "softmax") == []  # another exercise keeps its points
