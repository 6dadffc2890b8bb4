"""Every lesson, graded for real: the course check, sample mistakes and alternative solutions.

One scratch grading per lesson serves all of its tests: the reference solution, the untouched
release, the plausible-mistakes submission and every alternative correct solution.
"""

from __future__ import annotations

import functools

import pytest

from utils.check import REFERENCE, RELEASE, check_lesson
from utils.coursedir import REPO, lessons
from utils.samples_io import load_samples, sample_submission

pytestmark = pytest.mark.slow
LESSONS = lessons(REPO)
MISTAKEN = "plausible-mistakes"


@functools.lru_cache(maxsize=None)
def graded(lesson: str):
    mistakes, variants = load_samples(lesson)
    extra = {}
    if mistakes:
        extra[MISTAKEN] = sample_submission(REPO, lesson, mistakes)
    for name, cells in variants.items():
        extra[f"variant-{name}"] = sample_submission(REPO, lesson, cells)
    return check_lesson(REPO, lesson, extra)


def variant_params():
    return [pytest.param(lesson, name, id=f"{lesson}-{name}")
            for lesson in LESSONS for name in load_samples(lesson)[1]]


@pytest.mark.parametrize("lesson", LESSONS)
def test_course_check(lesson):
    """Reference full marks, release zero in every graded cell, release/ fresh, nothing leaked."""
    result = graded(lesson)
    assert not result.problems, "\n".join(result.problems)
    assert result.scores[REFERENCE] and result.scores[RELEASE]


@pytest.mark.parametrize("lesson", LESSONS)
def test_each_exercise_has_a_plausible_mistake(lesson):
    mistakes, _ = load_samples(lesson)
    assert mistakes, f"utils/samples/{lesson}.py defines no MISTAKES"
    got, full = graded(lesson).total(MISTAKEN)
    assert 0 < got < full, f"{lesson}: the mistaken submission scored {got:g}/{full:g}"


@pytest.mark.parametrize("lesson, variant", variant_params())
def test_alternative_solution_gets_full_marks(lesson, variant):
    result = graded(lesson)
    cells = result.scores.get(f"variant-{variant}")
    assert cells, f"{lesson}: variant {variant!r} was not graded\n{result.log[-2000:]}"
    lost = {cell: f"{s:g}/{m:g}" for cell, (s, m) in cells.items() if s < m}
    assert not lost, f"{lesson}: variant {variant!r} lost points in {lost}"


def test_every_lesson_has_alternative_solutions():
    missing = [lesson for lesson in LESSONS if not load_samples(lesson)[1]]
    assert not missing, f"no VARIANTS for {missing}"


def test_three_lessons_in_teaching_order():
    assert LESSONS == ["01_two_phases", "02_arithmetic_intensity", "03_timing_prefill_decode"]
