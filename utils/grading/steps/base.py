"""What the course's steps share: which cells are graded tests, and the notes each step leaves in
the graded notebook's metadata (NOTES_KEY: {"event", "cell", "text"} records) for the grading's
report. SafeOverwriteCells empties them first: a submission's own metadata is never believed.
"""

from __future__ import annotations

NOTES_KEY = "course_grading"


def _meta(cell) -> dict:
    """The cell's nbgrader metadata, {} where it (or the cell's metadata) is not a dict."""
    meta = cell.get("metadata") if isinstance(cell, dict) else None
    meta = meta.get("nbgrader") if isinstance(meta, dict) else None
    return meta if isinstance(meta, dict) else {}


def grade_id(cell) -> str | None:
    gid = _meta(cell).get("grade_id")
    return gid if isinstance(gid, str) else None


def is_test_cell(cell) -> bool:
    """A graded test cell: graded, not a solution, code, with a grade id."""
    meta = _meta(cell)
    return cell.get("cell_type") == "code" and meta.get("grade") is True and not meta.get("solution") \
        and bool(grade_id(cell))


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
