"""Verdicts: compare what the student's code returned with the grader's float64 reference, step by step.

References and the outputs of known bugs are never computed here: the grader puts them into each
case as `case["_oracle"][name]` (computed live while grading, precomputed as data for the public
cases a student runs at home). `known(name)` reads one of them.

A hidden check's message names the mistake and where it shows (the case, the output, the shape it should
have, the known bug) but never the case's inputs, the expected values or the student's values, nor any
number taken from the student's output (its shape, which or how many elements are wrong: the student
chooses those and could spell a hidden input in them): a student who resubmits must not collect the
answers of cases that do not change with the run's seed. `judging(hidden)` says which kind of check is judged; `fail(message, shown,
where)` and `shown_only_public` are the one place that decides what a message shows.
"""
import contextvars
import math
from collections.abc import Callable, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace

import numpy as np


@dataclass(frozen=True)
class Verdict:
    """passed, the message a student reads, and the same diagnosis as data: `stage`, the case it failed
    on (the 【…】 the message starts with), and `mistakes`, the known bugs it names as (key, message)
    pairs; key is the answer key's name of the bug (None for a recognised error without one)."""
    passed: bool
    message: str
    stage: str | None = None
    mistakes: tuple = ()


PASS = Verdict(True, "通过")

# diagnoses of mask bugs, shared by every judge of masked attention
MASK_MESSAGES = {
    "inverted": "掩码的约定反了：课程里布尔掩码 True = 屏蔽（masked_fill 的约定），你屏蔽的是 False 的位置。",
    "after_softmax": "掩码加在了 softmax 之后：把权重置 0 以后每行不再和为 1，未来位置仍通过分母泄露。"
                     "掩码要在 softmax 之前，把被屏蔽的分数填成 -inf（或极小值）。",
    "ignored": "没有用上掩码：被屏蔽的 key 仍然分到了注意力权重。",
}


_HIDDEN = contextvars.ContextVar("w1d1_judging_hidden", default=False)
HIDDEN_NOTE = "（隐藏检查不显示用例的输入、期望值和你的输出。）"


@contextmanager
def judging(hidden):
    """Verdicts made inside are on the cases of a hidden check (True) or of a public one."""
    token = _HIDDEN.set(bool(hidden))
    try:
        yield
    finally:
        _HIDDEN.reset(token)


def judging_hidden():
    return _HIDDEN.get()


def fail(message, shown=None, where=None, mistakes=()):
    """A failing verdict. `shown`: the lines under the message that show the case's inputs, the expected
    values or the student's values; a public check's message ends with them. A hidden check's ends
    instead with `where` (which output, the shape it should have: nothing from the student's output) and a
    note that values are not shown. `mistakes`: the known bugs the message names, as (key, message)."""
    data = {"stage": _stage_of(message), "mistakes": tuple(mistakes)}
    if shown is not None and not _HIDDEN.get():
        return Verdict(False, f"{message}\n{shown}", **data)
    if shown is not None:
        return Verdict(False, "\n".join([message] + ([where] if where else []) + [HIDDEN_NOTE]), **data)
    return Verdict(False, message, **data)


def _stage_of(message):
    """The case a message is about: the 【stage】 it starts with, or None."""
    if message.startswith("【") and "】" in message:
        return message[1:message.index("】")]
    return None


class Named(str):
    """A diagnosis message that also carries the known bugs it names, as (key, message) pairs; the bugs
    one message stands for share it, their keys joined by "/"."""

    mistakes: tuple = ()

    @classmethod
    def of(cls, pairs):
        """The messages of `pairs` joined as one diagnosis (None when there are none)."""
        keys = {}
        for key, message in pairs:  # one message under several keys (a bug and its variant) is one mistake
            if key not in keys.setdefault(message, []):
                keys[message].append(key)
        if not keys:
            return None
        named = cls("\n或者：".join(keys))
        named.mistakes = tuple(("/".join(k for k in ks if k) or None, message) for message, ks in keys.items())
        return named

    @classmethod
    def labelled(cls, message, label):
        """A message whose mistake is `label` (a fixed part of it, without the values it shows)."""
        named = cls(message)
        named.mistakes = ((None, label),)
        return named


def named_check(verdict):
    """A failure found by one of an exercise's own checks (a gate, flag, extra, recognised error, inputs
    changed): the check names the mistake, so its first line is the mistake when no known bug is named."""
    if not verdict or verdict.passed or verdict.mistakes:
        return verdict
    head = verdict.message.split("\n", 1)[0]
    if verdict.stage is not None:
        head = head[len(verdict.stage) + 2:]
    return replace(verdict, mistakes=((None, head),))


def mistakes_of(text):
    """The known bugs a diagnosis names: those a `Named` carries; a plain message is one unkeyed mistake."""
    if not text:
        return ()
    return getattr(text, "mistakes", None) or ((None, str(text)),)


def shown_only_public(text, instead=""):
    """Part of a sentence that shows a value: itself in a public check's message, `instead` in a hidden one's."""
    return instead if _HIDDEN.get() else text


class known:
    """The grader's output `name` (a reference or a known bug) on a case; KeyError when it has none.
    Its `name` is the bug's key in a verdict's data."""

    def __init__(self, name):
        self.name = name

    def __call__(self, case):
        return case["_oracle"][self.name]


def bug_table(text):
    """A verdict table written as text, one known bug a line: its name in the answer key, then the message
    that names it. [(message, known(name))] in the order written: the first bug that explains an output is
    the one named."""
    return [(message.strip(), known(name)) for name, message in (line.split(None, 1) for line in text.strip().splitlines())]


def bug_key(buggy):
    """The answer key's name of a known bug (None for one computed some other way)."""
    return getattr(buggy, "name", None)


def inputs_untouched(results, what="你的函数"):
    """Fail when the driver saw the student's function change an input array."""
    for res in results:
        if _input_changed(res):
            return fail(f"{what}修改了输入数组。函数不能原地修改输入（先复制，或写成不修改输入的形式）。")
    return None


def _input_changed(res):
    return ran(res) and bool(res["out"].get("input_changed") or res["out"].get("mask_changed"))


def fmt(x, max_items=24):
    """A short printable form of an array or number (in a hidden check's message: no values at all)."""
    if _HIDDEN.get():
        return "（隐藏）"
    arr = np.asarray(x)
    if arr.size > max_items:
        flat = np.array2string(arr.ravel()[:max_items], precision=4, suppress_small=True, max_line_width=100)
        return f"shape={arr.shape}，前 {max_items} 个元素：{flat} …"
    return np.array2string(arr, precision=4, suppress_small=True, max_line_width=100)


def close(got, want, rtol=1e-5, atol=1e-7, equal_nan=False):
    """Same shape and values within tolerance; bool arrays only equal bool arrays, exactly."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return False
    if want.dtype.kind == "b" or got.dtype.kind == "b":
        return got.dtype.kind == want.dtype.kind and bool(np.array_equal(got, want))
    return bool(np.allclose(got, want, rtol=rtol, atol=atol, equal_nan=equal_nan))


MEMORY = ("内存不够（MemoryError）：你的代码在这个用例上要的数组超过了评分内核的内存上限。大用例的 T 较大，"
          "不要构造 T×T×T 这样的中间数组（例如整个 softmax 的雅可比矩阵），按公式用广播逐行计算。")


def raised(stage, res, hints=()):
    """The verdict on a case whose run failed: a hint for an error it recognises (all its needles
    in the error text), otherwise the student's error itself."""
    err = res.get("error", "未知错误") if isinstance(res, dict) else "结果格式不对"
    for needles, hint in hints:
        if all(n in err for n in needles):
            return fail(f"【{stage}】{hint}\n报错：{err}", mistakes=((None, hint),))
    return fail(f"【{stage}】你的代码抛出了异常：\n{err}")


def ran(res):
    """Whether the student's code ran on a case and gave outputs."""
    return isinstance(res, dict) and bool(res.get("ok")) and isinstance(res.get("out"), dict)


def compare(cases, results, reference, keys, *, diagnoses=(), rtol=1e-6, atol=1e-8, dtypes=None, show=None):
    """The one loop of steps over plain outputs `keys` (no extra checks, inputs not checked).

    reference(case) -> dict of expected values; dtypes: key -> expected dtype name (or case -> name).
    """
    outputs = tuple(Output(k, expected=lambda c, k=k: reference(c)[k], tol=(rtol, atol),
                           dtype=(dtypes or {}).get(k)) for k in keys)
    return VerdictTable(outputs, diagnoses=diagnoses, show=show, untouched=None)(cases, results)


def _same_view(case, arr):
    return arr


@dataclass(frozen=True)
class Output:
    """One output of an exercise, checked on every case: shape, then dtype, then values.

    expected(case) -> the reference value (default: entry `key` of the case's answer named `answer`).
    dtype: the dtype name the driver reports as `<key>_dtype` (or case -> name); None: not checked.
    tol: (rtol, atol), or case -> (rtol, atol).
    view(case, array) -> the part of the output the contract fixes (values and bug names use it).
    name: how messages call it; fallback: the message when no known bug matches (default: described).
    render(case, want, got) -> the text under a value mismatch (default: inputs, expected, got).
    namer(case, out, outputs, diagnoses, key) -> the bug's message or None (default: name_bug).
    diagnoses: known bugs of this output alone (default: the exercise's).
    same_as: the input whose shape and dtype the output keeps; the messages then read
    "期望 float32（与 scores 相同），得到 …".
    nan_matches: a known bug's NaN is part of its output (e.g. 0/0 of a fully masked row) and names the bug
    only where the student's output has NaN too (default: a bug's NaN marks where it is undefined, skipped).
    """
    key: str
    answer: str = "ref"
    expected: Callable | None = None
    dtype: str | Callable | None = None
    tol: tuple | Callable = (1e-6, 1e-8)
    view: Callable = _same_view
    name: str | None = None
    shape_note: str = ""
    dtype_note: str = ""
    fallback: str | None = None
    render: Callable | None = None
    namer: Callable | None = None
    diagnoses: Sequence | None = None
    same_as: str = ""
    nan_matches: bool = False

    def want(self, case):
        return self.expected(case) if self.expected else case["_oracle"][self.answer][self.key]

    def tolerance(self, case):
        return self.tol(case) if callable(self.tol) else self.tol

    def _like(self):
        return f"（与 {self.same_as} 相同）" if self.same_as else ""

    def label(self):
        return self.name if self.name is not None else f"`{self.key}` "

    def check(self, stage, case, out, ex, diagnoses):
        """The first step this output fails on `case`, or None."""
        if self.key not in out:
            return fail(f"【{stage}】没有得到输出 `{self.key}`。")
        got, want = np.asarray(out[self.key]), np.asarray(self.want(case))
        if got.shape != want.shape:
            return fail(f"【{stage}】{self.label()}的形状不对：期望 {tuple(want.shape)}{self._like()}"
                        + shown_only_public(f"，得到 {tuple(got.shape)}") + "。" + self.shape_note)
        if self.dtype is not None:
            expected = self.dtype(case) if callable(self.dtype) else self.dtype
            if out.get(f"{self.key}_dtype") != expected:
                return fail(f"【{stage}】{self.label()}的 dtype 不对：期望 {expected}{self._like()}，得到 {out.get(f'{self.key}_dtype')}。"
                            + self.dtype_note, mistakes=(("dtype", f"{self.label()}的 dtype 不对：期望 {expected}"),))
        rtol, atol = self.tolerance(case)
        g, w = np.asarray(self.view(case, got)), np.asarray(self.view(case, want))
        if close(g, w, rtol, atol):
            return None
        own = self.diagnoses if self.diagnoses is not None else diagnoses
        msg = (self.namer or name_bug)(case, out, ex.outputs_of(case), own, self.key)
        mistakes = mistakes_of(msg)
        if msg is None:
            if self.fallback is not None:
                msg, mistakes = self.fallback, ((None, self.fallback),)
            elif _numeric(g) and _numeric(w) and not np.all(np.isfinite(g)) and np.all(np.isfinite(w)):
                msg = "结果里出现了 NaN 或 inf。"
            else:
                msg = describe_mismatch(self.key, g, w, rtol, atol)
                mistakes = getattr(msg, "mistakes", ())
        if _HIDDEN.get():
            return fail(f"【{stage}】{msg}", shown="", where=self.locate(case, got, want), mistakes=mistakes)
        shown = self.render(case, want, got) if self.render else _want_got(self.key, want, got, case, ex.show)
        return fail(f"【{stage}】{msg}", shown=shown, mistakes=mistakes)

    def locate(self, case, got, want):
        """Where a wrong value shows in a hidden check: the output and the shape it should have. Nothing derived
        from the student's output (its shape, which or how many elements are wrong): the student chooses those,
        and could spell a hidden case's inputs in them."""
        return f"出错的输出：{self.label().strip()}，形状 {tuple(want.shape)}"


@dataclass(frozen=True)
class VerdictTable:
    """The tables of one exercise, judged by the engine's one loop of steps:

    gate(cases, results)   conditions on the whole run, checked first (e.g. a forbidden API)
    then case by case:     error (hints, or error(case, res)) → flags(case, out) → each output's
                           shape → dtype → values with diagnoses → extras(case, out);
                           hint(case, out, message) adds to an unrecognised error's or an output's verdict
    after(case, out)       checks of each case made once every case passed the above; then inputs untouched.

    outputs and diagnoses may be functions of the case (exercises with several kinds of case);
    narrow: keep only the known bugs that explain every case (several bugs coincide on tiny cases).
    untouched: inputs_untouched(results) or another such function; or a message, reported with the stage
    of the first case whose input changed.
    """
    outputs: tuple | Callable
    diagnoses: Sequence | Callable = ()
    show: Callable | None = None
    hints: Sequence = ()
    error: Callable | None = None
    gate: Callable | None = None
    flags: Callable | None = None
    extras: Callable | None = None
    hint: Callable | None = None
    after: Callable | None = None
    untouched: Callable | str | None = inputs_untouched
    narrow: bool = False
    errors_first: bool = False

    def outputs_of(self, case):
        return self.outputs(case) if callable(self.outputs) else self.outputs

    def diagnoses_of(self, case):
        return self.diagnoses(case) if callable(self.diagnoses) else self.diagnoses

    def error_verdict(self, stage, case, res):
        """Running out of memory as such; an error the exercise recognises (error hook, hints) as is; any other one
        with the hint."""
        if isinstance(res, dict) and res.get("kind") == "MemoryError":
            return fail(f"【{stage}】{MEMORY}\n报错：{res.get('error')}", mistakes=((None, MEMORY),))
        return named_check(self.error and self.error(case, res)) or self.hinted(case, {}, raised(stage, res, self.hints))

    def hinted(self, case, out, verdict):
        if not (verdict and self.hint):
            return verdict
        return replace(verdict, message=verdict.message + self.hint(case, out, verdict.message))

    def __call__(self, cases, results):
        stages = [case.get("stage", f"用例 {i + 1}") for i, case in enumerate(cases)]
        verdict = named_check(self.gate(cases, results) if self.gate else None)
        if verdict:
            return verdict
        if self.errors_first:
            for stage, case, res in zip(stages, cases, results):
                if not ran(res):
                    return self.error_verdict(stage, case, res)
        kept = consistent(self, cases, results) if self.narrow else None
        for stage, case, res in zip(stages, cases, results):
            if not ran(res):
                return self.error_verdict(stage, case, res)
            out = res["out"]
            verdict = named_check(self.flags(case, out) if self.flags else None)
            for output in self.outputs_of(case):
                if verdict:
                    break
                verdict = self.hinted(case, out, output.check(stage, case, out, self,
                                                              kept if kept is not None else self.diagnoses_of(case)))
            verdict = verdict or named_check(self.extras(case, out) if self.extras else None)
            if verdict:
                return verdict
        for case, res in zip(cases, results) if self.after else ():
            verdict = named_check(self.after(case, res["out"]))
            if verdict:
                return verdict
        return named_check(self.untouched_verdict(stages, results)) or PASS

    def untouched_verdict(self, stages, results):
        if isinstance(self.untouched, str):
            changed = [stage for stage, res in zip(stages, results) if _input_changed(res)]
            return fail(f"【{changed[0]}】{self.untouched}") if changed else None
        return self.untouched(results) if self.untouched else None


@dataclass(frozen=True)
class Number(Output):
    """An output that is one number the driver reports with its type name as `<key>_type`.

    kind "int": an exact count (equal, and an int type); "float": equal within 1e-6 (an int or float type).
    type_note: what to say when an exact count comes back as a float; bounds: the range it must lie in.
    """
    kind: str = "int"
    type_note: str = ""
    bounds: tuple | None = None

    def check(self, stage, case, out, ex, diagnoses):
        got, type_name, want = out.get(self.key), str(out.get(f"{self.key}_type")), self.want(case)
        shown = None if _HIDDEN.get() else (f"输入：{ex.show(case)}\n" if ex.show else "") + \
            f"期望的 `{self.key}`：{want!r}\n你的 `{self.key}`：{got!r}（类型 {type_name}）"

        def fail_at(message, mistakes=()):
            return fail(f"【{stage}】{message}", shown=shown or "", where=f"出错的输出：`{self.key}`（类型 {type_name}）",
                        mistakes=mistakes)

        if isinstance(got, str) or got is None:
            return fail_at(f"`{self.key}` 应当是一个数，得到类型 {type_name}。", ((None, f"`{self.key}` 应当是一个数"),))
        if not self._same(got, want):
            own = self.diagnoses if self.diagnoses is not None else diagnoses
            named = Named.of((bug_key(bug), m) for m, bug in own if _near(got, _answer_or_none(bug, case)))
            if named:
                return fail_at(named, mistakes_of(named))
            msg = None
            if msg is None and self.kind == "int" and (isinstance(got, float) or abs(want) > 2**53) \
                    and math.isclose(_as_float(got), want, rel_tol=1e-12):  # int(…) of a float sum is off too
                msg = PRECISION_LOST
            if msg is None and self.kind == "int" and want >= 2**63:
                msg = INT64_OVERFLOW
            if msg is None:
                return fail_at(f"`{self.key}` 的数值不对。")
            return fail_at(msg + (self.type_note if msg == PRECISION_LOST else ""), ((None, msg),))
        if self.kind == "int" and not _is_int_type(type_name):
            return fail_at(f"数值对了，但类型是 {type_name}。{self.type_note}", (("type", f"`{self.key}` 应返回整数 int"),))
        if self.kind == "float" and not (_is_float_type(type_name) or _is_int_type(type_name)):
            return fail_at(f"`{self.key}` 应返回 float，得到类型 {type_name}。", ((None, f"`{self.key}` 应返回 float"),))
        if self.bounds and not self.bounds[0] <= _as_float(got) <= self.bounds[1]:
            bounds = f"{self.name or self.key}应在 [{self.bounds[0]:g}, {self.bounds[1]:g}] 之间"
            return fail_at(bounds + "。", ((None, bounds),))
        return None

    def _same(self, got, want):
        if isinstance(got, bool):
            return False
        if self.kind == "int":
            return (math.isfinite(got) and got == want) if isinstance(got, float) else got == want
        return math.isclose(_as_float(got), float(want), rel_tol=1e-6, abs_tol=1e-12)


PRECISION_LOST = "数值只差一点：用浮点数算大整数丢了精度（超过 2^53 的整数在浮点数里算不精确）。"
INT64_OVERFLOW = "结果超过了 int64 的范围：numpy 的 int64 会悄悄溢出，用 Python 的 int 求和（不要用 np.sum/np.arange）。"


def _is_int_type(name):
    return name == "int" or name.startswith(("int", "uint"))


def _is_float_type(name):
    return name == "float" or name.startswith("float")


def _answer_or_none(buggy, case):
    try:
        return buggy(case)
    except Exception:
        return None


def _near(got, want):
    """Loose equality used to name a bug (a float answer can still match a buggy formula)."""
    if want is None or isinstance(got, str) or not math.isfinite(_as_float(got)):
        return False
    if isinstance(got, int) and isinstance(want, int):
        return got == want
    return math.isclose(_as_float(got), float(want), rel_tol=1e-9, abs_tol=1e-12)


def _as_float(value):
    """A number as a float; one too large for a float is infinite (never an exception)."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def _numeric(arr):
    return arr.dtype.kind in "fiuc"


def matches(got, bug, rtol=1e-5, atol=1e-7, nan_matches=False):
    """Whether an output is a known bug's, wherever the bug's output is defined (finite);
    nan_matches: everywhere, a NaN matching only a NaN."""
    got, bug = np.asarray(got), np.asarray(bug)
    if got.shape != bug.shape:
        return False
    if not (_numeric(got) and _numeric(bug)):
        return close(got, bug)
    if nan_matches:
        return close(got, bug, max(rtol, 1e-5), max(atol, 1e-7), equal_nan=True)
    fin = np.isfinite(bug)
    if not fin.any() or not np.all(np.isfinite(got[fin])):
        return False
    return bool(np.allclose(got[fin], bug[fin], rtol=max(rtol, 1e-5), atol=max(atol, 1e-7)))


def _explains(case, out, outputs, buggy, key):
    """Whether one known bug gives the student's `key` and every other output of the student's it gives."""
    try:
        bug = buggy(case)
    except Exception:
        return False
    if bug is None:
        return False
    if not isinstance(bug, Mapping):
        bug = {key: bug}
    keyed = [o for o in outputs if o.key in bug]
    try:
        return key in bug and all(
            o.key in out and matches(o.view(case, np.asarray(out[o.key])), o.view(case, np.asarray(bug[o.key])),
                                     *o.tolerance(case), nan_matches=o.nan_matches) for o in keyed)
    except (IndexError, TypeError, ValueError):
        return False


def name_bug(case, out, outputs, diagnoses, key):
    """The messages of every known bug whose output is the student's on this case (a `Named`), or None."""
    return Named.of((bug_key(buggy), message) for message, buggy in diagnoses
                    if _explains(case, out, outputs, buggy, key))


def consistent(ex, cases, results):
    """The known bugs that explain the student's outputs on every case (all of them when none does)."""
    every = ex.diagnoses_of(cases[0]) if cases else ()
    kept = [(message, buggy) for message, buggy in every
            if all(ran(res) and _explains(case, res["out"], ex.outputs_of(case), buggy, ex.outputs_of(case)[0].key)
                   for case, res in zip(cases, results))]
    return kept or list(every)


def describe_mismatch(key, got, exp, rtol, atol):
    """What a wrong numeric answer looks like, when no known bug of the exercise matches it: a `Named`
    whose mistake is the shape of the error (its values left out), or the plain generic message."""
    head = f"`{key}` 的数值与参考答案不一致"
    if got.dtype.kind not in "fiu" or exp.dtype.kind not in "fiu" or got.size == 0:
        return head + "。"
    got, exp = got.astype(float), exp.astype(float)

    def shaped(label, detail):
        return Named.labelled(f"{head}：{label}{detail}", f"{head}：{label}")

    if not np.any(got) and np.any(exp):
        return shaped("你的结果全是 0", "——是不是返回了占位的 zeros，或者没有把算出的值写回去？")
    if got.size > 1 and np.ptp(got) == 0 and np.ptp(exp) > 0:
        return shaped("你的结果每个元素都相同，没有随输入变化", shown_only_public(f"（都等于 {got.flat[0]:.4g}）") + "。")
    if got.ndim >= 2 and got.shape[-1] == got.shape[-2] and close(np.swapaxes(got, -1, -2), exp, rtol, atol):
        return shaped("它正好是参考答案的转置", "——检查哪一维是 query（行）、哪一维是 key（列）。")
    scale = float(np.vdot(got, exp) / np.vdot(exp, exp)) if np.any(exp) else 0.0
    if scale != 0 and not np.isclose(scale, 1) and close(got, scale * exp, max(rtol, 1e-5), atol):
        return shaped("它和参考答案只差一个常数因子",
                      shown_only_public(f"（是参考答案的 {scale:.4g} 倍）") + "——检查缩放（如 1/√d_k）或归一化。")
    wrong = ~np.isclose(got, exp, rtol=rtol, atol=atol)
    if 0 < wrong.sum() <= max(1, wrong.size // 4):
        first = tuple(int(i) for i in np.argwhere(wrong)[0])
        return shaped("只有少数元素不对", shown_only_public(f"（{int(wrong.sum())} / {wrong.size} 个），第一个在下标 {list(first)}")
                      + "；其余都对——看看边界或特殊位置。")
    return head + "。"


def _want_got(key, exp, got, case, show):
    lines = []
    if show is not None:
        lines.append(f"输入：{show(case)}")
    lines.append(f"期望的 `{key}`：{fmt(exp)}")
    lines.append(f"你的 `{key}`：{fmt(got)}")
    return "\n".join(lines)
