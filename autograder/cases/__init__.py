"""The cases of every check, made from the grading run's seed (grader side; they travel as data)."""
