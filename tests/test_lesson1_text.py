"""Lesson 1 stays within its budget and is graded on its ideas (quick: reads the notebooks only).

- at most 2,500 words of text (markdown cells, split on whitespace), and the expected time stated
  in the first cell;
- no word a student must not read ("seed") in the release;
- at most one fifth of the hidden assertions check input validation (an `except ValueError` in a
  hidden test, or a call of a `_rejects(...)` helper, counts as one), so a right formula without a
  NaN check keeps its points;
- every graded test cell wraps its visible checks in `checking(...)`, and the visible checks pass
  a numpy array where the hidden tests do.
"""

from __future__ import annotations

import re

import nbformat
import pytest

from utils.coursedir import BEGIN_HIDDEN, END_HIDDEN, REPO, nbgrader_meta

LESSON = "01_two_phases"
SOURCE = REPO / "source" / LESSON / "two_phases.ipynb"
RELEASE = REPO / "release" / LESSON / "two_phases.ipynb"


@pytest.fixture(scope="module")
def source():
    return nbformat.read(str(SOURCE), as_version=4)


def graded(nb):
    return [c for c in nb.cells if nbgrader_meta(c).get("grade") and not nbgrader_meta(c).get("solution")]


def split(cell) -> tuple[str, str]:
    visible, _, rest = cell.source.partition(BEGIN_HIDDEN)
    return visible, rest.partition(END_HIDDEN)[0]


def test_at_most_2500_words_and_the_time_stated_at_the_top(source):
    words = sum(len(c.source.split()) for c in source.cells if c.cell_type == "markdown")
    assert words <= 2500, f"lesson 1 has {words} words of text"
    assert re.search(r"Expected time: about \d+ minutes", source.cells[0].source)


def test_no_seed_where_students_read():
    text = RELEASE.read_text().lower()
    assert "seed" not in text


def test_graded_on_ideas_not_on_validation(source):
    validation = total = 0
    for cell in graded(source):
        hidden = split(cell)[1]
        helper_calls = len(re.findall(r"^\s*_rejects\(", hidden, flags=re.M))  # a helper asserting a ValueError
        helper_defs = len(re.findall(r"^\s*def _rejects\(", hidden, flags=re.M))
        validation += helper_calls + len(re.findall(r"except ValueError", hidden)) - helper_defs
        total += helper_calls + len(re.findall(r"^\s*(assert\b|raise AssertionError)", hidden, flags=re.M))
    assert total and validation <= total / 5, f"{validation} of {total} hidden assertions check validation"


def test_visible_checks_in_checking_and_with_the_hidden_tests_input_types(source):
    for cell in graded(source):
        visible, hidden = split(cell)
        grade_id = nbgrader_meta(cell)["grade_id"]
        assert "with checking(" in visible, f"{grade_id}: visible checks outside checking()"
        if "np.array(" in hidden:
            assert "np.array(" in visible, f"{grade_id}: the hidden tests pass numpy arrays, the visible checks do not"
