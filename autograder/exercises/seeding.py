"""Case generators draw from a generator that depends on the grading run's seed and on the exercise."""
import functools

import numpy as np


def rng(seed, salt):
    """Never global state: the same (seed, salt) gives the same cases in every process."""
    return np.random.default_rng([int(seed), sum(ord(c) * 131 ** i for i, c in enumerate(salt)) % 2**32])


def graded(table, cases=None, answers=None):
    """{grade_id: (make_cases, answer_key)} -> (CASES, ANSWERS), added to `cases` and `answers` where given: the one
    place a grader module spells an exercise's grade_id. `make_cases(seed, hidden, salt)` is called with its grade_id
    as `salt`, the salt of its generator (`rng(seed, salt + str(hidden))`, say), so no second string names it."""
    cases = {} if cases is None else cases
    answers = {} if answers is None else answers
    for grade_id, (make, key) in table.items():
        cases[grade_id] = functools.partial(make, salt=grade_id)
        answers[grade_id] = key
    return cases, answers


def with_defaults(options, defaults):
    """`defaults` with `options` over them (a case's or a bug's table), after checking that `defaults` names each."""
    unknown = set(options) - set(defaults)
    if unknown:
        raise TypeError(f"unknown options: {sorted(unknown)}")
    return {**defaults, **options}
