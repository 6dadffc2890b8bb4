"""HideHiddenTests: the feedback copy of a notebook loses its hidden tests and the outputs that could
show them (tests/steps_common.py says how these tests are built)."""

from __future__ import annotations

import copy

from traitlets.config import Config

from utils.authoring import nbauthor as author
from utils.grading.steps.hide_hidden import LEFT_OUT, HideHiddenTests
from steps_common import SOURCE_A, display, notebook, ran, stream


def hidden(*cells, config=None, call=False):
    nb = notebook(cells)
    step = HideHiddenTests(config=config) if config is not None else HideHiddenTests()
    nb, _ = step(nb, {}) if call else step.preprocess(nb, {})
    return nb


def test_hidden_tests_are_cut_from_the_source_with_their_indentation():
    cell = author.tests("test_a", 2, "check('v', 1)\nfor i in range(2):\n    ### BEGIN HIDDEN TESTS\n"
                                     "    observe('h', i)\n    ### END HIDDEN TESTS\nafter()\n"
                                     "### BEGIN HIDDEN TESTS\nobserve('h2', 2)\n### END HIDDEN TESTS")
    assert hidden(cell).cells[0].source == ("check('v', 1)\nfor i in range(2):\n    # (hidden tests are not shown)\n"
                                            "after()\n# (hidden tests are not shown)")


def test_a_region_left_open_hides_everything_after_it():
    cell = author.tests("test_a", 2, "check('v', 1)\n### BEGIN HIDDEN TESTS\nobserve('h', 2)\nobserve('h3', 3)")
    assert hidden(cell).cells[0].source == "check('v', 1)\n# (hidden tests are not shown)"


def test_with_hidden_tests_only_the_verdicts_of_graded_cells_stay():
    verdict = [stream("✔ all 2 checks match the reference solution (1 visible, 1 hidden)\n")]
    graded = author.tests("test_a", 2, SOURCE_A)
    graded.outputs = copy.deepcopy(verdict)
    printer = ran("print(In)", [stream("observe('a(2)', a(2))"), display({"text/plain": "x"})])
    quiet = ran("y = 1")
    nb = hidden(author.md("text"), printer, graded, quiet)
    assert nb.cells[1].outputs == [stream(LEFT_OUT)] and nb.cells[2].outputs == verdict and nb.cells[3].outputs == []


def test_without_hidden_tests_the_notebook_is_left_as_it_is():
    cells = [ran("print(1)", [stream("1\n")]), author.tests("test_a", 2, "check('v', 1)")]
    assert hidden(*copy.deepcopy(cells)).cells == cells


def test_nbgraders_configured_delimiters_are_the_ones_cut():
    c = Config()
    c.ClearHiddenTests.begin_test_delimeter = "HIDE FROM HERE"
    c.ClearHiddenTests.end_test_delimeter = "HIDE TO HERE"
    cell = author.tests("test_a", 2, "v()\n# HIDE FROM HERE\nh()\n# HIDE TO HERE\nw()")
    nb = hidden(cell, ran("print(1)", [stream("1")]), config=c)
    assert nb.cells[0].source == "v()\n# (hidden tests are not shown)\nw()"
    assert nb.cells[1].outputs == [stream(LEFT_OUT)]
    assert hidden(author.tests("test_a", 2, SOURCE_A), config=c).cells[0].source == SOURCE_A


def test_released_hidden_tests_leave_the_notebook_as_graded():
    c = Config()
    c.HideHiddenTests.enabled = False
    cells = [author.tests("test_a", 2, SOURCE_A), ran("print(1)", [stream("1")])]
    assert hidden(*copy.deepcopy(cells), config=c, call=True).cells == cells
    assert hidden(*copy.deepcopy(cells), call=True).cells[0].source != SOURCE_A
