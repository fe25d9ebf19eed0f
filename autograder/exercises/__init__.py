"""The grader's half of every exercise, one module per notebook (`nb03_masks.py`): its cases, made from
the grading run's seed, and its answer key (float64 references and the outputs of the known bugs).
Shared float64 pieces are in `references.py`, the seeded generator in `seeding.py`.

CASES:   grade_id -> cases(seed, hidden) -> [case]
ANSWERS: grade_id -> {name: fn(case)}   ("ref" and each known bug the verdict tables name)
CARRIES: grade_id -> the exercises whose answers its hidden cases hold (correct classes under test): those
         cases reach a kernel only after every test cell of those exercises (autograder/chain/case_delivery.py)
"""
from w1d1_student import registry

from . import nb01_self_attention, nb02_scaled_dot_product, nb03_masks, nb04_multihead, nb05_complexity, nb06_api

NOTEBOOKS = (nb01_self_attention, nb02_scaled_dot_product, nb03_masks, nb04_multihead, nb05_complexity, nb06_api)
CASES = {gid: made for module in NOTEBOOKS for gid, made in module.CASES.items()}
ANSWERS = {gid: table for module in NOTEBOOKS for gid, table in module.ANSWERS.items()}
CARRIES = {gid: carried for module in NOTEBOOKS for gid, carried in getattr(module, "CARRIES", {}).items()}


def cases_of(grade_id):
    """The case maker of an exercise (KeyError in Chinese for an unknown one)."""
    registry.topic(grade_id)
    return CASES[grade_id]


def answers_of(grade_id):
    """The answer key of an exercise."""
    registry.topic(grade_id)
    return ANSWERS[grade_id]
