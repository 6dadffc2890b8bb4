"""The students' side of the exchange, for the tests: what a student's `nbgrader fetch_assignment`,
`submit` and `fetch_feedback` do, each student in a folder of their own.

Each simulated student keeps nbgrader's submission cache in their own folder, as on a hub where
every student has a home: fetch_feedback looks there for the student's own submissions."""

from __future__ import annotations

from pathlib import Path

from utils.classroom.course_commands import in_course


def _as_student(home: Path, student: str, course_id: str) -> list[str]:
    return [f"--course={course_id}", f"--student={student}", f"--Exchange.cache={Path(home).resolve() / '.nbgrader_cache'}"]


def student_fetch(home: Path, lesson: str, student: str, exchange: Path, course_id: str) -> Path:
    """The lesson fetched into `home`; returns its folder."""
    home = Path(home)
    home.mkdir(parents=True, exist_ok=True)
    in_course(["fetch_assignment", lesson, *_as_student(home, student, course_id)], home, exchange)
    return home / lesson


def student_submit(home: Path, lesson: str, student: str, exchange: Path, course_id: str) -> Path:
    """The lesson in `home` submitted; returns the newest submission folder in the exchange."""
    in_course(["submit", lesson, *_as_student(home, student, course_id)], Path(home), exchange)
    inbound = Path(exchange) / course_id / "inbound"
    return max(inbound.glob(f"{student}+{lesson}+*"), key=lambda p: p.stat().st_mtime)


def student_fetch_feedback(home: Path, lesson: str, student: str, exchange: Path, course_id: str) -> list[Path]:
    """The student's feedback fetched into `home`; returns the HTML files there."""
    in_course(["fetch_feedback", lesson, *_as_student(home, student, course_id)], Path(home), exchange)
    return sorted(Path(home).glob(f"{lesson}/feedback/*/*.html"))
