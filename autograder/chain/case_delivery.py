"""Which cases the kernel is handed, and when: just before the test cell whose checks use them (this run's
seed), so no answer cell ever sees a case before its check runs; and never the hidden cases that hold the
answer to an exercise whose test cell is still to run (a test cell moved up: `withheld`)."""
import json

from nbgrader import utils
from w1d1_student.cell_source import check_calls

from autograder.exercises import CARRIES


def is_test(cell):
    return cell.get("cell_type") == "code" and utils.is_grade(cell) and not utils.is_solution(cell)


def withheld(nb, index):
    """{grade_id: the exercises it would hand over} for the hidden checks of test cell `index` whose cases hold
    answers (CARRIES) to an exercise with a test cell still to run after it (a cell moved up): those cases are
    not sent, so no answer reaches the kernel before that exercise's own checks have run."""
    later = {gid for cell in nb.cells[index + 1:] if is_test(cell) for gid, _ in check_calls(cell.source)}
    out = {}
    for grade_id, hidden in check_calls(nb.cells[index].source) if is_test(nb.cells[index]) else []:
        pending = [gid for gid in CARRIES.get(grade_id, ()) if gid in later]
        if hidden and pending:
            out[grade_id] = pending
    return out


def withheld_message(grade_id, pending):
    return (f"{grade_id}（隐藏检查）这次没有运行：它的用例里有练习 {'、'.join(pending)} 的正确实现，评分程序只在那些练习的"
            "测试单元格都运行完之后才把它们送进内核；你的笔记本里这个测试单元格被移到了它们前面。"
            "把测试单元格放回原来的位置（练习的顺序），再提交。")


def delivery(nb, index, case_file):
    """The source of a hidden cell that hands the kernel the cases of test cell `index`'s checks, read from the
    file `case_file()` names (called only where the cell calls a check); None where it calls none."""
    from autograder.exercises.checks import read_case_file
    from autograder.exercises.private import for_kernel

    calls = check_calls(nb.cells[index].source) if is_test(nb.cells[index]) else []
    if not calls:
        return None
    data = read_case_file(case_file())
    held = withheld(nb, index)
    wanted = {}
    for grade_id, hidden in calls:
        kind = "hidden" if hidden else "public"
        if kind in data.get(grade_id, {}):
            wanted.setdefault(grade_id, {})[kind] = [] if hidden and grade_id in held else for_kernel(data[grade_id][kind])
    text = json.dumps(wanted, separators=(",", ":"))
    return f"__import__('w1d1_student.runner', fromlist=['receive']).receive({text!r})"
