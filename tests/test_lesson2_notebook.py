"""Lesson 2's source notebook and sample answers are shaped as docs/authoring.md asks (fast, no grading)."""

from __future__ import annotations

import importlib
import re

import nbformat
import pytest

from utils.coursedir import REPO, nbgrader_meta

LESSON = "02_arithmetic_intensity"
NOTEBOOK = REPO / "source" / LESSON / "arithmetic_intensity.ipynb"
EXERCISES = ["matmul", "roofline", "param_count", "kv_cache", "attention_flops", "step_time", "critical_batch",
             "roofline_plot"]
MAX_WORDS = 3000  # the lesson's text, so that it can be finished in the time it states

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
        assert src.lstrip().startswith("with checking("), f"{gid}: visible checks inside checking(...)"


def test_quiz_has_at_least_three_graded_questions(nb):
    quiz = [nbgrader_meta(c) for c in nb.cells if nbgrader_meta(c).get("grade_id", "").startswith("quiz_q")]
    assert len(quiz) >= 3 and all(m["grade"] for m in quiz)


def test_quiz_keys_follow_the_course_plan(nb):
    """Lesson 2's keys are b, d, a, c (letters spread across the course's three quizzes)."""
    answers = next(c.source for c in nb.cells if nbgrader_meta(c).get("grade_id") == "quiz_answers")
    keys = dict(re.findall(r'(q\d) = "([a-d])"', answers))
    assert keys == {"q1": "b", "q2": "d", "q3": "a", "q4": "c"}, keys


def test_points(nb):
    assert sum(nbgrader_meta(c).get("points", 0) for c in nb.cells if nbgrader_meta(c).get("grade")) == 25


def markdown_words(nb) -> int:
    text = " ".join(c.source for c in nb.cells if c.cell_type == "markdown")
    text = re.sub(r"\$\$.*?\$\$", " ", text, flags=re.S)  # display formulas are not words to read
    return len(re.findall(r"[A-Za-z0-9][A-Za-z0-9'’,.%-]*", text))


def test_lesson_states_its_time_and_stays_short(nb):
    assert re.search(r"Expected time: about \d+ minutes", nb.cells[0].source)
    words = markdown_words(nb)
    assert words <= MAX_WORDS, f"{words} words of text; the lesson's time allows {MAX_WORDS}"


def test_no_mbu_or_mfu_exercise(nb):
    """Lesson 3 owns MBU and MFU; lesson 2 stops at the bounds."""
    for cell in nb.cells:
        if nbgrader_meta(cell).get("solution"):
            assert "def mbu" not in cell.source and "def mfu" not in cell.source


def test_samples_name_real_cells_and_compile(nb, samples):
    solutions = {nbgrader_meta(c)["grade_id"] for c in nb.cells if nbgrader_meta(c).get("solution")}
    assert set(EXERCISES) <= set(samples.MISTAKES) <= solutions
    for name, cells in samples.VARIANTS.items():
        assert cells and set(cells) <= solutions, name
    for source in list(samples.MISTAKES.values()) + [s for v in samples.VARIANTS.values() for s in v.values()]:
        compile(source, "<sample>", "exec")
