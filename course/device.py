"""Which hardware this notebook runs on, and what it can do.

On an NVIDIA GPU the figures come from the catalog in course.hardware, looked up by the device's
name (a GH200 matches the H200 entry); a GPU the catalog does not know is said so, then measured.
On a CPU there is no spec sheet to trust (the cores, the memory channels and the neighbours on a
shared machine all matter), so the figures are measured, afresh on every call: read bandwidth
(summing a buffer larger than the last-level cache: decode *reads* its weights) and matmul
FLOP/s. A record of each measurement is written to .course_cache/ (or
~/.cache/prefill-decode-course) and read back only when asked (reuse=True), with its age and load.

A reference rate (a rate measured in the same cell as what it is compared with) measured at one
time does not hold at another on a shared machine. `interleave` times several functions in turns,
so that a drifting load hits all of them alike, and `held_against` holds a measurement against
probes taken in the same turns, never showing a utilisation above 100 % (the reference rate is
measured again, and if the excess persists the run is reported as disturbed).

How lesson 3 measures, in more detail than the lesson's one paragraph:

- Threads. `set_cpu_threads` runs one PyTorch thread per core that is free, and `interleave`
  chooses again before every round (`follow_load`): a thread that shares its core with another
  program holds up the others at every operation, so a count chosen once is stale as soon as a
  neighbour starts. Importing `course` before torch also makes the waiting workers sleep rather
  than spin (OMP_WAIT_POLICY=PASSIVE, course/__init__.py).
- Reference rates. On a CPU the read bandwidth is the bytes of a plain sum over a buffer, a pure read like
  decode's reads of its weights, not a copy; the FLOP/s is a square matmul's. The setup cell takes
  the median of torch.utils.benchmark runs (256 MiB; 2048 x 2048 fp32); the lesson's later cells
  time `read_probe` (as many bytes as the measured step reads) and `matmul_probe` (2048, or 1024
  under nbgrader) in turns with what is compared with them, and take each probe's best run. `matvec_probe` times bare
  matrix-vector products over a model's own weights: the work a decode step cannot avoid.
- Turns. `interleave` and `in_turns` warm every function or point up once, then run them in
  rounds, forwards then backwards, with the probes among them, so a program that wakes up
  halfway slows the measurement and its reference rates alike. A `Sampled` keeps every run: the median is
  shown, its bar the fastest to the slowest run; `overlap` and `too_noisy` (runs more than 30 %
  of their median apart) tell the lesson not to conclude.
- Readings. `change`, `warmup_reading`, `growth_reading` (every point against a model's
  prediction) and `disagreement` turn runs into the lines lesson 3 prints, with that noise rule
  (NOISE_LIMIT): scattered or overlapping runs read as "inconclusive", never as a claim.
  `intercept_reading` states a line's fit and sets it beside given times, drawing no conclusion.
  `fixed_part_reading` fits a step's fixed part (never below 0); `knee_reading` reads where the
  line through a sweep's two longest passes reaches its shortest pass's time, and says "no knee"
  only when the longest pass is not above that time.
- Re-measuring. `held_against` never shows a utilisation above 100 %: the reference rate is
  measured again, and if the measurement still beats it, the run is reported as disturbed.
- On a GPU the peaks are the datasheet's (course.hardware); its read probe is kept small so that
  it fits beside the model.
"""

from __future__ import annotations

import json
import math
import os
import platform
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch
import torch.utils.benchmark as benchmark

from course.hardware import Accelerator, get_accelerator

GIB = 2**30
CACHE_VERSION = 2


# --- the device and what runs on it ----------------------------------------------------------

def pick_device() -> torch.device:
    """The GPU when there is one (CUDA or ROCm), else the CPU."""
    return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")


def synchronize(device: torch.device | str | None = None) -> None:
    """Wait until every kernel launched on `device` (default: the current GPU, if any) has finished.

    GPU launches are asynchronous: a host clock read straight after a call measures the launch,
    not the work. On a CPU the work is done when the call returns, so there is nothing to wait for.
    """
    device = torch.device(device) if device is not None else pick_device()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def native_bf16(device: torch.device | str = "cuda") -> bool:
    """True when the GPU computes in bf16 in hardware: NVIDIA compute capability 8.0 or more
    (A100, H100, H200, L4, RTX 30xx on). torch.cuda.is_bf16_supported() is also true on a T4 or
    V100, which only emulate bf16, far below their fp16 rate; AMD GPUs report their own version."""
    device = torch.device(device)
    if device.type != "cuda":
        return False
    if getattr(torch.version, "hip", None):
        return bool(torch.cuda.is_bf16_supported())
    major, _minor = torch.cuda.get_device_capability(device)
    return major >= 8


def model_dtype(device: torch.device | str) -> torch.dtype:
    """bf16 on a GPU that computes in it natively (the dtype models are served in), fp16 on an
    older GPU (tensor cores since compute capability 7.0), fp32 on a CPU."""
    device = torch.device(device)
    if device.type == "cuda" and native_bf16(device):
        return torch.bfloat16
    if device.type == "cuda":
        return torch.float16
    return torch.float32


def dtype_name(dtype: torch.dtype) -> str:
    """The key of Accelerator.peak_flops_per_s for a torch dtype ("bf16", "fp32", ...)."""
    names = {torch.bfloat16: "bf16", torch.float16: "bf16", torch.float32: "fp32"}  # fp16 peaks = bf16 peaks
    if dtype not in names:
        raise ValueError(f"no peak FLOP/s key for dtype {dtype}")
    return names[dtype]


def cpu_threads() -> int:
    """Cores this process may run on (what a container or taskset allows, not the host's total)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def _own_running_threads() -> int:
    """Threads of this process that are running or ready to run now (state R): PyTorch's own
    workers, which /proc/loadavg counts among the machine's running tasks."""
    count = 0
    for stat in Path("/proc/self/task").glob("*/stat"):
        try:
            count += stat.read_text().rsplit(")", 1)[1].split()[0] == "R"
        except (OSError, IndexError):
            continue
    return max(1, count)  # at least the thread reading this


def busy_cores(samples: int = 5, interval_s: float = 0.01) -> float:
    """Cores other processes are running on now: the median of a few reads of the runnable-task
    count in /proc/loadavg, less this process's own running threads; falls back to the 1-minute
    load average."""
    counts = []
    for i in range(samples):
        try:
            running = Path("/proc/loadavg").read_text().split()[3].split("/")[0]
            counts.append(max(0, int(running) - _own_running_threads()))
        except (OSError, IndexError, ValueError):
            break
        if i + 1 < samples:
            time.sleep(interval_s)
    if counts:
        return float(statistics.median(counts))
    try:
        return float(os.getloadavg()[0])
    except (OSError, AttributeError):
        return 0.0


def free_cpu_cores(samples: int = 5, interval_s: float = 0.01) -> int:
    """Cores this process may use that nobody else is running on now (at least 1).

    PyTorch's CPU kernels split each operation among their threads and wait for the slowest: when
    another process holds one of the cores, every operation waits for the thread that shares it,
    and a small one (a decode step's attention) takes milliseconds instead of microseconds. Run no
    more threads than there are free cores.

    /proc/loadavg counts the whole machine's tasks: where this process may use only some of its
    cores (a container, taskset), their share of the busy ones is counted."""
    ours, machine = cpu_threads(), max(os.cpu_count() or 1, cpu_threads())
    busy_here = busy_cores(samples, interval_s) * ours / machine
    return max(1, min(ours, ours - math.floor(busy_here)))


# False: threads fixed by the caller (or never set); True: chosen again from the free cores before
# every round of interleave / in_turns (set_cpu_threads() without a number).
_threads_follow_load = False


def set_cpu_threads(n: int | None = None) -> int:
    """Let PyTorch's CPU kernels use `n` threads; by default the cores free now (free_cpu_cores()),
    chosen again before every round of `interleave` and `in_turns`, so that a program that starts
    or stops during a measurement changes the thread count of the next round (follow_load()).

    One thread per free core: more threads than that only make them take turns. A number fixes
    the count until the next call."""
    global _threads_follow_load
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
        raise ValueError(f"n must be a positive number of threads, got {n!r}")
    _threads_follow_load = n is None
    n = free_cpu_cores() if n is None else n
    torch.set_num_threads(n)
    return n


def follow_load() -> int:
    """When set_cpu_threads() chose the thread count from the free cores, choose it again now
    (three quick reads of the load: about 10 ms); return the threads PyTorch runs on."""
    if _threads_follow_load:
        n = free_cpu_cores(samples=3, interval_s=0.005)
        if n != torch.get_num_threads():
            torch.set_num_threads(n)
    return torch.get_num_threads()


# --- measuring -------------------------------------------------------------------------------

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


# --- measuring in turns, and holding a measurement against its bound ---------------------------

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
    """Seconds of one call of fn, the device synchronised before both clock reads."""
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
    fraction: float | None  # achieved / bound; None when it stayed above 1 (a disturbed run)
    note: str  # one line for the reader

    def percent(self) -> str:
        return "not shown" if self.fraction is None else f"{self.fraction:.0%}"


def held_against(achieved: float, bound: float, remeasure: Callable[[], float] | None = None,
                 tries: int = 2, what: str = "the reference rate") -> Held:
    """Hold a measured rate against a measured bound. A rate above its bound is impossible: the
    bound is measured again (remeasure() returns a fresh rate; the best is kept) up to `tries`
    times, and if the rate still exceeds it, no utilisation is given and the note says that the
    machine was disturbed while measuring."""
    for name, value in (("achieved", achieved), ("bound", bound)):
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be a finite rate > 0, got {value!r}")
    remeasured = 0
    while achieved > bound and remeasure is not None and remeasured < tries:
        bound = max(bound, float(remeasure()))
        remeasured += 1
    if achieved > bound:
        return Held(achieved, bound, None,
                    f"measured {achieved / bound:.2f}x {what}, which is impossible: the machine was "
                    f"disturbed while measuring (another process took cores or memory bandwidth). "
                    f"Re-run this cell when it is quieter")
    note = f"{achieved / bound:.0%} of {what}"
    if remeasured:
        note += f" ({what} measured again {remeasured} time(s): the first measurement was low)"
    return Held(achieved, bound, achieved / bound, note)


# --- detection -------------------------------------------------------------------------------

def default_cache_dir() -> Path:
    """Where measured figures are kept: $COURSE_CACHE_DIR, else .course_cache/ at the repository
    root when the course package sits in one, else ~/.cache/prefill-decode-course."""
    if os.environ.get("COURSE_CACHE_DIR"):
        return Path(os.environ["COURSE_CACHE_DIR"])
    repo = Path(__file__).resolve().parents[1]
    if (repo / "nbgrader_config.py").exists() and os.access(repo, os.W_OK):
        return repo / ".course_cache"
    return Path.home() / ".cache" / "prefill-decode-course"


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def cpu_last_level_cache_bytes() -> float | None:
    """Size of the largest CPU cache Linux reports (usually L3), or None."""
    sizes = []
    for path in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        text = path.read_text().strip().upper()
        scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:], 1)
        try:
            sizes.append(int(text.rstrip("KMG")) * scale)
        except ValueError:
            continue
    return float(max(sizes)) if sizes else None


def _total_memory_bytes() -> float:
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 8.0 * GIB


def _load(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("version") == CACHE_VERSION else None


def _save(path: Path, data: dict) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=1))
    except OSError:
        pass  # a read-only checkout measures again next time; nothing else changes


def _load_average() -> float | None:
    try:
        return round(float(os.getloadavg()[0]), 2)
    except (OSError, AttributeError):
        return None


def _measure(device: torch.device, key: str, where: Path | None, reuse: bool, verbose: bool,
             read_bytes: int, matmul_n: int, dtype: torch.dtype, min_run_time: float) -> dict:
    path = None if where is None else where / f"hardware-{key}.json"
    data = _load(path) if (reuse and path is not None) else None
    if data is not None:
        if verbose:
            age_min = (time.time() - data.get("measured_at", 0)) / 60
            print(f"reusing figures measured {age_min:,.0f} min ago at load average {data.get('load_average')} "
                  f"({path}); every figure held against them is checked, and they are measured again when "
                  f"one comes out impossible")
        return data
    if verbose:
        print(f"measuring read bandwidth and {dtype_name(dtype)} matmul FLOP/s on {device} (about a second) ...",
              flush=True)
    data = {"version": CACHE_VERSION, "key": key, "read_bytes": read_bytes, "matmul_n": matmul_n,
            "measured_at": time.time(), "load_average": _load_average(),
            "bandwidth_bytes_per_s": measure_read_bandwidth(device, read_bytes, min_run_time),
            "matmul_flops_per_s": measure_matmul_flops(device, matmul_n, dtype, min_run_time)}
    if path is not None:
        _save(path, data)
    return data


def _safe(text: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in text).strip("-").lower()


def catalog_accelerator(gpu_name: str) -> Accelerator | None:
    """The course catalog's entry for a GPU as the driver names it ("NVIDIA H100 80GB HBM3"), or
    None. A GH200 (Grace Hopper) carries an H200-class GPU and matches the H200 entry by substring
    ("NVIDIA GH200 480GB")."""
    candidates = [gpu_name, gpu_name.removeprefix("NVIDIA ").strip()]
    upper = gpu_name.upper()
    if "GH200" in upper:
        candidates.append("H200")
    for candidate in candidates:
        try:
            return get_accelerator(candidate)
        except ValueError:
            continue
    return None


def detect_hardware(device: torch.device | str | None = None, reuse: bool = False, verbose: bool = True,
                    cache_dir: Path | str | None = None, use_cache: bool = True, read_bytes: int | None = None,
                    matmul_n: int | None = None, min_run_time: float = 0.5, refresh: bool | None = None) -> Accelerator:
    """The Accelerator this notebook runs on.

    GPU: the catalog entry for its name; an unknown GPU is said so and measured.
    CPU: read bandwidth and fp32 matmul FLOP/s, measured now. A record is kept in `cache_dir`
    (default: default_cache_dir(); none when use_cache is False); reuse=True reads it back instead
    of measuring, and says how old it is. (refresh=True is the old spelling of reuse=False.)
    """
    if refresh is not None:
        reuse = not refresh
    device = torch.device(device) if device is not None else pick_device()
    where = None if not use_cache else Path(cache_dir) if cache_dir is not None else default_cache_dir()
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        acc = catalog_accelerator(name)
        if acc is not None:
            if verbose:
                print(f"GPU {name!r}: catalog entry {acc.name!r} ({acc.source})")
            return acc
        if verbose:
            print(f"GPU {name!r} is not in the course catalog (course.hardware); measuring it instead.")
        dtype = model_dtype(device)
        key = _safe(f"{name}-torch{torch.__version__}")
        data = _measure(device, key, where, reuse, verbose, read_bytes or 2 * GIB, matmul_n or 8192,
                        dtype, min_run_time)
        props = torch.cuda.get_device_properties(device)
        return Accelerator(
            f"{name} (measured)", {dtype_name(dtype): data["matmul_flops_per_s"]}, data["bandwidth_bytes_per_s"],
            float(props.total_memory), source=_measured_source(data, dtype), measured=True,
            l2_cache_bytes=float(getattr(props, "L2_cache_size", 0)) or None)
    if device.type != "cpu":
        raise ValueError(f"no detection for device type {device.type!r}; use 'cuda' or 'cpu'")
    threads = torch.get_num_threads()
    key = _safe(f"{cpu_name()}-{threads}threads-torch{torch.__version__}")
    data = _measure(device, key, where, reuse, verbose, read_bytes or 256 * 2**20, matmul_n or 2048,
                    torch.float32, min_run_time)
    return Accelerator(
        f"CPU: {cpu_name()}, {threads} threads (measured)", {"fp32": data["matmul_flops_per_s"]},
        data["bandwidth_bytes_per_s"], _total_memory_bytes(), source=_measured_source(data, torch.float32),
        measured=True, l2_cache_bytes=cpu_last_level_cache_bytes())


def _measured_source(data: dict, dtype: torch.dtype) -> str:
    when = time.strftime("%H:%M", time.localtime(data.get("measured_at", 0)))
    return (f"measured on this machine at {when}, load average {data.get('load_average')}: sum of "
            f"{data['read_bytes'] / 2**20:.0f} MiB (bytes read), {data['matmul_n']}^3 {dtype_name(dtype)} "
            f"matmul; medians of torch.utils.benchmark runs")


def describe(acc: Accelerator, dtype: torch.dtype) -> str:
    """One line: name, peak FLOP/s for `dtype`, bandwidth, ridge point, where the figures come from."""
    peak = acc.peak(dtype_name(dtype))
    kind = "measured" if acc.measured else "spec sheet"
    return (f"{acc.name}: {peak / 1e12:.3g} TFLOP/s {dtype_name(dtype)}, {acc.bandwidth_bytes_per_s / 1e9:.3g} GB/s, "
            f"ridge {peak / acc.bandwidth_bytes_per_s:.0f} FLOP/byte ({kind}: {acc.source})")


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
            f"machine was busy. Trust only differences larger than the bars, or re-run this cell when it is quieter.")


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
                f"({span}); the machine was busy. Re-run this cell when it is quieter.")
    margin = max(warm.high - warm.low, limit * warm.median)
    if first > warm.high + margin and (not later or first > max(later)):
        return (f"-> the first cold run took {first / warm.median:.1f}x the warmed median ({span}), more than "
                f"their spread above the slowest: a one-off cost that the warm-up keeps out of the timings")
    if first <= warm.high + margin:
        slower = [t for t in later if t > warm.high + margin]
        tail = "" if not slower else f"; {len(slower)} later cold run(s) were slower, which warm-up does not explain"
        return (f"-> no one-off cost beyond the noise showed here: the first cold run ({first * 1e3:,.1f} ms) was "
                f"within the {span}, or above them by less than their spread{tail}. A CPU may have little to warm "
                f"up; on a GPU the first calls also pay for the CUDA context and compilation")
    return (f"-> inconclusive: the first cold run was above the {span}, but so was a later one: "
            f"the load changed while measuring")


def line_fit(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """(slope, intercept) of the least-squares line through the points."""
    if len(xs) != len(ys) or len(xs) < 2:
        raise ValueError(f"a line needs two or more (x, y) points, got {len(xs)} x and {len(ys)} y")
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        raise ValueError("a line needs at least two different x values")
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    return slope, my - slope * mx


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
    line = (f"a line through the medians rises {slope * 1e3:,.3f} ms per {unit} and meets 0 {unit}s at "
            f"{intercept * 1e3:,.1f} ms ({lowest * 1e3:,.1f} to {highest * 1e3:,.1f} within the runs' spreads)")
    beside = "; ".join(f"{what}: {seconds * 1e3:,.1f} ms" for what, seconds in reads_s.items())
    return f"{line}\n   beside it, {beside}" if beside else line


def growth_reading(what: str, points: list, measured: list[Sampled], expected_s: list[float],
                   model: str = "the estimate", limit: float = NOISE_LIMIT) -> str:
    """Did `what` grow from the first point to each of the others as `model` (expected_s, seconds
    at each point) predicts? One line per point; 'as ... predicts' for the whole sweep only when
    every point agrees within `limit`; a point whose runs are noisy, or overlap the first's when
    the model expects a change, is 'inconclusive'."""
    _check_limit(limit)
    if not (len(points) == len(measured) == len(expected_s)) or len(points) < 2:
        raise ValueError("points, measured and expected_s need one entry per point, two or more points")
    if not all(isinstance(e, (int, float)) and math.isfinite(e) and e > 0 for e in expected_s):
        raise ValueError(f"expected_s must be positive times, got {expected_s!r}")
    first, lines, agree = measured[0], [], True
    for point, s, e in zip(points[1:], measured[1:], expected_s[1:]):
        ratio, wanted = s.median / first.median, e / expected_s[0]
        moved = change(first, s, limit)
        said = f"{point}: {ratio:.2f}x the first point (the {model.removeprefix('the ')}: {wanted:.2f}x)"
        if too_noisy([first, s], limit) or moved.startswith("inconclusive") or (overlap(first, s) and abs(wanted - 1) > limit):
            lines.append(f"{said}, inconclusive: the runs disagree too much")
            agree = False
        elif abs(ratio / wanted - 1) <= limit:
            lines.append(f"{said}, as {model} predicts within {limit:.0%}")
        else:
            lines.append(f"{said}, {'more' if ratio > wanted else 'less'} than {model} predicts")
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
    line = (f"fixed part: {fixed_s * 1e3:.2f} ms per step from the medians ({fixed_s / full.median:.0%} of the full "
            f"step); anywhere from {max(low, 0) * 1e3:.2f} to {high * 1e3:.2f} ms within the runs' spreads (a fixed "
            f"part is never below 0)")
    if too_noisy([full, thin], limit):
        return (f"{line}\n-> inconclusive: the runs of a step disagree by more than {limit:.0%} of their median; the "
                f"machine was busy. Re-run this cell when it is quieter.")
    if thin.low > full.high:
        return (f"{line}\n-> inconclusive: the narrow step was the slower, which no fixed part explains; the machine "
                f"was disturbed. Re-run this cell when it is quieter.")
    if overlap(full, thin):
        return (f"{line}\n-> {bytes_ratio:.2f}x the bytes took as long, within the spreads: the time did not follow "
                f"the bytes; this step is overhead-bound")
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
        return knee, (f"measured: {ratio}; the line through the two longest passes reaches the {t0}-token pass's time "
                      f"at {knee:,.1f} tokens, at or below the smallest T: the time already rises from T = {t0}, and "
                      f"the knee of this run lies below it")
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
