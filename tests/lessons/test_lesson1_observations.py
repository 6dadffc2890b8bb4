"""Lesson 1 graded by observations: the grader's verdict on each graded cell, per submission.

Every submission is graded once, through nbgrader with the sandbox, in the session's one grading of
the lesson (tests/grading_runs.py, shared with test_lessons.py); Verdicts judged each graded cell
against the reference solution's observations, outside the student's kernel, and these tests read
the verdict lines of the autograded notebooks (each checked against the cell's score):

- the reference's observations, as grading ran them: labels unique per cell, and every graded cell
  passes when the reference solution is graded as a student in a second kernel (deterministic;
  test_dask.py compares a third run on a Dask worker value for value);
- the release (stubs): every graded cell fails;
- the plausible-mistakes sample (utils/authoring/samples/01_two_phases.py): exactly the cells of its mistakes
  fail;
- every alternative-solution sample: every graded cell passes;
- TPOT of a one-token request as the convention before NaN (a ValueError), or as 0: only the
  one-token cell fails.
"""

from __future__ import annotations

import nbformat
import pytest

from grading_runs import MISTAKEN, REFERENCE, RELEASE, graded, want, want_samples
from grading_runs import failed as failed_cells
from utils.lessons import REPO
from utils.notebooks import graded_cells
from utils.authoring.samples_io import load_samples

pytestmark = pytest.mark.slow

LESSON = "01_two_phases"
SOURCE = REPO / "source" / LESSON / "two_phases.ipynb"
MISTAKES, VARIANTS = load_samples(LESSON)

# The cells each mistake of the plausible-mistakes sample must lose, and nothing else.
MISTAKEN_CELLS = {"request_metrics_tpot", "token_arrivals_first_last", "phase_flops", "phase_bytes", "quiz_q2",
                  "quiz_p1"}

# One misconception each about a single output token; each must lose request_metrics_one_token only.
ONE_TOKEN = {
    "raises": '''
def request_metrics(send_time_s, token_times_s):
    times = as_token_times(send_time_s, token_times_s)
    if times.size < 2:
        raise ValueError("TPOT is undefined for a single output token")
    ttft_s, e2e_s = times[0] - send_time_s, times[-1] - send_time_s
    return {"ttft_s": ttft_s, "tpot_s": (e2e_s - ttft_s) / (times.size - 1), "e2e_s": e2e_s}
''',
    "zero": '''
def request_metrics(send_time_s, token_times_s):
    times = as_token_times(send_time_s, token_times_s)
    ttft_s, e2e_s = times[0] - send_time_s, times[-1] - send_time_s
    return {"ttft_s": ttft_s, "tpot_s": (e2e_s - ttft_s) / max(times.size - 1, 1), "e2e_s": e2e_s}
''',
}


want_samples(LESSON)
want(LESSON, {f"one-token-{name}": {"request_metrics": source} for name, source in ONE_TOKEN.items()})
GRADED = graded_cells(nbformat.read(str(SOURCE), as_version=4))


def failed(name: str) -> set[str]:
    return failed_cells(LESSON, name, every=set(GRADED))


def test_reference_observations_labelled_uniquely_in_every_graded_cell():
    """Determinism: the reference solution, graded as a student in a kernel of its own, is judged
    against these observations and must pass every cell (test_reference_passes_every_graded_cell);
    test_dask.py compares a third run, on a Dask worker, value for value."""
    first = graded(LESSON).reference.observations
    assert list(first) == GRADED
    for gid, obs in first.items():
        labels = [o.label for o in obs]
        assert labels, f"{gid}: no observations"
        assert len(set(labels)) == len(labels), f"{gid}: repeated labels"


def test_reference_passes_every_graded_cell():
    assert failed(REFERENCE) == set()


def test_release_fails_every_graded_cell():
    assert failed(RELEASE) == set(GRADED)


def test_plausible_mistakes_lose_only_their_cells():
    assert failed(MISTAKEN) == MISTAKEN_CELLS


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_alternative_solution_passes_everything(variant):
    assert failed(f"variant-{variant}") == set()


@pytest.mark.parametrize("mistake", sorted(ONE_TOKEN))
def test_one_token_mistake_loses_only_the_one_token_cell(mistake):
    assert failed(f"one-token-{mistake}") == {"request_metrics_one_token"}


def test_a_notebook_run_outside_nbgrader_is_judged_like_grading(synthetic_course):
    """utils.grading.steps.observations' own runner (python -m utils.grading.steps.observations), on the small
    synthetic lesson: the executed reference passes every graded cell against itself, the release
    with its locked cells restored fails every one."""
    from conftest import SYNTH
    from utils.grading.steps.observations import compare_notebooks, observations_by_cell, restore_locked_cells, run_observed

    source = synthetic_course / "source" / SYNTH / "synthetic.ipynb"
    release = synthetic_course / "release" / SYNTH / "synthetic.ipynb"
    reference = run_observed(source)
    assert all(observations_by_cell(reference).values())
    verdicts = compare_notebooks(reference, reference)
    assert verdicts and all(v.passed for v in verdicts.values())
    stub = restore_locked_cells(nbformat.read(str(release), as_version=4), source)
    path = synthetic_course / "stub.ipynb"
    nbformat.write(stub, str(path))
    verdicts = compare_notebooks(reference, run_observed(path, cwd=source.parent))
    assert set(verdicts) == set(observations_by_cell(reference)) and not any(v.passed for v in verdicts.values())
