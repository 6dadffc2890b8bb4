"""The course's gradebook, written in one place: the lesson's template that every grading run
starts from (SQLite, a few kilobytes), a run's grades merged into the course's gradebook (SQLite
or a database server) by the grader alone, and the zeros of submissions that could not be graded.
Only utils/grading/lesson.py calls the writers."""

from __future__ import annotations

import contextlib
import warnings
from pathlib import Path

from nbgrader.api import Gradebook, MissingEntry

from utils.scores import alembic_on_path
from utils.grading.settings import CourseSettings


@contextlib.contextmanager
def quiet_sqlalchemy():
    """nbgrader's add_submission triggers SQLAlchemy's harmless autoflush SAWarning; hide it."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*not in session.*")
        yield


def lesson_template(settings: CourseSettings, lesson: str, dest: Path) -> float:
    """A new SQLite gradebook at `dest` holding the lesson as the course's gradebook defines it
    (due date, notebooks, graded, solution, task and source cells with their checksums) and no
    student: what one grading run records into. Returns the lesson's maximum score."""
    alembic_on_path()
    with quiet_sqlalchemy(), Gradebook(settings.db_url, settings.course_id) as course, \
            Gradebook(f"sqlite:///{dest}", settings.course_id) as new:
        lesson_row = course.find_assignment(lesson)
        new.update_or_create_assignment(lesson, duedate=lesson_row.duedate)
        for nb in lesson_row.notebooks:
            new.update_or_create_notebook(nb.name, lesson, kernelspec=nb.kernelspec)
            for c in nb.grade_cells:
                new.update_or_create_grade_cell(c.name, nb.name, lesson, max_score=c.max_score, cell_type=c.cell_type)
            for c in nb.solution_cells:
                new.update_or_create_solution_cell(c.name, nb.name, lesson)
            for c in nb.task_cells:
                new.update_or_create_task_cell(c.name, nb.name, lesson, max_score=c.max_score, cell_type=c.cell_type)
            for c in nb.source_cells:
                new.update_or_create_source_cell(c.name, nb.name, lesson, cell_type=c.cell_type, locked=c.locked,
                                                 source=c.source, checksum=c.checksum)
        return float(lesson_row.max_score)


def open_course(settings: CourseSettings) -> Gradebook:
    """The course's gradebook, opened once for a lesson's merges (`merge(..., dst=)`): each opening
    makes a database engine, checks every table and compiles every query again (about 50 ms a
    submission). The caller closes it."""
    alembic_on_path()
    return Gradebook(settings.db_url, settings.course_id)


def merge(src_url: str, settings: CourseSettings, lesson: str, students: list[str],
          dst: Gradebook | None = None) -> None:
    """Copy the autograde results of `students` from a grading run's gradebook into the course's
    (`dst` where open_course opened it; a manual score already there is kept)."""
    own = dst is None
    if own:
        dst = open_course(settings)
    try:
        with quiet_sqlalchemy(), Gradebook(src_url, settings.course_id) as src:
            for student in students:
                _merge_one(src, dst, lesson, student)
    except BaseException:
        dst.db.rollback()
        raise
    finally:
        if own:
            dst.close()


def _merge_one(src: Gradebook, dst: Gradebook, lesson: str, student: str) -> None:
    sub = src.find_submission(lesson, student)
    try:
        dst.find_student(student)
    except MissingEntry:
        s = sub.student
        dst.add_student(student, first_name=s.first_name, last_name=s.last_name, email=s.email,
                        lms_user_id=s.lms_user_id)
    dst.update_or_create_submission(lesson, student, timestamp=sub.timestamp)
    for nb in sub.notebooks:
        target = dst.find_submission_notebook(nb.name, lesson, student)
        target.flagged = nb.flagged
        target.late_submission_penalty = nb.late_submission_penalty
        grades, comments = _by_name(target.grades), _by_name(target.comments)
        for grade in nb.grades:
            mine = _named(grades, grade.name, "grade", nb.name, lesson, student)
            mine.auto_score = grade.auto_score
            mine.needs_manual_grade = grade.needs_manual_grade
        for c in nb.comments:
            _named(comments, c.name, "comment", nb.name, lesson, student).auto_comment = c.auto_comment
    dst.db.commit()


def _by_name(rows) -> dict:
    """A submitted notebook's grades or comments by their cell's name (one query, where
    find_grade and find_comment make one per cell)."""
    return {row.name: row for row in rows}


def _named(rows: dict, name: str, kind: str, notebook: str, lesson: str, student: str):
    if name not in rows:   # as find_grade / find_comment say it
        raise MissingEntry(f"no {kind} {name!r} in notebook {notebook!r} of {lesson!r} for {student!r}")
    return rows[name]


def record_zero(settings: CourseSettings, lesson: str, student: str) -> None:
    """Every graded cell of the submission autogrades 0 (replacing any earlier autograde); a
    manual score an instructor gave stays, as when a submission is merged (nbgrader's own rule: a
    manual score wins and the cell needs review)."""
    alembic_on_path()
    with quiet_sqlalchemy(), Gradebook(settings.db_url, settings.course_id) as gb:
        gb.update_or_create_student(student)
        sub = gb.update_or_create_submission(lesson, student)
        for nb in sub.notebooks:
            for grade in nb.grades:
                grade.auto_score = 0.0
                grade.needs_manual_grade = grade.manual_score is not None
        gb.db.commit()
