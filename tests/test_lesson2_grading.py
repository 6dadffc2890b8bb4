"""Lesson 2's sample mistakes, one at a time: each loses the points of its own exercise and no
others (the lumped single max loses step_time's, the full-square prefill attention loses
attention_flops', ...). One scratch grading serves every case."""

from __future__ import annotations

import functools

import pytest

from utils.check import check_lesson
from utils.coursedir import REPO, nbgrader_meta, source_notebook
from utils.samples_io import load_samples, sample_submission

pytestmark = pytest.mark.slow
LESSON = "02_arithmetic_intensity"
MISTAKES, _ = load_samples(LESSON)


@functools.lru_cache(maxsize=None)
def graded():
    extra = {f"only-{gid}": sample_submission(REPO, LESSON, {gid: source}) for gid, source in MISTAKES.items()}
    return check_lesson(REPO, LESSON, extra)


def graded_cell_of(solution_id: str) -> str:
    """The graded cell that grades a solution cell: `<id>_tests`, or quiz_q1.. for the quiz."""
    return f"{solution_id}_tests"


@pytest.mark.parametrize("gid", sorted(MISTAKES))
def test_a_mistake_loses_only_its_own_points(gid):
    import nbformat

    result = graded()
    assert not result.problems, "\n".join(result.problems)
    cells = result.scores[f"only-{gid}"]
    lost = {cell for cell, (score, max_score) in cells.items() if score < max_score}
    if gid == "quiz_answers":
        nb = nbformat.read(str(source_notebook(REPO, LESSON)), as_version=4)
        quiz = {nbgrader_meta(c)["grade_id"] for c in nb.cells if nbgrader_meta(c).get("grade_id", "").startswith("quiz_q")}
        assert lost and lost <= quiz, lost
    else:
        assert lost == {graded_cell_of(gid)}, f"the {gid} mistake lost {sorted(lost)}"


def test_the_named_misconceptions_are_among_the_mistakes():
    # one max over the whole step's FLOPs and bytes; the full T x T square in prefill
    assert "(matmul_flops + attn_flops) / peak_flops_per_s" in MISTAKES["step_time"]
    assert "new_tokens * (cached_tokens + new_tokens)" in MISTAKES["attention_flops"]
