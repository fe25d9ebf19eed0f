"""`check(grade_id)`: run the student's definitions on the check's cases.

At home the verdict is computed right here, so a student sees it at once. While grading
(`W1D1_GRADING=1`, set by the sandbox) the results are only emitted as plain data; the grader
judges them in its own process, where nothing the student wrote has run.
"""
import os
import sys
import traceback
import warnings

from . import cell_scope, registry, wire

MAX_ERROR_CHARS = 600


def grading():
    return os.environ.get("W1D1_GRADING") == "1"


def _short_error(exc):
    lines = traceback.format_exception_only(type(exc), exc)
    text = "".join(lines).strip()
    return text if len(text) <= MAX_ERROR_CHARS else text[:MAX_ERROR_CHARS] + " …"


def _origin(obj):
    """Where a definition comes from: its module and the file its code was compiled from."""
    code = getattr(obj, "__code__", None)
    if code is None and isinstance(obj, type):
        for attr in vars(obj).values():
            code = getattr(attr, "__code__", None) or getattr(getattr(attr, "__func__", None), "__code__", None)
            if code is not None:
                break
    return {"module": str(getattr(obj, "__module__", "")), "file": str(getattr(code, "co_filename", ""))}


def run_cases(grade_id, ns, hidden=False, seed=None):
    drv = registry.driver(grade_id)
    seed = int(os.environ.get("W1D1_SEED", "0")) if seed is None else seed
    results = []
    for case in drv.cases(seed=seed, hidden=hidden):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out = drv.run(ns, case)
            results.append({"ok": True, "out": out})
        except Exception as exc:  # the student's error becomes part of the verdict
            results.append({"ok": False, "error": _short_error(exc)})
    origins = {name: _origin(ns[name]) for name in drv.names if name in ns}
    return {"grade_id": grade_id, "hidden": bool(hidden), "seed": seed, "results": results, "origins": origins}


def check(grade_id, hidden=False):
    """Run the checks of exercise `grade_id` on the definitions in the calling notebook."""
    ns = sys._getframe(1).f_globals
    payload = run_cases(grade_id, ns, hidden=hidden)
    if grading():
        from IPython.display import display

        display({wire.MIME: wire.dumps(payload), "text/plain": f"[{grade_id}] 检查结果已提交评分"}, raw=True)
        return None
    from autograder.judge import judge_payload

    cell_scope.warn_outside(ns, registry.driver(grade_id).names)  # grading runs only setup/answer/test cells

    verdict = judge_payload(wire.loads(wire.dumps(payload)))  # same plain data the grader would see
    if not verdict.passed:
        raise CheckFailed(verdict.message)
    kind = "隐藏检查" if hidden else "公开检查"
    note = "" if hidden else "（提交后还有隐藏检查）"
    print(f"✅ {kind}通过：{grade_id}{note}")
    return None


class CheckFailed(AssertionError):
    """A check that did not pass; the message says why, in Chinese."""

    def _render_traceback_(self):
        # IPython shows these lines instead of a traceback through the checker's own code
        return ["\x1b[1;31mCheckFailed：检查未通过\x1b[0m", str(self)]
