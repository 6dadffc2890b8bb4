"""Lesson 3 stays within its budget (quick: reads the source notebook only).

- at most 3,000 words of text a student reads (markdown cells, split on whitespace), and a stated
  time in the first cell of at most 95 minutes (a tester who had not seen the lesson needed 90 to
  103 minutes with the ridge in tokens as an exercise and section 8 read; given and optional now,
  about 80 to 95; the lesson is meant to fit in 75);
- exercises lettered A, B, C, ... without a gap;
- lesson 2's per-block floor said once (one max(...) in the text), the measuring harness in one
  paragraph (the rest is in course/timing.py);
- the graded prediction comes before the sweeps it predicts, and each committed prediction (p1 to
  p3) before its own sweep, which sets the student's letter beside what it measured;
- each prediction's answer holds by the lesson's bounds on any machine it may run on;
- one name per quantity: T* is the ridge in tokens (`ridge_in_tokens`), no "critical batch", no
  "floor".
"""

from __future__ import annotations

import re
import string

import nbformat
import torch
import pytest

from utils.lessons import REPO
from utils.notebooks import nbgrader_meta

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
    assert int(stated.group(stated.lastindex)) <= 95, f"lesson 3 must fit in 95 minutes: {stated.group(0)}"
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
    graded_prediction = ids.index("predict_bounds_tests")
    first_sweep = next(i for i, c in enumerate(cells) if "request_sweep(PROMPT_LENS" in c.source)
    assert graded_prediction < first_sweep


def test_each_prediction_is_committed_before_its_sweep(cells):
    ids = [nbgrader_meta(c).get("grade_id") for c in cells]
    for name, sweep in (("p1", "request_sweep(PROMPT_LENS"), ("p2", "batch_steps = "), ("p3", "PASS_TOKENS = [1,")):
        answer, check = ids.index(name), ids.index(f"{name}_check")
        measured = next(i for i, c in enumerate(cells) if sweep in c.source)
        assert answer < check < measured, (name, answer, check, measured)
        assert f"answered('{name}')" in cells[measured].source, f"the {name} sweep does not show the student's letter"
        assert 'check_choice("' + name + '", ' + name + ', "abcd")' in cells[check].source


def test_one_name_per_quantity(cells):
    prose = "\n".join(c.source for c in cells)
    for gone in ("critical batch", "knee_tokens", "floor", "KNEE_TOKENS"):
        assert gone not in prose.lower() if gone == "floor" else gone not in prose, gone
    assert "ridge_in_tokens" in prose and "$T^*$" in prose


def _toy_gpu_on_meta():
    import torch

    from course.models import get_model_config
    from course.toy_model import ToyTransformer

    with torch.device("meta"):  # the shapes alone: no 5 GB of weights
        model = ToyTransformer(get_model_config("toy-gpu")).to(torch.bfloat16)
    return model


def _bounds(prompt_len, batch, n_params, weight_bytes, kv_per_token, bandwidth, peak):
    """Exercise C's bounds (the reference's formula)."""
    memory_s = (weight_bytes + batch * prompt_len * kv_per_token) / bandwidth
    return {"ttft_s": max(2 * n_params * batch * prompt_len / peak, memory_s),
            "tpot_s": max(2 * n_params * batch / peak, memory_s)}


def test_p1_holds_by_the_bounds_on_any_machine():
    """p1 (b): over the prompt sweep, TTFT grows several times over and TPOT by a few per cent.
    toy-gpu over 128 to 4,096 tokens on the catalog's GPUs in bf16; toy-cpu (fp32) over 16 to 256
    tokens at CPU ridges from 1 to 30 FLOP/byte (a T* of 2 to 60 tokens)."""
    import torch

    from course.hardware import CATALOG
    from course.models import get_model_config
    from course.toy_model import ToyTransformer

    gpu = _toy_gpu_on_meta()
    with torch.device("meta"):
        cpu = ToyTransformer(get_model_config("toy-cpu"))
    cases = [(gpu, 128, 4096, acc.bandwidth_bytes_per_s, acc.peak("bf16")) for acc in CATALOG.values()]
    cases += [(cpu, 16, 256, 20e9, ridge * 20e9) for ridge in (1, 4, 8, 15, 30)]
    for model, short, long, bandwidth, peak in cases:
        weight_bytes = model.decode_weight_bytes()
        n_params, kv = weight_bytes // model.dtype.itemsize, model.new_cache(1, 1).nbytes
        a = _bounds(short, 1, n_params, weight_bytes, kv, bandwidth, peak)
        b = _bounds(long, 1, n_params, weight_bytes, kv, bandwidth, peak)
        assert b["ttft_s"] / a["ttft_s"] > 3, (model.config.name, bandwidth, peak)
        assert b["tpot_s"] / a["tpot_s"] < 1.2, (model.config.name, bandwidth, peak)


def test_p2_holds_by_the_bounds_below_t_star():
    """p2 (c): below T*, doubling B leaves the step's bound near the weights' read time and about
    doubles tokens/s (toy-gpu, 24 positions cached, H100 SXM)."""
    from course.hardware import get_accelerator

    model, h100 = _toy_gpu_on_meta(), get_accelerator("H100 SXM")
    weight_bytes = model.decode_weight_bytes()
    n_params, kv = weight_bytes // 2, model.new_cache(1, 1).nbytes
    bound = [_bounds(24, b, n_params, weight_bytes, kv, h100.bandwidth_bytes_per_s, h100.peak("bf16"))["tpot_s"]
             for b in (1, 2, 4, 8, 16, 32, 64, 128)]
    for b, (t1, t2) in zip((1, 2, 4, 8, 16, 32, 64), zip(bound, bound[1:])):
        assert t2 / t1 < 1.1 and (2 * b / t2) / (b / t1) > 1.8, b


def _sweep_definitions(device_type: str, grading: bool) -> dict:
    """The prompt sweep's definitions as lesson 3's cell runs them (the lines before WEIGHT_BYTES)."""
    from types import SimpleNamespace

    nb = nbformat.read(str(SOURCE), as_version=4)
    cell = next(c for c in nb.cells if c.source.startswith("if DEVICE.type == \"cuda\":") and "PROMPT_LENS" in c.source)
    head = cell.source.split("WEIGHT_BYTES =")[0]
    from course.timing import batches_past

    namespace = {"DEVICE": SimpleNamespace(type=device_type), "GRADING": grading, "batches_past": batches_past,
                 "HW": SimpleNamespace(bandwidth_bytes_per_s=3.35e12), "PEAK_FLOPS": 989e12, "DTYPE": torch.bfloat16}
    exec(head, namespace)
    return namespace


def test_p1_states_the_sweep_that_runs_under_grading_too(cells):
    """p1 says 16 times the tokens on a CPU and 32 on a GPU: so the sweep runs, with nbgrader or not."""
    p1 = next(c.source for c in cells if "**p1 (1 point)" in c.source)
    assert "16 times the\ntokens on a CPU, 32 on a GPU, under nbgrader too" in p1, p1
    for device, factor in (("cpu", 16), ("cuda", 32)):
        for grading in (False, True):
            lens = _sweep_definitions(device, grading)["PROMPT_LENS"]
            assert lens[-1] / lens[0] == factor, (device, grading, lens)


def test_p1_holds_for_the_graded_narrow_model():
    """Under nbgrader on a CPU the sweep runs on toy-cpu at half the width with 2 layers: p1 (b) holds there too."""
    import torch

    from course.models import get_model_config
    from course.toy_model import ToyTransformer, narrower, shallower

    with torch.device("meta"):
        model = ToyTransformer(shallower(narrower(get_model_config("toy-cpu"), 2), 2))
    weight_bytes = model.decode_weight_bytes()
    n_params, kv = weight_bytes // model.dtype.itemsize, model.new_cache(1, 1).nbytes
    for ridge in (1, 4, 8, 15, 30):
        a = _bounds(16, 1, n_params, weight_bytes, kv, 20e9, ridge * 20e9)
        b = _bounds(256, 1, n_params, weight_bytes, kv, 20e9, ridge * 20e9)
        assert b["ttft_s"] / a["ttft_s"] > 3 and b["tpot_s"] / a["tpot_s"] < 1.2, ridge


def _pass_times(tokens, read_s, peak, flops_per_token, additive):
    """Passes with a fixed part of one read: hidden behind the FLOPs (a pass takes the longer of twice
    the read and its FLOPs' time), or added to every pass (one read plus the longer of a read and
    the FLOPs' time). Either way the one-token pass takes twice the read."""
    from course.timing import Sampled

    def seconds(t):
        flops_s = t * flops_per_token / peak
        return read_s + max(read_s, flops_s) if additive else max(2 * read_s, flops_s)
    return [Sampled(f"{t}", [seconds(t)] * 3) for t in tokens]


@pytest.mark.parametrize("additive", [False, True], ids=["overlapping", "additive"])
def test_p3_holds_by_the_lines_the_lesson_prints(additive):
    """p3 (a): a one-token pass at twice the weights' read time and long passes adding their FLOPs at
    the peak put the knee, as the lesson reads it (knee_reading) and splits it (knee_factors), at
    2 T* when the fixed part hides behind the long passes' FLOPs and at T* when it adds to every
    pass: (a) names both, (b) and (c) each hold for one only. The knee is also where the time starts
    to grow: the pass just below it takes the one-token pass's time."""
    from course.readings import knee_factors, knee_reading

    read_s, peak, flops_per_token = 1e-3, 1e12, 2e6  # T* = read_s * peak / flops_per_token = 500 tokens
    t_star = read_s * peak / flops_per_token
    tokens = [1, 250, 500, 1000, 2000, 4000, 8000]
    passes = _pass_times(tokens, read_s, peak, flops_per_token, additive)
    knee, _ = knee_reading(tokens, passes, formula=t_star)
    want = t_star if additive else 2 * t_star
    assert knee == pytest.approx(want)
    below = _pass_times([1, 0.99 * want, 1.01 * want], read_s, peak, flops_per_token, additive)
    assert below[1].median == pytest.approx(below[0].median) and below[2].median > below[0].median
    said = knee_factors(tokens, passes, [t * flops_per_token for t in tokens], read_s, peak, t_star)
    fixed = "1.00" if additive else "0.00"
    assert "2.00x the weights' read time" in said and f"{fixed}x the read time" in said and "at 100% of" in said
    assert f"= {want:,.1f} tokens" in said, said
    p3 = next(c.source for c in nbformat.read(str(SOURCE), as_version=4).cells if "**p3 (1 point)" in c.source)
    assert "twice the weights' read time" in p3 and "add their FLOPs at the peak rate" in p3
    assert re.search(r"\(a\) Near \$2T\^\*\$ if that extra time hides behind the long passes' FLOPs.*at \$T\^\*\$ if it adds to\s+every pass",
                     p3, re.S), p3
