"""What the course's steps share: which cells are graded tests, and the notes each step leaves in
the graded notebook's metadata (NOTES_KEY: {"event", "cell", "text"} records) for utils.grade's
report. SafeOverwriteCells empties them first: a submission's own metadata is never believed.
"""

from __future__ import annotations

NOTES_KEY = "course_grading"


def grade_id(cell) -> str | None:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


def is_test_cell(cell) -> bool:
    """A graded test cell: graded, not a solution, code, with a grade id."""
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return cell.get("cell_type") == "code" and bool(meta.get("grade")) and not meta.get("solution") \
        and bool(meta.get("grade_id"))


def reset_notes(nb) -> None:
    nb.metadata[NOTES_KEY] = {"notes": []}


def add_note(nb, event: str, cell: str | None, text: str) -> None:
    """Record one thing a step did to this notebook (shown to the instructor, never scored)."""
    notes = nb.metadata.setdefault(NOTES_KEY, {}).setdefault("notes", [])
    record = {"event": event, "cell": cell, "text": text}
    if record not in notes:
        notes.append(record)


def read_notes(nb) -> list[dict]:
    notes = nb.get("metadata", {}).get(NOTES_KEY, {}).get("notes", [])
    return [n for n in notes if isinstance(n, dict)] if isinstance(notes, list) else []
