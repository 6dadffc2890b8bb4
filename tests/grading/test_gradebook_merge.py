"""A grading run's results merged into the course's gradebook (utils/grading/gradebook.py): the
course's gradebook opened once for all a lesson's merges, with the same rows as a merge that
opens it itself; a manual score given before is kept."""

from __future__ import annotations

import nbgrader.api
from nbgrader.api import Gradebook

from utils.grading import gradebook
from utils.grading.pipeline import stamp_gradebooks_in_process
from utils.grading.settings import CourseSettings

SCORES = {"ann": (2, 0), "bob": (1, 1), "cy": (0, 1)}


def _lesson(url: str, students: dict) -> None:
    """Lesson 'L' (notebook 'nb': graded cells a_test, 2 points, and b_test, 1; a graded answer
    cell `essay` with a comment) and each student's submission with its scores."""
    with Gradebook(url, "c") as gb:
        gb.add_assignment("L")
        gb.add_notebook("nb", "L")
        gb.add_grade_cell("a_test", "nb", "L", max_score=2, cell_type="code")
        gb.add_grade_cell("b_test", "nb", "L", max_score=1, cell_type="code")
        gb.add_solution_cell("essay", "nb", "L")
        for student, (a, b) in students.items():
            gb.add_student(student, first_name=student.title())
            gb.add_submission("L", student)
            gb.find_grade("a_test", "nb", "L", student).auto_score = a
            gb.find_grade("b_test", "nb", "L", student).auto_score = b
            gb.find_grade("b_test", "nb", "L", student).needs_manual_grade = b == 0
            gb.find_comment("essay", "nb", "L", student).auto_comment = f"{student} wrote"
        gb.db.commit()


def _rows(url: str) -> list:
    with Gradebook(url, "c") as gb:
        return sorted((s.student.id, s.student.first_name, g.name, g.auto_score, g.manual_score, g.needs_manual_grade)
                      for s in gb.find_assignment("L").submissions for nb in s.notebooks for g in nb.grades) + \
            sorted((c.student.id, c.name, c.auto_comment) for s in gb.find_assignment("L").submissions
                   for nb in s.notebooks for c in nb.comments)


def _course(path, url_src: str) -> CourseSettings:
    url = f"sqlite:///{path}"
    _lesson(url, {})
    with Gradebook(url, "c") as gb:   # an instructor's manual score on ann's earlier submission
        gb.add_student("ann", first_name="Ann")
        gb.add_submission("L", "ann")
        gb.find_grade("a_test", "nb", "L", "ann").manual_score = 1.5
        gb.db.commit()
    return CourseSettings("c", url)


def test_one_open_course_gradebook_gives_the_rows_of_a_merge_that_opens_its_own(tmp_path, monkeypatch):
    stamp_gradebooks_in_process()
    src = f"sqlite:///{tmp_path / 'run.db'}"
    _lesson(src, SCORES)
    alone, shared = _course(tmp_path / "alone.db", src), _course(tmp_path / "shared.db", src)
    for student in SCORES:
        gradebook.merge(src, alone, "L", [student])

    engines = []
    make = nbgrader.api.create_engine
    monkeypatch.setattr(nbgrader.api, "create_engine", lambda url, **kw: engines.append(url) or make(url, **kw))
    dst = gradebook.open_course(shared)
    try:
        for student in SCORES:
            gradebook.merge(src, shared, "L", [student], dst)
    finally:
        dst.close()
    assert engines.count(shared.db_url) == 1 and engines.count(src) == len(SCORES)

    rows = _rows(shared.db_url)
    assert rows == _rows(alone.db_url)
    assert ("ann", "Ann", "a_test", 2.0, 1.5, True) in rows          # the manual score is kept
    assert ("bob", "Bob", "b_test", 1.0, None, False) in rows
    assert ("cy", "essay", "cy wrote") in rows
