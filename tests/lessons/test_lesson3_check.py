"""Lesson 3's course check (tests/lessons/test_lessons.py checks lessons 1 and 2): its grading is the
longest of the three, so it has a file, and so a test process, of its own (tests/conftest.py runs it
first)."""

from __future__ import annotations

import pytest

from lessons.test_lessons import course_check

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


def test_course_check():
    course_check("03_timing_prefill_decode")
