"""Every lesson, graded for real: the course check, sample mistakes and alternative solutions.

One nbgrader grading per lesson serves all of its tests, here and in the lesson observation tests
(tests/grading_runs.py): the reference solution, the untouched release, the plausible-mistakes
submission, every alternative correct solution and what those tests add.
"""

from __future__ import annotations

import pytest

from grading_runs import MISTAKEN, REFERENCE, RELEASE, graded, want_samples
from utils.lessons import REPO, lessons
from utils.authoring.samples_io import load_samples

# each course check grades its lesson (lesson 3: 87 s in make test, docs/benchmarks.md; several times that loaded)
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]
LESSONS = lessons(REPO)
for _lesson in LESSONS:
    want_samples(_lesson)


def variant_params():
    return [pytest.param(lesson, name, id=f"{lesson}-{name}")
            for lesson in LESSONS for name in load_samples(lesson)[1]]


def course_check(lesson):
    """Reference full marks, release zero in every graded cell, release/ fresh, nothing leaked."""
    result = graded(lesson).check
    assert not result.problems, "\n".join(result.problems)
    assert result.scores[REFERENCE] and result.scores[RELEASE]


# Lesson 3's check (its grading, the longest) is a file of its own, test_lesson3_check.py, so that a
# second test process grades it while this one grades lessons 1 and 2.
@pytest.mark.parametrize("lesson", [lesson for lesson in LESSONS if not lesson.startswith("03_")])
def test_course_check(lesson):
    course_check(lesson)


@pytest.mark.parametrize("lesson", LESSONS)
def test_each_exercise_has_a_plausible_mistake(lesson):
    mistakes, _ = load_samples(lesson)
    assert mistakes, f"utils/authoring/samples/{lesson}.py defines no MISTAKES"
    cells = graded(lesson).scores(MISTAKEN)
    got, full = sum(s for s, _ in cells.values()), sum(m for _, m in cells.values())
    assert 0 < got < full, f"{lesson}: the mistaken submission scored {got:g}/{full:g}"


@pytest.mark.parametrize("lesson, variant", variant_params())
def test_alternative_solution_gets_full_marks(lesson, variant):
    run = graded(lesson)
    cells = run.scores(f"variant-{variant}")
    assert cells, f"{lesson}: variant {variant!r} was not graded\n{run.check.log[-2000:]}"
    lost = {cell: f"{s:g}/{m:g}" for cell, (s, m) in cells.items() if s < m}
    assert not lost, f"{lesson}: variant {variant!r} lost points in {lost}"


def test_every_lesson_has_alternative_solutions():
    missing = [lesson for lesson in LESSONS if not load_samples(lesson)[1]]
    assert not missing, f"no VARIANTS for {missing}"


def test_three_lessons_in_teaching_order():
    assert LESSONS == ["01_two_phases", "02_arithmetic_intensity", "03_timing_prefill_decode"]
