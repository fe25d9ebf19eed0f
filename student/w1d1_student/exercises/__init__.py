"""The student's half of every exercise, one module per notebook (`nb03_masks.py`): for each exercise its
driver (how to run the student's code on one case and send back plain outputs) right above its verdict
table (how the engine reads those outputs). Each module names its notebook (NOTEBOOK) and lists its
exercises (EXERCISES: grade_id -> (driver, verdict table)); `w1d1_student.registry` imports them all.
"""
