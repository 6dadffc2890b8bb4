"""Lesson 1 graded by observations: the grader's verdict on each graded cell, per submission.

The reference solution (source notebook) and each submission run as autograding runs them
(NBGRADER_EXECUTION=autograde, utils.grading.observations.run_observed); compare_notebooks judges
every graded cell against the reference's observations, outside the student's kernel:

- the reference, run twice: the same labels and values (deterministic), labels unique per cell,
  every graded cell passes;
- the release (stubs): every graded cell fails;

Submissions are built on the release, whose test cells lack the hidden tests; as nbgrader's
autograde does, every locked cell is restored from the source notebook before running.
- the plausible-mistakes sample (utils/samples/01_two_phases.py): exactly the cells of its mistakes
  fail;
- every alternative-solution sample: every graded cell passes;
- TPOT of a one-token request as the convention before NaN (a ValueError), or as 0: only the
  one-token cell fails.

Slow: each notebook is executed (about half a minute each on a 2-core machine).
"""

from __future__ import annotations

import functools

import nbformat
import pytest

from utils.coursedir import REPO, graded_cells
from utils.grading.observations import compare_notebooks, observations_by_cell, restore_locked_cells, run_observed
from utils.samples_io import load_samples, sample_submission

pytestmark = pytest.mark.slow

LESSON = "01_two_phases"
SOURCE = REPO / "source" / LESSON / "two_phases.ipynb"
RELEASE = REPO / "release" / LESSON / "two_phases.ipynb"
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


def with_hidden_tests(nb):
    return restore_locked_cells(nb, SOURCE)


def _run(nb, tmp_path_factory, name: str):
    nb = with_hidden_tests(nb)
    path = tmp_path_factory.mktemp(name) / "two_phases.ipynb"
    nbformat.write(nb, str(path))
    return run_observed(path)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    @functools.lru_cache(maxsize=None)
    def executed(name: str):
        if name in ("reference", "reference-again"):
            return _run(nbformat.read(str(SOURCE), as_version=4), tmp_path_factory, name)
        if name == "release":
            return _run(nbformat.read(str(RELEASE), as_version=4), tmp_path_factory, name)
        if name == "mistakes":
            return _run(sample_submission(REPO, LESSON, MISTAKES), tmp_path_factory, name)
        if name.startswith("one-token-"):
            cells = {"request_metrics": ONE_TOKEN[name.removeprefix("one-token-")]}
            return _run(sample_submission(REPO, LESSON, cells), tmp_path_factory, name)
        return _run(sample_submission(REPO, LESSON, VARIANTS[name.removeprefix("variant-")]), tmp_path_factory, name)
    return executed


def failed(run, name: str) -> set[str]:
    verdicts = compare_notebooks(run("reference"), run(name))
    assert set(verdicts) == set(GRADED), f"{name}: verdicts for {sorted(verdicts)}"
    return {gid for gid, v in verdicts.items() if not v.passed}


GRADED = graded_cells(nbformat.read(str(SOURCE), as_version=4))


def test_reference_observations_deterministic_and_labels_unique(run):
    first, second = observations_by_cell(run("reference")), observations_by_cell(run("reference-again"))
    assert list(first) == GRADED
    for gid, obs in first.items():
        labels = [o.label for o in obs]
        assert labels, f"{gid}: no observations"
        assert len(set(labels)) == len(labels), f"{gid}: repeated labels"
        assert obs == second[gid], f"{gid}: the reference's observations differ between two runs"


def test_reference_passes_every_graded_cell(run):
    assert failed(run, "reference-again") == set()


def test_release_fails_every_graded_cell(run):
    assert failed(run, "release") == set(GRADED)


def test_plausible_mistakes_lose_only_their_cells(run):
    assert failed(run, "mistakes") == MISTAKEN_CELLS


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_alternative_solution_passes_everything(run, variant):
    assert failed(run, f"variant-{variant}") == set()


@pytest.mark.parametrize("mistake", sorted(ONE_TOKEN))
def test_one_token_mistake_loses_only_the_one_token_cell(run, mistake):
    assert failed(run, f"one-token-{mistake}") == {"request_metrics_one_token"}
