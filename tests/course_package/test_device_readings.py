"""The conclusions lesson 3 prints under its measurements (course/readings.py), fed fixed runs: each
reading follows the numbers, and the noise rule turns overlapping or scattered runs into
'inconclusive' rather than a claim."""

from __future__ import annotations

import math
import re

import pytest

from course import readings, timing

S = timing.Sampled


def test_change_reads_apart_bands_as_a_change():
    assert readings.change(S("a", [1.0, 1.1, 1.05]), S("b", [3.0, 3.2, 3.1])) == "rose 2.95x"
    assert readings.change(S("a", [1.0, 1.1, 1.05]), S("b", [0.5, 0.52, 0.51])).startswith("fell 0.49x")


def test_change_says_no_change_only_for_tight_overlapping_runs():
    assert readings.change(S("a", [1.0, 1.1, 1.05]), S("b", [1.02, 1.08, 1.06])).startswith("did not change")


def test_change_halving_within_wide_bands_is_inconclusive_not_unchanged():
    # the tester's case: TTFT halved, but one point's runs spread over twice their median
    said = readings.change(S("a", [0.2, 0.9, 0.3]), S("b", [0.15, 0.2, 0.16]))
    assert said.startswith("inconclusive") and "0.53x" in said and "did not change" not in said


def test_noise_warning_names_the_noisy_points_only():
    stats = [S("a", [1.0, 1.05]), S("b", [1.0, 2.0])]
    assert "[64]" in readings.noise_warning(stats, [16, 64], "TTFT") and "TTFT" in readings.noise_warning(stats, [16, 64], "TTFT")
    assert readings.noise_warning(stats[:1], [16], "TTFT") == ""
    with pytest.raises(ValueError, match="limit"):
        readings.noise_warning(stats, [16, 64], "x", limit=0)


def test_warmup_reading_follows_the_cold_runs():
    warm = S("w", [0.100, 0.105, 0.110])
    assert "one-off cost" in readings.warmup_reading([0.300, 0.104, 0.101], warm)
    assert "2.9x" in readings.warmup_reading([0.300, 0.104, 0.101], warm)
    # the tester's case: every cold run beat every warmed run
    said = readings.warmup_reading([0.1436, 0.1051, 0.0660], S("w", [0.170, 0.175, 0.180]))
    assert said.startswith("-> no one-off cost") and "faster than every warmed run" in said
    # a first run just above the slowest warmed run, well within their spread: no one-off cost named
    said = readings.warmup_reading([0.190, 0.150], S("w", [0.140, 0.160, 0.180]))
    assert said.startswith("-> no one-off cost") and "one-off cost that" not in said
    assert "inconclusive" in readings.warmup_reading([0.3, 0.104], S("w", [0.1, 0.2, 0.11]))  # warmed runs scattered
    assert "inconclusive" in readings.warmup_reading([0.3, 0.4], warm)  # a later cold run slower still
    with pytest.raises(ValueError, match="cold_s"):
        readings.warmup_reading([], warm)


def test_line_fit_is_least_squares():
    assert timing.line_fit([1, 2, 3], [3, 5, 7]) == pytest.approx((2.0, 1.0))
    assert timing.line_fit([0.5, 1.5, 2.5, 3.5], [1.0, 2.0, 2.0, 5.0]) == pytest.approx((1.2, 0.1))  # off the line: least squares
    with pytest.raises(ValueError, match="two or more .* got 1 x and 1 y"):
        timing.line_fit([1], [1])
    with pytest.raises(ValueError, match="got 3 x and 2 y"):
        timing.line_fit([1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match="different"):
        timing.line_fit([2, 2], [1, 3])


def test_intercept_reading_states_the_fit_and_draws_no_conclusion():
    xs = [16, 64, 256]
    # the tester's numbers: about 270 ms at 16 tokens, about 1,310 at 256
    measured = [S("16", [0.26, 0.27, 0.28]), S("64", [0.45, 0.46, 0.47]), S("256", [1.30, 1.31, 1.32])]
    said = readings.intercept_reading(xs, measured, "token", {"the weights read once at the bare products' rate": 0.19})
    assert "meets 0 tokens at 191.7 ms (178.3 to 205.0" in said
    assert "the weights read once at the bare products' rate: 190.0 ms" in said
    for claim in ("fixed cost", "overhead", "launch", "->"):
        assert claim not in said
    assert "\n" not in readings.intercept_reading(xs, measured, "token", {})
    with pytest.raises(ValueError, match="one entry per point"):
        readings.intercept_reading(xs, measured[:2], "token", {})


def test_growth_reading_judges_every_point_not_the_two_ends():
    a = S("b1", [0.073, 0.074, 0.075])
    # the tester's batch sweep: batch 4 took 1.56x batch 1 where the estimate said 1.00x, batch 16 about as estimated
    said = readings.growth_reading("the step", ["batch 1", "batch 4", "batch 16"],
                              [a, S("b4", [0.113, 0.115, 0.117]), S("b16", [0.088, 0.090, 0.092])], [1.0, 1.0, 1.2])
    assert "at every point" not in said and "batch 4: 1.55x the first point (the step bound: 1.00x), more than" in said
    assert "batch 16: 1.22x the first point (the step bound: 1.20x), as the step bound predicts" in said
    ok = readings.growth_reading("the step", [1, 4], [a, S("b4", [0.078, 0.080, 0.082])], [1.0, 1.05])
    assert ok.startswith("-> the step grew as the step bound predicts, within 30%, at every point")
    assert "less than the step bound" in readings.growth_reading("TTFT", [16, 256], [a, S("b", [0.20, 0.21])], [1.0, 16.0])
    scattered = readings.growth_reading("the step", [1, 4], [a, S("b", [0.05, 0.2, 0.1])], [1.0, 1.0])
    assert "inconclusive: the runs disagree too much" in scattered and "at every point" not in scattered
    # overlapping, tight runs 1.42x apart: neither a change nor no change, so no comparison
    assert "inconclusive" in readings.growth_reading("the step", [1, 4], [S("a", [1.0, 1.25]), S("b", [1.25, 1.6, 1.62])],
                                                [1.0, 1.0])
    # a quiet run's batch 16: the medians 1.27x the estimate's ratio, but the runs allow up to 1.51x
    straddles = readings.growth_reading("the step", [1, 16], [S("b1", [1.00, 1.02, 1.04]), S("b16", [2.20, 2.23, 2.60])],
                                        [1.0, 1.72])
    assert "as the step bound predicts" not in straddles and "inconclusive: the runs allow 2.12x to 2.60x" in straddles
    with pytest.raises(ValueError, match="expected_s"):
        readings.growth_reading("x", [1, 2], [a, a], [1.0, 0.0])
    with pytest.raises(ValueError, match="one entry per point"):
        readings.growth_reading("x", [1], [a], [1.0])


def test_disagreement_only_when_ranges_are_apart():
    table, sweep = S("t", [2.1, 2.2, 2.3]), S("s", [1.30, 1.31, 1.32])
    assert "different times" in readings.disagreement(table, sweep, "this prefill", "the prompt sweep's")
    assert readings.disagreement(table, S("s", [2.0, 2.25]), "a", "b") == ""


def test_fixed_part_reading_follows_the_two_steps():
    # this machine's run at load 2: 48.7 ms for the full step, 20.4 ms at 0.27x the bytes
    said = readings.fixed_part_reading(S("full", [0.04379, 0.04872, 0.05076]), S("thin", [0.01774, 0.02042, 0.02101]), 0.27)
    assert "11% to 26% of the step is fixed" in said and said.count("\n") == 1
    bandwidth = readings.fixed_part_reading(S("full", [0.100, 0.101, 0.102]), S("thin", [0.027, 0.0275, 0.028]), 0.27)
    assert "bandwidth-bound, not overhead-bound" in bandwidth
    overhead = readings.fixed_part_reading(S("full", [0.010, 0.0105, 0.011]), S("thin", [0.0098, 0.0101, 0.0104]), 0.27)
    assert "overhead-bound" in overhead and "did not follow the bytes" in overhead
    mostly = readings.fixed_part_reading(S("full", [0.100, 0.101, 0.102]), S("thin", [0.080, 0.081, 0.082]), 0.27)
    assert "at least" in mostly and "sets most of its time" in mostly
    assert "inconclusive: the runs of a step disagree" in readings.fixed_part_reading(
        S("full", [0.0649, 0.0949, 0.111]), S("thin", [0.025, 0.0254, 0.029]), 0.27)  # the first run of the day
    assert "narrow step was the slower" in readings.fixed_part_reading(S("f", [0.05, 0.051]), S("t", [0.06, 0.061]), 0.27)
    with pytest.raises(ValueError, match="bytes_ratio"):
        readings.fixed_part_reading(S("f", [1.0]), S("t", [1.0]), 1.5)


KNEE_T = [1, 2, 4, 8, 16, 32, 64, 128]


def _passes(ms):
    return [S(f"{t}", [m * 0.95e-3, m * 1e-3, m * 1.05e-3]) for t, m in zip(KNEE_T, ms)]


def test_knee_reading_finds_a_knee_inside_the_sweep():
    knee, said = readings.knee_reading(KNEE_T, _passes([100, 100, 100, 100, 101, 110, 150, 300]), formula=20.0)
    # line through (64, 150) and (128, 300) meets 100 at 64 - 50 / (150 / 64) = 42.7
    assert knee == pytest.approx(64 - 50 / (150 / 64))
    assert "42.7 tokens" in said and "x the formula's 20.0" in said and "no knee" not in said


def test_knee_reading_crossing_below_the_smallest_t_says_so():
    # the tester's run: T = 128 at 8.31x the one-token pass, the line meets its level near T = -33; the 2-token
    # pass's runs (104.5 to 115.5) overlap the 1-token pass's (95 to 105): no rise from T = 1 shown
    ms = [100, 110, 130, 170, 250, 420, 623, 831]
    knee, said = readings.knee_reading(KNEE_T, _passes(ms))
    assert math.isnan(knee) and "8.31x" in said  # nan: no line is drawn
    assert "no knee within this sweep" in said and "at or below T = 1" in said and "already rises" not in said
    assert not re.search(r"-\d", said) and "not above" not in said and "disturbed" not in said


def test_knee_reading_no_knee_only_when_the_longest_pass_is_not_above_the_smallest():
    knee, said = readings.knee_reading(KNEE_T, _passes([100, 100, 99, 98, 100, 99, 97, 99]))
    assert math.isnan(knee) and "no knee" in said and "0.99x" in said


def test_knee_reading_last_two_not_rising_is_no_line_not_no_knee():
    knee, said = readings.knee_reading(KNEE_T, _passes([100, 100, 100, 120, 150, 200, 300, 290]))
    assert math.isnan(knee) and "no line" in said and "no knee" not in said and "2.90x" in said


def test_knee_reading_range_clamped_and_bad_input_named():
    # medians 1.0, 1.15, 1.55: knee at 1.25; the spreads' steepest-down corner meets 1.0 at -1, shown as 0
    knee, said = readings.knee_reading([1, 2, 4], [S("a", [1.0, 1.0]), S("b", [1.0, 1.3]), S("c", [1.5, 1.6])])
    assert knee == pytest.approx(1.25) and "(0.0 to" in said
    with pytest.raises(ValueError, match="ascending"):
        readings.knee_reading([4, 2, 1], _passes([1, 2, 3]))
    with pytest.raises(ValueError, match="ascending"):
        readings.knee_reading([1, 2], _passes([1, 2]))


def test_fixed_part_range_never_below_zero():
    said = readings.fixed_part_reading(S("full", [0.30, 0.40, 0.50]), S("thin", [0.08, 0.10, 0.14]), 0.27)
    assert "from -" not in said and "from 0.00 to" in said


# --- lesson 3's statements checked against a quiet run and a run with both cores busy (2026-12-02) ---


def test_noise_lines_do_not_claim_a_busy_machine_they_cannot_see():
    # the quiet run (load 0.6) printed "the machine was busy" five times: noise shows that the runs
    # disagree, not why
    noisy, tight = S("n", [0.078, 0.080, 0.1252]), S("t", [0.100, 0.101, 0.102])
    for said in (readings.noise_warning([noisy], [2], "TTFT"),
                 readings.warmup_reading([0.057, 0.051], S("w", [0.0329, 0.0364, 0.0487])),
                 readings.fixed_part_reading(S("f", [0.0437, 0.0493, 0.0577]), S("t", [0.0121, 0.0125, 0.0170]), 0.27)):
        assert "the machine was busy" not in said and "may have been busy" in said, said
    assert "the load may have changed" in readings.warmup_reading([0.3, 0.4], S("w", [0.100, 0.105, 0.110]))
    assert readings.noise_warning([tight], [2], "TTFT") == ""


def test_warmup_reading_says_where_the_first_cold_run_was():
    # every cold run faster than every warmed run: not "within" them
    said = readings.warmup_reading([0.1436, 0.1051, 0.0660], S("w", [0.170, 0.175, 0.180]))
    assert said.startswith("-> no one-off cost") and "within the" not in said and "faster than every warmed run" in said
    # 18 ms above the slowest of warmed runs 2 ms apart: above by more than their spread, less than 30 % of their median
    said = readings.warmup_reading([0.120, 0.101], S("w", [0.100, 0.101, 0.102]))
    assert said.startswith("-> no one-off cost") and "less than their spread" not in said
    assert "18.0 ms above the slowest" in said and "less than 30% of their median" in said
    # the quiet run: 42.0 ms among warmed runs of 32.7 to 43.2 ms
    said = readings.warmup_reading([0.04196, 0.0384, 0.03809], S("w", [0.03266, 0.03656, 0.04316]))
    assert "was within the warmed runs 32.7 to 43.2 ms" in said and "above" not in said


def test_fixed_part_reading_never_states_a_fixed_part_below_zero():
    # the busy run: the narrow step took 0.25x the time at 0.27x the bytes, the medians' line meets 0 bytes at -1.2 ms
    said = readings.fixed_part_reading(S("f", [0.04374, 0.04933, 0.05766]), S("t", [0.01214, 0.01254, 0.01702]), 0.2716)
    assert "fixed part: -" not in said and "meets 0 bytes at -1.18 ms" in said and "from 0.00 to 7.06 ms" in said
    # the narrow step below 0.27x the time even at the spreads' ends: no range "from 0.00 to -6.85 ms"
    said = readings.fixed_part_reading(S("f", [0.100, 0.101, 0.102]), S("t", [0.020, 0.021, 0.022]), 0.27)
    assert "to -" not in said and "below 0 anywhere within the runs' spreads" in said
    assert "not overhead-bound" in said and "follows the bytes" not in said and "at most" not in said


def test_knee_reading_says_the_time_rises_from_the_smallest_t_only_when_the_runs_show_it():
    # the line meets the 1-token level below T = 1, but the 2-token pass's runs overlap the 1-token pass's
    knee, said = readings.knee_reading(KNEE_T, _passes([100, 102, 130, 170, 250, 420, 623, 831]))
    assert math.isnan(knee) and "already rises" not in said and "overlap" in said and "at or below T = 1" in said
    # the quiet run: the 2-token pass 2.01x the 1-token pass, ranges apart
    quiet = [S(f"{t}", [lo * 1e-3, m * 1e-3, hi * 1e-3]) for t, (lo, m, hi) in zip(KNEE_T, [
        (29.45, 30.25, 31.30), (60.20, 60.93, 62.08), (52.49, 55.45, 57.65), (50.13, 50.30, 58.44),
        (59.19, 59.71, 74.33), (79.17, 89.37, 92.69), (116.20, 131.80, 173.05), (213.50, 215.35, 228.01)])]
    knee, said = readings.knee_reading(KNEE_T, quiet)
    assert math.isnan(knee) and "no knee within this sweep" in said and "already rises from T = 1" in said
    assert not re.search(r"-\d", said), said  # the line meets the level at -13.8 tokens: never printed


def test_no_knee_is_said_with_its_reason_and_no_negative_token_count():
    """The tester's busy run: the 1-token pass at 1.04x the read time, the two longest passes' line meeting
    0 tokens at 1.97x it; (1.04 - 1.97) x 0.99 x T* came out as -28.1 tokens. Now: no knee, and why."""
    tokens = [1, 2, 4, 8, 16, 32, 64, 128]
    read_s, peak = 10e-3, 1e12
    level = 1.04 * read_s
    ms = [level, level * 1.3, level * 1.6, level * 1.9, 2.3 * read_s, 2.9 * read_s, 1.97 * read_s + 64 * 2e-4,
          1.97 * read_s + 128 * 2e-4]
    passes = [S(f"{t}", [m * 0.99, m, m * 1.01]) for t, m in zip(tokens, ms)]
    flops = [t * 2e8 * 0.99 for t in tokens]  # the long passes add theirs at 99 % of the peak
    knee, said = readings.knee_reading(tokens, passes, formula=29.0)
    why = readings.knee_factors(tokens, passes, flops, read_s, peak, 29.0)
    assert math.isnan(knee) and "no knee" in said
    assert "no knee follows from these figures" in why and "1.97x against 1.04x the read time" in why
    assert "from T = 1 to 2 they added theirs at" in why and "small matmuls run far below the peak" in why
    assert not re.search(r"-\d", said + why), (said, why)


def test_no_share_above_100_percent_names_the_bound_measured_under_other_load():
    assert readings.share(45.0, 100.0, "the read bandwidth") == "45% of the read bandwidth"
    said = readings.share(128.0, 100.0, "the step bound")
    assert "128%" not in said and "1.28x" in said and "the step bound was measured under other load" in said
    with pytest.raises(ValueError, match="bound"):
        readings.share(1.0, 0.0, "x")


def test_the_weights_beside_the_cache_in_one_unit():
    """The tester's CPU: 428 MB of weights and a 480 MiB last-level cache, printed as '1 times the cache:
    decode must read them from main memory'. Both in MiB now, and only what the sizes allow."""
    within = readings.cache_reading(428e6, 480 * 2**20, "last-level cache")
    assert "408 MiB against the 480 MiB last-level cache: they fit in it" in within and "must" not in within
    above = readings.cache_reading(5.4e9, 50 * 2**20, "L2 cache")
    assert "(103.0x)" in above and "from main memory on every decode step" in above


def test_intercept_reading_says_falls_for_a_falling_line():
    measured = [S("16", [0.30, 0.31]), S("64", [0.28, 0.29]), S("256", [0.20, 0.21])]
    said = readings.intercept_reading([16, 64, 256], measured, "token", {})
    assert "rises -" not in said and "falls 0.4" in said
