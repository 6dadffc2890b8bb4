"""Lesson 3's graded cells judged the new way (course.observe in the kernel, utils.grading outside):
the release fails every graded cell, the reference passes them all, each plausible mistake in
utils/authoring/samples/03_timing_prefill_decode.py loses only its own cell(s), each timing mistake loses its
cell for a wrong observed value (not an error), every correct variant keeps them all, and the
reference solution, graded as a student in a second kernel, passes against the first run's
observations (test_dask.py compares a third run, on a Dask worker, value for value).

The reference, the release, the plausible mistakes and the variants are graded once, through
nbgrader with the sandbox, in the session's one grading of the lesson (tests/grading_runs.py,
shared with test_lessons.py); those tests read each graded cell's verdict in the autograded
notebooks, checked against its score in the gradebook. The further and the timing mistakes, which
nothing else grades, run outside nbgrader, trimmed to the cells grading depends on (the setup,
the solutions and the graded cells, hidden tests included, as autograde restores them): the timing
sweeps between them observe nothing and make a full run under nbgrader several times longer.
"""

from __future__ import annotations

import pytest

import nbformat

from grading_runs import MISTAKEN, REFERENCE, RELEASE, graded, samples_module, want_samples
from grading_runs import failed as failed_cells
from utils.lessons import REPO
from utils.notebooks import nbgrader_meta, submission_from
from utils.grading.steps.observations import compare_notebooks, run_observed

LESSON = "03_timing_prefill_decode"
SOURCE = REPO / "source" / LESSON / "timing_prefill_decode.ipynb"
SAMPLES = samples_module(LESSON)

pytestmark = pytest.mark.slow

RELEASE_NB = REPO / "release" / LESSON / "timing_prefill_decode.ipynb"

want_samples(LESSON)


def trimmed(nb):
    """The setup cell, the solution cells and the graded cells, in order; the graded cells as the
    source has them, hidden tests included (as nbgrader autograde restores them)."""
    source = {nbgrader_meta(c).get("grade_id"): c.source for c in nbformat.read(str(SOURCE), as_version=4).cells}
    nb = nbformat.reads(nbformat.writes(nb), as_version=4)
    nb.cells = [c for c in nb.cells if nbgrader_meta(c).get("grade_id") == "setup"
                or nbgrader_meta(c).get("solution") or nbgrader_meta(c).get("grade")]
    for cell in nb.cells:
        if nbgrader_meta(cell).get("grade") and not nbgrader_meta(cell).get("solution"):
            cell.source = source[nbgrader_meta(cell)["grade_id"]]
    return nb


def run(nb, tmp_path, name):
    path = tmp_path / f"{name}.ipynb"
    nbformat.write(trimmed(nb), str(path))
    return run_observed(path, cwd=REPO)


def verdicts_failed(verdicts) -> set[str]:
    return {gid for gid, v in verdicts.items() if not v.passed}


@pytest.fixture(scope="module")
def notebooks():
    return nbformat.read(str(SOURCE), as_version=4), nbformat.read(str(RELEASE_NB), as_version=4)


@pytest.fixture(scope="module")
def trimmed_reference(notebooks, tmp_path_factory):
    return run(notebooks[0], tmp_path_factory.mktemp("reference"), "reference")


def submission(notebooks, overrides, tmp_path, name):
    source, release = notebooks
    return run(submission_from(release, source, overrides), tmp_path, name)


def failed(name: str) -> set[str]:
    return failed_cells(LESSON, name)


def test_reference_observations_are_labelled_uniquely():
    """Determinism: the reference solution graded as a student (a second kernel) passes every cell
    below; test_dask.py compares a third run, on a Dask worker, value for value."""
    first = graded(LESSON).reference.observations
    for gid, observations in first.items():
        labels = [o.label for o in observations]
        assert observations and len(labels) == len(set(labels)), gid


def test_reference_passes_and_release_fails_every_graded_cell():
    assert not failed(REFERENCE), graded(LESSON).messages(REFERENCE)
    verdicts = graded(LESSON).verdicts_of(RELEASE)
    assert failed(RELEASE) == set(verdicts), {g: v for g, v in verdicts.items() if v and v[0]}


def test_the_reference_runs_top_to_bottom_under_the_grading_settings_without_an_error():
    """The session's one grading runs the whole lesson as nbgrader autograde runs it
    (NBGRADER_EXECUTION=autograde: the narrower grading model, the shorter sweeps). No cell of the
    reference may raise there, graded or not (section 8 once narrowed the grading model again and
    stopped: `n_kv_heads=1 is not divisible by 2`)."""
    assert graded(LESSON).errors.get(REFERENCE) == [], graded(LESSON).errors.get(REFERENCE)


def test_sample_mistakes_lose_only_their_cells():
    assert failed(MISTAKEN) == {"time_fn_tests", "generate_timing_tests", "predict_bounds_tests", "decode_mbu_tests",
                                "prefill_mfu_tests", "generate_without_cache_tests",
                                "quiz_q1", "p3_check"}, \
        graded(LESSON).messages(MISTAKEN)


@pytest.mark.parametrize("name", sorted(SAMPLES.MORE_MISTAKES))
def test_each_further_mistake_loses_only_its_cell(name, trimmed_reference, notebooks, tmp_path):
    gid, source = SAMPLES.MORE_MISTAKES[name]
    verdicts = compare_notebooks(trimmed_reference, submission(notebooks, {gid: source}, tmp_path, name))
    assert verdicts_failed(verdicts) == {"predict_bounds_tests"}, {g: v.message for g, v in verdicts.items()}


@pytest.mark.parametrize("name", sorted(SAMPLES.TIMING_MISTAKES))
def test_each_timing_mistake_is_a_wrong_value_in_its_own_cell(name, trimmed_reference, notebooks, tmp_path):
    overrides, lost = SAMPLES.TIMING_MISTAKES[name]
    verdicts = compare_notebooks(trimmed_reference, submission(notebooks, overrides, tmp_path, name))
    assert verdicts_failed(verdicts) == lost, {g: v.message for g, v in verdicts.items()}
    for gid in lost:  # a wrong observed value, not an error raised in the kernel
        assert "does not match" in verdicts[gid].message or "expected" in verdicts[gid].message, verdicts[gid]


@pytest.mark.parametrize("name", sorted(SAMPLES.VARIANTS))
def test_variants_keep_every_cell(name):
    assert not failed(f"variant-{name}"), graded(LESSON).messages(f"variant-{name}")
