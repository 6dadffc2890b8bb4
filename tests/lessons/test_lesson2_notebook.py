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
             "roofline_plot", "mixed_step", "chunk_for_tbt"]
PREDICTIONS = {"p1": 2}  # section 11's prediction (a letter, graded on its idea) and its points
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


def test_each_prediction_is_a_letter_then_its_graded_cell(nb):
    """A prediction is answered as a quiz question is (check_choice), before the cell that computes it."""
    cells = [(nbgrader_meta(c).get("grade_id"), c) for c in nb.cells]
    ids = [gid for gid, _ in cells]
    for gid, points in PREDICTIONS.items():
        i = ids.index(gid)
        assert nbgrader_meta(cells[i][1])["solution"] and re.search(rf'^{gid} = "[a-d]"$', cells[i][1].source, re.M)
        test_meta = nbgrader_meta(cells[i + 1][1])
        assert cells[i + 1][0] == f"{gid}_tests" and test_meta["grade"] and test_meta["points"] == points
        assert f'check_choice("{gid}", {gid}, "abcd")' in cells[i + 1][1].source
        assert "HIDDEN" not in cells[i + 1][1].source


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
    # Mistral-7B (section 10's Sarathi-Serve budgets): 7,241,732,096 parameters, 7.24B
    assert reference["param_count"](get_model_config("mistral-7b")) == 7_241_732_096
    # LLaMA-2-13B has 40 KV heads: the book's 6.7e9 bytes per 8,192-token sequence, and 1.34e9 with 8
    llama13 = get_model_config("llama-2-13b")
    assert llama13.n_kv_heads == 40
    assert 8192 * reference["kv_bytes_per_token"](llama13) == pytest.approx(6.7e9, rel=0.01)
    assert 8192 * reference["kv_bytes_per_token"](llama13) * 8 / 40 == pytest.approx(1.34e9, rel=0.01)


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
    # the mean gap of the whole-prompt design at 2 requests/s is under 25 ms: TBT, not TPOT (a mean), shows the stall
    mean_gap = 1 / (2 + (1 - 2 * steps(8192)[0]) / alone[0])
    assert mean_gap < 0.025 < steps(8192)[0]
    # a 16 ms TBT target: the chunk at 64 streams shrinks to 192 tokens
    tight = reference["chunk_for_tbt"](dec, lambda c: chunk(c, max(0, 8192 - c)), 0.016, peak, bw)
    assert tight == 192 and sum(steps(tight)) > 0.4


@pytest.fixture(scope="module")
def sections_10_11(nb, reference):
    """Sections 10 and 11's given cells run on the reference functions: their namespace, their printed lines
    and the rows of their tables."""
    from course.hardware import get_accelerator
    from course.models import ModelConfig, get_model_config

    given = {nbgrader_meta(c).get("grade_id"): c.source for c in nb.cells}
    out = {"printed": [], "tables": []}
    namespace = dict(reference, BYTES={"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "int8": 1, "int4": 0.5 + 4 / 32},
                     get_accelerator=get_accelerator, get_model_config=get_model_config, ModelConfig=ModelConfig,
                     llama3=get_model_config("llama-3-8b"), h100=get_accelerator("H100 SXM"),
                     markdown_table=lambda header, rows: out["tables"].append(rows),
                     print=lambda *a, **k: out["printed"].append(" ".join(map(str, a))))
    for gid in ("steps", "interference_demo", "disaggregation_demo"):
        exec(given[gid], namespace)
    return namespace, out


def test_section_11_goodput_under_queues(sections_10_11):
    """The table the conclusion reads: goodput per GPU (requests/s) with the M/D/1 prefill queue, 90 % of
    requests within the TTFT target, one workload (8,192-token prompts), the decode batch by Little's law
    and the prefill:decode split searched (up to 8 GPUs)."""
    ns, out = sections_10_11
    rows = out["tables"][-1]
    assert [r[:2] for r in rows] == [["256", "400, 25"], ["256", "150, 25"], ["256", "400, 16"], ["1,024", "400, 25"],
                                     ["1,024", "150, 25"], ["1,024", "160, 25"], ["1,024", "150, 26"]]
    assert [r[2:] for r in rows] == [
        ["2.89 (B 8, chunk 1,144)", "2.79 (5:2)", "2.66 (5:2)"],
        ["0.72 (B 1, chunk 1,279)", "0.64 (7:1)", "0, TTFT missed"],
        ["2.78 (B 6, chunk 634)", "2.60 (2:1)", "2.49 (2:1)"],
        ["1.47 (B 20, chunk 876)", "1.46 (3:5)", "1.40 (3:5)"],
        ["0.20 (B 1, chunk 1,279)", "0.55 (3:1)", "0, TTFT missed"],
        ["0.64 (B 5, chunk 1,147)", "0.58 (3:1)", "0, TTFT missed"],
        ["0.50 (B 3, chunk 1,277)", "0.55 (3:1)", "0, TTFT missed"]]
    # the conclusion's figures: one GPU 3.7 to 12 % ahead with 256 output tokens, about even with 1,024 at
    # 400 ms, 2.7 times behind at 150 ms with 1,024
    one = {k: ns["one_gpu"](*k)[0] for k in [(256, 0.4, 0.025), (256, 0.15, 0.025), (256, 0.4, 0.016),
                                               (1024, 0.4, 0.025), (1024, 0.15, 0.025)]}
    pools = {k: ns["two_pools"](*k, 450e9)[0] for k in one}
    ahead = [one[k] / pools[k] - 1 for k in one if k[0] == 256]
    assert 0.0365 < min(ahead) < 0.0375 and 0.12 < max(ahead) < 0.125
    assert one[(1024, 0.4, 0.025)] / pools[(1024, 0.4, 0.025)] == pytest.approx(1, abs=0.02)
    assert pools[(1024, 0.15, 0.025)] / one[(1024, 0.15, 0.025)] > 2.5
    # the cliff at 150 ms, 8 ms above the bare 142 ms prefill: from a mean of 2 streams the chunk within 25 ms
    # shrinks to 1,150 tokens and the prompt's 8 steps take 150.1 ms; at 26 ms TBT one GPU is about 8 % behind,
    # at 160 ms TTFT it wins
    assert 1e3 * (0.15 - ns["prefill_s"]) == pytest.approx(7.9, abs=0.05)
    b2 = dict(ns["decode_batches"](1024))[2]
    size = ns["chunk_for_tbt"](b2, ns["last_chunk"], 0.025, ns["peak"], ns["bw"])
    steps = ns["chunked_steps"](size, b2)
    assert (size, len(steps)) == (1150, 8) and 1e3 * sum(steps) == pytest.approx(150.1, abs=0.05)
    assert 0.915 < ns["one_gpu"](1024, 0.15, 0.026)[0] / ns["two_pools"](1024, 0.15, 0.026, 450e9)[0] < 0.925
    assert ns["one_gpu"](1024, 0.16, 0.025)[0] > ns["two_pools"](1024, 0.16, 0.025, 450e9)[0]
    # InfiniBand with the cache sent layer by layer: 0.7 ms after the prefill, no longer a miss
    line = " ".join(next(p for p in out["printed"] if p.startswith("InfiniBand at 150 ms")).split())
    assert "(0.7 ms after the prefill): 0.65 with 256 output tokens, 0.55 with 1,024" in line
    # p1: a prefill GPU of 142 ms, 2.4 ms of NVLink transfer: no queue 7.04/s, mean TTFT at 400 ms 5.51/s,
    # 90 % within 400 ms 3.91/s (option c)
    line = " ".join(next(p for p in out["printed"] if p.startswith("a prefill GPU")).split())
    assert "no queue 7.04 requests/s; mean TTFT 400 ms at 5.51; 90 % within 400 ms up to 3.91" in line


def test_section_11_colocated_rate_is_littles_law(sections_10_11):
    """At the one-GPU design's best batch, streams = rate x output tokens x mean step time, and the steps
    that carry a chunk are over 1 % of all (so the longest gap, a chunked step, is the P99 TBT too)."""
    ns, _ = sections_10_11
    from course.serving import colocated_rate

    for output_len, ttft, tbt in [(256, 0.4, 0.025), (256, 0.4, 0.016), (1024, 0.4, 0.025)]:
        rate, b, size = ns["one_gpu"](output_len, ttft, tbt)
        d = ns["decode_step"](ns["llama3"], b, 8192 + output_len // 2, ns["h100"])
        steps = ns["chunked_steps"](size, d)
        little = colocated_rate(b, output_len, d["time_s"], steps)
        steps_per_s = little * len(steps) + (1 - little * sum(steps)) / d["time_s"]
        assert b == pytest.approx(little * output_len / steps_per_s, rel=1e-12)
        assert little * len(steps) / steps_per_s > 0.01
        assert rate <= little * (1 + 1e-12) and max(steps) <= tbt


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


def test_section_10_states_its_conditions(nb):
    """Issue 45's claims, each within its conditions: which attention layout is bounded and what V1 does,
    the roofline chunk as a bound on a profiled budget, the attainment share, TBT against TPOT, the
    overlap of kernels qualified, LLaMA-2-13B's 40 KV heads."""
    text = {c.get("id"): c.source for c in nb.cells if c.cell_type == "markdown"}
    assert "removed V0" in text["s10-intro"] and "V1's\nFlashAttention backend runs one kernel" in text["s10-intro"]
    assert "FlashInfer backend still makes two calls" in text["s10-intro"]
    assert "Sarathi; Agrawal et al.\n2023, arXiv 2308.16369" in text["s10-intro"]
    assert "Attention runs as two\nkernels" not in text["s10-intro"]
    assert "profiles a **token budget**" in text["s10-chunk"]
    demo = next(t for t in text.values() if t.startswith("Your functions on Llama-3-8B, bf16, H100 SXM: 64 streams"))
    assert "bound Sarathi-Serve's budgets from above" in demo  # said where the comparison prints
    assert "512 tokens at 100 ms, 2,048 at 500 ms" in text["s10-chunk"]
    queues = text["a240a9c9"]
    assert "M/D/1" in queues and "90 % of requests" in queues and "P99 TBT" in queues and "TPOT" in queues
    assert "Little's law" in queues and "prefill:decode split" in queues
    assert "NanoFlow" in text["ma-47"]
    assert "40 or 8 KV heads" in text["ma-35"] and "32 or 8" not in text["ma-35"]
    assert "a first-time reader's worked run" in nb.cells[0].source  # where the stated time comes from


def test_sections_10_and_11_state_what_the_reviews_asked(nb):
    """The engineer's review: the 150 ms result named a cliff with its sensitivity rows, TBT held at the
    mean batch and the figures called optimistic, the InfiniBand miss tied to a transfer after the
    prefill, random dispatch, a few percent between bounds not a ranking, the table's conditions, the
    link bandwidths' sources. The tester's: section 10 split in two, section 11 after class, the quiz's
    one answer cell, the time an estimate by a stated method."""
    text = {c.get("id"): c.source for c in nb.cells if c.cell_type == "markdown"}
    headings = [line for c in nb.cells if c.cell_type == "markdown" for line in c.source.splitlines()
                if line.startswith("## ")]
    assert headings[9:] == ["## 10. Chunked prefill", "## 11. Two pools and queues", "## 12. Checkpoint quiz (4 points)",
                            "## 13. Explore (optional)", "## Summary"]
    queues = text["a240a9c9"]
    assert queues.startswith("## 11. Two pools and queues\n\nThis section can follow class; p1 is graded when you submit.")
    assert "random arrivals, a fixed service time, one server" in " ".join(queues.split())
    assert "90th percentile lies far above the mean" in queues and "random\nshare of requests" in queues
    assert "at the mean batch by Little's law" in queues and "the batch swings about it" in queues
    assert "a few percent optimistic" not in queues and "every step" not in queues
    # the queueing intuition: the load, why waits grow near 1, a Little's law number
    assert "its **load**" in queues and "waits grow without bound" in queues and "10.2" in queues
    assert "H100 datasheet: 900 GB/s, both directions" in queues and "ConnectX-7 datasheet" in queues
    conclusion = next(c.source for c in nb.cells if c.cell_type == "markdown" and c.source.startswith("Verdicts are"))
    for claim in ["the simulation's", "parity margin", "Sarathi-Serve\n(Agrawal et al., OSDI 2024)", "DistServe (Zhong et al., OSDI 2024)",
                  "each phase's parallelism", "one-GPU instances exclude", "DistServe and Splitwise count, it meets"]:
        assert claim in conclusion, claim
    for ranking in ["falls off a cliff", "160 ms TTFT it wins", "3.7 to 12 %", "a few percent"]:
        assert ranking not in conclusion, ranking
    table = next(c.source for c in nb.cells if nbgrader_meta(c).get("grade_id") == "disaggregation_demo")
    assert '"1 GPU, chunks (mean streams B, chunk)"' in table and "(1024, 0.16, 0.025)" in table
    given = next(c.source for c in nb.cells if c.cell_type == "markdown" and c.source.startswith("Given code: p1's"))
    assert "one H100 SXM\nper GPU; B is the mean number of decoding streams" in given
    summary = text["ma-80"] if "ma-80" in text else nb.cells[-1].source
    assert "few percent above the bare prefill" in " ".join(summary.split()) and '"NanoFlow"' in summary and '"Sarathi" (2023)' in summary
    quiz = next(c.source for c in nb.cells if c.source.startswith("## 12. Checkpoint quiz"))
    assert "Set `q1` to `q4` in the one answer cell below" in quiz
    # terms defined at first use in this lesson
    joined = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    for first_use in ["**TPOT** (time per output token", "**TTFT** (time to first token)", "MBU (model bandwidth utilization)",
                      "MLA, DeepSeek-V2's multi-head latent attention", "LLM-Viewer, Yuan et al. 2024, a roofline tool",
                      "$W_o$ ($h_q d_h \\times d$)", "an intensity of $h_q / h_{kv}$", "spanning the widest range of"]:
        assert first_use in joined, first_use
    # the time a first-time reader's worked run took, the core path and section 11 apart
    assert re.search(r"Expected time: about 210 minutes for sections 1-10 and the quiz;\nsection 11, after class, "
                     r"about 35 \(a first-time reader's worked run\)", nb.cells[0].source)


def test_p1_is_reasoned_from_the_text_not_eliminated(nb):
    """p1 is a prediction the text lets a student reason to: each option places the 90 % rate against
    1/D or the mean's rate R_m, with the idea behind it; no option quotes a rate only a later cell prints."""
    queues = next(c.source for c in nb.cells if c.source.startswith("## 11. Two pools and queues"))
    stem, options_text = queues.split("**p1 (predict, 2 points).**")[1].split("\n\n- ", 1)
    options = re.findall(r"^- \(([a-d])\) (.*)$", "- " + options_text, re.M)
    assert [letter for letter, _ in options] == list("abcd")
    assert "$R_m$" in stem and "$1/D$" in stem
    for _, text in options:
        rate, reason = text.split(": ", 1)
        assert rate in ("$1/D$", "$R_m$", "Below $R_m$", "Above $R_m$"), text
        assert not re.search(r"\d", text.replace("$1/D$", "")), text  # no rate to match against the printout
    # what settles it is in the text before p1
    assert "the 90th percentile lies far above the mean" in queues.split("**p1")[0]
    assert "About 3.9" not in queues and "5.5" not in queues


def test_section_11_quotes_what_the_page_prints(nb, sections_10_11):
    """The figures section 11's text quotes are the printed ones, rounded as the text rounds them: p1's
    key against the prefill GPU's printed line, the worked load and Little's law numbers."""
    ns, out = sections_10_11
    queues = next(c.source for c in nb.cells if c.source.startswith("## 11. Two pools and queues"))
    line = next(p for p in out["printed"] if p.startswith("a prefill GPU"))
    patterns = {"D_ms": r"([\d.]+) ms a prompt", "transfer_ms": r"([\d.]+) ms to send", "no_queue": r"no queue ([\d.]+)",
                "mean": r"mean TTFT 400 ms at ([\d.]+)", "p90": r"up to ([\d.]+)"}
    printed = {key: float(re.search(pattern, line).group(1)) for key, pattern in patterns.items()}
    assert f"$D$ = {printed['D_ms']:.0f} ms" in queues and f"{printed['transfer_ms']:.1f} ms to send" in queues
    # p1's key, (c): the 90 % rate below the mean's rate R_m, both below 1/D, as printed
    assert printed["p90"] < printed["mean"] < printed["no_queue"]
    assert "- (c) Below $R_m$" in queues
    assert f"$RD$ = {5 * ns['prefill_s']:.2f}" in queues  # the load at 5 requests/s
    assert f"{2 * 256 * 0.020:.1f} streams" in queues  # Little's law: 2/s x 256 steps x 20 ms


def test_gpt_fast_share_is_the_quoted_one(nb):
    text = next(c.source for c in nb.cells if c.source.startswith("**Against a measurement.**"))
    assert f"1,397 GB/s, {1397 / 2039:.0%} of the datasheet's 2,039".replace("%", " %") in text


def test_exercise_j_says_the_first_chunk_when_the_decode_tokens_fill_whole_tiles(nb, reference):
    """Exercise J names the first chunk tried when the decode tokens are already a multiple of the tile
    (a whole tile, never 0), and the reference does what it says."""
    text = next(c.source for c in nb.cells if "### Exercise J" in c.source)
    assert "64 decode tokens give chunks 64, 192" in text and "128 give 128, 256" in text
    tried = []

    def chunk_of(c):
        tried.append(c)
        return {"matmul_flops": 0.0, "weight_bytes": 0.0, "attn_flops": 0.0, "kv_bytes": 0.0, "tokens": c}

    dec = {"matmul_flops": 0.0, "weight_bytes": 0.0, "attn_flops": 0.0, "kv_bytes": 0.0, "tokens": 128}
    reference["chunk_for_tbt"](dec, lambda c: chunk_of(c) if c < 512 else {**chunk_of(c), "kv_bytes": 1e30},
                               1.0, 1e12, 1e12)
    assert tried[:3] == [128, 256, 384]
