"""W1D1 autograder.

`autograder.kernel` is the only part that runs next to student code (and the only part
visible inside the grading sandbox): it runs the student's functions on the check's cases
and hands back plain data. Everything that reaches a verdict lives in `autograder.judge`
and runs in the grader's own process.
"""
