"""Lesson 2's source notebook and sample answers are shaped as docs/authoring.md asks (fast, no grading)."""

from __future__ import annotations

import importlib

import nbformat
import pytest

from utils.coursedir import REPO, nbgrader_meta

LESSON = "02_arithmetic_intensity"
NOTEBOOK = REPO / "source" / LESSON / "arithmetic_intensity.ipynb"
EXERCISES = ["matmul", "roofline", "param_count", "kv_cache", "kv_fit", "prefill_step", "decode_step",
             "critical_batch", "batch_sweep", "sweep_plot", "roofline_plot", "serving_limits", "utilization"]

pytestmark = pytest.mark.skipif(not NOTEBOOK.exists(), reason="lesson 2 not written yet")


@pytest.fixture(scope="module")
def nb():
    return nbformat.read(str(NOTEBOOK), as_version=4)


@pytest.fixture(scope="module")
def samples():
    return importlib.import_module(f"utils.samples.{LESSON}")


def test_committed_without_outputs(nb):
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert not cell.outputs and cell.execution_count is None, cell.source[:60]


def test_each_exercise_is_solution_then_graded_tests(nb):
    cells = [(nbgrader_meta(c).get("grade_id"), c) for c in nb.cells]
    ids = [gid for gid, _ in cells]
    for gid in EXERCISES:
        i = ids.index(gid)
        assert nbgrader_meta(cells[i][1])["solution"]
        test_meta = nbgrader_meta(cells[i + 1][1])
        assert cells[i + 1][0] == f"{gid}_tests" and test_meta["grade"] and test_meta["points"] > 0
        src = cells[i + 1][1].source
        assert "### BEGIN HIDDEN TESTS" in src and "### END HIDDEN TESTS" in src
        assert src.index("check_") < src.index("### BEGIN HIDDEN TESTS"), f"{gid}: visible checks first"


def test_quiz_has_at_least_three_graded_questions(nb):
    quiz = [nbgrader_meta(c) for c in nb.cells if nbgrader_meta(c).get("grade_id", "").startswith("quiz_q")]
    assert len(quiz) >= 3 and all(m["grade"] for m in quiz)


def test_points(nb):
    assert sum(nbgrader_meta(c).get("points", 0) for c in nb.cells if nbgrader_meta(c).get("grade")) == 37


def test_samples_name_real_cells_and_compile(nb, samples):
    solutions = {nbgrader_meta(c)["grade_id"] for c in nb.cells if nbgrader_meta(c).get("solution")}
    assert set(EXERCISES) <= set(samples.MISTAKES) <= solutions
    for name, cells in samples.VARIANTS.items():
        assert cells and set(cells) <= solutions, name
    for source in list(samples.MISTAKES.values()) + [s for v in samples.VARIANTS.values() for s in v.values()]:
        compile(source, "<sample>", "exec")
