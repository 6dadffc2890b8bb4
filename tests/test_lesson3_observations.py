"""Lesson 3's graded cells judged the new way (course.observe in the kernel, utils.grading outside):
the release fails every graded cell, the reference passes them all, each plausible mistake in
utils/samples/03_timing_prefill_decode.py loses only its own cell(s), each timing mistake loses its
cell for a wrong observed value (not an error), every correct variant keeps them all, and the
reference's observations are the same on a second run.

Every submission is graded once, through nbgrader with the sandbox, in the session's one grading of
the lesson (tests/grading_runs.py, shared with test_lessons.py); these tests read each graded
cell's verdict in the autograded notebooks, checked against its score in the gradebook.
"""

from __future__ import annotations

import pytest

from grading_runs import MISTAKEN, REFERENCE, RELEASE, graded, samples_module, want, want_samples
from utils.coursedir import REPO

LESSON = "03_timing_prefill_decode"
SOURCE = REPO / "source" / LESSON / "timing_prefill_decode.ipynb"
SAMPLES = samples_module(LESSON)

pytestmark = pytest.mark.slow

want_samples(LESSON)
want(LESSON, {f"more-{name}": {gid: source} for name, (gid, source) in SAMPLES.MORE_MISTAKES.items()})
want(LESSON, {f"timing-{name}": overrides for name, (overrides, _) in SAMPLES.TIMING_MISTAKES.items()})


def failed(name: str) -> set[str]:
    return graded(LESSON).failed(name)


def test_reference_observations_are_deterministic_and_labels_unique():
    from utils.grading.reference import run_reference

    first = graded(LESSON).reference.observations
    again = run_reference(SOURCE, 600).observations
    assert first == again
    for gid, observations in first.items():
        labels = [o.label for o in observations]
        assert observations and len(labels) == len(set(labels)), gid


def test_reference_passes_and_release_fails_every_graded_cell():
    assert not failed(REFERENCE), graded(LESSON).messages(REFERENCE)
    verdicts = graded(LESSON).verdicts_of(RELEASE)
    assert failed(RELEASE) == set(verdicts), {g: v for g, v in verdicts.items() if v and v[0]}


def test_sample_mistakes_lose_only_their_cells():
    assert failed(MISTAKEN) == {"time_fn_tests", "generate_timing_tests", "predict_floors_tests", "decode_mbu_tests",
                                "prefill_mfu_tests", "generate_without_cache_tests", "quiz_q1"}, \
        graded(LESSON).messages(MISTAKEN)


@pytest.mark.parametrize("name", sorted(SAMPLES.MORE_MISTAKES))
def test_each_further_mistake_loses_only_its_cell(name):
    assert failed(f"more-{name}") == {"predict_floors_tests"}, graded(LESSON).messages(f"more-{name}")


@pytest.mark.parametrize("name", sorted(SAMPLES.TIMING_MISTAKES))
def test_each_timing_mistake_is_a_wrong_value_in_its_own_cell(name):
    _, lost = SAMPLES.TIMING_MISTAKES[name]
    messages = graded(LESSON).messages(f"timing-{name}")
    assert failed(f"timing-{name}") == lost, messages
    for gid in lost:  # a wrong observed value (CheckFailed), not an error raised in the kernel
        assert messages[gid].startswith("CheckFailed: "), messages[gid]
        assert "does not match" in messages[gid] or "expected" in messages[gid], messages[gid]


@pytest.mark.parametrize("name", sorted(SAMPLES.VARIANTS))
def test_variants_keep_every_cell(name):
    assert not failed(f"variant-{name}"), graded(LESSON).messages(f"variant-{name}")
