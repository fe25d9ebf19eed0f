"""Time autograder.report.similarity.compare on a synthetic class: 300 students × 3 exercises (printed, never asserted).

Each student's answer is one of the mutation tables' correct styles with about half of its lines rewritten at
random (other names, other numbers, other operators), so most pairs share some code and a few share much; three
pairs are planted copies. The companion script and the release notebooks' code are the references.

    .venv/bin/python bench/similarity_bench.py [students]
"""
import random
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from similarity_settings import COMPANION, HONEST_BACKWARD, HONEST_MHA, release_code, stubs  # noqa: E402

from autograder.report import similarity  # noqa: E402
from tests.variants import nb02_scaled_dot_product as v02  # noqa: E402

STYLES = {"mha": list(HONEST_MHA.values()), "attention_backward": list(HONEST_BACKWARD.values()),
          "attention_forward": v02.VARIANTS["attention_forward"]["correct"][:3] + [v02.FORWARD]}
_NAMES = ["a", "b", "c", "tmp", "out", "w", "z", "acc", "res", "t0", "u", "scale"]


def _expr(rng, depth=0):
    """A random expression of random shape: names, numbers, operators, calls, subscripts."""
    r = rng.random()
    if depth > 2 or r < 0.25:
        return rng.choice(_NAMES) if rng.random() < 0.7 else str(rng.randint(0, 9))
    if r < 0.55:
        return f"{_expr(rng, depth + 1)} {rng.choice('+-*/@%')} {_expr(rng, depth + 1)}"
    if r < 0.8:
        args = ", ".join(_expr(rng, depth + 1) for _ in range(rng.randint(1, 3)))
        return f"{rng.choice(_NAMES)}.{rng.choice(['sum', 'mean', 'max', 'view', 'clip'])}({args})"
    return f"{rng.choice(_NAMES)}[{_expr(rng, depth + 1)}:{rng.randint(-3, 3)}]"


def _rewrite(line, rng):
    """The line's right-hand side replaced by a random expression (same indentation)."""
    m = re.match(r"(\s*)(\w[\w, ]*)\s*=\s*(.+)", line)
    return f"{m.group(1)}{m.group(2)} = {_expr(rng)}" if m else line


def synthetic_class(n=300, seed=0, share=0.5):
    """{grade_id: {student_id: source}} for n students, and the planted copies [(grade_id, a, b)]."""
    rng = random.Random(seed)
    answers = {gid: {} for gid in STYLES}
    for gid, styles in STYLES.items():
        for i in range(n):
            lines = rng.choice(styles).splitlines()
            answers[gid][f"s{i:03d}"] = "\n".join(_rewrite(s, rng) if rng.random() < share else s for s in lines) + "\n"
    planted = [(gid, max(answers[gid], key=lambda s: len(answers[gid][s])), f"s{n - 1:03d}") for gid in STYLES]
    for gid, a, b in planted:
        answers[gid][b] = answers[gid][a].replace("    ", "  ")
    return answers, planted


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    answers, planted = synthetic_class(n)
    st = stubs()
    refs = {"w1day1_checks.py": COMPANION, **release_code()}
    t = time.perf_counter()
    result = similarity.compare(answers, {g: st[g] for g in answers}, refs)
    took = time.perf_counter() - t
    found = {(p.grade_id, p.a, p.b) for p in result.pairs}
    left_out = {gid: len(who) for gid, who in result.left_out.items()}
    print(f"{n} students × {len(answers)} exercises: {took:.2f} s; compared {result.compared}; skipped {result.skipped}; "
          f"answers not compared {left_out}")
    print(f"{len(result.pairs)} pairs ≥ {result.threshold}; planted copies found: {sum(p in found for p in planted)}/{len(planted)}")


if __name__ == "__main__":
    main()
