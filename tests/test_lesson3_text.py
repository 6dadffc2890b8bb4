"""Lesson 3 stays within its budget (quick: reads the source notebook only).

- at most 3,000 words of text a student reads (markdown cells, split on whitespace), and a stated
  time of at most 75 minutes in the first cell;
- exercises lettered A, B, C, ... without a gap;
- lesson 2's per-block floor said once (one max(...) in the text), the measuring harness in one
  paragraph (the rest is in course/timing.py);
- the graded prediction comes before the sweeps it predicts.
"""

from __future__ import annotations

import re
import string

import nbformat
import pytest

from utils.coursedir import REPO, nbgrader_meta

LESSON = "03_timing_prefill_decode"
SOURCE = REPO / "source" / LESSON / "timing_prefill_decode.ipynb"


@pytest.fixture(scope="module")
def cells():
    return nbformat.read(str(SOURCE), as_version=4).cells


def text(cells) -> list[str]:
    return [c.source for c in cells if c.cell_type == "markdown"]


def test_at_most_3000_words_and_75_minutes_stated(cells):
    words = sum(len(t.split()) for t in text(cells))
    assert words <= 3000, f"lesson 3 has {words} words of text"
    stated = re.search(r"\*\*Time:\*\* about (\d+) minutes", cells[0].source)
    assert stated and int(stated.group(1)) <= 75, cells[0].source[:300]


def test_exercises_lettered_without_gaps(cells):
    letters = re.findall(r"^### Exercise ([A-Z])\b", "\n".join(text(cells)), flags=re.M)
    assert letters == list(string.ascii_uppercase[:len(letters)]), letters
    titles = re.findall(r'checking\("Exercise ([A-Z])\b', "\n".join(c.source for c in cells if c.cell_type == "code"))
    assert sorted(set(titles)) == letters, (titles, letters)


def test_the_floor_once_and_the_harness_in_one_paragraph(cells):
    assert sum(len(re.findall(r"\bmax\(", t)) for t in text(cells)) == 1, "the per-block floor is spelled out more than once"
    harness = [p for t in text(cells) for p in t.split("\n\n") if "ROUNDS" in p or "interleav" in p or "threads" in p]
    assert len(harness) <= 1, harness


def test_the_prediction_comes_before_the_sweeps(cells):
    ids = [nbgrader_meta(c).get("grade_id") for c in cells]
    graded_prediction = ids.index("predict_floors_tests")
    first_sweep = next(i for i, c in enumerate(cells) if "request_sweep(PROMPT_LENS" in c.source)
    assert graded_prediction < first_sweep
