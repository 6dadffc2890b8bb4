"""The device lesson 3 runs on, and the dtype it computes in.

The GPU when there is one (CUDA or ROCm), else the CPU. bf16 on a GPU that computes in it
natively, fp16 on an older one, fp32 on a CPU; `dtype_name` gives the key of the dtype's peak in
course.hardware. `synchronize` waits for a GPU's queued work, so that a clock read after it
measures the work, not its launch.

How lesson 3 measures is in modules of its own: course.threads (PyTorch's CPU threads under a
neighbour's load), course.timing (timing in turns, and the statistics of the runs), course.probes
(reference rates, and holding a measurement against them), course.detect (which hardware this is,
and its figures), course.graphs (on a GPU, each step replayed as one CUDA graph) and
course.readings (the lines lesson 3 prints about its runs).
"""

from __future__ import annotations

import torch


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
