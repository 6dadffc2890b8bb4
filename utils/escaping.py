"""Names and text from submissions, printed safely: a student's file or name never starts a line of
its own or passes for another line of a report.

`escaped` is the one helper every door uses before student-controlled text reaches a terminal or a
log (the LMS import, collect's refused lines, the kernel's own output the grader forwards, the
tools' error messages that quote a log): C0 and C1 controls, DEL, carriage returns, escape
sequences, Unicode direction overrides and isolates, line and paragraph separators and every other
character that is not printable are written as their escapes, so that nothing can erase a line,
move the cursor or print a forged one. tests/test_escaping_doors.py finds the doors and feeds each
one such text."""

from __future__ import annotations

import re

_PLAIN_NAME = re.compile(r"[\w.@+-]{1,120}")


def shown(name) -> str:
    """A file or student name as printed: as it is when it is plain (letters, digits, _ . @ + -),
    else quoted with every control, format or line-breaking character escaped (repr), so that a
    name can never start a line of its own or pass for another line of a report."""
    name = str(name)
    return name if _PLAIN_NAME.fullmatch(name) else repr(name)


def _escape(c: str) -> str:
    return c if c.isprintable() else repr(c)[1:-1]


def escaped(text, keep_newlines: bool = False) -> str:
    """`text` with every character that is not printable (newlines, carriage returns, escape
    sequences, direction overrides) written as its escape: one line, as it was received. With
    `keep_newlines`, "\\n" still ends a line (a log quoted line by line) and everything else is
    escaped. Escaping escaped text changes nothing."""
    text = str(text)
    if keep_newlines:
        return "\n".join("".join(map(_escape, line)) for line in text.split("\n"))
    return "".join(map(_escape, text))


def has_control(text) -> bool:
    """Whether `text` holds a character `escaped` would escape (a newline counts)."""
    return any(not c.isprintable() for c in str(text))
