"""The verdict step (nbgrader preprocessor JudgeProbes): every autograder test cell's outputs replaced by the
grader's own verdict, reached from the check results the kernel sent (the executor's record, never the cell's
outputs) and from what the answer cells are (provenance, forbidden calls)."""
import json

from nbformat import NotebookNode
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Integer
from w1d1_format import MIME, OWN_KEY, VERDICTS_KEY
from w1d1_student import registry, wire
from w1d1_student.cell_source import check_calls

from autograder import timing
from autograder.chain.case_delivery import is_test, withheld, withheld_message
from autograder.exercises.checks import judge_payload
from autograder.static import forbidden_calls, provenance

VERDICT_ENAME = "检查未通过"
CASES_KEY = "w1d1_case_file"  # resources: the case file the kernel's cases came from, for JudgeProbes
ARRIVED_KEY = "w1d1_probes"  # resources: {cell index: every check result the kernel sent while it ran}, for JudgeProbes


def error_output(title, message):
    return NotebookNode(output_type="error", ename=title, evalue=message, traceback=[f"{title}: {message}"])


def stream_output(text):
    return NotebookNode(output_type="stream", name="stdout", text=text)


def _decoded(text):
    try:
        return wire.loads(text if isinstance(text, str) else json.dumps(text))
    except Exception:  # malformed, too deep (RecursionError) …: this probe is unusable
        return None


def _payloads(cell, arrived=None):
    """The check results of a test cell: those the kernel sent while it ran (`arrived`, the executor's record), or
    where no kernel ran here, those in the cell's outputs."""
    if arrived is not None:
        return [_decoded(text) for text in arrived]
    return [_decoded(out["data"][MIME]) for out in cell.get("outputs", [])
            if out.get("output_type") in ("display_data", "execute_result") and MIME in out.get("data", {})]


def answer_problems(nb, grade_id, names):
    """Why exercise `grade_id` scores 0 whatever its checks report: its answer cells (provenance) and what they
    reach (forbidden_calls); [] when nothing is found."""
    try:
        return provenance.answer_problems(nb, grade_id, names) + forbidden_calls.answer_problems(nb, grade_id)
    except RecursionError:  # Python runs it; the checks' readers of the code cannot follow it, nor vouch for it
        return ["答案单元格里的表达式嵌套太深，评分检查读不了这本笔记本的代码，本题计 0 分（把长的表达式拆成几行）"]


def _record(grade_id, hidden, passed, stage=None, mistakes=()):
    """One check's verdict as data (stored with the graded notebook, read by the class report)."""
    return {"grade_id": grade_id, "hidden": bool(hidden), "passed": bool(passed), "stage": stage,
            "mistakes": [[key, message] for key, message in mistakes]}


def judge_cell(nb, cell, seed, case_file=None, arrived=None):
    """The verdict of one autograder test cell as (passed, message, records): records, one per check
    of the cell, carry the same diagnosis as data (`_record`). `arrived`: the executor's record of the check
    results the kernel sent ({cell index: [...]}; None where no kernel ran here: the cell's outputs)."""
    calls = check_calls(cell.source)
    if not calls:
        return False, "这个测试单元格里没有检查（单元格可能被改动过）。", []
    index = next(i for i, c in enumerate(nb.cells) if c is cell)
    payloads = _payloads(cell, None if arrived is None else arrived.get(index, []))
    held = withheld(nb, index)
    lines, records = [], []
    for grade_id, hidden in calls:
        kind = "隐藏检查" if hidden else "公开检查"
        try:
            names = registry.driver(grade_id).names
        except KeyError:
            return False, f"未知的练习 {grade_id}", records
        problems = answer_problems(nb, grade_id, names)
        if problems:
            records.append(_record(grade_id, hidden, False, mistakes=[(None, p) for p in problems]))
            return False, f"{grade_id}：" + "；".join(problems) + "。", records
        if hidden and grade_id in held:
            message = withheld_message(grade_id, held[grade_id])
            records.append(_record(grade_id, hidden, False, mistakes=[(None, message)]))
            return False, message, records
        mine = [p for p in payloads if isinstance(p, dict) and p.get("grade_id") == grade_id and bool(p.get("hidden")) == hidden]
        if len(mine) != 1 or len(payloads) != len(calls):
            records.append(_record(grade_id, hidden, False))
            return False, (f"{grade_id}（{kind}）没有得到可用的检查结果：单元格没有运行完"
                           "（前面的错误、超时或内核退出），或者输出被改动。"), records
        verdict = judge_payload(mine[0], seed=seed, case_file=case_file)
        records.append(_record(grade_id, hidden, verdict.passed, verdict.stage, verdict.mistakes))
        if not verdict.passed:
            return False, f"{grade_id}（{kind}）未通过：\n{verdict.message}", records
        lines.append(f"✅ {grade_id}：{kind}通过")
    return True, "\n".join(lines), records


class JudgeProbes(NbGraderPreprocessor):
    """Replace every autograder test cell's outputs by the grader's own verdict."""

    seed = Integer(0, help="Seed of the check cases where no kernel ran (the kernels' case file rules).").tag(config=True)

    def preprocess(self, nb, resources):
        with timing.timed("judging"):
            return self._judge_all(nb, resources)

    def _judge_all(self, nb, resources):
        seed, case_file = self.seed, resources.get(CASES_KEY)  # the cases the kernel was given
        arrived = resources.get(ARRIVED_KEY)
        for cell in nb.cells:
            if is_test(cell):
                try:
                    passed, message, records = judge_cell(nb, cell, seed, case_file, arrived)
                except Exception as exc:  # a verdict that cannot be reached costs this test cell only
                    passed, message, records = False, f"这个检查的结果无法判定（{type(exc).__name__}），这一项记 0 分。", []
                cell.outputs = [stream_output(message + "\n")] if passed else [error_output(VERDICT_ENAME, message)]
                cell.metadata[OWN_KEY] = {VERDICTS_KEY: records}  # the grader's own: intake cleared the student's
        return nb, resources
