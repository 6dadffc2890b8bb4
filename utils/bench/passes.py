"""The passes utils.bench times, and how it times them: a decode step (eager, captured by hand as
one CUDA graph, or under torch.compile) and a prefill, each on the toy model; CUDA events on a
GPU, perf_counter with synchronisation on a CPU; the load average printed beside each run."""

from __future__ import annotations

import course  # noqa: F401 - first: it sets the OpenMP wait policy, which libgomp reads once, when torch loads it

import os
import statistics
from dataclasses import dataclass
from typing import Callable

import torch

from course.counting import count_flops
from course.device import synchronize
from course.graphs import capture
from course.timing import timed_call
from course.toy_model import ToyTransformer


def timer_for(device: torch.device, calls: int = 1) -> Callable[[Callable[[], object]], float]:
    """Seconds per call of fn, over `calls` back-to-back calls: CUDA events on a GPU (the device
    synchronised after each sample), perf_counter with synchronisation on a CPU."""
    def timed(fn: Callable[[], object]) -> float:
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(calls):
                fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1e3 / calls
        return timed_call(lambda: [fn() for _ in range(calls)], device) / calls
    return timed


@dataclass
class Timing:
    label: str
    seconds: float  # median per call
    spread: float  # max - min over the repeats, per call


def measure(fn: Callable[[], object], device: torch.device, warmup: int, repeats: int, calls: int = 1,
            label: str = "") -> Timing:
    """Median seconds per call of fn: `warmup` untimed calls, then `repeats` samples of `calls`
    back-to-back calls each. CUDA events on a GPU (the device is synchronised after each sample),
    perf_counter on a CPU."""
    for _ in range(warmup):
        fn()
    synchronize(device)
    timed = timer_for(device, calls)
    samples = [timed(fn) for _ in range(repeats)]
    return Timing(label, statistics.median(samples), max(samples) - min(samples))


# --- decode ------------------------------------------------------------------------------------

def _decode_setup(model: ToyTransformer, context: int, batch: int):
    device = model.device
    prompt = torch.randint(0, model.config.vocab_size, (batch, context), device=device)
    cache = model.new_cache(batch, context + 1)
    token = model.prefill(prompt, cache).argmax(dim=-1, keepdim=True)  # (B, 1)
    position = torch.tensor([context], device=device)  # the slot every timed step rewrites
    return cache, token, position


def _decode_through(forward, cache, token, position, out: list | None = None) -> Callable[[], torch.Tensor]:
    """One decode step through `forward` (the model, or its forward compiled), as
    ToyTransformer.decode runs it: over the positions written, its own included. It returns its
    logits and, given a list `out`, also leaves them in it."""
    written = int(position[-1]) + 1

    def step():
        with torch.inference_mode():
            logits = forward(token, position, cache, written=written)
        if out is not None:
            out[:] = [logits]
        return logits
    return step


def decode_eager(model, cache, token, position, out: list | None = None) -> Callable[[], torch.Tensor]:
    """One decode step, eager."""
    return _decode_through(model, cache, token, position, out)


def decode_cuda_graph(model, cache, token, position, out: list | None = None) -> Callable[[], None]:
    """One decode step captured as a CUDA graph (course.graphs, as lesson 3 times it): every
    kernel replayed with a single launch. A replay returns nothing; given a list `out`, the
    capture leaves in it the graph's logits tensor, which every replay rewrites."""
    return capture(decode_eager(model, cache, token, position, out))


def decode_compiled(model, cache, token, position) -> Callable[[], None]:
    """torch.compile(mode="reduce-overhead"): fused kernels, replayed as CUDA graphs. The cache is
    updated in place, so its tensors are marked as static (fixed-address) inputs."""
    for buffer in cache.tensors():
        torch._dynamo.mark_static_address(buffer)
    compiled = torch.compile(model.forward, mode="reduce-overhead", fullgraph=True)
    return _decode_through(compiled, cache, token, position)


# Generated CPU kernels of a compiled decode step run on this many threads. Each of them (a norm, the
# rotary positions, a cache write, SiLU times the gate) works on a few kilobytes, less work than
# waking a sleeping second thread costs (course.toy_model.serial_attention says the same of a small
# attention call); the matmuls stay PyTorch's own kernels, on every thread PyTorch has. On a
# 2-core VM, toy-cpu decode reached 91 % of the bare products' rate with these kernels on one
# thread, 82 % with them split over both (docs/benchmarks.md).
CPU_FUSED_KERNEL_THREADS = 1


def decode_compiled_cpu(model, cache, token, position) -> Callable[[], None]:
    """torch.compile on a CPU, as gpt-fast compiles decode there too: the few hundred small
    operators of an eager step fused into a few dozen generated C++ kernels between the weight
    matmuls, which remain PyTorch's own (the kernels the bare products run). Compiled by its first
    call, made here; compiling needs a C++ compiler, and its absence raises."""
    step = _decode_through(torch.compile(model.forward, fullgraph=True, dynamic=False), cache, token, position)
    # The thread count is read when the kernels are generated, so only the compiling call needs it.
    with torch._inductor.config.patch({"cpp.threads": CPU_FUSED_KERNEL_THREADS}):
        step()
    return step


# --- prefill -----------------------------------------------------------------------------------

def prefill_through(forward, prompt: torch.Tensor, cache) -> Callable[[], torch.Tensor]:
    """A prefill of `prompt` through `forward` (the model's, or compiled) into an empty `cache`:
    causal attention, the logits of the last position only, returned."""
    positions = torch.arange(prompt.shape[1], device=prompt.device)

    def run():
        with torch.inference_mode():
            return forward(prompt, positions, cache, fresh=True, last_only=True)
    return run


def prefill_fn(model: ToyTransformer, prompt_len: int, compiled: bool,
               prompt: torch.Tensor | None = None) -> tuple[Callable[[], torch.Tensor], int]:
    """The prefill timed (of `prompt`, default random tokens), and its FLOPs."""
    device = model.device
    if prompt is None:
        prompt = torch.randint(0, model.config.vocab_size, (1, prompt_len), device=device)
    cache = model.new_cache(1, prompt_len)
    if compiled:
        torch._dynamo.reset()  # forget the decode compilation: another mode, other shapes
    forward = torch.compile(model.forward, fullgraph=True, dynamic=False) if compiled else model.forward
    flops = count_flops(lambda: model.prefill(prompt, model.new_cache(1, prompt_len)))
    return prefill_through(forward, prompt, cache), flops


def load_average() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except (OSError, AttributeError):
        return "unknown"
