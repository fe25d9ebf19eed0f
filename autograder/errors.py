"""What stops a grading run before it starts or before it publishes."""


class GradingError(Exception):
    """An instructor-side problem: grading cannot start (or its result cannot be published)."""
