"""nbgrader configuration: the repo root is the course.

source = solutions/, release = notebooks/, assignment w1d1. Grading runs each student kernel in
a bubblewrap sandbox and reaches verdicts in the grader's own process: the chain and its settings
are in autograder/chain/nbgrader_chain.py: change them there, so that every path (the grading command
included) runs them. A line added below reaches nbgrader's own commands only.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from autograder.chain.nbgrader_chain import configure  # noqa: E402

configure(get_config())  # noqa: F821
