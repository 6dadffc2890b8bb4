"""What a first-time reader of lesson 2 stumbled on stays fixed: the header's time and labels, the
passing line's numbers, the figures the text states without a reason, and the whole-number rule of
Exercise D as the visible check and the grader both apply it (fast, no kernel)."""

from __future__ import annotations

import contextlib
import io
import re

import nbformat
import pytest

from course.checks import check_close, check_equal
from course.formatting import format_pair
from utils.grading.steps.observations import _exact
from utils.lessons import REPO
from utils.notebooks import nbgrader_meta

NOTEBOOK = REPO / "source" / "02_arithmetic_intensity" / "arithmetic_intensity.ipynb"


@pytest.fixture(scope="module")
def nb():
    return nbformat.read(str(NOTEBOOK), as_version=4)


def _markdown(nb, start):
    return next(c.source for c in nb.cells if c.cell_type == "markdown" and c.source.startswith(start))


def test_a_passing_check_shows_no_float_noise():
    """312e12 returned as 312,000,000,000,001 passes check_close and prints as the expected does."""
    assert format_pair(312e12, 312e12 + 1, tell_apart=False) == ("312,000,000,000,000",) * 2
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        check_close("A100 at 1000 FLOP/byte (FLOP/s)", 312e12 + 1, 312e12)
    assert out.getvalue().strip().endswith("expected 312,000,000,000,000, returned 312,000,000,000,000")
    # a difference the tolerance allows beyond float noise still shows, and a failure tells them apart
    assert format_pair(262_406_144_000, 262_144_000_000, tell_apart=False) == ("262,406,144,000", "262,144,000,000")
    assert format_pair(312e12, 312e12 + 1)[0] != format_pair(312e12, 312e12 + 1)[1]


def test_header_names_each_prediction_as_its_label_does(nb):
    header = nb.cells[0].source
    assert "prediction\np1" in header or "prediction p1" in header
    assert "prediction q1" in header
    assert "**p1 (predict, 2 points).**" in _markdown(nb, "## 11. Two pools and queues")
    assert "**q1 (predict;" in _markdown(nb, "## 12. Checkpoint quiz")


def test_the_time_is_the_worked_run_core_and_after_class_apart(nb):
    assert "about 210 minutes for sections 1-10 and the quiz;\nsection 11, after class, about 35" in nb.cells[0].source
    readme_row = next(line for line in (REPO / "README.md").read_text().splitlines() if "`02_arithmetic_intensity`" in line)
    assert "about 210 minutes for sections 1-10 and the quiz, and about 35 for section 11 after class" in readme_row


def test_stated_figures_come_with_their_reason(nb):
    roofline = _markdown(nb, "## 2. The ridge point")
    assert "Real kernels, running below peak rates,\ncan exceed even the **no-overlap time**" in roofline
    assert "141" not in next(c.source for c in nb.cells if c.source.startswith("`course/hardware.py` holds"))
    chunks = _markdown(nb, "Your functions on Llama-3-8B, bf16, H100 SXM: 64 streams")
    assert "Sarathi-Serve's budgets from above, 4-5x loose" in chunks and "slack shrink real budgets" in chunks


def test_exercise_d_whole_number_rule_is_the_graders(nb):
    """The text and the visible check say a float that equals the count passes, as the grader's exact rule
    takes it; a fractional count fails both."""
    text = _markdown(nb, "## 4. The KV cache")
    assert "a whole number (33.0 counts as 33)" in text
    check = next(c.source for c in nb.cells if nbgrader_meta(c).get("grade_id") == "kv_cache_tests")
    assert "(int or float)" in check
    assert _exact(33, 33.0) and not _exact(33, 33.5)
    with contextlib.redirect_stdout(io.StringIO()):
        check_equal("fit", 33.0, 33)
    with pytest.raises(Exception):
        check_equal("fit", 33.5, 33)
