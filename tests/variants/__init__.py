"""Answer-cell variants per exercise for the grader's mutation suite.

Each module `exNN.py` defines VARIANTS = {grade_id: {"solution": src, "correct": [src, ...],
"buggy": [(src, diagnosis_substring), ...]}}. Every src is a complete answer cell (imports included).
"""
