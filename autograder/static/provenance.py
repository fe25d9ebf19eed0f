"""Static check on the student's source, run in the grader's process: an exercise is answered by
the definitions written in its own answer cell.

This is not what keeps borrowed answers out: the grading kernel runs only the setup, answer and
test cells, and the companion script and the reference do not exist in its sandbox (see
autograder/kernels/kernel_view.py), however a cell tries to reach them. This check only names the mistake of
an answer cell that defines nothing (for example one that imports the function from elsewhere).
"""
from w1d1_student.cell_scope import answer_cells, defined_names, missing_message

__all__ = ["answer_problems", "defined_names"]


def answer_problems(nb, grade_id, names):
    """Why exercise `grade_id` does not count as answered in its own cells ([] when it does): the answer
    cell and its copies (which run where they stand) together. The rule is the student package's
    `defined_names`, which `check()` applies at home too."""
    answer = answer_cells(nb, grade_id)
    if not answer:
        return ["找不到这道题的答案单元格"]
    defined = set().union(*(defined_names(c.source) for c in answer))
    missing = [n for n in names if n not in defined]
    return [missing_message(missing)] if missing else []
