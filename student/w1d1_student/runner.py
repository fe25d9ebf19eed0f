"""`check(grade_id)`: run the student's definitions on the check's cases.

The cases are data the grader made. At home the public ones come with the package (with the
grader's expected values and the outputs of the known bugs), and the verdict is computed right
here, so a student sees it at once. While grading (`W1D1_GRADING=1`) the grader sends each test cell's
cases (inputs only) in a cell of its own just before that test cell (`receive`); the results are only
emitted as plain data and the grader judges them in its own process, where nothing the student wrote
has run. `W1D1_CASES` (a case file with the grader's answers) is for the tests: hidden checks at home.
"""
import contextlib
import json
import os
import sys
import types
import warnings
from importlib import resources

from . import cell_scope, registry, wire

MAX_ERROR_CHARS = 600
CASES_ENV = "W1D1_CASES"
PUBLIC_DATA = "public_cases.json"
# the course's own code that holds answers: while grading these modules are a stub (the sandbox writes it from
# COMPANION_STUB), and at home their functions raise the stub's error while a check runs, so home and grading agree
COMPANIONS = ("w1day1_checks", "w1d1_attention")
UNAVAILABLE = "评分时 {module} 不可用（用到了 `{name}`）：答案必须在答案单元格里自己实现。"
COMPANION_STUB = ('"""评分时没有这个模块：答案必须自己实现。"""\n\n\ndef __getattr__(name):\n'
                  f"    raise AttributeError({UNAVAILABLE!r}.format(module=__name__, name=name))\n")


def grading():
    return os.environ.get("W1D1_GRADING") == "1"


def _short_error(exc):
    """{"error": "Name: message", "kind": its nearest built-in class's name} of an exception the student's code
    raised, read without running any method of it: the class's own name, and the message where its arguments are
    plain text or numbers (a library's error)."""
    import builtins

    cls = type(exc)
    name, module = type.__getattribute__(cls, "__qualname__"), type.__getattribute__(cls, "__module__")
    args = BaseException.args.__get__(exc)
    plain = all(any(type(a) is t for t in (str, int, float, bool)) for a in args)
    own_str = cls.__str__ if getattr(builtins, name, None) is cls else BaseException.__str__  # builtins' own: KeyError's quotes
    message = own_str(exc) if plain else ""
    if type(module) is str and module not in ("__main__", "builtins"):  # as a traceback names it
        name = f"{module}.{name}"
    text = (f"{name}: {message}" if message else name).strip()
    # the nearest built-in class: what a hidden verdict may name (numpy's _ArrayMemoryError is a MemoryError)
    # (by identity: comparing classes with == could run a metaclass's __eq__, the student's code)
    kind = next((k for k, c in ((type.__getattribute__(c, "__name__"), c) for c in type.__getattribute__(cls, "__mro__"))
                 if type(k) is str and getattr(builtins, k, None) is c), "Exception")
    return {"error": text if len(text) <= MAX_ERROR_CHARS else text[:MAX_ERROR_CHARS] + " …", "kind": kind}


_PUBLIC = {}


def public_cases():
    """{grade_id: [case, ...]}: the public cases shipped with the package, with the grader's answers."""
    if not _PUBLIC:
        text = resources.files("w1d1_student").joinpath("data", PUBLIC_DATA).read_text(encoding="utf-8")
        _PUBLIC.update(wire.decode(json.loads(text)))
    return _PUBLIC


def case_file_cases(path, grade_id, hidden):
    with open(path, encoding="utf-8") as fh:
        data = wire.decode(json.load(fh))
    return data[grade_id]["hidden" if hidden else "public"]


_DELIVERED = {}


def receive(text):
    """While grading: the cases of the checks of the test cell about to run, sent by the grader just
    before it (never earlier, so no answer cell can read a case before its own check runs)."""
    _DELIVERED.clear()
    _DELIVERED.update(json.loads(text))


def cases_for(grade_id, hidden):
    """The cases of one check, or None where there are none here (hidden cases at home)."""
    registry.topic(grade_id)  # an unknown grade_id is a clear error
    path = os.environ.get(CASES_ENV)
    if path:
        return case_file_cases(path, grade_id, hidden)
    kind = "hidden" if hidden else "public"
    if grading() and kind in _DELIVERED.get(grade_id, {}):
        return wire.decode(_DELIVERED[grade_id][kind])
    if grading():
        raise RuntimeError(f"评分程序没有送来 {grade_id} 的用例：请联系助教。")
    if hidden:
        return None
    return public_cases()[grade_id]


def _raiser(module, name):
    """The code of a function that raises the grading stub's error for `module.name`."""
    scope = {}
    exec(f"def unavailable(*args, **kwargs):\n    raise AttributeError({UNAVAILABLE.format(module=module, name=name)!r})",
         scope)
    return scope["unavailable"].__code__


@contextlib.contextmanager
def _companions_unavailable():
    """The companion modules' functions raise, as they do while grading, until the block ends (every reference to
    them too: their code is swapped, not the module's names)."""
    swapped = []
    for module in COMPANIONS:
        for name, fn in list(vars(sys.modules.get(module, types.ModuleType(module))).items()):
            if type(fn) is types.FunctionType and fn.__module__ == module and not fn.__code__.co_freevars:
                swapped.append((fn, fn.__code__))
                fn.__code__ = _raiser(module, name)
    try:
        yield
    finally:
        for fn, code in swapped:
            fn.__code__ = code


def _make_run_cases(driver, companions_unavailable, short_error):
    """run_cases, holding (from this module's import, before any cell of the student's) the functions it calls."""

    def run_cases(grade_id, ns, cases, hidden=False):
        """Run the student's code on every case; each result is plain data or the student's error."""
        with companions_unavailable():
            drv = driver(grade_id)
            results = []
            for case in cases:
                inputs = {k: v for k, v in case.items() if k != "_oracle"}
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        out = drv.run(ns, inputs)
                    results.append({"ok": True, "out": out})
                except Exception as exc:  # the student's error becomes part of the verdict
                    results.append({"ok": False, **short_error(exc)})
        return {"grade_id": grade_id, "hidden": bool(hidden), "results": results}

    return run_cases


run_cases = _make_run_cases(registry.driver, _companions_unavailable, _short_error)


def judge(grade_id, cases, results, hidden=False):
    """The verdict on `results` of the student's code on `cases` (each case carrying `_oracle`);
    `hidden`: the cases of the hidden check, whose message shows no input, expected or student's value."""
    from .engine import fail, judging

    if not isinstance(results, list) or len(results) != len(cases):
        return fail("检查结果不完整：内核没有为每个测试用例返回结果。")
    results = [_in_words(res) for res in results]
    try:
        with judging(hidden):
            verdict = registry.verdict_table(grade_id)(cases, results)
    except Exception as exc:  # a value the checks cannot even compare costs this exercise only
        why = type(exc).__name__ if hidden else f"{type(exc).__name__}: {str(exc)[:200]}"
        return fail(f"检查没法比较你的结果（{why}）：返回值不符合题目的约定"
                    "（形状、类型或数值范围）。这道题不得分；对照题目要求的返回值再检查一遍。")
    return _without_error_texts(verdict, results) if hidden else verdict


def _words_only(value, keys=True):
    """`value` with every text in it a word of the vocabulary (registry.VOCABULARY; any other text becomes
    driver.OTHER), dict keys too where `keys`."""
    from .driver import OTHER

    if isinstance(value, str):
        return value if value in registry.VOCABULARY else OTHER
    if isinstance(value, dict):
        return {(_words_only(k) if keys else k): _words_only(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_words_only(v) for v in value]
    return value


def _in_words(res):
    """A case's result as the verdict tables read it: its outputs hold no text but words of the vocabulary, so a
    verdict carries no text the kernel made up (the error, the student's own, is cut down in hidden verdicts)."""
    if isinstance(res, dict) and isinstance(res.get("out"), dict):
        return {**res, "out": _words_only(res["out"], keys=False)}
    return res


def _builtin_kind(res):
    """The exception's type as shown in a hidden verdict: a built-in exception's name (its own, else the nearest
    built-in class the kernel reported), else a fixed word (the student names their own exception classes, and
    could spell a case's inputs in the name)."""
    import builtins

    def builtin(name):
        return isinstance(getattr(builtins, name, None), type) and issubclass(getattr(builtins, name), BaseException)

    own, nearest = res["error"].split(":", 1)[0].strip(), res.get("kind")
    if builtin(own):
        return own
    return nearest if isinstance(nearest, str) and builtin(nearest) and nearest not in ("BaseException", "Exception") else "异常"


def _without_error_texts(verdict, results):
    """A hidden check's verdict with the student's error messages cut down to their exception type: the
    student writes that text, and could print a hidden case's inputs in it."""
    from dataclasses import replace

    message = verdict.message
    for res in results:
        err = res.get("error") if isinstance(res, dict) else None
        if not isinstance(err, str) or not err.strip():
            continue
        kind = _builtin_kind(res)
        shown = f"{kind}（隐藏检查不显示报错内容）"
        for part in sorted({err, *err.splitlines()}, key=len, reverse=True):
            if len(part.strip()) >= 4 and part.strip() != kind:
                message = message.replace(part, shown)
    return replace(verdict, message=message) if message != verdict.message else verdict


def _publisher():
    """IPython's display, bound when this module is imported (a grading kernel imports it before the first cell):
    a notebook that later rebinds IPython.display.display does not see the check's result go by."""
    try:
        from IPython.display import display
    except ImportError:  # no IPython here: nothing to publish to (the home path prints)
        return None
    return display


def _make_check(publish, dumps, cases_for, run_cases, driver):
    """check(), holding what it calls from this module's import on: nothing it uses while grading is looked up
    in a module's namespace, which a notebook's code could rebind."""

    def check(grade_id, hidden=False):
        """Run the checks of exercise `grade_id` on the definitions in the calling notebook."""
        ns = sys._getframe(1).f_globals
        cases = cases_for(grade_id, hidden)
        if cases is None:
            print(f"ℹ️ 隐藏检查在提交后由评分系统运行：{grade_id}")
            return None
        payload = run_cases(grade_id, ns, cases, hidden=hidden)
        if grading():
            publish({wire.MIME: dumps(payload), "text/plain": f"[{grade_id}] 检查结果已提交评分"}, raw=True)
            return None
        names = driver(grade_id).names
        undefined = cell_scope.undefined_at_home(ns, grade_id, names)  # as grading reads it
        if undefined:
            raise CheckFailed(f"【{grade_id}】{undefined}。评分时这道题得 0 分。")
        cell_scope.warn_outside(ns, names)  # grading runs only setup/answer/test cells
        verdict = judge(grade_id, cases, wire.loads(dumps(payload))["results"], hidden)  # what the grader would see
        if not verdict.passed:
            raise CheckFailed(verdict.message)
        kind = "隐藏检查" if hidden else "公开检查"
        note = "" if hidden else "（提交后还有隐藏检查）"
        print(f"✅ {kind}通过：{grade_id}{note}")
        return None

    return check


check = _make_check(_publisher(), wire.dumps, cases_for, run_cases, registry.driver)


class CheckFailed(AssertionError):
    """A check that did not pass; the message says why, in Chinese."""

    def _render_traceback_(self):
        # IPython shows these lines instead of a traceback through the checker's own code
        return ["\x1b[1;31mCheckFailed：检查未通过\x1b[0m", str(self)]
