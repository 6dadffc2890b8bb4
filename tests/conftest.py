"""Shared fixtures: a small fabricated lesson for testing the instructor tools quickly."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import grading_runs

from utils import nbauthor as nb
from utils.coursedir import REPO, nbgrader, scratch_config

SYNTH = "00_synthetic"


def synthetic_cells(test_body: str | None = None, quiz_hidden: str | None = None) -> list:
    """A lesson with one function exercise and one quiz question, shaped like the real ones: the
    graded cells observe (course.observe), the quiz answer is its check_choice observation."""
    return [
        nb.md("# A synthetic lesson\nSquares and a quiz.", "intro"),
        nb.readonly("setup", "import math\nfrom course.checks import check_close\nfrom course.quiz import check_choice"),
        nb.solution("square", "def square(x):\n    ### BEGIN SOLUTION\n    if x != x:\n"
                               "        raise ValueError('x is NaN')\n    return x * x\n    ### END SOLUTION"),
        nb.tests("square_test", 2, test_body or (
            "check_close('square(3)', square(3), 9.0)\n"
            "### BEGIN HIDDEN TESTS\n"
            "from course.observe import observe\n"
            "observe('square(1.5)', square(1.5))\n"
            "### END HIDDEN TESTS")),
        nb.solution("quiz_q1", "### BEGIN SOLUTION\nq1 = 'c'\n### END SOLUTION"),
        nb.tests("quiz_q1_test", 1, "check_choice('q1', q1, 'abcd')" + (quiz_hidden or "")),
    ]


def make_course(root: Path, cells: list) -> Path:
    """A course directory at `root` with the synthetic lesson in source/ and its release built."""
    scratch_config(root, REPO)
    (root / "course").mkdir(exist_ok=True)
    nb.write(root / "source" / SYNTH / "synthetic.ipynb", cells)
    nbgrader(["generate_assignment", SYNTH, "--force"], cwd=root)
    return root


@pytest.fixture(scope="session", autouse=True)
def _one_grading_per_lesson_across_test_processes(tmp_path_factory):
    """Under pytest-xdist, the lessons' shared gradings (tests/grading_runs.py) live in the folder
    above every process's own temporary folder, which all of them see."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        grading_runs.SHARED = tmp_path_factory.getbasetemp().parent


@pytest.fixture
def synthetic_course(tmp_path: Path) -> Path:
    return make_course(tmp_path / "course-root", synthetic_cells())
