"""nbgrader's commands in a course directory, with the exchange the class uses: how the
instructor's term commands (roster, release, feedback) and the tests' students run nbgrader.
What each command did is read from its exit status (a failure raises ToolError with its log) and
from the files it wrote, not from the lines it printed."""

from __future__ import annotations

from pathlib import Path

from utils.processes import NbgraderRun, nbgrader


def in_course(args: list[str], root: Path, exchange: Path | None = None) -> NbgraderRun:
    """`nbgrader ARGS` in course directory `root`; with `exchange`, that folder as Exchange.root."""
    if exchange is not None:
        args = [*args, f"--Exchange.root={Path(exchange).resolve()}"]
    return nbgrader(args, cwd=Path(root))
