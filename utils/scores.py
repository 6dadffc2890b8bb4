"""Scores read from a gradebook (SQLite or PostgreSQL), one row per graded cell and submission, and
the table the tools print of them."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from utils.escaping import shown


@dataclass
class CellScore:
    lesson: str
    student: str
    cell: str
    score: float
    max_score: float


def read_scores(course: Path, lesson_names: list[str] | None = None) -> list[CellScore]:
    """Every graded cell's score for every submission in the course's SQLite gradebook.db."""
    return read_scores_url(f"sqlite:///{Path(course) / 'gradebook.db'}", None, lesson_names)


def read_scores_url(db_url: str, course_id: str | None = None, lesson_names: list[str] | None = None) -> list[CellScore]:
    """Every graded cell's score for every submission in the gradebook at `db_url` (SQLite or
    PostgreSQL), optionally only one course's and only some lessons'."""
    from nbgrader.api import Gradebook, MissingEntry

    alembic_on_path()
    if db_url.startswith("sqlite:///") and not Path(db_url[len("sqlite:///"):]).exists():
        return []
    rows: list[CellScore] = []
    with Gradebook(db_url, course_id or "default_course") as gb:
        for assignment in gb.assignments:
            if lesson_names is not None and assignment.name not in lesson_names:
                continue
            if course_id and assignment.course_id != course_id:
                continue
            for sub in assignment.submissions:
                for nb in sub.notebooks:
                    for grade in nb.grades:
                        try:
                            score = grade.score
                        except MissingEntry:
                            score = 0.0
                        rows.append(CellScore(assignment.name, sub.student.id, grade.name,
                                              float(score or 0.0), float(grade.max_score)))
    rows.sort(key=lambda r: (r.lesson, r.student))
    return rows


def alembic_on_path() -> None:
    """nbgrader's Gradebook runs `alembic` from PATH when it creates a database: make it this
    interpreter's (the virtual environment's bin folder may not be on PATH)."""
    bindir = str(Path(sys.executable).parent)
    if bindir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = os.pathsep.join([bindir, os.environ.get("PATH", "")])


def score_table(rows: list[CellScore]) -> str:
    """Cells down, students across; a total line per lesson."""
    if not rows:
        return "(no graded submissions)"
    students = sorted({r.student for r in rows})
    names = {st: shown(st) for st in students}
    by_key = {(r.lesson, r.cell, r.student): r for r in rows}
    cells: list[tuple[str, str]] = []
    for r in rows:
        if (r.lesson, r.cell) not in cells:
            cells.append((r.lesson, r.cell))
    width = max(len(f"{l}/{c}") for l, c in cells) + 2
    col = max(12, *(len(names[s]) + 2 for s in students))
    lines = ["cell".ljust(width) + "".join(names[s].rjust(col) for s in students)]
    for lesson in dict.fromkeys(l for l, _ in cells):
        for l, c in (x for x in cells if x[0] == lesson):
            entries = []
            for s in students:
                r = by_key.get((l, c, s))
                entries.append((f"{r.score:g}/{r.max_score:g}" if r else "-").rjust(col))
            lines.append(f"{l}/{c}".ljust(width) + "".join(entries))
        totals = []
        for s in students:
            mine = [r for r in rows if r.lesson == lesson and r.student == s]
            totals.append((f"{sum(r.score for r in mine):g}/{sum(r.max_score for r in mine):g}" if mine else "-").rjust(col))
        lines.append(f"{lesson} TOTAL".ljust(width) + "".join(totals))
    return "\n".join(lines)
