"""W1D1 autograder (the instructor's side).

It makes the cases of every check and computes the float64 answers (`autograder.exercises`, one
module per notebook; `autograder.exercises.checks` hands them to the verdict tables), runs the class in
sandboxes and reaches every verdict in its own process. Student kernels never see it: they import the
student package `w1d1_student`, which this package imports (never the other way round) for its
drivers and its verdict tables.
"""
