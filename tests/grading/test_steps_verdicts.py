"""Verdicts: each graded test cell is judged outside the kernel against the reference's observations
(tests/steps_common.py says how these tests are built)."""

from __future__ import annotations

import pytest
from nbformat.notebooknode import from_dict
from nbformat.v4 import new_code_cell
from nbgrader.utils import determine_grade

from course.observe import MIME
from utils.authoring import nbauthor as author
from utils.grading.reference_run import RESOURCE_KEY
from utils.grading.steps.verdicts import GRADER_ERRORS, Verdicts
from steps_common import display, error, lesson, lesson_reference, observed, stream


def judged(outputs_a, outputs_b=(), reference=lesson_reference, extra=()):
    """`lesson()` as executed, with the given outputs in its two test cells, through Verdicts."""
    nb = lesson()
    nb.cells[3].outputs, nb.cells[5].outputs = list(outputs_a), list(outputs_b)
    nb.cells.extend(extra)
    resources = {RESOURCE_KEY: reference()} if reference else {}
    nb, _ = Verdicts().preprocess(nb, resources)
    return nb


def test_a_matching_test_cell_gets_the_pass_line_and_full_points():
    nb = judged([stream("noise", "stderr"), observed("a(1)", 1.0), observed("a(2)", 2.0)])
    assert [o.text for o in nb.cells[3].outputs] == [
        "✔ all 2 checks match the reference solution (1 visible, 1 hidden)\n"]
    assert determine_grade(nb.cells[3]) == (2, 2) and determine_grade(nb.cells[5]) == (0, 3)


def test_without_a_reference_every_test_cell_fails():
    nb = judged([observed("a(1)", 1.0), observed("a(2)", 2.0)], reference=None)
    assert all(c.outputs[0].ename == "CheckFailed" and "has no graded cell" in c.outputs[0].evalue
               for c in (nb.cells[3], nb.cells[5]))


def test_an_observation_the_grader_cannot_read_fails_its_cell_only():
    unreadable = display({MIME: "{" * 100_000})                        # nested deeper than json parses
    nb = judged([observed("a(1)", 1.0), unreadable, observed("a(2)", 2.0)],
                [observed("b(1)", 2.0), observed("b(2)", 4.0)])
    assert "cannot read" in nb.cells[3].outputs[0].evalue and determine_grade(nb.cells[3]) == (0, 2)
    assert determine_grade(nb.cells[5]) == (3, 3)


@pytest.mark.parametrize("forged, said", [
    (from_dict({"output_type": "display_data", "metadata": {}, "data": 5}), "could not be read (TypeError)"),
    (display({MIME: {"label": "a(1)", "rule": "close", "value": 1.0, "rel": 10 ** 400}}), "cannot read"),
    (display({MIME: {"label": "a(1)", "rule": "close", "value": 1.0, "abs": float("nan")}}), "cannot read"),
])
def test_outputs_of_the_wrong_shape_fail_the_cell_and_nothing_else(forged, said):
    nb = judged([observed("a(1)", 1.0), forged, observed("a(2)", 2.0)], [observed("b(1)", 2.0), observed("b(2)", 4.0)])
    out = nb.cells[3].outputs[0]
    assert out.ename == "CheckFailed" and said in out.evalue and determine_grade(nb.cells[3]) == (0, 2)
    assert determine_grade(nb.cells[5]) == (3, 3)


@pytest.mark.parametrize("ename", sorted(GRADER_ERRORS))
def test_the_graders_own_errors_keep_their_name_and_the_graders_sentence(ename):
    nb = judged([error(ename, "the kernel wrote this: observe('a(2)', a(2))")])
    out = nb.cells[3].outputs[0]
    assert (out.ename, out.evalue, out.traceback) == (ename, GRADER_ERRORS[ename], [f"{ename}: {GRADER_ERRORS[ename]}"])


def test_cells_that_are_not_graded_tests_keep_their_outputs():
    printed = new_code_cell("print(1)")
    printed.outputs = [stream("1\n")]
    answer = author.solution("sol_md", "An answer")
    answer.cell_type, answer.outputs = "code", [stream("mine\n")]
    answer.metadata.nbgrader.update(grade=True, points=1)              # a graded answer, judged by hand
    odd = new_code_cell("x")
    odd.metadata["nbgrader"] = "grade"                                  # not a dict: not a test cell
    odd.outputs = [stream("odd\n")]
    nb = judged([], extra=[printed, answer, odd])
    assert [c.outputs for c in nb.cells[-3:]] == [[stream("1\n")], [stream("mine\n")], [stream("odd\n")]]
