"""Which student ids the course's tools take in: the one rule, asked at every door a student id
comes through (collect from the exchange, `python -m utils.grading`, the LMS zip import, the
roster import).

A student id names a folder, a Unix user, a URL of the formgrader and text in the instructor's
pages; nbgrader prints it unescaped in the formgrader's page of a submission and reads it as a glob
pattern on the command line. So an id is 1 to 64 ASCII letters, digits and `_ . @ -`, starting
with a letter, a digit or `_`: no markup, quote, space, slash, pattern or control character, no
`+` (nbgrader's separator in the exchange), nothing that looks alike in another script or is
normalised differently by another file system. An id refused here never reaches the gradebook.
"""

from __future__ import annotations

import re

from utils.escaping import shown

STUDENT_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.@-]{0,63}")
PATTERN = frozenset("*?[]")   # nbgrader reads a student id as a glob pattern
RULE = "an id is 1 to 64 letters a-z A-Z, digits and _ . @ -, starting with a letter, a digit or _"


def id_problem(student) -> str | None:
    """None when `student` is an id the course takes in, else why not, in one line."""
    student = student if isinstance(student, str) else ""
    if STUDENT_ID.fullmatch(student):
        return None
    if not student:
        return "the student id is empty"
    if PATTERN & set(student):
        return (f"the student id {shown(student)} holds a character nbgrader reads as a pattern "
                f"({' '.join(sorted(PATTERN & set(student)))}); {RULE}")
    if len(student) > 64:
        return f"the student id {shown(student[:64])}... is {len(student)} characters long; {RULE}"
    bad = sorted({c for c in student if not re.fullmatch(r"[A-Za-z0-9_.@-]", c)})
    if bad:
        return f"the student id {shown(student)} holds {' '.join(repr(c) for c in bad[:8])}; {RULE}"
    return f"the student id {shown(student)} starts with {student[0]!r}; {RULE}"
