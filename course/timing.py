"""Timing in turns, and the statistics of the runs.

A reference rate (a rate measured in the same cell as what it is compared with) measured at one
time does not hold at another on a shared machine. `interleave` times several functions in turns,
so that a drifting load hits all of them alike.

- Turns. `interleave` and `in_turns` warm every function or point up once, then run them in
  rounds, forwards then backwards, with the probes (course.probes) among them, so a program that
  wakes up halfway slows the measurement and its reference rates alike. On a CPU the threads are
  chosen again before every round when set_cpu_threads() chose them (course.threads).
- Statistics. A `Sampled` keeps every run: the median is shown, its bar the fastest to the
  slowest run; `overlap` and `too_noisy` (runs more than 30 % of their median apart) tell the
  lesson not to conclude.
- `line_fit` is the least-squares line through points, which course.readings reads.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, field
from typing import Callable

import torch

from course.device import synchronize
from course.threads import follow_load


@dataclass
class Sampled:
    """Seconds per call of one function, from several timed calls."""

    label: str
    samples: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def low(self) -> float:
        return min(self.samples)

    @property
    def high(self) -> float:
        return max(self.samples)

    @property
    def rel_spread(self) -> float:
        """(max - min) / median: 0.1 means the calls disagreed by 10 % of the median."""
        return (self.high - self.low) / self.median if self.median > 0 else math.inf


def timed_call(fn: Callable[[], object], device: torch.device | str | None = None) -> float:
    """Seconds of one call of fn, the device synchronised before both clock reads (on a GPU the
    host clock and a device-wide synchronise add microseconds to each call: nothing beside a
    millisecond step; CUDA events would leave them out)."""
    synchronize(device)
    start = time.perf_counter()
    fn()
    synchronize(device)
    return time.perf_counter() - start


def interleave(fns: dict[str, Callable[[], object]], rounds: int = 5, warmup: int = 1,
               timer: Callable[[Callable[[], object]], float] | None = None,
               on_call: Callable[[str], None] | None = None, label: str | None = None) -> dict[str, Sampled]:
    """Time every function in `fns` `rounds` times, in turns: round r calls each once, forwards
    on even rounds and backwards on odd ones, so that load drifting during the run hits all of
    them alike. Each is first called `warmup` times untimed (a new shape pays one-off costs).
    Before each round, the CPU thread count is chosen again when set_cpu_threads() chose it
    (follow_load): every function of a round runs on the same threads.
    `timer(fn)` returns the seconds of one call (default: timed_call); `on_call(label)` runs
    after every call; with a `label`, a progress bar shows the calls done and left."""
    for name, value, least in (("rounds", rounds, 1), ("warmup", warmup, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ValueError(f"interleave: {name} must be a whole number of at least {least}, not {value!r}")
    if not fns:
        raise ValueError("fns must name at least one function to time")
    timer = timer or timed_call
    bar = None
    if label is not None:
        from course.progress import Progress
        bar = Progress(len(fns) * (warmup + rounds), label, unit="calls")

    def done(name: str) -> None:
        if on_call:
            on_call(name)
        if bar:
            bar.advance()

    results = {name: Sampled(name) for name in fns}
    try:
        follow_load()
        for name, fn in fns.items():
            for _ in range(warmup):
                fn()
                done(name)
        order = list(fns)
        for r in range(rounds):
            follow_load()  # a neighbour that started or stopped since the last round changes the threads
            for name in (order if r % 2 == 0 else order[::-1]):
                results[name].samples.append(float(timer(fns[name])))
                done(name)
    finally:
        if bar:
            bar.close()
    return results


def in_turns(points: list, run: Callable[[object], object], rounds: int = 5, warmup: int = 1,
             label: str = "", unit: str = "runs") -> dict[object, list]:
    """{point: [run(point) of each round]}: every point run `warmup` times first (a new shape
    pays one-off costs), then `rounds` rounds in turns, forwards then backwards, so that a load
    that drifts during the sweep hits every point alike. A progress bar advances after each run."""
    from course.progress import Progress

    points = list(points)
    bar = Progress(len(points) * (warmup + rounds), label, unit=unit)
    fns = {i: (lambda p=p: out[p].append(run(p))) for i, p in enumerate(points)}
    out: dict = {p: [] for p in points}
    try:
        interleave(fns, rounds=rounds, warmup=warmup, timer=lambda fn: (fn(), 0.0)[1],
                   on_call=lambda _label: bar.advance())
    finally:
        bar.close()
    return {p: runs[warmup:] for p, runs in out.items()}


def sampled(runs: dict[object, list], key: str | None = None) -> list[Sampled]:
    """One Sampled per point of in_turns' result: run[key] of each run (or each run itself)."""
    return [Sampled(str(p), [float(r[key] if key is not None else r) for r in rs]) for p, rs in runs.items()]


def error_bars(stats: list[Sampled], scale: float = 1.0) -> tuple[list[float], list[list[float]]]:
    """(medians, [below, above]) for matplotlib's errorbar: the min-max band of each point."""
    med = [scale * s.median for s in stats]
    return med, [[scale * (s.median - s.low) for s in stats], [scale * (s.high - s.median) for s in stats]]


def too_noisy(stats: list[Sampled], limit: float = 0.3) -> list[int]:
    """Indices of the points whose runs disagree by more than `limit` of their median."""
    return [i for i, s in enumerate(stats) if s.rel_spread > limit]


def overlap(a: Sampled, b: Sampled) -> bool:
    """True when the min-max bands of two measurements overlap: this run cannot order them."""
    return a.low <= b.high and b.low <= a.high


def line_fit(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """(slope, intercept) of the least-squares line through the points (statistics.linear_regression)."""
    try:
        fit = statistics.linear_regression(xs, ys)
    except statistics.StatisticsError as err:  # too few points, unequal lengths, or every x the same
        if len(xs) != len(ys) or len(xs) < 2:
            raise ValueError(f"a line needs two or more (x, y) points, got {len(xs)} x and {len(ys)} y") from err
        raise ValueError("a line needs at least two different x values") from err
    return fit.slope, fit.intercept


def batches_past(t_star: float, factor: int = 4) -> list[int]:
    """Batch sizes 1, factor, factor^2, ... up to the first at least twice `t_star` (the ridge in
    tokens, lesson 2's formula): a batch sweep that goes past the point where the weight matmuls
    turn compute-bound, far enough to show the throughput level off."""
    if not (isinstance(t_star, (int, float)) and math.isfinite(t_star) and t_star > 0):
        raise ValueError(f"t_star must be a positive number of tokens, got {t_star!r}")
    if isinstance(factor, bool) or not isinstance(factor, int) or factor < 2:
        raise ValueError(f"factor must be a whole number of at least 2, got {factor!r}")
    batches = [1]
    while batches[-1] < 2 * t_star:
        batches.append(batches[-1] * factor)
    return batches
