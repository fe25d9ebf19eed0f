"""Grader side: verdicts from plain data, in the grader's own process."""
from .core import Verdict, judge_payload

__all__ = ["Verdict", "judge_payload"]
