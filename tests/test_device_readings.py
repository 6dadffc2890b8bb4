"""The conclusions lesson 3 prints under its measurements (course/device.py), fed fixed runs: each
reading follows the numbers, and the noise rule turns overlapping or scattered runs into
'inconclusive' rather than a claim."""

from __future__ import annotations

import pytest

from course import device as dev

S = dev.Sampled


def test_change_reads_apart_bands_as_a_change():
    assert dev.change(S("a", [1.0, 1.1, 1.05]), S("b", [3.0, 3.2, 3.1])) == "rose 2.95x"
    assert dev.change(S("a", [1.0, 1.1, 1.05]), S("b", [0.5, 0.52, 0.51])).startswith("fell 0.49x")


def test_change_says_no_change_only_for_tight_overlapping_runs():
    assert dev.change(S("a", [1.0, 1.1, 1.05]), S("b", [1.02, 1.08, 1.06])).startswith("did not change")


def test_change_halving_within_wide_bands_is_inconclusive_not_unchanged():
    # the tester's case: TTFT halved, but one point's runs spread over twice their median
    said = dev.change(S("a", [0.2, 0.9, 0.3]), S("b", [0.15, 0.2, 0.16]))
    assert said.startswith("inconclusive") and "0.53x" in said and "did not change" not in said


def test_noise_warning_names_the_noisy_points_only():
    stats = [S("a", [1.0, 1.05]), S("b", [1.0, 2.0])]
    assert "[64]" in dev.noise_warning(stats, [16, 64], "TTFT") and "TTFT" in dev.noise_warning(stats, [16, 64], "TTFT")
    assert dev.noise_warning(stats[:1], [16], "TTFT") == ""
    with pytest.raises(ValueError, match="limit"):
        dev.noise_warning(stats, [16, 64], "x", limit=0)


def test_warmup_reading_follows_the_cold_runs():
    warm = S("w", [0.100, 0.105, 0.110])
    assert "one-off cost" in dev.warmup_reading([0.300, 0.104, 0.101], warm)
    assert "2.9x" in dev.warmup_reading([0.300, 0.104, 0.101], warm)
    # the tester's case: every cold run beat the warmed median
    said = dev.warmup_reading([0.1436, 0.1051, 0.0660], S("w", [0.170, 0.175, 0.180]))
    assert said.startswith("-> no one-off cost") and "within or below" in said
    assert "inconclusive" in dev.warmup_reading([0.3, 0.104], S("w", [0.1, 0.2, 0.11]))  # warmed runs scattered
    assert "inconclusive" in dev.warmup_reading([0.3, 0.4], warm)  # a later cold run slower still
    with pytest.raises(ValueError, match="cold_s"):
        dev.warmup_reading([], warm)


def test_line_fit_is_least_squares():
    assert dev.line_fit([1, 2, 3], [3, 5, 7]) == pytest.approx((2.0, 1.0))
    with pytest.raises(ValueError, match="two"):
        dev.line_fit([1], [1])
    with pytest.raises(ValueError, match="different"):
        dev.line_fit([2, 2], [1, 3])


def test_fixed_cost_reading_names_a_large_intercept():
    xs = [16, 64, 256]
    floors = [0.035, 0.040, 0.160]
    # the tester's numbers: about 270 ms at 16 tokens against a 35 ms floor, about 1,310 at 256
    measured = [S("16", [0.26, 0.27, 0.28]), S("64", [0.45, 0.46, 0.47]), S("256", [1.30, 1.31, 1.32])]
    said = dev.fixed_cost_reading(xs, measured, floors, "token")
    assert "fixed cost that neither bound contains" in said and "meets 0 tokens at 191.7 ms (178.3 to 205.0" in said
    close = [S("16", [0.036, 0.037]), S("64", [0.041, 0.042]), S("256", [0.162, 0.163])]
    assert "no fixed cost above the floor" in dev.fixed_cost_reading(xs, close, floors, "token")
    some = [S("16", [0.045, 0.046]), S("64", [0.050, 0.051]), S("256", [0.170, 0.171])]
    assert "fixed cost of about" in dev.fixed_cost_reading(xs, some, floors, "token")
    noisy = [S("16", [0.2, 0.6]), *measured[1:]]
    assert "inconclusive: the runs' spreads allow a fixed cost from" in dev.fixed_cost_reading(xs, noisy, floors, "token")
    # a noisy middle point (runs 35 % of their median apart) that leaves the reading intact either way
    wide = [measured[0], S("64", [0.40, 0.46, 0.56]), measured[2]]
    assert dev.too_noisy(wide) == [1]
    assert "at least 136.7 ms of every call" in dev.fixed_cost_reading(xs, wide, floors, "token")
    with pytest.raises(ValueError, match="one entry per point"):
        dev.fixed_cost_reading(xs, measured[:2], floors, "token")


def test_growth_reading_against_the_floor():
    a = S("b1", [0.073, 0.074, 0.075])
    # the tester's batch sweep: batch 1 -> 4, 73 -> 152 ms, floor flat
    said = dev.growth_reading("the step", a, S("b4", [0.150, 0.152, 0.155]), 1.0)
    assert "rose 2.05x" in said and "the floor: 1.00x" in said and "more than the floor predicts" in said
    assert "as the floor predicts" in dev.growth_reading("the step", a, S("b4", [0.078, 0.080, 0.082]), 1.05)
    assert "less than the floor" in dev.growth_reading("TTFT", a, S("b", [0.20, 0.21]), 16.0)
    scattered = dev.growth_reading("the step", a, S("b", [0.05, 0.2, 0.1]), 1.0)
    assert scattered == ("-> the step: 1.35x between the medians (the floor: 1.00x); inconclusive: "
                         "the runs disagree too much to compare with the floor")
    # overlapping, tight runs 1.42x apart: neither a change nor no change, so no comparison with the floor
    assert "inconclusive" in dev.growth_reading("the step", S("a", [1.0, 1.25]), S("b", [1.25, 1.6, 1.62]), 1.0)
    with pytest.raises(ValueError, match="floor_ratio"):
        dev.growth_reading("x", a, a, 0.0)


def test_disagreement_only_when_ranges_are_apart():
    table, sweep = S("t", [2.1, 2.2, 2.3]), S("s", [1.30, 1.31, 1.32])
    assert "different times" in dev.disagreement(table, sweep, "this prefill", "the prompt sweep's")
    assert dev.disagreement(table, S("s", [2.0, 2.25]), "a", "b") == ""


def test_fixed_part_reading_follows_the_two_steps():
    # this machine's run at load 2: 48.7 ms for the full step, 20.4 ms at 0.27x the bytes
    said = dev.fixed_part_reading(S("full", [0.04379, 0.04872, 0.05076]), S("thin", [0.01774, 0.02042, 0.02101]), 0.27)
    assert "11% to 26% of the step is fixed" in said and said.count("\n") == 1
    bandwidth = dev.fixed_part_reading(S("full", [0.100, 0.101, 0.102]), S("thin", [0.027, 0.0275, 0.028]), 0.27)
    assert "bandwidth-bound, not overhead-bound" in bandwidth
    overhead = dev.fixed_part_reading(S("full", [0.010, 0.0105, 0.011]), S("thin", [0.0098, 0.0101, 0.0104]), 0.27)
    assert "overhead-bound" in overhead and "did not follow the bytes" in overhead
    mostly = dev.fixed_part_reading(S("full", [0.100, 0.101, 0.102]), S("thin", [0.080, 0.081, 0.082]), 0.27)
    assert "at least" in mostly and "sets most of its time" in mostly
    assert "inconclusive: the runs of a step disagree" in dev.fixed_part_reading(
        S("full", [0.0649, 0.0949, 0.111]), S("thin", [0.025, 0.0254, 0.029]), 0.27)  # the first run of the day
    assert "narrow step was the slower" in dev.fixed_part_reading(S("f", [0.05, 0.051]), S("t", [0.06, 0.061]), 0.27)
    with pytest.raises(ValueError, match="bytes_ratio"):
        dev.fixed_part_reading(S("f", [1.0]), S("t", [1.0]), 1.5)
