"""W1D1 autograder (the instructor's side).

It makes the cases of every check (`autograder.cases`), computes the float64 answers
(`autograder.judge`), runs the class in sandboxes and reaches every verdict in its own process.
Student kernels never see it: they import the student package `w1d1_student`, which this package
imports (never the other way round) for its drivers and its judge.
"""
