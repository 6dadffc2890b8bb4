"""Lesson 2's source notebook and sample answers are shaped as docs/authoring.md asks (fast, no grading)."""

from __future__ import annotations

import importlib
import math
import re

import nbformat
import pytest

from utils.lessons import REPO
from utils.notebooks import nbgrader_meta

LESSON = "02_arithmetic_intensity"
NOTEBOOK = REPO / "source" / LESSON / "arithmetic_intensity.ipynb"
EXERCISES = ["matmul", "roofline", "param_count", "kv_cache", "attention_flops", "step_time", "ridge_in_tokens",
             "roofline_plot", "mixed_step", "chunk_for_tbt", "goodput_per_gpu"]
MAX_WORDS = 3000  # the lesson's text, so that it can be finished in the time it states

pytestmark = pytest.mark.skipif(not NOTEBOOK.exists(), reason="lesson 2 not written yet")


@pytest.fixture(scope="module")
def nb():
    return nbformat.read(str(NOTEBOOK), as_version=4)


@pytest.fixture(scope="module")
def samples():
    return importlib.import_module(f"utils.authoring.samples.{LESSON}")


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
    assert sum(nbgrader_meta(c).get("points", 0) for c in nb.cells if nbgrader_meta(c).get("grade")) == 31


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

    from utils.notebooks import strip_markers

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
    t = reference["roofline_time"](2 * 256 * 30e9, 30e9 + 256 * 819e6, 16 * 1.97e14, 16 * 8.1e11)["bound_s"]
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
    assert reference["ridge_in_tokens"](989e12, 3.35e12, 1) == pytest.approx(147.6, rel=1e-3)


def _llama3_on_h100(reference):
    """Section 10's setting, from the reference functions: Llama-3-8B, bf16, H100 SXM, 64 streams at
    4,096 positions, an 8,192-token prompt."""
    from course.hardware import get_accelerator
    from course.models import get_model_config

    cfg, gpu = get_model_config("llama-3-8b"), get_accelerator("H100 SXM")
    peak, bw = gpu.peak("bf16"), gpu.bandwidth_bytes_per_s
    n, kv = reference["streamed_params"](cfg), reference["kv_bytes_per_token"](cfg)

    def dicts(tokens, attn_flops, kv_bytes):
        return {"matmul_flops": 2 * n * tokens, "weight_bytes": 2 * n, "attn_flops": attn_flops, "kv_bytes": kv_bytes,
                "tokens": tokens}

    dec = dicts(64, 64 * reference["attention_flops"](cfg, 1, 4096), 64 * 4096 * kv)  # 4,096 positions cached

    def chunk(size, past):
        return dicts(size, reference["attention_flops"](cfg, size, past), (past + size) * kv)

    def steps(size):
        return [reference["mixed_step"](dec, chunk(min(size, 8192 - p), p), peak, bw)["time_s"] for p in range(0, 8192, size)]

    return cfg, peak, bw, n, kv, dec, chunk, steps


def test_section_10_figures(reference):
    """The chunk within a 25 ms TBT target (T a multiple of 128), its TTFT beside the free-ride chunk's,
    the weights read once against twice, and the disaggregated designs' TTFT."""
    cfg, peak, bw, n, kv, dec, chunk, steps = _llama3_on_h100(reference)
    free_ride = math.floor(reference["ridge_in_tokens"](peak, bw) - 64)
    assert free_ride == 231
    for_tbt = reference["chunk_for_tbt"](dec, lambda c: chunk(c, max(0, 8192 - c)), 0.025, peak, bw)
    assert for_tbt == 704 and (64 + for_tbt) % 128 == 0
    # the next tile up breaks the target; this one meets it
    assert reference["mixed_step"](dec, chunk(704 + 128, 8192 - 832), peak, bw)["time_s"] > 0.025
    assert max(steps(704)) == pytest.approx(0.0247, abs=5e-5) and len(steps(704)) == 12
    assert sum(steps(704)) == pytest.approx(0.277, abs=5e-4)
    assert sum(steps(231)) == pytest.approx(0.548, abs=5e-4) and len(steps(231)) == 36
    assert steps(8192)[0] == pytest.approx(0.1533, abs=5e-5)
    # a 512-token chunk: weights read once, against its own step after the decode step's
    once = reference["mixed_step"](dec, chunk(512, 0), peak, bw)["time_s"]
    alone = [reference["step_time"](d["matmul_flops"], d["weight_bytes"], d["attn_flops"], d["kv_bytes"], peak, bw)["time_s"]
             for d in (dec, chunk(512, 0))]
    assert (1e3 * once, 1e3 * sum(alone), 1e3 * alone[0]) == pytest.approx((19.1, 22.6, 14.7), abs=0.05)
    # disaggregation: prefill 142 ms; 1.07 GB of cache, 2.4 ms at 450 GB/s, 21.5 ms at 50 GB/s
    prefill = max(2 * n * 8192 / peak, 2 * n / bw) + max(reference["attention_flops"](cfg, 8192) / peak, 8192 * kv / bw)
    assert prefill == pytest.approx(0.1421, abs=5e-5)
    assert (8192 * kv / 450e9, 8192 * kv / 50e9) == pytest.approx((0.00239, 0.02147), abs=1e-5)
    # layer by layer (Splitwise): the link keeps up, so only the last layer's transfer follows the prefill
    per_layer_prefill, per_layer_transfer = prefill / 32, 8192 * kv / 50e9 / 32
    assert per_layer_transfer < per_layer_prefill
    assert prefill + per_layer_transfer == pytest.approx(0.1428, abs=5e-5)
    # goodput per GPU: the highest rate (one over the busiest resource's seconds per request) over the GPUs,
    # when TTFT and TBT (the longest step) meet their targets
    g = reference["goodput_per_gpu"]
    chunked, nvlink = sum(steps(704)), prefill + 8192 * kv / 450e9
    assert (1 / chunked, 1 / prefill / 2) == pytest.approx((3.61, 3.52), abs=5e-3)
    # the printed highest rates (requests/s): whole prompt, free ride, a prefill GPU
    assert (1 / steps(8192)[0], 1 / sum(steps(231)), 1 / prefill) == pytest.approx((6.52, 1.82, 7.04), abs=5e-3)
    assert g(1 / chunked, chunked, max(steps(704)), 1, 0.4, 0.025) == pytest.approx(3.61, abs=5e-3)  # one GPU, loose
    assert g(1 / steps(8192)[0], steps(8192)[0], steps(8192)[0], 1, 0.4, 0.025) == 0.0  # whole prompt: TBT 153 ms
    assert g(1 / sum(steps(231)), sum(steps(231)), max(steps(231)), 1, 0.4, 0.025) == 0.0  # free ride: TTFT 548 ms
    assert g(1 / prefill, nvlink, alone[0], 2, 0.2, 0.025) == pytest.approx(3.52, abs=5e-3)
    assert g(1 / prefill, prefill + 8192 * kv / 50e9, alone[0], 2, 0.15, 0.025) == 0.0  # IB after the whole prefill
    assert g(1 / prefill, prefill + per_layer_transfer, alone[0], 2, 0.15, 0.025) > 0  # ... and layer by layer
    # the mean gap of the whole-prompt design at 2 requests/s is under 25 ms: TBT, not TPOT, rules it out
    mean_gap = 1 / (2 + (1 - 2 * steps(8192)[0]) / alone[0])
    assert mean_gap < 0.025 < steps(8192)[0]
    # a 16 ms TBT target: one GPU's chunk shrinks to 192 tokens, its TTFT past 400 ms; the decode GPU meets it
    tight = reference["chunk_for_tbt"](dec, lambda c: chunk(c, max(0, 8192 - c)), 0.016, peak, bw)
    assert tight == 192 and sum(steps(tight)) > 0.4
    assert g(1 / prefill, nvlink, alone[0], 2, 0.4, 0.016) == pytest.approx(3.52, abs=5e-3)


def test_paged_cache_and_prefix_figures(reference):
    """Section 4's engine figures: 4,100 positions in pages of 16 tokens; in 90 % of an A100 80GB, requests
    of up to 4,096 positions that fill 1,030, reserved whole or paged."""
    from course.hardware import get_accelerator
    from course.models import get_model_config

    llama7, a100 = get_model_config("llama-2-7b"), get_accelerator("A100 80GB SXM")
    weights, kv = 2 * reference["param_count"](llama7), reference["kv_bytes_per_token"](llama7)
    assert math.ceil(4100 / 16) == 257
    assert reference["max_batch"](a100.memory_bytes, weights, kv, 4100) == 33
    assert reference["max_batch"](a100.memory_bytes, weights, kv, 257 * 16) == 33  # rounding to pages alone
    assert reference["max_batch"](0.9 * a100.memory_bytes, weights, kv, 4096) == 29  # each reserves 4,096
    assert math.ceil(1030 / 16) * 16 == 1040
    assert reference["max_batch"](0.9 * a100.memory_bytes, weights, kv, 1040) == 117  # pages of what they fill
    assert 7 * 2048 * kv / 2**30 == pytest.approx(7.0)
