"""A lesson to the students: its student version built from source/ (nbgrader generate_assignment)
and put in the exchange for them to fetch (release_assignment)."""

from __future__ import annotations

from pathlib import Path

from utils.classroom.course_commands import in_course
from utils.errors import ToolError


def release(root: Path, lesson: str, exchange: Path | None = None) -> list[Path]:
    """Build release/LESSON and release it to the exchange; returns the notebooks released."""
    in_course(["generate_assignment", lesson, "--force"], root)
    notebooks = sorted((Path(root) / "release" / lesson).glob("*.ipynb"))
    if not notebooks:
        raise ToolError(f"{lesson}: nbgrader generate_assignment wrote no notebook into release/{lesson}")
    in_course(["release_assignment", lesson, "--force"], root, exchange)
    return notebooks
