"""Which hardware this notebook runs on, and what it can do.

On an NVIDIA GPU the figures come from the catalog in course.hardware, looked up by the device's
name; a GPU the catalog does not know is said so, then measured. On a CPU there is no spec sheet
to trust (the cores, the memory channels and the neighbours on a shared machine all matter), so
the figures are measured: copy bandwidth and matmul FLOP/s, in a few seconds, cached in
.course_cache/ at the repository root (or ~/.cache/prefill-decode-course). Measured figures are
labelled as such (Accelerator.measured is True).

The measurements use torch.utils.benchmark, which warms up and synchronises for us.
"""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path

import torch
import torch.utils.benchmark as benchmark

from course.hardware import Accelerator, get_accelerator

GIB = 2**30
CACHE_VERSION = 1


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


def model_dtype(device: torch.device | str) -> torch.dtype:
    """bf16 on a GPU that supports it (the dtype models are served in), fp32 elsewhere."""
    device = torch.device(device)
    if device.type == "cuda" and torch.cuda.is_bf16_supported():
        return torch.bfloat16
    if device.type == "cuda":
        return torch.float16
    return torch.float32


def dtype_name(dtype: torch.dtype) -> str:
    """The key of Accelerator.peak_flops_per_s for a torch dtype ("bf16", "fp32", ...)."""
    names = {torch.bfloat16: "bf16", torch.float16: "bf16", torch.float32: "fp32"}
    if dtype not in names:
        raise ValueError(f"no peak FLOP/s key for dtype {dtype}")
    return names[dtype]


def cpu_threads() -> int:
    """Cores this process may run on (what a container or taskset allows, not the host's total)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def set_cpu_threads(n: int | None = None) -> int:
    """Let PyTorch's CPU kernels use `n` threads (default: every core this process may use).

    One thread per core: more threads than cores only make them take turns."""
    n = cpu_threads() if n is None else n
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive number of threads, got {n!r}")
    torch.set_num_threads(n)
    return n


# --- measuring -------------------------------------------------------------------------------

def _median_seconds(stmt: str, env: dict, min_run_time: float) -> float:
    timer = benchmark.Timer(stmt=stmt, globals=env, num_threads=torch.get_num_threads())
    return timer.blocked_autorange(min_run_time=min_run_time).median


def measure_copy_bandwidth(device: torch.device | str = "cpu", nbytes: int = 256 * 2**20,
                           min_run_time: float = 1.0) -> float:
    """Bytes/s of dst.copy_(src) for two `nbytes` buffers, counting the read and the write.

    Pick `nbytes` well above the last-level cache (CPU L3, GPU L2) or this measures the cache."""
    device = torch.device(device)
    n = max(1, nbytes // 4)
    src = torch.ones(n, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    seconds = _median_seconds("dst.copy_(src)", {"dst": dst, "src": src}, min_run_time)
    return 2 * src.nbytes / seconds


def measure_matmul_flops(device: torch.device | str = "cpu", n: int = 2048, dtype: torch.dtype = torch.float32,
                         min_run_time: float = 1.0) -> float:
    """FLOP/s of an n x n by n x n matmul (2 n^3 FLOPs) in `dtype`: the attainable peak."""
    device = torch.device(device)
    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    seconds = _median_seconds("torch.mm(a, b)", {"a": a, "b": b, "torch": torch}, min_run_time)
    return 2 * n**3 / seconds


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


def _measure(device: torch.device, key: str, where: Path | None, refresh: bool, verbose: bool,
             copy_bytes: int, matmul_n: int, dtype: torch.dtype, min_run_time: float) -> dict:
    path = None if where is None else where / f"hardware-{key}.json"
    data = None if (refresh or path is None) else _load(path)
    if data is not None:
        if verbose:
            print(f"measured figures from {path} (delete it, or pass refresh=True, to measure again)")
        return data
    if verbose:
        print(f"measuring copy bandwidth and {dtype_name(dtype)} matmul FLOP/s on {device} (a few seconds) ...",
              flush=True)
    data = {"version": CACHE_VERSION, "key": key, "copy_bytes": copy_bytes, "matmul_n": matmul_n,
            "bandwidth_bytes_per_s": measure_copy_bandwidth(device, copy_bytes, min_run_time),
            "matmul_flops_per_s": measure_matmul_flops(device, matmul_n, dtype, min_run_time)}
    if path is not None:
        _save(path, data)
    return data


def _safe(text: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in text).strip("-").lower()


def detect_hardware(device: torch.device | str | None = None, refresh: bool = False, verbose: bool = True,
                    cache_dir: Path | str | None = None, use_cache: bool = True, copy_bytes: int | None = None,
                    matmul_n: int | None = None, min_run_time: float = 1.0) -> Accelerator:
    """The Accelerator this notebook runs on.

    GPU: the catalog entry for its name; an unknown GPU is said so and measured.
    CPU: measured copy bandwidth and fp32 matmul FLOP/s, kept in `cache_dir` (default:
    default_cache_dir()) unless use_cache is False; refresh=True measures again.
    """
    device = torch.device(device) if device is not None else pick_device()
    where = None if not use_cache else Path(cache_dir) if cache_dir is not None else default_cache_dir()
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        for candidate in (name, name.removeprefix("NVIDIA ").strip()):
            try:
                acc = get_accelerator(candidate)
            except ValueError:
                continue
            if verbose:
                print(f"GPU {name!r}: catalog entry {acc.name!r} ({acc.source})")
            return acc
        if verbose:
            print(f"GPU {name!r} is not in the course catalog (course.hardware); measuring it instead.")
        dtype = model_dtype(device)
        key = _safe(f"{name}-torch{torch.__version__}")
        data = _measure(device, key, where, refresh, verbose, copy_bytes or 2 * GIB, matmul_n or 8192,
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
    data = _measure(device, key, where, refresh, verbose, copy_bytes or 256 * 2**20, matmul_n or 2048,
                    torch.float32, min_run_time)
    return Accelerator(
        f"CPU: {cpu_name()}, {threads} threads (measured)", {"fp32": data["matmul_flops_per_s"]},
        data["bandwidth_bytes_per_s"], _total_memory_bytes(), source=_measured_source(data, torch.float32),
        measured=True, l2_cache_bytes=cpu_last_level_cache_bytes())


def _measured_source(data: dict, dtype: torch.dtype) -> str:
    return (f"measured on this machine by course.device: copy of {data['copy_bytes'] / 2**20:.0f} MiB "
            f"(read + write counted), {data['matmul_n']}^3 {dtype_name(dtype)} matmul; medians of "
            f"torch.utils.benchmark runs")


def describe(acc: Accelerator, dtype: torch.dtype) -> str:
    """One line: name, peak FLOP/s for `dtype`, bandwidth, ridge point, where the figures come from."""
    peak = acc.peak(dtype_name(dtype))
    kind = "measured" if acc.measured else "spec sheet"
    return (f"{acc.name}: {peak / 1e12:.3g} TFLOP/s {dtype_name(dtype)}, {acc.bandwidth_bytes_per_s / 1e9:.3g} GB/s, "
            f"ridge {peak / acc.bandwidth_bytes_per_s:.0f} FLOP/byte ({kind}: {acc.source})")
