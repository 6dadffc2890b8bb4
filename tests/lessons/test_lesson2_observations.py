"""Lesson 2 graded through observations (course.observe, utils.grading.steps.observations): the reference
passes every graded cell, the release fails every one, each plausible mistake, submitted alone,
fails only its own cells (the lumped single max loses step_time's, the full-square prefill attention
loses attention_flops', ...), and the alternative solutions pass everywhere.

The reference, the release, the plausible-mistakes sample (every mistake at once) and the
alternative solutions are graded once, through nbgrader with the sandbox, in the session's one
grading of the lesson (tests/grading_runs.py, shared with test_lessons.py); these tests read each
graded cell's verdict in the autograded notebooks, checked against its score in the gradebook (a
cell that fails loses its points, and only that cell). The one-mistake-at-a-time samples (16 of
them) ask only which cells a misconception loses: they run one after the other in one kernel, as
autograding runs them, and the grader's own judge_cell decides each graded cell against the same
reference run (grading_runs.judged_in_one_kernel), about 2 s each instead of 10.
"""

from __future__ import annotations

import importlib
import re

import nbformat
import pytest

from grading_runs import RELEASE, graded, judged_in_one_kernel, want_samples
from grading_runs import failed as failed_cells
from utils.lessons import REPO, source_notebook
from utils.notebooks import nbgrader_meta
from utils.authoring.samples_io import load_samples

pytestmark = pytest.mark.slow
LESSON = "02_arithmetic_intensity"
SOURCE = source_notebook(REPO, LESSON)
MISTAKES, VARIANTS = load_samples(LESSON)
# mistakes beyond the one per exercise: name -> (solution cell, its source)
MORE_MISTAKES = getattr(importlib.import_module(f"utils.authoring.samples.{LESSON}"), "MORE_MISTAKES", {})

want_samples(LESSON)
ALONE = {f"only-{gid}": {gid: source} for gid, source in MISTAKES.items()} | \
    {f"more-{name}": {gid: source} for name, (gid, source) in MORE_MISTAKES.items()}


@pytest.fixture(scope="module")
def alone() -> dict[str, dict[str, tuple[bool, str]]]:
    """Each mistake submitted alone: name -> graded cell -> (passed, verdict line)."""
    reference = graded(LESSON).reference
    assert reference is not None, "\n".join(graded(LESSON).check.problems)
    return judged_in_one_kernel(LESSON, ALONE, reference)


def lost_alone(alone, name: str) -> set[str]:
    verdicts = alone[name]
    assert set(verdicts) == set(graded(LESSON).verdicts_of(RELEASE)), f"{name}: verdicts for {sorted(verdicts)}"
    return {gid for gid, (passed, _) in verdicts.items() if not passed}


def graded_cells_of(solution_id: str) -> set[str]:
    """The graded cells that grade a solution cell: `<id>_tests`, or every quiz question."""
    if solution_id == "quiz_answers":
        nb = nbformat.read(str(SOURCE), as_version=4)
        return {nbgrader_meta(c)["grade_id"] for c in nb.cells
                if nbgrader_meta(c).get("grade") and nbgrader_meta(c).get("grade_id", "").startswith("quiz_q")}
    return {f"{solution_id}_tests"}


def failed(name: str) -> set[str]:
    return failed_cells(LESSON, name)


def test_reference_observes_in_every_graded_cell():
    """Determinism: the reference solution, graded as a student in a kernel of its own, is judged
    against these observations and passes every cell (test_lessons.py); test_dask.py compares a
    third run, on a Dask worker."""
    reference = graded(LESSON).reference
    obs = reference.observations
    nb = nbformat.read(str(SOURCE), as_version=4)
    cells = {nbgrader_meta(c)["grade_id"] for c in nb.cells if nbgrader_meta(c).get("grade")}
    assert set(obs) == cells
    for gid, found in obs.items():
        labels = [o.label for o in found]
        assert found and len(labels) == len(set(labels)), f"{gid}: no or repeated labels"
    assert graded(LESSON).failed("reference-solution") == set(), graded(LESSON).messages("reference-solution")


def test_hidden_tests_hold_no_expected_values():
    """Hidden parts observe: no assert, and the quiz cells have none. A cell may hold more than one
    hidden region (mixed_step_tests sets up a correct step_time before its visible checks and puts
    the student's back after its observations); together they observe."""
    nb = nbformat.read(str(SOURCE), as_version=4)
    for cell in nb.cells:
        meta = nbgrader_meta(cell)
        if meta.get("grade"):
            assert "assert " not in cell.source, meta["grade_id"]
            if meta["grade_id"].startswith("quiz_q") or meta["grade_id"] == "p1_tests":  # letters, as quizzes
                assert "HIDDEN" not in cell.source, meta["grade_id"]
            else:
                hidden = "".join(re.findall(r"### BEGIN HIDDEN TESTS\n(.*?)### END HIDDEN TESTS", cell.source, re.S))
                assert "observe(" in hidden, meta["grade_id"]


def test_release_fails_every_graded_cell():
    verdicts = graded(LESSON).verdicts_of(RELEASE)
    assert verdicts and not [g for g, v in verdicts.items() if v and v[0]]
    assert failed(RELEASE) == set(verdicts)


@pytest.mark.parametrize("gid", sorted(MISTAKES))
def test_a_mistake_fails_only_its_own_cells(alone, gid):
    """Submitted alone, a mistake fails its own exercise's cells and no other (so loses only their points)."""
    assert not graded(LESSON).check.problems, "\n".join(graded(LESSON).check.problems)
    lost = lost_alone(alone, f"only-{gid}")
    if gid == "quiz_answers":
        assert lost and lost <= graded_cells_of(gid), lost
    else:
        assert lost == graded_cells_of(gid), f"the {gid} mistake failed {sorted(lost)}"


def test_the_named_misconceptions_are_among_the_mistakes():
    # one max over the whole step's FLOPs and bytes; the full T x T square in prefill
    assert "(matmul_flops + attn_flops) / peak_flops_per_s" in MISTAKES["step_time"]
    assert "new_tokens * (cached_tokens + new_tokens)" in MISTAKES["attention_flops"]
    # section 10: the weights read twice (the chunk as a step of its own), the free-ride chunk for the
    # TBT-target one, the rate where the mean TTFT meets the target taken for 90 % of requests (p1 "b")
    assert 'alone[0][key] + alone[1][key]' in MISTAKES["mixed_step"]
    assert "free_ride = math.floor(peak_flops_per_s / bandwidth_bytes_per_s" in MISTAKES["chunk_for_tbt"]
    assert MISTAKES["p1"].strip() == 'p1 = "b"'


@pytest.mark.parametrize("name", sorted(MORE_MISTAKES))
def test_the_named_misconceptions_fail_only_their_own_cell(alone, name):
    gid, _ = MORE_MISTAKES[name]
    assert lost_alone(alone, f"more-{name}") == graded_cells_of(gid), alone[f"more-{name}"]


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_alternative_solutions_pass_everywhere(name):
    assert not failed(f"variant-{name}"), graded(LESSON).messages(f"variant-{name}")
