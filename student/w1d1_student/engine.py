"""Verdicts: compare what the student's code returned with the grader's float64 reference, stage by stage.

References and the outputs of known bugs are never computed here: the grader puts them into each
case as `case["_oracle"][name]` (computed live while grading, precomputed as data for the public
cases a student runs at home). `known(name)` reads one of them.
"""
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Verdict:
    passed: bool
    message: str


PASS = Verdict(True, "通过")

# diagnoses of mask bugs, shared by every judge of masked attention
MASK_MESSAGES = {
    "inverted": "掩码的约定反了：课程里布尔掩码 True = 屏蔽（masked_fill 的约定），你屏蔽的是 False 的位置。",
    "after_softmax": "掩码加在了 softmax 之后：把权重置 0 以后每行不再和为 1，未来位置仍通过分母泄露。"
                     "掩码要在 softmax 之前，把被屏蔽的分数填成 -inf（或极小值）。",
    "ignored": "没有用上掩码：被屏蔽的 key 仍然分到了注意力权重。",
}


def fail(message):
    return Verdict(False, message)


def known(name):
    """The grader's output `name` (a reference or a known bug) on a case; KeyError when it has none."""
    return lambda case: case["_oracle"][name]


def inputs_untouched(results, what="你的函数"):
    """Fail when the driver saw the student's function change an input array."""
    for res in results:
        if res.get("ok") and res["out"].get("input_changed"):
            return fail(f"{what}修改了输入数组。函数不能原地修改输入（先复制，或写成不修改输入的形式）。")
    return None


def fmt(x, max_items=24):
    """A short printable form of an array or number."""
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


def raised(stage, res, hints=()):
    """The verdict on a case whose run failed: a hint for an error it recognises (all its needles
    in the error text), otherwise the student's error itself."""
    err = res.get("error", "未知错误") if isinstance(res, dict) else "结果格式不对"
    for needles, hint in hints:
        if all(n in err for n in needles):
            return fail(f"【{stage}】{hint}\n报错：{err}")
    return fail(f"【{stage}】你的代码抛出了异常：\n{err}")


def ran(res):
    """Whether the student's code ran on a case and gave outputs."""
    return isinstance(res, dict) and bool(res.get("ok"))


def compare(cases, results, reference, keys, *, diagnoses=(), rtol=1e-6, atol=1e-8, dtypes=None, show=None):
    """Staged comparison.

    reference(case) -> dict of expected values for `keys`.
    diagnoses: (message, buggy(case) -> dict) pairs; on a mismatch the first bug whose output
    the student's matches names the likely mistake.
    dtypes: optional dict key -> expected dtype name reported by the driver under key + "_dtype".
    show(case) -> short text describing the inputs of the failing case.
    """
    for i, (case, res) in enumerate(zip(cases, results)):
        stage = case.get("stage", f"用例 {i + 1}")
        if not ran(res):
            return raised(stage, res)
        out = res.get("out") or {}
        want = reference(case)
        for key in keys:
            if key not in out:
                return fail(f"【{stage}】没有得到输出 `{key}`。")
            got = np.asarray(out[key])
            exp = np.asarray(want[key])
            if got.shape != exp.shape:
                return fail(f"【{stage}】`{key}` 的形状不对：期望 {tuple(exp.shape)}，得到 {tuple(got.shape)}。")
            if dtypes and key in dtypes:
                expected_dtype = dtypes[key](case) if callable(dtypes[key]) else dtypes[key]
                got_dtype = out.get(f"{key}_dtype")
                if got_dtype != expected_dtype:
                    return fail(f"【{stage}】`{key}` 的 dtype 不对：期望 {expected_dtype}，得到 {got_dtype}。")
            if exp.dtype.kind == "f" and got.dtype.kind == "f" and not np.all(np.isfinite(got)) and np.all(np.isfinite(exp)):
                msg = _diagnose(case, out, keys, diagnoses, rtol, atol) or "结果里出现了 NaN 或 inf。"
                return fail(f"【{stage}】{msg}\n{_want_got(key, exp, got, case, show)}")
            if not close(got, exp, rtol, atol):
                msg = _diagnose(case, out, keys, diagnoses, rtol, atol) or describe_mismatch(key, got, exp, rtol, atol)
                return fail(f"【{stage}】{msg}\n{_want_got(key, exp, got, case, show)}")
    return PASS


def _diagnose(case, out, keys, diagnoses, rtol, atol):
    for message, buggy in diagnoses:
        try:
            bug = buggy(case)
        except Exception:
            continue
        tol = (max(rtol, 1e-5), max(atol, 1e-7))
        if all(k in out and close(out[k], bug[k], *tol, equal_nan=True) for k in keys if k in bug):
            if any(k in bug for k in keys):
                return message
    return None


def describe_mismatch(key, got, exp, rtol, atol):
    """What a wrong numeric answer looks like, when no known bug of the exercise matches it."""
    head = f"`{key}` 的数值与参考答案不一致"
    if got.dtype.kind not in "fiu" or exp.dtype.kind not in "fiu" or got.size == 0:
        return head + "。"
    got, exp = got.astype(float), exp.astype(float)
    if not np.any(got) and np.any(exp):
        return head + "：你的结果全是 0——是不是返回了占位的 zeros，或者没有把算出的值写回去？"
    if got.size > 1 and np.ptp(got) == 0 and np.ptp(exp) > 0:
        return head + f"：你的结果每个元素都等于 {got.flat[0]:.4g}，没有随输入变化。"
    if got.ndim >= 2 and got.shape[-1] == got.shape[-2] and close(np.swapaxes(got, -1, -2), exp, rtol, atol):
        return head + "：它正好是参考答案的转置——检查哪一维是 query（行）、哪一维是 key（列）。"
    scale = float(np.vdot(got, exp) / np.vdot(exp, exp)) if np.any(exp) else 0.0
    if scale != 0 and not np.isclose(scale, 1) and close(got, scale * exp, max(rtol, 1e-5), atol):
        return head + f"：它是参考答案的 {scale:.4g} 倍，只差一个常数因子——检查缩放（如 1/√d_k）或归一化。"
    wrong = ~np.isclose(got, exp, rtol=rtol, atol=atol)
    if 0 < wrong.sum() <= max(1, wrong.size // 4):
        first = tuple(int(i) for i in np.argwhere(wrong)[0])
        return head + f"：{int(wrong.sum())} / {wrong.size} 个元素不对，第一个在下标 {list(first)}；其余都对——看看边界或特殊位置。"
    return head + "。"


def _want_got(key, exp, got, case, show):
    lines = []
    if show is not None:
        lines.append(f"输入：{show(case)}")
    lines.append(f"期望的 `{key}`：{fmt(exp)}")
    lines.append(f"你的 `{key}`：{fmt(got)}")
    return "\n".join(lines)
