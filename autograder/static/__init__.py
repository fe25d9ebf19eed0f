"""Static checks of answer cells, read in the grader's process: forbidden calls, provenance."""
