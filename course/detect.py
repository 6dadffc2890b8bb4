"""Which hardware this notebook runs on, and what it can do.

On an NVIDIA GPU the figures come from the catalog in course.hardware, looked up by the device's
name (a GH200 has entries of its own, one per memory version); a GPU the catalog does not know is said so, then measured.
On a CPU there is no spec sheet to trust (the cores, the memory channels and the neighbours on a
shared machine all matter), so the figures are measured, afresh on every call: read bandwidth
(summing a buffer larger than the last-level cache: decode *reads* its weights) and matmul
FLOP/s (course.probes). A record of each measurement is written to .course_cache/ (or
~/.cache/prefill-decode-course) and read back only when asked (reuse=True), with its age and load.
"""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path

import torch

from course.device import dtype_name, model_dtype, pick_device
from course.formatting import format_number, page_lines
from course.hardware import Accelerator, get_accelerator
from course.probes import PEAK_SIZES, measure_matmul_flops, measure_peak_flops, measure_read_bandwidth

GIB = 2**30
CACHE_VERSION = 2


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
            print(page_lines(f"reusing figures measured {age_min:,.0f} min ago at load average "
                             f"{data.get('load_average')} ({path}); every figure held against them is checked, "
                             f"and they are measured again when one comes out impossible", indent="  "))
        return data
    if verbose:
        print(page_lines(f"measuring read bandwidth and {dtype_name(dtype)} matmul FLOP/s on {device} "
                         f"(about a second) ...", indent="  "), flush=True)
    if device.type == "cuda":  # a GPU's peak as a benchmark takes it: several sizes, the best of repeats
        flops = measure_peak_flops(device, dtype, PEAK_SIZES, min_run_time)
    else:  # a CPU's reference rate: the median of one size's runs, which later cells measure again beside their work
        flops = measure_matmul_flops(device, matmul_n, dtype, min_run_time)
    data = {"version": CACHE_VERSION, "key": key, "read_bytes": read_bytes,
            "matmul_n": matmul_n if device.type != "cuda" else list(PEAK_SIZES),
            "measured_at": time.time(), "load_average": _load_average(),
            "bandwidth_bytes_per_s": measure_read_bandwidth(device, read_bytes, min_run_time),
            "matmul_flops_per_s": flops}
    if path is not None:
        _save(path, data)
    return data


def _safe(text: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in text).strip("-").lower()


def catalog_accelerator(gpu_name: str) -> Accelerator | None:
    """The course catalog's entry for a GPU as the driver names it ("NVIDIA H100 80GB HBM3"), or
    None. A GH200 (Grace Hopper) is not an H200: its GPU comes with 96 GB of HBM3 at 4.0 TB/s
    ("NVIDIA GH200 480GB", the 480 GB being the Grace CPU's memory) or 144 GB of HBM3e at 4.9 TB/s
    ("NVIDIA GH200 144G HBM3e"), each an entry of its own."""
    candidates = [gpu_name, gpu_name.removeprefix("NVIDIA ").strip()]
    upper = gpu_name.upper()
    if "GH200" in upper:
        candidates.append("GH200 144GB HBM3e" if ("HBM3E" in upper or "144G" in upper) else "GH200 96GB HBM3")
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
                print(page_lines(f"GPU {name!r}: catalog entry {acc.name!r} ({acc.source})", indent="  "))
            return acc
        if verbose:
            print(page_lines(f"GPU {name!r} is not in the course catalog (course.hardware); measuring it instead.",
                             indent="  "))
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
        f"CPU: {cpu_name()}, {threads} thread{'' if threads == 1 else 's'} (measured)", {"fp32": data["matmul_flops_per_s"]},
        data["bandwidth_bytes_per_s"], _total_memory_bytes(), source=_measured_source(data, torch.float32),
        measured=True, l2_cache_bytes=cpu_last_level_cache_bytes())


def _measured_source(data: dict, dtype: torch.dtype) -> str:
    when = time.strftime("%H:%M", time.localtime(data.get("measured_at", 0)))
    sizes = data["matmul_n"]
    matmul = (f"the best of {', '.join(f'{n}^3' for n in sizes)} {dtype_name(dtype)} matmuls (best of repeated runs)"
              if isinstance(sizes, list) else f"{sizes}^3 {dtype_name(dtype)} matmul (median of runs)")
    return (f"measured on this machine at {when}, load average {data.get('load_average')}: sum of "
            f"{data['read_bytes'] / 2**20:.0f} MiB (bytes read, median of runs), {matmul}; torch.utils.benchmark")


def describe(acc: Accelerator, dtype: torch.dtype) -> str:
    """Name, peak FLOP/s for `dtype`, bandwidth, ridge point, where the figures come from: one sentence,
    in lines that fit the page (course.formatting.page_lines)."""
    peak = acc.peak(dtype_name(dtype))
    kind = "measured" if acc.measured else "spec sheet"
    # A measured source already opens with "measured on this machine": do not say "measured" twice.
    where = acc.source if acc.source.lower().startswith(kind) else f"{kind}: {acc.source}"
    def three(x: float) -> str:  # three significant digits, never e-notation (3350, not 3.35e+03)
        return format_number(float(f"{x:.3g}"))

    return page_lines(f"{acc.name}: {three(peak / 1e12)} TFLOP/s {dtype_name(dtype)}, "
                      f"{three(acc.bandwidth_bytes_per_s / 1e9)} GB/s, ridge {peak / acc.bandwidth_bytes_per_s:.0f} "
                      f"FLOP/byte ({where})", indent="  ")
