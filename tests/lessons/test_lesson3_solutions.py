"""Lesson 3's reference solutions on the real toy model, and the shape of its graded cells.

The autograding itself (reference full marks, stub zero, mistakes, variants) is in
test_lessons.py; these tests are fast and need no nbgrader run.
"""

from __future__ import annotations

import math
import re
import statistics
import time
from pathlib import Path

import nbformat
import pytest
import torch

from course.device import synchronize
from course.models import ModelConfig
from course.toy_model import build_model
from course.validate import integers, non_negative, positive, token_ids
from utils.lessons import REPO

NOTEBOOK = REPO / "source" / "03_timing_prefill_decode" / "timing_prefill_decode.ipynb"
TINY = ModelConfig("tiny", n_layers=2, d_model=64, n_heads=4, n_kv_heads=2, d_ff=96, vocab_size=97)


def _cells():
    nb = nbformat.read(str(NOTEBOOK), as_version=4)
    return {c.metadata.get("nbgrader", {}).get("grade_id"): c for c in nb.cells
            if c.metadata.get("nbgrader", {}).get("grade_id")}


@pytest.fixture(scope="module")
def solutions() -> dict:
    namespace = {"math": math, "statistics": statistics, "time": time, "torch": torch, "synchronize": synchronize,
                 "integers": integers, "non_negative": non_negative, "positive": positive, "token_ids": token_ids}
    for cell in _cells().values():
        if cell.metadata["nbgrader"].get("solution"):
            exec(cell.source, namespace)  # the markers are comments
    return namespace


def test_generate_with_the_cache_picks_the_tokens_of_recomputing_everything(solutions):
    model = build_model(TINY, seed=5)
    prompt = torch.randint(0, TINY.vocab_size, (3, 7))
    out = solutions["generate"](model, prompt, 6)
    assert out["tokens"].shape == (3, 6)
    assert torch.equal(out["tokens"], solutions["generate_without_cache"](model, prompt, 6))
    times = out["token_times_s"]
    assert len(times) == 6 and all(b >= a for a, b in zip(times, times[1:]))
    assert out["tpot_s"] == pytest.approx((out["e2e_s"] - out["ttft_s"]) / 5)
    assert math.isnan(solutions["generate"](model, prompt, 1)["tpot_s"])


def test_time_fn_on_a_real_clock(solutions):
    result = solutions["time_fn"](lambda: time.sleep(0.01), warmup=1, repeats=3)
    assert len(result["times_s"]) == 3
    assert 0.009 < result["median_s"] < 0.2 and result["spread_s"] >= 0


def test_the_formulas(solutions):
    assert solutions["decode_mbu"](14e9, 0, 0.014, 2e12) == pytest.approx((1e12, 0.5))
    assert solutions["prefill_mfu"](1e12, 2.0, 1e12) == pytest.approx((5e11, 0.5))


def test_the_given_argument_checks_name_bad_arguments(solutions):
    """The stubs check their arguments in given lines (course/validate.py), outside the solution:
    the released stub keeps them, and no graded cell asks the student for them."""
    model = build_model(TINY, seed=5)
    with pytest.raises(ValueError, match="repeats"):
        solutions["time_fn"](lambda: None, repeats=0)
    with pytest.raises(ValueError, match="warmup"):
        solutions["time_fn"](lambda: None, warmup=-1)
    for generate in (solutions["generate"], solutions["generate_without_cache"]):
        with pytest.raises(ValueError, match="prompt"):
            generate(model, torch.zeros((1, 0), dtype=torch.long), 3)
        with pytest.raises(ValueError, match="n_out"):
            generate(model, torch.tensor([[1, 2]]), 0)
    with pytest.raises(ValueError, match="tpot_s"):
        solutions["decode_mbu"](14e9, 0, 0.0, 2e12)
    with pytest.raises(ValueError, match="kv_bytes"):
        solutions["decode_mbu"](14e9, float("nan"), 0.014, 2e12)
    with pytest.raises(ValueError, match="flops"):
        solutions["prefill_mfu"](-1.0, 0.03, 989e12)
    with pytest.raises(ValueError, match="peak_flops_per_s"):
        solutions["prefill_mfu"](1e12, 0.03, 0.0)
    for gid, cell in _cells().items():
        meta = cell.metadata["nbgrader"]
        if meta.get("solution") and gid != "quiz_answers" and not re.fullmatch(r"p\d", gid):  # letters: nothing to check
            given = cell.source.split("### BEGIN SOLUTION")[0]
            assert re.search(r"\b(integers|non_negative|positive|token_ids)\(", given), f"{gid}: no given argument check"
            assert "raise ValueError" not in cell.source, f"{gid}: the solution validates by hand"
        if meta.get("grade"):
            assert "ValueError" not in cell.source and "check_raises" not in cell.source, \
                f"{gid} grades input validation: that belongs to the given lines, not the exercise"


def test_hidden_tests_observe_and_bring_their_own_fakes():
    """Hidden tests pass inputs and observe results (course.observe), with fakes of their own: no
    assert, no expected value, and no other course helper a student's cell could replace. The
    quiz and prediction cells have no hidden part: check_choice is their observation."""
    for gid, cell in _cells().items():
        if not cell.metadata["nbgrader"].get("grade"):
            continue
        match = re.search(r"### BEGIN HIDDEN TESTS\n(.*)### END HIDDEN TESTS", cell.source, re.S)
        if gid.startswith("quiz_") or re.fullmatch(r"p\d_check", gid):  # a committed letter (quiz or prediction)
            assert not match and "check_choice(" in cell.source, gid
            continue
        assert match, f"{gid} has no hidden tests"
        hidden = match.group(1)
        assert "from course.observe import observe" in hidden and "observe(f\"" in hidden, gid
        hidden = hidden.replace("from course.observe import observe", "")
        for name in ("FakeDevice", "RecordingModel", "check_close", "check_equal", "check_raises", "course.",
                     "assert ", "math.isclose", "want", "expected"):
            assert name not in hidden, f"hidden tests of {gid} use {name}"


def test_sweeps_shrink_while_grading_and_show_progress():
    sources = "\n".join(c.source for c in nbformat.read(str(NOTEBOOK), as_version=4).cells)
    assert 'os.environ.get("NBGRADER_EXECUTION")' in sources
    # every measurement that takes more than a few seconds shows a progress bar
    calls = re.findall(r"(?:in_turns|interleave|request_sweep)\((?:[^()]|\([^()]*\))*\)", sources)
    assert len(calls) >= 7 and all("label" in c or c.startswith("request_sweep(points") for c in calls), calls
    assert "NBGRADER_EXECUTION" in " ".join(c.source for c in nbformat.read(str(NOTEBOOK), as_version=4).cells
                                            if c.cell_type == "markdown")
