"""Kernel side of the checks: test cells call `check(...)`."""
from .runner import check

__all__ = ["check"]
