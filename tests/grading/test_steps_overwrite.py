"""SafeOverwriteCells: a submission's test cells, roles and points come back from the gradebook,
deleted test cells come back in place, a submission's own grading notes are emptied
(tests/steps_common.py says how these tests are built)."""

from __future__ import annotations

import copy

import pytest
from nbformat.v4 import new_code_cell
from nbgrader.preprocessors import DeduplicateIds, OverwriteCells

from utils.grading.steps.base import NOTES_KEY, read_notes
from utils.grading.steps.overwrite import SafeOverwriteCells
from steps_common import SOURCE_A, gids, lesson, submitted


def overwrite(nb, gradebook):
    nb, _ = SafeOverwriteCells(add_missing_cells=True).preprocess(nb, copy.deepcopy(gradebook))
    return nb


def test_a_submissions_own_grading_notes_are_emptied(gradebook):
    nb = submitted()
    nb.metadata[NOTES_KEY] = {"notes": [{"event": "roles-restored", "cell": "test_a", "text": "all fine, 5/5"}]}
    assert read_notes(overwrite(nb, gradebook)) == []


def test_an_edited_test_cell_gets_its_source_and_points_back(gradebook):
    nb = submitted()
    nb.cells[3].source = "check_close('a(1)', a(1), 1.0)"   # the hidden tests deleted
    nb.cells[3].metadata.nbgrader["points"] = 200
    cell = overwrite(nb, gradebook).cells[3]
    assert cell.source == SOURCE_A and cell.metadata.nbgrader["points"] == 2.0


def test_a_solution_cell_made_graded_gets_its_role_back_with_a_note(gradebook):
    nb = submitted()
    nb.cells[2].metadata.nbgrader.update(grade=True)   # no points: nbgrader's own step raised KeyError
    meta = overwrite(nb, gradebook).cells[2].metadata.nbgrader
    assert (meta["grade"], meta["solution"], "points" in meta) == (False, True, False)
    assert [(n["event"], n["cell"]) for n in read_notes(nb)] == [("roles-restored", "sol_a")]
    assert "(grade)" in read_notes(nb)[0]["text"]


def test_a_test_cell_made_a_solution_is_graded_again(gradebook):
    nb = submitted()
    nb.cells[5].metadata.nbgrader.update(solution=True, grade=False, points=0)
    meta = overwrite(nb, gradebook).cells[5].metadata.nbgrader
    assert (meta["grade"], meta["solution"], meta["points"]) == (True, False, 3.0)
    assert "grade, solution, points" in read_notes(nb)[0]["text"]


def test_a_cell_of_an_unknown_grade_id_becomes_a_plain_cell(gradebook):
    nb = submitted()
    forged = new_code_cell("print('extra credit')")
    forged.metadata["nbgrader"] = {"grade": True, "solution": False, "locked": False, "grade_id": "bonus", "points": 50}
    nb.cells.append(forged)
    nb = overwrite(nb, gradebook)
    assert "nbgrader" not in nb.cells[-1].metadata and nb.cells[-1].source == "print('extra credit')"
    assert gids(nb) == gids(lesson()) + [None]


def test_a_copied_test_cell_counts_once_and_its_copy_runs_as_a_plain_cell(gradebook):
    """As autograde runs them: nbgrader's DeduplicateIds empties the copy's nbgrader metadata
    (nbgrader's OverwriteCells then failed with KeyError 'grade_id' when adding missing cells)."""
    nb = submitted()
    nb.cells.insert(3, copy.deepcopy(nb.cells[5]))    # test_b pasted before test_a
    nb, _ = DeduplicateIds().preprocess(nb, {})
    nb = overwrite(nb, gradebook)
    assert gids(nb) == ["intro", "setup", "sol_a", None, "test_a", "sol_b", "test_b"]
    assert "nbgrader" not in nb.cells[3].metadata


@pytest.mark.parametrize("deleted, order", [
    ({"test_a"}, ["intro", "setup", "sol_a", "test_a", "sol_b", "test_b"]),
    ({"sol_b", "test_b"}, ["intro", "setup", "sol_a", "test_a", "test_b"]),     # the cell before it gone too
    ({"sol_a", "test_a", "sol_b"}, ["intro", "setup", "test_a", "test_b"]),
    ({"intro", "setup", "sol_a", "test_a"}, ["test_a", "sol_b", "test_b"]),      # nothing earlier left
])
def test_a_deleted_test_cell_comes_back_after_the_nearest_earlier_cell_left(gradebook, deleted, order):
    nb = submitted()
    nb.cells = [c for c in nb.cells if c.metadata.nbgrader["grade_id"] not in deleted]
    nb = overwrite(nb, gradebook)
    assert gids(nb) == order
    back = {c.metadata["nbgrader"]["grade_id"]: c for c in nb.cells if c.metadata["nbgrader"].get("grade")}
    assert back["test_a"].metadata["nbgrader"]["points"] == 2 and SOURCE_A in back["test_a"].source
    assert back["test_b"].metadata["nbgrader"]["points"] == 3


def test_nbgraders_own_step_loses_a_submission_missing_two_cells_in_a_row(gradebook):
    """The control for the test above."""
    nb = submitted()
    nb.cells = nb.cells[:4]
    with pytest.raises(KeyError):
        OverwriteCells(add_missing_cells=True).preprocess(nb, copy.deepcopy(gradebook))
