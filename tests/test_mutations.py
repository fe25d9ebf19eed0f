"""Mutation suite: solution, correct variants pass; stub and buggy variants lose points with a named diagnosis.

The answer cells are executed in-process here (fast); tests/test_grading_e2e.py sends a subset
through the real sandboxed grader.
"""
import hashlib
import importlib
import os
import pkgutil
import re
from pathlib import Path

import pytest
from w1d1_student import registry, wire
from w1d1_student.runner import run_cases

import tests.variants as variants_pkg
from autograder.exercises import ANSWERS
from autograder.exercises.checks import judge_payload, make_cases
from autograder.exercises.private import for_kernel

STUB = "# 你的代码\nraise NotImplementedError()"


def _load_variants():
    table = {}
    for mod in pkgutil.iter_modules(variants_pkg.__path__):
        table.update(importlib.import_module(f"tests.variants.{mod.name}").VARIANTS)
    return table


VARIANTS = _load_variants()


def verdicts(src, grade_id, checks=(False, True), ns=None):
    """The verdicts of the public and the hidden check (seed 0), or of the `checks` given (hidden: True);
    `ns`: a namespace the answer already ran in."""
    ns = {"__name__": "__main__"} if ns is None else ns
    try:
        exec(compile(src, "<answer cell>", "exec"), ns)
    except NotImplementedError:
        pass
    payloads = [run_cases(grade_id, ns, for_kernel(make_cases(grade_id, 0, h)), hidden=h) for h in checks]
    return [judge_payload(wire.loads(wire.dumps(p)), seed=0) for p in payloads]


def _params(kind):
    out = []
    for gid, table in VARIANTS.items():
        if kind == "solution":
            out.append(pytest.param(gid, table["solution"], "", id=f"{gid}-solution"))
        elif kind == "stub":
            out.append(pytest.param(gid, STUB, "", id=f"{gid}-stub"))
        else:
            for i, item in enumerate(table[kind]):
                src, diag = item if isinstance(item, tuple) else (item, "")
                out.append(pytest.param(gid, src, diag, id=f"{gid}-{kind}{i}"))
    return out


@pytest.mark.parametrize("grade_id,src,_", _params("solution") + _params("correct"))
def test_correct_answers_pass(grade_id, src, _):
    for v in verdicts(src, grade_id):
        assert v.passed, v.message


@pytest.mark.parametrize("grade_id,src,_", _params("stub"))
def test_release_stub_fails(grade_id, src, _):
    assert not any(v.passed for v in verdicts(src, grade_id))


@pytest.mark.parametrize("grade_id,src,diagnosis", _params("buggy"))
def test_buggy_answers_lose_points(grade_id, src, diagnosis):
    vs = verdicts(src, grade_id)
    failed = [v for v in vs if not v.passed]
    assert failed, f"buggy variant passed every check of {grade_id}"
    assert diagnosis in failed[0].message, failed[0].message
    for v in failed:
        assert_diagnosis_as_data(grade_id, v)


GENERIC = ("的形状不对", "的数值与参考答案不一致。", "的数值不对。", "你的代码抛出了异常", "出现了 NaN")


def assert_diagnosis_as_data(grade_id, verdict):
    """The verdict's data says what its message says: the stage it starts with, each named mistake
    (a keyed one is a bug the answer key reproduces); only a generic failure names none."""
    table = ANSWERS[grade_id]
    if verdict.message.startswith("【"):
        assert verdict.message.startswith(f"【{verdict.stage}】"), (verdict.stage, verdict.message)
    for key, text in verdict.mistakes:
        assert key == "type" or text in verdict.message, (text, verdict.message)  # "type": a fixed label
        assert key is None or key in ("dtype", "type") or set(key.split("/")) <= set(table), key
    if not verdict.mistakes:
        assert any(g in verdict.message.split("\n", 1)[0] for g in GENERIC), verdict.message


def _warned():
    """(grade_id, diagnosis, buggy sources with it) for each diagnosis a table lists under "warned"."""
    out = []
    for gid, table in VARIANTS.items():
        for i, diagnosis in enumerate(table.get("warned", ())):
            srcs = [item[0] for item in table["buggy"] if isinstance(item, tuple) and item[1] == diagnosis]
            out.append(pytest.param(gid, diagnosis, srcs, id=f"{gid}-warned{i}"))
    return out


@pytest.mark.parametrize("grade_id,diagnosis,srcs", _warned())
def test_warned_bugs_fail_the_public_check(grade_id, diagnosis, srcs):
    """A bug the exercise's prompt or the course text warns about is caught by the PUBLIC check, whose message
    names it: a student who falls into it is told so at home, before the hidden check costs the points."""
    assert diagnosis and srcs, f"{grade_id}: no buggy variant with the diagnosis {diagnosis!r}"
    for src in srcs:
        (public,) = verdicts(src, grade_id, checks=(False,))
        assert not public.passed, f"the public check of {grade_id} passes a bug the prompt warns about ({diagnosis})"
        assert diagnosis in public.message, public.message


def test_every_registered_exercise_has_variants():
    """Each exercise of the registry has a mutation table, and each table belongs to an exercise."""
    assert sorted(VARIANTS) == sorted(registry.NOTEBOOK_OF)
    for gid, table in VARIANTS.items():
        assert len(table["correct"]) >= 2, gid
        assert len(table["buggy"]) >= 3, gid


PUBLIC_DIGESTS = Path(__file__).parent / "data" / "public_messages.sha256"
# whether the SDPA call of these answers is seen depends on what ran before in the process (the torch
# function mode of torch_calls.py): their messages are not pinned
UNPINNED = ("sdpa_attention/", "decode_step/")


def public_messages():
    """{variant: message of its public check} for the stub and every buggy variant (torch seeded: a
    module's random initial weights appear in some messages)."""
    import torch

    out = {}
    for gid, table in VARIANTS.items():
        items = [("stub", STUB)] + [(f"buggy{i}", it[0] if isinstance(it, tuple) else it)
                                    for i, it in enumerate(table["buggy"])]
        for name, src in items:
            torch.manual_seed(0)
            out[f"{gid}/{name}"] = verdicts(src, gid, checks=(False,))[0].message  # the public check alone
    return out


def _shape_of(message):
    """A message with its numbers as # and its runs of spaces as one: float32 results vary in their last
    digits with what ran before in the process (torch picks its kernels), the text around them does not."""
    return re.sub(r"\s+", " ", re.sub(r"-?\d+(?:\.\d*)?(?:e[+-]?\d+)?", "#", message))


def pin(text, got, update=False):
    """(the digests file's text to write, or None where it stays as it is; the pinned messages that changed), `text`
    the file's, `got` {variant: digest} as they are now. A message pinned before changes only with `update`; one
    pinned nowhere yet (a new exercise's, a new variant's) is pinned now, with no variable to set."""
    pinned = dict(reversed(line.split("  ", 1)) for line in text.splitlines())
    got = {k: d for k, d in got.items() if not k.startswith(UNPINNED)}
    if update:
        return "".join(f"{d}  {k}\n" for k, d in sorted(got.items())), []
    changed = sorted(k for k in pinned if got.get(k) != pinned[k] and not k.startswith(UNPINNED))
    new = {k: d for k, d in got.items() if k not in pinned}
    merged = "".join(f"{d}  {k}\n" for k, d in sorted({**pinned, **new}.items()))
    return (merged if new else None), changed


def test_public_messages_are_unchanged():
    """Public checks show inputs, expected values and the student's own: their messages are pinned, text,
    value blocks and the count of numbers in them (digests in tests/data; W1D1_UPDATE_PUBLIC_MESSAGES=1
    rewrites them after a deliberate change; a message not pinned yet, a new exercise's, is pinned on the first run)."""
    got = {k: hashlib.sha256(_shape_of(v).encode()).hexdigest() for k, v in public_messages().items()}
    text, changed = pin(PUBLIC_DIGESTS.read_text(), got, update=os.environ.get("W1D1_UPDATE_PUBLIC_MESSAGES") == "1")
    if text is not None:
        PUBLIC_DIGESTS.write_text(text)
    assert not changed, changed


def test_a_new_exercise_is_pinned_without_the_variable_and_a_pinned_message_changes_only_with_it():
    text = "aaa  softmax/buggy0\nbbb  softmax/stub\n"
    got = {"softmax/buggy0": "aaa", "softmax/stub": "bbb", "new_exercise/stub": "ccc", "new_exercise/buggy0": "ddd",
           "decode_step/stub": "eee"}
    pinned_now = "ddd  new_exercise/buggy0\nccc  new_exercise/stub\naaa  softmax/buggy0\nbbb  softmax/stub\n"
    assert pin(text, got) == (pinned_now, [])  # the new exercise's messages pinned, decode_step's left unpinned
    assert pin(text, {**got, "softmax/stub": "xxx"}) == (pinned_now, ["softmax/stub"])  # a pinned one: still fails
    assert pin(text, {"softmax/buggy0": "aaa", "softmax/stub": "bbb"}) == (None, [])            # nothing to write
    rewritten, changed = pin(text, {**got, "softmax/stub": "xxx"}, update=True)
    assert changed == [] and "xxx  softmax/stub\n" in rewritten and "decode_step" not in rewritten


def test_the_self_attention_check_leaves_the_students_softmax_as_it_was():
    """While self_attention is checked, `softmax` means torch's; afterwards the student's own is back (or absent)."""
    from tests.variants.nb01_self_attention import SELF_ATTENTION

    ns = {"__name__": "__main__"}
    exec(SELF_ATTENTION, ns)
    own = ns["softmax"]
    run_cases("self_attention", ns, make_cases("self_attention", 0, False))
    assert ns["softmax"] is own
    del ns["softmax"]
    payload = run_cases("self_attention", ns, make_cases("self_attention", 0, False))
    assert "softmax" not in ns and all(r["ok"] for r in payload["results"])


@pytest.fixture(scope="module", autouse=True)
def every_name_asked_for_has_an_answer():
    """Across the whole mutation suite, a verdict table asks the answer key only for names it holds (the
    key treats an unknown name as a bug that does not apply: a misspelt name would silently name nothing)."""
    from autograder.exercises import checks

    checks.UNKNOWN_NAMES.clear()
    yield
    assert not checks.UNKNOWN_NAMES, sorted(checks.UNKNOWN_NAMES)


REBIND_THE_WATCH = '''
import contextlib, importlib, math
import torch
_t = importlib.import_module("w1d1_" + "student.torch_calls")


@contextlib.contextmanager
def _blind(needles, seen, operators=False):
    seen("scaled_dot_product_attention", (), {})
    yield


_t.watching = _blind


def sdpa_attention(q, k, v, mask=None, is_causal=False, dropout_p=0.0, training=False):
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        s = s.masked_fill(mask, float("-inf"))
    if is_causal:
        s = s.masked_fill(torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(s, -1) @ v
'''


def test_rebinding_a_watch_before_the_first_check_blinds_no_driver():
    """In a fresh process the student's cell reaches torch_calls before any check has imported a
    driver; the drivers come with the package, so they hold the real watch already."""
    import subprocess
    import sys

    probe = (f"ns = {{'__name__': '__main__'}}\nexec({REBIND_THE_WATCH!r}, ns)\n"
             "from tests.test_mutations import verdicts\n"
             "print([v.message.split(chr(10))[0] for v in verdicts('', 'sdpa_attention', ns=ns) if not v.passed][0])")
    out = subprocess.run([sys.executable, "-c", probe], cwd=Path(__file__).resolve().parents[1],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "没有调用 F.scaled_dot_product_attention" in out.stdout, out.stdout
