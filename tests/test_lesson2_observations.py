"""Lesson 2 graded through observations (course.observe, utils.grading.observations): the reference
passes every graded cell, the release fails every one, each plausible mistake fails only its own
cells, and the alternative solutions pass everywhere. Each notebook runs once per session."""

from __future__ import annotations

import functools
import importlib

import nbformat
import pytest

from utils.coursedir import REPO, nbgrader_meta, source_notebook
from utils.grading.observations import compare_notebooks, observations_by_cell, restore_locked_cells, run_observed
from utils.samples_io import load_samples, sample_submission

pytestmark = pytest.mark.slow
LESSON = "02_arithmetic_intensity"
SOURCE = source_notebook(REPO, LESSON)
RELEASE = REPO / "release" / LESSON / SOURCE.name
MISTAKES, VARIANTS = load_samples(LESSON)
# mistakes beyond the one per exercise: name -> (solution cell, its source)
MORE_MISTAKES = getattr(importlib.import_module(f"utils.samples.{LESSON}"), "MORE_MISTAKES", {})


def as_autograded(nb):
    return restore_locked_cells(nb, SOURCE)


def graded_cells_of(solution_id: str) -> set[str]:
    """The graded cells that grade a solution cell: `<id>_tests`, or every quiz question."""
    if solution_id == "quiz_answers":
        return {g for g in reference_observations() if g.startswith("quiz_q")}
    return {f"{solution_id}_tests"}


@functools.lru_cache(maxsize=None)
def reference():
    return run_observed(SOURCE)


@functools.lru_cache(maxsize=None)
def reference_observations():
    return observations_by_cell(reference())


@functools.lru_cache(maxsize=None)
def verdicts_of(name: str) -> dict:
    """grade_id -> Verdict for one named submission, executed as autograding would."""
    import tempfile
    from pathlib import Path

    if name == "release":
        nb = nbformat.read(str(RELEASE), as_version=4)
    elif name.startswith("mistake-"):
        gid = name[len("mistake-"):]
        nb = sample_submission(REPO, LESSON, {gid: MISTAKES[gid]})
    elif name.startswith("more-"):
        gid, source = MORE_MISTAKES[name[len("more-"):]]
        nb = sample_submission(REPO, LESSON, {gid: source})
    else:
        nb = sample_submission(REPO, LESSON, VARIANTS[name[len("variant-"):]])
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / SOURCE.name
        nbformat.write(as_autograded(nb), str(path))
        return compare_notebooks(reference(), run_observed(path))


def failed(name: str) -> set[str]:
    return {gid for gid, v in verdicts_of(name).items() if not v.passed}


def test_reference_observes_in_every_graded_cell_and_deterministically():
    obs = reference_observations()
    nb = nbformat.read(str(SOURCE), as_version=4)
    graded = {nbgrader_meta(c)["grade_id"] for c in nb.cells if nbgrader_meta(c).get("grade")}
    assert set(obs) == graded
    for gid, found in obs.items():
        labels = [o.label for o in found]
        assert found and len(labels) == len(set(labels)), f"{gid}: no or repeated labels"
    again = compare_notebooks(reference(), run_observed(SOURCE))   # a second run observes the same
    assert set(again) == graded and all(v.passed for v in again.values())


def test_hidden_tests_hold_no_expected_values():
    """Hidden parts observe: no assert, and the quiz cells have none."""
    nb = nbformat.read(str(SOURCE), as_version=4)
    for cell in nb.cells:
        meta = nbgrader_meta(cell)
        if meta.get("grade"):
            assert "assert " not in cell.source, meta["grade_id"]
            if meta["grade_id"].startswith("quiz_q"):
                assert "HIDDEN" not in cell.source, meta["grade_id"]
            else:
                hidden = cell.source.split("### BEGIN HIDDEN TESTS")[1]
                assert "observe(" in hidden, meta["grade_id"]


def test_release_fails_every_graded_cell():
    verdicts = verdicts_of("release")
    assert verdicts and not [g for g, v in verdicts.items() if v.passed]


@pytest.mark.parametrize("gid", sorted(MISTAKES))
def test_a_mistake_fails_only_its_own_cells(gid):
    lost = failed(f"mistake-{gid}")
    if gid == "quiz_answers":
        assert lost and lost <= graded_cells_of(gid), lost
    else:
        assert lost == graded_cells_of(gid), f"the {gid} mistake failed {sorted(lost)}"


@pytest.mark.parametrize("name", sorted(MORE_MISTAKES))
def test_the_named_misconceptions_fail_only_their_own_cell(name):
    gid, _ = MORE_MISTAKES[name]
    assert failed(f"more-{name}") == graded_cells_of(gid)


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_alternative_solutions_pass_everywhere(name):
    assert not failed(f"variant-{name}"), {g: v.message for g, v in verdicts_of(f"variant-{name}").items() if not v.passed}
