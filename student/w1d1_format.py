"""The names both sides write into a notebook or a kernel message, and nothing else: no imports.

The student package (in the kernel), the grading chain and the class report read them from here, so
the report needs none of the code that runs a notebook.
"""
# cell metadata only the grader writes (intake clears any a student sent)
OWN_KEY = "w1d1"
COPY_KEY = "copy_of"  # {COPY_KEY: grade_id}: a copy of an answer cell, which runs where it stands, as at home
VERDICTS_KEY = "verdicts"  # a test cell's verdicts as data
# a check's result on its way out of the kernel (w1d1_student/wire.py encodes it)
MIME = "application/vnd.w1d1.probe+json"


def copy_of(cell):
    """The grade_id of the answer this cell is a copy of (marked by intake), or None."""
    own = cell.get("metadata", {}).get(OWN_KEY)
    gid = own.get(COPY_KEY) if isinstance(own, dict) else None
    return gid if isinstance(gid, str) else None
