"""A submission whose Markdown takes hours to render, graded beside a fair one: both graded and
recorded, the fair feedback as usual, hers a plain page saying why, grades.csv written, in bounded
time (a page's limit of 2 s here: c.RenderDeadline.seconds)."""

from __future__ import annotations

import csv
import time

import nbformat
import pytest

from utils.notebooks import submission_from
from utils.grading.grade_course import grade_lessons
from utils.classroom.rehearsal import rehearsal_course

pytestmark = pytest.mark.slow
LESSON, NB = "01_tiny", "tiny.ipynb"
SLOW_MARKDOWN = "\\begin{x}" * 60_000   # 540 kB, under the per-cell limit; hours of nbconvert's math pattern


def test_text_that_takes_hours_to_render_costs_only_its_own_page(tmp_path):
    course = rehearsal_course(tmp_path / "course", extra_config="\nc.RenderDeadline.seconds = 2\n")
    release = nbformat.read(str(course / "release" / LESSON / NB), as_version=4)
    source = nbformat.read(str(course / "source" / LESSON / NB), as_version=4)
    fair, slow = submission_from(release, source, {}), submission_from(release, source, {})
    slow.cells.insert(1, nbformat.v4.new_markdown_cell(SLOW_MARKDOWN))
    for student, nb in (("fair", fair), ("slow", slow)):
        (course / "submitted" / student / LESSON).mkdir(parents=True)
        nbformat.write(nb, str(course / "submitted" / student / LESSON / NB))

    start = time.monotonic()
    run = grade_lessons(course, [LESSON], workers=2, quiet=True)
    assert time.monotonic() - start < 240
    outcomes = {o.student: o for o in run.outcomes}
    assert {s: (o.status, o.score) for s, o in outcomes.items()} == {"fair": ("graded", 6.0), "slow": ("graded", 6.0)}
    assert not run.failures
    fair_page = (course / "feedback" / "fair" / LESSON / "tiny.html").read_text()
    slow_page = (course / "feedback" / "slow" / LESSON / "tiny.html").read_text()
    assert "could not be rendered" not in fair_page and "not rendered" not in fair_page and "add_test" in fair_page
    assert "could not be rendered within 2 s" in slow_page and "graded and its score recorded" in slow_page
    with open(course / "grades.csv", newline="") as f:
        rows = {r["student_id"]: float(r["score"]) for r in csv.DictReader(f) if r["assignment"] == LESSON}
    assert rows == {"fair": 6.0, "slow": 6.0}
