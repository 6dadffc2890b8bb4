"""make validate (the Validate button from a terminal) exits non-zero where a lesson did not validate,
and 0 where it did. The target itself runs, from a scratch folder laid out as a checkout with its
student environment in place (the course's own .venv stands in for .venv-student, so nothing is
installed), on lesson 1's released stub cut to its first exercise (a kernel for each run)."""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
import sys

import nbformat
import pytest

from utils.lessons import REPO

LESSON = "01_two_phases"
STUB = REPO / "release" / LESSON / "two_phases.ipynb"
SOLVED = REPO / "source" / LESSON / "two_phases.ipynb"
SOLUTION_CELL = "request_metrics"  # the first exercise's solution cell's grade_id
pytestmark = pytest.mark.slow


def _first_exercise(nb):
    """The stub's cells up to its first exercise's graded tests (they all fail on the stub)."""
    cells = nb.cells
    ids = [c.metadata.get("nbgrader", {}).get("grade_id", "") for c in cells]
    solution = ids.index(SOLUTION_CELL)
    end = solution + 1
    while end < len(cells) and cells[end].metadata.get("nbgrader", {}).get("grade"):
        end += 1
    cut = copy.deepcopy(nb)
    cut.cells = cells[:end]
    return cut, solution


@pytest.fixture(scope="module")
def checkout(tmp_path_factory):
    """A folder with what `make validate` reads from a checkout; its student environment's python
    (and nbgrader) run this one's, and its stamp is newer than the requirements, so make installs nothing."""
    root = tmp_path_factory.mktemp("checkout")
    for name in ("Makefile", "utils", "requirements.txt", "requirements-pins.txt", "pyproject.toml", "release"):
        (root / name).symlink_to(REPO / name)
    bin_dir = root / ".venv-student" / "bin"
    bin_dir.mkdir(parents=True)
    for name, command in (("python", ""), ("nbgrader", " -m nbgrader")):
        (bin_dir / name).write_text(f'#!/bin/sh\nexec "{sys.executable}"{command} "$@"\n')
        (bin_dir / name).chmod(0o755)
    (root / ".venv-student" / ".installed").touch()
    return root


def _make_validate(root, lesson: str) -> subprocess.CompletedProcess:
    """`make validate LESSON=lesson` in `root`, as from a terminal (no outer make's or Jupyter's settings)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MAKE", "JUPYTER"))}
    return subprocess.run(["make", "--no-print-directory", "validate", f"LESSON={lesson}"], cwd=root, env=env,
                          capture_output=True, text=True, timeout=300)


def _validate(root, lesson: str, nb) -> subprocess.CompletedProcess:
    folder = root / "lessons" / lesson
    folder.mkdir(parents=True)
    nbformat.write(nb, folder / STUB.name)
    return _make_validate(root, lesson)


def test_a_failing_lesson_makes_validate_exit_1_and_a_passing_one_0(checkout):
    stub, solution = _first_exercise(nbformat.read(STUB, as_version=4))
    failed = _validate(checkout, "failing", stub)
    assert "VALIDATION FAILED ON 3 CELL(S)" in failed.stdout, failed.stdout + failed.stderr
    assert failed.returncode != 0, failed.stdout
    assert f"lessons/failing/{STUB.name} did not validate" in failed.stderr

    source = {c.metadata.get("nbgrader", {}).get("grade_id"): c for c in nbformat.read(SOLVED, as_version=4).cells}
    solved = copy.deepcopy(stub)
    solved.cells[solution].source = source[SOLUTION_CELL].source
    passed = _validate(checkout, "passing", solved)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "VALIDATION FAILED" not in passed.stdout and "Success! Your notebook passes all the tests." in passed.stdout


def test_a_lesson_without_a_notebook_is_named(checkout):
    (checkout / "lessons" / "empty").mkdir(parents=True)
    run = _make_validate(checkout, "empty")
    assert run.returncode != 0 and "no notebook matches lessons/empty/*.ipynb" in run.stderr, run.stderr
    shutil.rmtree(checkout / "lessons" / "empty")
