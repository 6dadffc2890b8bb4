"""Every line a lesson prints fits the page: at 1,400 pixels with the file browser open JupyterLab shows
about 121 characters of a cell's output, and a longer line wraps mid-word or leaves a lone word on a
line (course.formatting.PAGE_WIDTH = 120).

Two sources of printed lines: the visible checks' "ok" lines and messages, checked where
tests/lessons/test_visible_checks_reject_mistakes.py runs them (on the reference and every sample mistake),
and every other cell's output, read here from the reference's autograded notebook of the session's
one grading of each lesson (tests/grading_runs.py; nothing is run again for it). What lesson 3 would
print on a GPU, which no reference run here reaches, is checked in tests/lessons/test_lesson3_printed_width.py."""

from __future__ import annotations

import pytest

from course.formatting import PAGE_WIDTH, page_lines
from grading_runs import graded
from utils.authoring.check import REFERENCE
from utils.lessons import REPO, lessons

LESSONS = [l for l in lessons(REPO) if (REPO / "utils" / "authoring" / "samples" / f"{l}.py").exists()]


def _too_long(lines):
    return [(len(line), line) for line in lines if len(line) > PAGE_WIDTH]


def test_page_lines_wraps_at_spaces_within_the_page():
    text = "ok    " + " ".join(["word"] * 60)
    lines = page_lines(text).splitlines()
    assert len(lines) > 1 and all(len(line) <= PAGE_WIDTH for line in lines)
    assert all(line.startswith("      word") for line in lines[1:])
    assert page_lines("short") == "short"


def test_page_lines_keeps_each_line_apart_and_leaves_no_word_alone():
    said = "-> " + " ".join(["bytes"] * 40) + "\n   beside it, " + " ".join(["12,345.6"] * 30)
    lines = page_lines(said, indent="   ").splitlines()
    assert all(len(line) <= PAGE_WIDTH for line in lines)
    second = next(i for i, line in enumerate(lines) if line.startswith("   beside it,"))
    assert second > 1 and all(line.startswith("   ") for line in lines[1:second])   # its own indent, then ours
    assert all(line.startswith("      12,345.6") for line in lines[second + 1:])   # numbers whole
    orphan = " ".join(["wordy1234"] * 12 + ["alone"])   # textwrap alone puts "alone" by itself on a second line
    assert page_lines(orphan).splitlines() == [" ".join(["wordy1234"] * 11), "      wordy1234 alone"]
    assert page_lines(page_lines(said)) == page_lines(said)   # lines that fit are left as they are


@pytest.mark.slow
@pytest.mark.parametrize("lesson", LESSONS)
def test_reference_run_prints_within_the_page(lesson):
    printed = graded(lesson).printed.get(REFERENCE)
    assert printed, f"{lesson}: the reference printed nothing"
    assert not _too_long(printed), _too_long(printed)
