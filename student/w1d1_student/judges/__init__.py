"""Verdicts of each exercise, from the student's outputs and the grader's answers in `case["_oracle"]`."""
