"""The lines lesson 3 prints about its runs: what the measurements show, in words.

`change`, `warmup_reading`, `growth_reading` (every point against a model's prediction) and
`disagreement` turn runs into the lines lesson 3 prints, with one noise rule (NOISE_LIMIT):
scattered or overlapping runs read as "inconclusive", never as a claim. `intercept_reading`
states a line's fit and sets it beside given times, drawing no conclusion. `fixed_part_reading`
fits a step's fixed part (never states one below 0); `knee_reading` reads where the line through a
sweep's two longest passes reaches its shortest pass's time, says "no knee" only when the longest
pass is not above that time, and that the time rises from the shortest pass only when the next
pass's runs are above its runs. `noise_warning` names the points whose runs disagree too much.
`share` says what share of a bound a figure reached, or, when it beat the bound, that the bound
was measured under other load: never a share above 100 %.
`cache_reading` sets the weights' bytes beside the device's last cache, in one unit.
`graph_reading` sets an eager step beside its CUDA-graph replay; `knee_factors` splits the knee's
distance from T* into what the runs measure (the one-token pass's level over the weights' read
time, the fixed part the long passes still pay, the long passes' FLOP/s over the peak).
Noise shows that runs disagree, not why: the lines say the machine "may have been busy".
"""

from __future__ import annotations

import math
import statistics

from course.timing import Sampled, line_fit, overlap, too_noisy


# --- conclusions computed from the runs ----------------------------------------------------------
# Lesson 3 prints what its own runs show, never an outcome fixed in advance. These helpers turn
# Sampled runs into one line each, with one noise rule: runs more than NOISE_LIMIT of their median
# apart, or a comparison whose min-max bands overlap, decide nothing.

NOISE_LIMIT = 0.3


def _check_limit(limit: float) -> None:
    if not (isinstance(limit, (int, float)) and math.isfinite(limit) and limit > 0):
        raise ValueError(f"limit must be a positive fraction such as 0.3, got {limit!r}")


def noise_warning(stats: list[Sampled], points: list, what: str, limit: float = NOISE_LIMIT) -> str:
    """A line naming the points whose runs disagree by more than `limit` of their median, or ""."""
    _check_limit(limit)
    noisy = [points[i] for i in too_noisy(stats, limit)]
    if not noisy:
        return ""
    return (f"  careful: the runs of {what} at {noisy} disagree by more than {limit:.0%} of their median; the "
            f"machine may have been busy. Trust only differences larger than the bars, or re-run this cell when it is quieter.")


def change(a: Sampled, b: Sampled, limit: float = NOISE_LIMIT) -> str:
    """How b's runs differ from a's, in words: 'rose 3.10x' / 'fell 0.52x' when the min-max bands
    are apart; 'did not change beyond the spread' only when the bands overlap, neither is noisy and
    the medians are within `limit` of each other; otherwise 'inconclusive', with the ratio."""
    _check_limit(limit)
    ratio = b.median / a.median
    if not overlap(a, b):
        return f"{'rose' if ratio > 1 else 'fell'} {ratio:.2f}x"
    if max(a.rel_spread, b.rel_spread) <= limit and abs(ratio - 1) <= limit:
        return f"did not change beyond the spread of the runs ({ratio:.2f}x)"
    return (f"inconclusive: {ratio:.2f}x between the medians, but the runs' ranges overlap "
            f"({a.low * 1e3:,.1f} to {a.high * 1e3:,.1f} ms against {b.low * 1e3:,.1f} to {b.high * 1e3:,.1f} ms)")


def warmup_reading(cold_s: list[float], warm: Sampled, limit: float = NOISE_LIMIT) -> str:
    """What a few runs with no warm-up (in order, seconds) show against warmed runs of the same step.

    A one-off cost is named only when the first cold run is slower than the slowest warmed run by
    more than the warmed runs' own spread (and more than `limit` of their median), and slower than
    the cold runs after it: a first run within that margin shows nothing the noise does not."""
    _check_limit(limit)
    if not cold_s or not all(isinstance(t, (int, float)) and math.isfinite(t) and t > 0 for t in cold_s):
        raise ValueError(f"cold_s must be one or more positive durations in seconds, got {cold_s!r}")
    first, later = cold_s[0], list(cold_s[1:])
    span = f"warmed runs {warm.low * 1e3:,.1f} to {warm.high * 1e3:,.1f} ms"
    if warm.rel_spread > limit:
        return (f"-> inconclusive: the warmed runs themselves disagree by {warm.rel_spread:.0%} of their median "
                f"({span}); the machine may have been busy. Re-run this cell when it is quieter.")
    margin = max(warm.high - warm.low, limit * warm.median)
    if first > warm.high + margin and (not later or first > max(later)):
        return (f"-> the first cold run took {first / warm.median:.1f}x the warmed median ({span}), more than "
                f"their spread above the slowest: a one-off cost that the warm-up keeps out of the timings")
    if first <= warm.high + margin:
        slower = [t for t in later if t > warm.high + margin]
        tail = "" if not slower else f"; {len(slower)} later cold run(s) were slower, which warm-up does not explain"
        if first < warm.low:
            where = f"faster than every warmed run ({span})"
        elif first <= warm.high:
            where = f"within the {span}"
        else:
            # here their spread is at most `limit` of their median, so margin is that share of it
            where = (f"{(first - warm.high) * 1e3:,.1f} ms above the slowest of the {span}, less than "
                     f"{margin / warm.median:.0%} of their median")
        return (f"-> no one-off cost beyond the noise showed here: the first cold run ({first * 1e3:,.1f} ms) was "
                f"{where}{tail}. A CPU may have little to warm up; on a GPU the first calls also pay for the CUDA "
                f"context and compilation")
    return (f"-> inconclusive: the first cold run was above the {span}, but so was a later one: "
            f"the load may have changed while measuring")


def intercept_reading(xs: list[float], measured: list[Sampled], unit: str, reads_s: dict[str, float]) -> str:
    """A line through the medians against x: its slope, where it meets x = 0 and the range the
    runs' spreads allow for that intercept (the least-squares intercept is a weighted sum of the
    points), set beside the seconds given in `reads_s` ({what: seconds}, e.g. the time to read
    the weights once at a reference rate). It draws no conclusion: what the intercept holds is
    for the reader to say."""
    if not (len(xs) == len(measured)):
        raise ValueError("xs and measured must have one entry per point")
    slope, intercept = line_fit(xs, [s.median for s in measured])
    mx = statistics.fmean(xs)
    sxx = sum((x - mx) ** 2 for x in xs)
    weights = [1 / len(xs) - mx * (x - mx) / sxx for x in xs]  # intercept = sum(w * y)
    lowest = sum(w * (s.low if w > 0 else s.high) for w, s in zip(weights, measured))
    highest = sum(w * (s.high if w > 0 else s.low) for w, s in zip(weights, measured))
    line = (f"a line through the medians {'rises' if slope >= 0 else 'falls'} {abs(slope) * 1e3:,.3f} ms per {unit} "
            f"and meets 0 {unit}s at "
            f"{intercept * 1e3:,.1f} ms ({lowest * 1e3:,.1f} to {highest * 1e3:,.1f} within the runs' spreads)")
    beside = "; ".join(f"{what}: {seconds * 1e3:,.1f} ms" for what, seconds in reads_s.items())
    return f"{line}\n   beside it, {beside}" if beside else line


def growth_reading(what: str, points: list, measured: list[Sampled], expected_s: list[float],
                   model: str = "the step bound", limit: float = NOISE_LIMIT) -> str:
    """Did `what` grow from the first point to each of the others as `model` (expected_s, seconds
    at each point) predicts? One line per point; 'as ... predicts' for the whole sweep only when
    every point agrees within `limit`, every ratio its runs allow (fastest against slowest) included;
    a point whose runs are noisy, overlap the first's when the model expects a change, or allow
    ratios both within and beyond `limit` of the model's, is 'inconclusive'."""
    _check_limit(limit)
    if not (len(points) == len(measured) == len(expected_s)) or len(points) < 2:
        raise ValueError("points, measured and expected_s need one entry per point, two or more points")
    if not all(isinstance(e, (int, float)) and math.isfinite(e) and e > 0 for e in expected_s):
        raise ValueError(f"expected_s must be positive times, got {expected_s!r}")
    first, lines, agree = measured[0], [], True
    for point, s, e in zip(points[1:], measured[1:], expected_s[1:]):
        ratio, wanted = s.median / first.median, e / expected_s[0]
        low, high = s.low / first.high, s.high / first.low   # every ratio the runs allow
        moved = change(first, s, limit)
        said = f"{point}: {ratio:.2f}x the first point (the {model.removeprefix('the ')}: {wanted:.2f}x)"
        if too_noisy([first, s], limit) or moved.startswith("inconclusive") or (overlap(first, s) and abs(wanted - 1) > limit):
            lines.append(f"{said}, inconclusive: the runs disagree too much")
            agree = False
        elif wanted * (1 - limit) <= low and high <= wanted * (1 + limit):
            lines.append(f"{said}, as {model} predicts within {limit:.0%}")
        elif low > wanted * (1 + limit) or high < wanted * (1 - limit):
            lines.append(f"{said}, {'more' if ratio > wanted else 'less'} than {model} predicts")
            agree = False
        else:
            lines.append(f"{said}, inconclusive: the runs allow {low:.2f}x to {high:.2f}x, within {limit:.0%} of "
                         f"{model} and beyond it")
            agree = False
    head = (f"-> {what} grew as {model} predicts, within {limit:.0%}, at every point" if agree
            else f"-> {what}, point by point against the first")
    return head + "".join(f"\n   {line}" for line in lines)


def disagreement(a: Sampled, b: Sampled, what_a: str, what_b: str) -> str:
    """A line when two measurements of the same work, taken at different times, disagree, or ""."""
    if overlap(a, b):
        return ""
    return (f"  note: {what_a} took {a.median * 1e3:,.1f} ms (median) and {what_b} {b.median * 1e3:,.1f} ms, "
            f"ranges apart: they ran at different times, each under the load it met, and each is held "
            f"only against the reference rates measured beside it.")


def fixed_part_reading(full: Sampled, thin: Sampled, bytes_ratio: float, limit: float = NOISE_LIMIT) -> str:
    """Two steps with the same launches, one reading `bytes_ratio` of the other's bytes: fit
    time = fixed part + bytes / rate through them and say what the runs allow of the fixed part
    (two lines: the fit, then the reading)."""
    _check_limit(limit)
    if not (isinstance(bytes_ratio, (int, float)) and 0 < bytes_ratio < 1):
        raise ValueError(f"bytes_ratio must be between 0 and 1 (the narrow step reads fewer bytes), got {bytes_ratio!r}")

    def fixed(thin_s: float, full_s: float) -> float:  # the line through both points, at 0 bytes
        return (thin_s - bytes_ratio * full_s) / (1 - bytes_ratio)

    fixed_s, low, high = fixed(thin.median, full.median), fixed(thin.low, full.high), fixed(thin.high, full.low)
    fit = (f"{fixed_s * 1e3:.2f} ms per step from the medians ({fixed_s / full.median:.0%} of the full step)"
           if fixed_s >= 0 else f"below 0 from the medians (their line meets 0 bytes at {fixed_s * 1e3:.2f} ms)")
    allowed = (f"anywhere from {max(low, 0) * 1e3:.2f} to {high * 1e3:.2f} ms within the runs' spreads" if high >= 0
               else "below 0 anywhere within the runs' spreads")
    line = f"fixed part: {fit}; {allowed} (a fixed part is never below 0)"
    if too_noisy([full, thin], limit):
        return (f"{line}\n-> inconclusive: the runs of a step disagree by more than {limit:.0%} of their median; the "
                f"machine may have been busy. Re-run this cell when it is quieter.")
    if thin.low > full.high:
        return (f"{line}\n-> inconclusive: the narrow step was the slower, which no fixed part explains: the conditions "
                f"changed between the runs (the machine may have been busy). Re-run this cell when it is quieter.")
    if overlap(full, thin):
        return (f"{line}\n-> {bytes_ratio:.2f}x the bytes took as long, within the spreads: the time did not follow "
                f"the bytes; this step is overhead-bound")
    if high < 0:
        return (f"{line}\n-> {bytes_ratio:.2f}x the bytes took less than {bytes_ratio:.2f}x the time even within the "
                f"spreads: no fixed part shows, so this step is not overhead-bound; its time fell more than its bytes")
    if high <= 0.25 * full.median:
        return (f"{line}\n-> at most {max(high, 0) / full.median:.0%} of the step is fixed: its time follows the "
                f"bytes; this step is bandwidth-bound, not overhead-bound")
    if low >= 0.5 * full.median:
        return (f"{line}\n-> at least {low / full.median:.0%} of the step is fixed: per-step overhead, not bytes, "
                f"sets most of its time")
    if high - low <= 0.25 * full.median:
        return (f"{line}\n-> {max(low, 0) / full.median:.0%} to {high / full.median:.0%} of the step is fixed: "
                f"per-step overhead sets that part of its time, the bytes the rest")
    return (f"{line}\n-> inconclusive: the spreads allow a fixed part from {max(low, 0) / full.median:.0%} "
            f"to {high / full.median:.0%} of the step")


def knee_reading(tokens: list[int], passes: list[Sampled], formula: float | None = None) -> tuple[float, str]:
    """Passes of `tokens` tokens each (ascending, the first the smallest): where the line through the
    two longest passes reaches the smallest pass's time, and what the runs allow of it. Returns
    (the crossing in tokens, or nan where there is none to read; the lines to print). `formula`:
    a knee to compare with (tokens), or None."""
    if len(tokens) != len(passes) or len(tokens) < 3 or list(tokens) != sorted(set(tokens)):
        raise ValueError(f"need three or more ascending token counts, one pass each; got {tokens!r} and {len(passes)} passes")
    t0, ta, tb = tokens[0], tokens[-2], tokens[-1]
    level, a, b = passes[0], passes[-2], passes[-1]

    def meeting(lv: float, ya: float, yb: float) -> float:
        slope = (yb - ya) / (tb - ta)
        return tb - (yb - lv) / slope if slope > 0 else math.nan

    ratio = f"the {tb}-token pass took {b.median / level.median:.2f}x the {t0}-token pass"
    if b.median <= level.median:
        return math.nan, (f"measured: {ratio}: the longest pass was not above the smallest one's time, so no knee "
                          f"shows within {tb} tokens; the machine may have been disturbed. Re-run this cell when it "
                          f"is quieter.")
    knee = meeting(level.median, a.median, b.median)
    if not math.isfinite(knee):
        return math.nan, (f"measured: {ratio}, but the {tb}-token pass was not above the {ta}-token one, so no line "
                          f"through them reads a knee; the machine may have been disturbed. Re-run this cell when it "
                          f"is quieter.")
    if knee <= t0:
        second = passes[1]
        shown = (f"the {tokens[1]}-token pass was above the {t0}-token one beyond their spreads: the time already "
                 f"rises from T = {t0}" if second.low > level.high else
                 f"the {tokens[1]}-token pass's runs overlap the {t0}-token one's (or fall below them), so the sweep "
                 f"does not show the time rising from T = {t0} either")
        return math.nan, (f"measured: {ratio}; no knee within this sweep: the line through the two longest passes "
                          f"reaches the {t0}-token pass's time only at or below T = {t0}, outside the sweep, so no "
                          f"knee is drawn; {shown}. Why, from this run's figures: the next line")
    corners = [meeting(x, y, z) for x in (level.low, level.high) for y in (a.low, a.high) for z in (b.low, b.high)]
    if all(math.isfinite(c) for c in corners):
        spread = f"{max(min(corners), 0):,.1f} to {max(corners):,.1f} within the runs' spreads"
    else:
        spread = "the runs' spreads also allow the two longest passes to be level, so no range"
    line = (f"measured: {ratio}; the line through the two longest passes reaches the {t0}-token pass's time at "
            f"{knee:,.1f} tokens ({spread})")
    if formula is not None and formula > 0:
        line += f", {knee / formula:.2f}x the formula's {formula:,.1f}"
    return knee, line


def graph_reading(eager: Sampled, graph: Sampled) -> str:
    """The same step, eager and replayed as one CUDA graph: what the runs show of the launches' cost."""
    if overlap(eager, graph):
        return (f"eager {eager.median * 1e3:,.3f} ms, replayed as one CUDA graph {graph.median * 1e3:,.3f} ms: their "
                f"runs overlap, so this run cannot tell the two apart")
    if eager.median > graph.median:
        return (f"eager {eager.median * 1e3:,.3f} ms, replayed as one CUDA graph {graph.median * 1e3:,.3f} ms: the "
                f"same kernels, so launching them one by one from Python cost "
                f"{(eager.median - graph.median) * 1e3:,.3f} ms of each eager step ({eager.median / graph.median:.2f}x)")
    return (f"eager {eager.median * 1e3:,.3f} ms, replayed as one CUDA graph {graph.median * 1e3:,.3f} ms: the graph "
            f"was the slower here, beyond the runs' spreads; the machine may have been busy. Re-run this cell")


def knee_factors(tokens: list[int], passes: list[Sampled], flops: list[float], read_s: float, peak: float,
                 t_star: float) -> str:
    """Three figures of the measured knee against T*, each read off the runs. The knee is where the
    line through the two longest passes reaches the one-token pass's time: (1) that time over the
    weights' read time (launch overhead, or reads below the bandwidth, raise it); (2) where that
    line meets 0 tokens, over the read time: a fixed part the long passes still pay lifts the line
    as much as the level and moves no knee, while one hidden behind their FLOPs (the line meets 0
    near 0 ms) leaves the whole level to be reached; and (3) the FLOP/s at which the two longest
    passes added their extra FLOPs (counted, `flops` per pass) over the peak (matmuls below the
    peak reach the level sooner: an earlier knee). (1 - 2) x 3 x T* is then where that line meets
    that level, when the FLOPs per token are the 2N that T* assumes; T* itself assumes a level of
    one read, no fixed part and the peak rate."""
    if not (len(tokens) == len(passes) == len(flops) >= 3):
        raise ValueError(f"need three or more passes with their FLOPs; got {len(tokens)} token counts, "
                         f"{len(passes)} passes and {len(flops)} FLOP counts")
    for name, value in (("read_s", read_s), ("peak", peak), ("t_star", t_star)):
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be a positive number, got {value!r}")
    level = passes[0].median
    lift = level / read_s
    added_s = passes[-1].median - passes[-2].median
    head = (f"the {tokens[0]}-token pass took {lift:.2f}x the weights' read time ({read_s * 1e3:,.3f} ms at this "
            f"sweep's bandwidth): the level the line must reach")
    if added_s <= 0 or overlap(passes[-1], passes[-2]):
        return head + ("; the two longest passes' runs overlap or are level, so no FLOP/s can be read off them; "
                       "the machine may have been busy. Re-run this cell")
    at_zero = passes[-1].median - added_s / (tokens[-1] - tokens[-2]) * tokens[-1]  # the line's time at 0 tokens
    fixed = at_zero / read_s
    added_rate = (flops[-1] - flops[-2]) / added_s
    efficiency = added_rate / peak
    said = (f"; the line through the two longest passes meets 0 tokens at {at_zero * 1e3:,.3f} ms, "
            f"{fixed:.2f}x the read time: a fixed part the long passes still pay, which lifts the line and "
            f"the level alike; from T = {tokens[-2]} to {tokens[-1]} the passes added their FLOPs at "
            f"{share(added_rate, peak, 'this sweep' + chr(39) + 's peak FLOP/s')}")
    if lift <= fixed:
        first_s = passes[1].median - passes[0].median
        if first_s > 0:
            start = (f"from T = {tokens[0]} to {tokens[1]} they added theirs at "
                     f"{share((flops[1] - flops[0]) / first_s, peak, 'the peak')}")
        else:
            start = f"the {tokens[1]}-token pass was not slower than the {tokens[0]}-token one"
        return head + said + (f"; no knee follows from these figures: the line meets 0 tokens above the one-token "
                              f"pass's time ({fixed:.2f}x against {lift:.2f}x the read time), so it never comes down "
                              f"to that level at a positive T. The short passes' time grew faster per token than the "
                              f"long ones' ({start}): small matmuls run far below the peak rate")
    if efficiency > 1:
        return head + said + "; no knee is computed from a rate above the peak"
    return head + said + (f"; together: ({lift:.2f} - {fixed:.2f}) x {efficiency:.2f} x T* = "
                          f"{(lift - fixed) * efficiency * t_star:,.1f} tokens, where that line reaches the one-token "
                          f"pass's time if every token adds 2N FLOPs")


def share(achieved: float, bound: float, bound_name: str) -> str:
    """'85% of <bound_name>': the share of a bound a measured rate reached. A rate above its bound
    gets no share (a share above 100 % is never printed): the phrase says that the bound was
    measured under other load than the figure held against it."""
    for name, value in (("achieved", achieved), ("bound", bound)):
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be a finite rate > 0, got {value!r}")
    if achieved <= bound:
        return f"{achieved / bound:.0%} of {bound_name}"
    return (f"more than {bound_name} ({achieved / bound:.2f}x), so {bound_name} was measured under other load than "
            f"this figure: no share is shown")


def cache_reading(weight_bytes: float, cache_bytes: float, cache_name: str) -> str:
    """The weights' bytes beside a cache's, in MiB both, and what that allows: above the cache,
    decode reads what does not fit from main memory on every step; within it, part of the weights
    may still be in the cache when the next step reads them (it is shared with other cores and
    processes, so how much is not known in advance)."""
    for name, value in (("weight_bytes", weight_bytes), ("cache_bytes", cache_bytes)):
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be a positive number of bytes, got {value!r}")
    mib = 2**20
    sizes = f"the weights' {weight_bytes / mib:,.0f} MiB against the {cache_bytes / mib:,.0f} MiB {cache_name}"
    if weight_bytes > cache_bytes:
        return (f"{sizes} ({weight_bytes / cache_bytes:,.1f}x): at least the {(weight_bytes - cache_bytes) / mib:,.0f} "
                f"MiB that do not fit come from main memory on every decode step")
    return (f"{sizes}: they fit in it, so part of them may still be cached when the next decode step reads them "
            f"(the cache is shared with other cores and processes); decode and the read probe of as many bytes "
            f"may then read faster than main memory")
