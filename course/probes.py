"""Reference rates: what the hardware can do, measured, and a measurement held against them.

- Reference rates. On a CPU the read bandwidth is the bytes of a plain sum over a buffer, a pure read like
  decode's reads of its weights, not a copy; the FLOP/s is a square matmul's. The setup cell takes
  the median of torch.utils.benchmark runs (256 MiB; 2048 x 2048 fp32); the lesson's later cells
  time `read_probe` (as many bytes as the measured step reads) and `matmul_probe` (2048, or 1024
  under nbgrader) in turns with what is compared with them, and take each probe's best run. `matvec_probe` times bare
  matrix-vector products over a model's own weights: the work a decode step cannot avoid.
- Re-measuring. `held_against` never shows a utilisation above 100 %: the reference rate is
  measured again, and if the measurement still beats it, the note says that the reference rate was
  measured under other load.
- On a GPU the peaks are the datasheet's (course.hardware); its read probe is kept small so that
  it fits beside the model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch
import torch.utils.benchmark as benchmark


# --- measuring a rate once (the figures course.detect keeps) ------------------------------------

def _median_seconds(stmt: str, env: dict, min_run_time: float) -> float:
    timer = benchmark.Timer(stmt=stmt, globals=env, num_threads=torch.get_num_threads())
    return timer.blocked_autorange(min_run_time=min_run_time).median


def measure_read_bandwidth(device: torch.device | str = "cpu", nbytes: int = 256 * 2**20,
                           min_run_time: float = 1.0) -> float:
    """Bytes/s of summing an `nbytes` buffer: a pure read, the access pattern of decode's weights.

    (A copy also writes, and on a CPU a fresh destination faults in every page it writes: a copy
    measures something else.) Pick `nbytes` well above the last-level cache."""
    device = torch.device(device)
    buf = torch.ones(max(1, nbytes // 4), dtype=torch.float32, device=device)
    return buf.nbytes / _median_seconds("buf.sum()", {"buf": buf}, min_run_time)


def measure_matmul_flops(device: torch.device | str = "cpu", n: int = 2048, dtype: torch.dtype = torch.float32,
                         min_run_time: float = 1.0) -> float:
    """FLOP/s of an n x n by n x n matmul (2 n^3 FLOPs) in `dtype`: the attainable peak."""
    device = torch.device(device)
    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    seconds = _median_seconds("torch.mm(a, b)", {"a": a, "b": b, "torch": torch}, min_run_time)
    return 2 * n**3 / seconds


PEAK_SIZES = (2048, 4096, 8192)  # square matmuls an unknown GPU's peak is measured on


def _best_seconds(stmt: str, env: dict, min_run_time: float) -> float:
    """The fastest of torch.utils.benchmark's repeated measurements (each a block of runs, the
    device synchronised around it): the attainable time, as a bench takes it."""
    timer = benchmark.Timer(stmt=stmt, globals=env, num_threads=torch.get_num_threads())
    return min(timer.blocked_autorange(min_run_time=min_run_time).times)


def measure_peak_flops(device: torch.device | str, dtype: torch.dtype = torch.bfloat16,
                       sizes: tuple[int, ...] = PEAK_SIZES, min_run_time: float = 0.2,
                       seconds: Callable[[str, dict, float], float] | None = None) -> float:
    """A GPU's attainable FLOP/s in `dtype` as a benchmark measures it: square matmuls of several
    sizes, each repeated in blocks, the best block of the best size (a single size between two
    synchronisations undershoots: a small one leaves the GPU partly idle, launches and clocks
    ramping up weigh on a short run). `seconds` stands in for the timer in the tests."""
    seconds = seconds or _best_seconds
    device = torch.device(device)
    best = 0.0
    for n in sizes:
        a = torch.randn(n, n, device=device).to(dtype)
        b = torch.randn(n, n, device=device).to(dtype)
        best = max(best, 2 * n**3 / seconds("torch.mm(a, b)", {"a": a, "b": b, "torch": torch}, min_run_time))
    return best


# --- probes timed in turns, and holding a measurement against its bound -----------------------

def read_probe(nbytes: int, device: torch.device | str = "cpu") -> Callable[[], object]:
    """A function that reads `nbytes` (a sum over a buffer of that size, made once)."""
    buf = torch.ones(max(1, int(nbytes) // 4), dtype=torch.float32, device=torch.device(device))
    return buf.sum


def matvec_probe(model: torch.nn.Module, batch: int = 1) -> tuple[Callable[[], object], int]:
    """Bare matrix-vector products over the very weights a decode step reads, and their bytes.

    One `batch` x in_features input per weight matrix (every 2-D parameter but the token
    embedding table, which decode only gathers a row of): the same bytes as decode's weights,
    with none of its other work (norms, rotary positions, attention, launches between them)."""
    weights = [p for name, p in model.named_parameters() if p.ndim == 2 and "embeddings" not in name]
    if not weights:
        raise ValueError("the model has no weight matrices to multiply")
    inputs = {w.shape[1]: torch.randn(batch, w.shape[1], device=w.device, dtype=w.dtype) for w in weights}

    @torch.inference_mode()
    def run() -> None:
        for w in weights:
            torch.nn.functional.linear(inputs[w.shape[1]], w)

    return run, sum(w.nbytes for w in weights)


def matmul_probe(n: int = 2048, dtype: torch.dtype = torch.float32,
                 device: torch.device | str = "cpu") -> tuple[Callable[[], object], int]:
    """An n x n by n x n matmul (the attainable FLOP/s) and its FLOPs, 2 n^3."""
    a = torch.randn(n, n, device=torch.device(device)).to(dtype)
    b = torch.randn(n, n, device=torch.device(device)).to(dtype)
    return (lambda: torch.mm(a, b)), 2 * n**3


@dataclass
class Held:
    """A measured rate held against its bound."""

    achieved: float  # units per second
    bound: float  # units per second, the best of the probes
    fraction: float | None  # achieved / bound; None when it stayed above 1 (the bound was measured under other load)
    note: str  # one line for the reader

    def percent(self) -> str:
        return "not shown" if self.fraction is None else f"{self.fraction:.0%}"


def held_against(achieved: float, bound: float, remeasure: Callable[[], float] | None = None,
                 tries: int = 2, what: str = "the reference rate") -> Held:
    """Hold a measured rate against a measured bound. A rate above its bound is impossible: the
    bound is measured again (remeasure() returns a fresh rate; the best is kept) up to `tries`
    times, and if the rate still exceeds it, no utilisation is given and the note says that the
    bound was measured under other load than the rate."""
    for name, value in (("achieved", achieved), ("bound", bound)):
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be a finite rate > 0, got {value!r}")
    remeasured = 0
    while achieved > bound and remeasure is not None and remeasured < tries:
        bound = max(bound, float(remeasure()))
        remeasured += 1
    if achieved > bound:
        return Held(achieved, bound, None,
                    f"measured {achieved / bound:.2f}x {what}, which the same work under the same load cannot do: "
                    f"{what} was measured under other load than this figure (another process may have taken "
                    f"cores or memory bandwidth while it ran), so no share of it is shown")
    note = f"{achieved / bound:.0%} of {what}"
    if remeasured:
        note += f" ({what} measured again {remeasured} time(s): the first measurement was low)"
    return Held(achieved, bound, achieved / bound, note)
