"""The nbgrader chain every path runs: intake, sandboxed execution, verdicts, feedback pages."""
