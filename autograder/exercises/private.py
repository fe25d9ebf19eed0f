"""What of a case stays with the grader: under the key PRIVATE a case may hold what the grader knows of its own
inputs (which bug a class under test has). It stays in the grader's case file and its answers; `for_kernel` is
what a kernel is sent, at grading (autograder/chain/case_delivery.py) and in the wheel (autograder/student_package.py)."""

PRIVATE = "_grader"


def for_kernel(cases):
    """The cases without what only the grader may know."""
    return [{k: v for k, v in case.items() if k != PRIVATE} for case in cases]
