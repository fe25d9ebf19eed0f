"""W1D1 student package: `check()` for the notebooks' test cells.

It holds the public cases with the grader's answers as data, the drivers that run a student's
code on a case, and the comparison and Chinese diagnosis engine. No reference implementation, no
hidden case and no grader: those stay with the instructor (`autograder/`), which imports this
package, never the other way round.
"""
from .runner import CheckFailed, check

__all__ = ["check", "CheckFailed"]
