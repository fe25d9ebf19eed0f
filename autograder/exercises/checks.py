"""Grader side of the checks: the cases, the answers, and verdicts in the grader's own process.

For each notebook, `autograder/exercises/<topic>.py` makes the cases from the run's seed (CASES) and
holds the answer key (ANSWERS): per exercise, name -> function(case) giving the float64 reference or
the output of one known bug. The verdict itself comes from the student package's verdict table,
which reads those answers from `case["_oracle"]` — the same code that judges a public check at home,
where the answers were precomputed as data (`autograder.student_package`).
"""
import json
from collections.abc import Mapping

import numpy as np
from w1d1_student import registry, wire
from w1d1_student.runner import judge

from autograder.exercises import answers_of, cases_of


def _plain(value):
    """numpy scalars become Python numbers: a case reads the same in the kernel and here."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def as_data(value):
    """JSON-ready plain data (wire encoding) of cases, or of cases with their answers."""
    return wire.encode(_plain(value))


def make_cases(grade_id, seed, hidden):
    """The cases of one check as plain data, after a trip through JSON: what a kernel is sent, and what only the
    grader keeps (exercises/private.py)."""
    cases = cases_of(grade_id)(seed=int(seed), hidden=bool(hidden))
    return wire.decode(json.loads(json.dumps(as_data(cases))))


UNKNOWN_NAMES = set()   # (grade_id, name) a verdict table asked for that no answer key holds: a misspelt bug name


class Oracle(Mapping):
    """The answers on one case, computed when first asked for; a function that fails has no answer."""

    def __init__(self, case, table, grade_id=""):
        self._case, self._table, self._done, self._grade_id = case, table, {}, grade_id

    def __getitem__(self, name):
        if name not in self._table:
            UNKNOWN_NAMES.add((self._grade_id, name))
        if name not in self._done:
            try:
                self._done[name] = self._table[name](self._case)
            except Exception:  # a bug that does not apply to this case (or an unknown name)
                self._done[name] = KeyError(name)
        value = self._done[name]
        if isinstance(value, KeyError):
            raise value
        return value

    def __iter__(self):
        return iter(self._table)

    def __len__(self):
        return len(self._table)


def with_answers(grade_id, cases):
    """Copies of the cases, each with its `_oracle` (lazy: only what the verdict table asks for is computed)."""
    table = answers_of(grade_id)
    out = []
    for case in cases:
        plain = {k: v for k, v in case.items() if k != "_oracle"}
        out.append({**plain, "_oracle": Oracle(plain, table, grade_id)})
    return out


def answered(grade_id, cases):
    """Copies of the cases with every answer that applies to each, as plain data (for a file)."""
    out = []
    for case in with_answers(grade_id, cases):
        oracle, answers = case["_oracle"], {}
        for name in oracle:
            try:
                answers[name] = oracle[name]
            except KeyError:
                pass
        out.append({**case, "_oracle": answers})
    return out


def case_file_data(seed, answers=False):
    """{grade_id: {"public": cases, "hidden": cases}} of one seed: what a kernel runs while grading.
    With `answers` (never while grading) each case also carries the grader's answers, so the
    checks can be judged right in the kernel, hidden ones included (tests of the notebooks)."""
    def cases(gid, kind):
        made = make_cases(gid, seed, kind == "hidden")
        return as_data(answered(gid, made) if answers else made)

    return {gid: {kind: cases(gid, kind) for kind in ("public", "hidden")} for gid in registry.NOTEBOOK_OF}


CASE_FILE = "cases.json"
_READ = {}   # path -> the file's cases: read once per process
_MADE = {}   # seed -> the case file this process made for it


def write_case_file(seed, folder):
    """The grading run's case file in `folder` (the grader's own, never bound into a sandbox): every
    check's cases of one seed, inputs only, no answer; made once per run. Returns its path."""
    import os

    path = os.path.join(folder, CASE_FILE)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump({"seed": int(seed), "cases": case_file_data(seed)}, fh, separators=(",", ":"))
    return path


def read_case_file(path):
    """{grade_id: {"public": cases, "hidden": cases}} of a case file, as wire data."""
    if path not in _READ:
        with open(path, encoding="utf-8") as fh:
            _READ[path] = json.load(fh)["cases"]
    return _READ[path]


def case_file_of_seed(seed):
    """A case file for `seed`, made once per process in a private folder removed at exit: plain
    `nbgrader autograde` (one process for the class) draws its seed in nbgrader_config.py."""
    if seed not in _MADE:
        import atexit
        import shutil
        import tempfile

        folder = tempfile.mkdtemp(prefix="w1d1cases-")
        atexit.register(shutil.rmtree, folder, True)
        _MADE[seed] = write_case_file(seed, folder)
    return _MADE[seed]


def cases_in_file(path, grade_id, hidden):
    """The cases of one check as the kernel saw them (the same as make_cases of the file's seed)."""
    registry.topic(grade_id)  # an unknown exercise: KeyError in Chinese
    return wire.decode(read_case_file(path)[grade_id]["hidden" if hidden else "public"])


def judge_payload(payload, seed=0, case_file=None):
    """Judge one probe payload against the cases of this grading run: its case file, else its seed."""
    grade_id = payload.get("grade_id")
    hidden = payload.get("hidden")
    try:
        cases = cases_in_file(case_file, grade_id, hidden) if case_file else make_cases(grade_id, seed, hidden)
    except KeyError as exc:
        from w1d1_student.engine import fail

        return fail(str(exc))
    return judge(grade_id, with_answers(grade_id, cases), payload.get("results"), hidden=bool(payload.get("hidden")))
