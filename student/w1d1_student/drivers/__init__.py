"""How each exercise runs the student's code on one case (no reference implementation here)."""
