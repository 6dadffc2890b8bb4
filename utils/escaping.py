"""Names and text from submissions, printed safely: a student's file or name never starts a line of
its own or passes for another line of a report."""

from __future__ import annotations

import re

_PLAIN_NAME = re.compile(r"[\w.@+-]{1,120}")


def shown(name) -> str:
    """A file or student name as printed: as it is when it is plain (letters, digits, _ . @ + -),
    else quoted with every control, format or line-breaking character escaped (repr), so that a
    name can never start a line of its own or pass for another line of a report."""
    name = str(name)
    return name if _PLAIN_NAME.fullmatch(name) else repr(name)


def escaped(text) -> str:
    """`text` with every character that is not printable (newlines, carriage returns, escape
    sequences, direction overrides) written as its escape: one line, as it was received."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))
