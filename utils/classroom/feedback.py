"""Feedback to the students: nbgrader's generate_feedback (hidden tests left out unless asked:
utils/grading/steps/hide_hidden.py), then release_feedback into the exchange."""

from __future__ import annotations

from pathlib import Path

from utils.classroom.course_commands import in_course


def feedback(root: Path, lesson: str, exchange: Path | None = None, show_hidden_tests: bool = False,
             release_to_students: bool = True) -> list[Path]:
    """Feedback HTML for every graded submission, released to the exchange for students to fetch
    unless `release_to_students` is False. Returns the HTML files."""
    args = ["generate_feedback", lesson, "--force"]
    if show_hidden_tests:
        args.append("--HideHiddenTests.enabled=False")
    in_course(args, root)
    if release_to_students:
        in_course(["release_feedback", lesson], root, exchange)
    return sorted((Path(root) / "feedback").glob(f"*/{lesson}/*.html"))
