"""What stops a grading run before it starts or before it publishes."""


class GradingError(Exception):
    """An instructor-side problem: grading cannot start (or its result cannot be published)."""


class SandboxUnavailable(RuntimeError):
    """Why no sandbox can run here (`cause`, the real one) and what to do about it (`advice`)."""

    def __init__(self, cause, advice="把这个原因报告给课程维护者"):
        super().__init__(f"{cause}\n    怎么办：{advice}")
        self.cause, self.advice = cause, advice
