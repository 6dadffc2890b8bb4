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
             "roofline_plot", "mixed_step", "chunk_budget"]
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
        # the observing hidden tests come after the visible checks; a hidden region before them may
        # only set things up (mixed_step_tests: a correct step_time), so what students see starts
        # with the checks
        assert src.index("check_") < src.rindex("### BEGIN HIDDEN TESTS"), f"{gid}: visible checks first"
        visible = re.sub(r"### BEGIN HIDDEN TESTS\n.*?### END HIDDEN TESTS\n?", "", src, flags=re.S)
        assert visible.lstrip().startswith("with checking("), f"{gid}: visible checks inside checking(...)"


def test_quiz_has_at_least_three_graded_questions(nb):
    quiz = [nbgrader_meta(c) for c in nb.cells if nbgrader_meta(c).get("grade_id", "").startswith("quiz_q")]
    assert len(quiz) >= 3 and all(m["grade"] for m in quiz)


def test_quiz_keys_follow_the_course_plan(nb):
    """Lesson 2's keys are b, d, a, c (letters spread across the course's three quizzes)."""
    answers = next(c.source for c in nb.cells if nbgrader_meta(c).get("grade_id") == "quiz_answers")
    keys = dict(re.findall(r'(q\d) = "([a-d])"', answers))
    assert keys == {"q1": "b", "q2": "d", "q3": "a", "q4": "c"}, keys


def test_points(nb):
    assert sum(nbgrader_meta(c).get("points", 0) for c in nb.cells if nbgrader_meta(c).get("grade")) == 28


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


@pytest.fixture(scope="module")
def reference(nb):
    """The reference solution's functions, run outside the notebook."""
    import math

    import numpy as np

    from utils.coursedir import strip_markers

    namespace = {"math": math, "np": np, "BOUND_COLOR": "grey"}
    for cell in nb.cells:
        if nbgrader_meta(cell).get("solution") and "def " in cell.source:
            exec(strip_markers(cell.source), namespace)
    return namespace


# How to Scale Your Model, "All About Transformer Inference": (params, weight bytes, cache bytes per
# sequence, batch, FLOP/s, bytes/s) and the step time it prints, in ms. The 30B int8 model on 16 TPU
# v5e at batch 4 is its expression (4 * 819e6 + 30e9) / (16 * 8.1e11), printed rounded as 2.5 ms.
BOOK = ([(30e9, 30e9, 819e6, 4, 16 * 1.97e14, 16 * 8.1e11, 2.5676), (30e9, 30e9, 819e6, 256, 16 * 1.97e14, 16 * 8.1e11, 21)]
        + [(13e9, 26e9, 6.7e9, b, 1.6e15, 8 * 0.82e12, ms)
           for b, ms in zip([1, 8, 16, 32, 64, 240], [4.98, 12.13, 20.30, 36.65, 69.33, 249.09])]
        + [(13e9, 26e9, 1.34e9, b, 1.6e15, 8 * 0.82e12, ms)
           for b, ms in zip([1, 8, 16, 32, 64, 240], [4.17, 5.60, 7.23, 10.50, 17.04, 52.99])])


@pytest.mark.parametrize("params, weight_bytes, kv_per_seq, batch, peak, bw, book_ms", BOOK)
def test_step_time_reproduces_how_to_scale_your_model(reference, params, weight_bytes, kv_per_seq, batch, peak,
                                                       bw, book_ms):
    got = 1e3 * reference["step_time"](2 * batch * params, weight_bytes, 0.0, batch * kv_per_seq, peak, bw)["time_s"]
    assert got == pytest.approx(book_ms, rel=0.01)


def test_lumped_max_misses_the_books_compute_bound_example(reference):
    """At batch 256 the book's 21 ms needs the per-block sum; one max over the totals says 18.5."""
    t = reference["roofline_time"](2 * 256 * 30e9, 30e9 + 256 * 819e6, 16 * 1.97e14, 16 * 8.1e11)["floor_s"]
    assert 1e3 * t == pytest.approx(18.49, rel=0.01)


def test_worked_numbers_of_the_text(reference):
    from course.hardware import get_accelerator
    from course.models import get_model_config

    llama7 = get_model_config("llama-2-7b")
    a100 = get_accelerator("A100 80GB SXM")
    assert reference["param_count"](llama7) == 6_738_415_616
    assert reference["streamed_params"](llama7) == 6_738_415_616 - 32000 * 4096
    assert reference["max_batch"](a100.memory_bytes, 2 * 6_738_415_616, reference["kv_bytes_per_token"](llama7), 4096) == 33
    # causal prefill attention is about half the full square
    causal = reference["attention_flops"](llama7, 4096)
    assert causal / (4 * 32 * 4096 * 4096 * 4096) == pytest.approx(0.5, rel=1e-3)
    assert reference["critical_batch"](989e12, 3.35e12, 1) == pytest.approx(147.6, rel=1e-3)
