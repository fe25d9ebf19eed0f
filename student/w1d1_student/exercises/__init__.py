"""The student's half of every exercise, one module per notebook (`nb03_masks.py`): for each exercise its
driver (how to run the student's code on one case and send back plain outputs) right above its verdict
table (how the engine reads those outputs). Each module names its notebook (NOTEBOOK) and lists its
exercises (EXERCISES: grade_id -> (driver, verdict table)); `registry` is built from MODULES.

Every module is imported with this package, before any code of the student's can reach one of them: a
driver captures its watches (torch_calls.watching, AutogradUse) by value when it is imported, so a student
who rebinds an attribute of torch_calls first would otherwise blind a driver imported later. (A grading
kernel imports this package before the first cell: autograder/sandbox.py.)
"""
from . import nb01_self_attention, nb02_scaled_dot_product, nb03_masks, nb04_multihead, nb05_complexity, nb06_api

MODULES = (nb01_self_attention, nb02_scaled_dot_product, nb03_masks, nb04_multihead, nb05_complexity, nb06_api)
