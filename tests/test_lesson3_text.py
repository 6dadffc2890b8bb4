"""Lesson 3 stays within its budget (quick: reads the source notebook only).

- at most 3,000 words of text a student reads (markdown cells, split on whitespace), and a stated
  time in the first cell no shorter than a careful student needs (about 90 to 100 minutes);
- exercises lettered A, B, C, ... without a gap;
- lesson 2's per-block floor said once (one max(...) in the text), the measuring harness in one
  paragraph (the rest is in course/timing.py);
- the graded prediction comes before the sweeps it predicts;
- quiz question 5's premise holds by the lesson's floors (toy-gpu, batch 1, H100 SXM, bf16).
"""

from __future__ import annotations

import re
import string

import nbformat
import pytest

from utils.coursedir import REPO, nbgrader_meta

LESSON = "03_timing_prefill_decode"
SOURCE = REPO / "source" / LESSON / "timing_prefill_decode.ipynb"


@pytest.fixture(scope="module")
def cells():
    return nbformat.read(str(SOURCE), as_version=4).cells


def text(cells) -> list[str]:
    return [c.source for c in cells if c.cell_type == "markdown"]


def test_at_most_3000_words_and_the_time_stated(cells):
    words = sum(len(t.split()) for t in text(cells))
    assert words <= 3000, f"lesson 3 has {words} words of text"
    stated = re.search(r"\*\*Time:\*\* about (\d+)(?: to (\d+))? minutes", cells[0].source)
    assert stated, cells[0].source[:300]
    assert int(stated.group(stated.lastindex)) >= 90, f"a careful student needs 90 to 100 minutes: {stated.group(0)}"
    assert "load average" not in cells[0].source, "the header quotes one machine's load, not what a student meets"


def test_exercises_lettered_without_gaps(cells):
    letters = re.findall(r"^### Exercise ([A-Z])\b", "\n".join(text(cells)), flags=re.M)
    assert letters == list(string.ascii_uppercase[:len(letters)]), letters
    titles = re.findall(r'checking\("Exercise ([A-Z])\b', "\n".join(c.source for c in cells if c.cell_type == "code"))
    assert sorted(set(titles)) == letters, (titles, letters)


def test_the_floor_once_and_the_harness_in_one_paragraph(cells):
    assert sum(len(re.findall(r"\bmax\(", t)) for t in text(cells)) == 1, "the per-block floor is spelled out more than once"
    harness = [p for t in text(cells) for p in t.split("\n\n") if "ROUNDS" in p or "interleav" in p or "threads" in p]
    assert len(harness) <= 1, harness


def test_the_prediction_comes_before_the_sweeps(cells):
    ids = [nbgrader_meta(c).get("grade_id") for c in cells]
    graded_prediction = ids.index("predict_floors_tests")
    first_sweep = next(i for i, c in enumerate(cells) if "request_sweep(PROMPT_LENS" in c.source)
    assert graded_prediction < first_sweep


def test_question_5_premise_holds_by_the_floors():
    """512 tokens of toy-gpu at batch 1 on an H100 SXM in bf16 (datasheet peaks): a compute-bound
    prefill (above the ridge of about 295 tokens) and a memory-bound decode step whose KV cache is
    a small share of its bytes; doubling the prompt doubles TTFT's floor and barely moves TPOT's,
    answer (b). At 256 tokens the prefill would be memory-bound."""
    import torch

    from course.hardware import get_accelerator
    from course.models import get_model_config
    from course.toy_model import ToyTransformer

    with torch.device("meta"):  # the shapes alone: no 5 GB of weights
        model = ToyTransformer(get_model_config("toy-gpu")).to(torch.bfloat16)
    weight_bytes = model.decode_weight_bytes()
    n_params = weight_bytes // model.dtype.itemsize
    kv_per_token = model.new_cache(batch_size=1, max_seq_len=1).nbytes
    h100 = get_accelerator("H100 SXM")
    bandwidth, peak = h100.bandwidth_bytes_per_s, h100.peak("bf16")

    def floors(prompt_len):  # Exercise C's floors at batch 1
        memory_s = (weight_bytes + prompt_len * kv_per_token) / bandwidth
        return {"prefill_compute_s": 2 * n_params * prompt_len / peak, "memory_s": memory_s,
                "ttft_s": max(2 * n_params * prompt_len / peak, memory_s),
                "tpot_s": max(2 * n_params / peak, memory_s)}

    assert floors(256)["prefill_compute_s"] < floors(256)["memory_s"]  # the premise the question had
    at_512, at_1024 = floors(512), floors(1024)
    assert at_512["prefill_compute_s"] > at_512["memory_s"]  # compute-bound prefill
    assert 2 * n_params / peak < at_512["memory_s"]  # memory-bound decode step
    assert 512 * kv_per_token / (weight_bytes + 512 * kv_per_token) < 0.05  # the cache a small share
    assert at_1024["ttft_s"] / at_512["ttft_s"] == pytest.approx(2.0, rel=1e-9)
    assert at_1024["tpot_s"] / at_512["tpot_s"] < 1.05
