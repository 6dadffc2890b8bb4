"""Benchmark the toy model on this machine: decode bandwidth and MBU, prefill FLOP/s and MFU.

    python -m utils.bench                     # the detected device and its preset
    python -m utils.bench --prompt 1024 --no-compile --device cpu

A benchmark, not a test: it prints what it measured next to the bound it is held against and
the course's target, and exits 0 either way (--strict: exit 1 when a target is missed).

Targets (docs/benchmarks.md records what was measured, and where):
  CPU          decode at batch 1 reaches >= 50 % of the measured copy bandwidth;
  H100 / H200  decode MBU >= 60 % at batch 1 (CUDA graphs allowed); prefill MFU >= 50 % at
               2,048 tokens.

On a GPU, decode is timed three ways: eager PyTorch, one CUDA graph captured by hand, and
torch.compile(mode="reduce-overhead") (fused kernels replayed as CUDA graphs); the best is held
against the target. Prefill is timed eager and under torch.compile.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Callable

import torch

from course.device import (describe, detect_hardware, dtype_name, model_dtype, pick_device, set_cpu_threads,
                           synchronize)
from course.toy_model import ToyTransformer, build_model, count_flops

CPU_DECODE_TARGET = 0.50  # of the measured copy bandwidth
GPU_DECODE_MBU_TARGET = 0.60  # H100 / H200, batch 1
GPU_PREFILL_MFU_TARGET = 0.50  # H100 / H200, 2,048 tokens
TARGET_GPUS = ("H100", "H200")


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
    samples = []
    for _ in range(repeats):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(calls):
                fn()
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end) / 1e3 / calls)
        else:
            synchronize(device)
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            synchronize(device)
            samples.append((time.perf_counter() - t0) / calls)
    return Timing(label, statistics.median(samples), max(samples) - min(samples))


# --- decode ------------------------------------------------------------------------------------

def _decode_setup(model: ToyTransformer, context: int, batch: int):
    device = model.device
    prompt = torch.randint(0, model.config.vocab_size, (batch, context), device=device)
    cache = model.new_cache(batch, context + 1)
    token = model.prefill(prompt, cache).argmax(dim=-1, keepdim=True)  # (B, 1)
    position = torch.tensor([context], device=device)  # the slot every timed step rewrites
    return cache, token, position


def decode_eager(model, cache, token, position) -> Callable[[], None]:
    @torch.inference_mode()
    def step():
        model(token, position, cache)
    return step


def decode_cuda_graph(model, cache, token, position) -> Callable[[], None]:
    """One decode step captured as a CUDA graph: every kernel replayed with a single launch."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), torch.inference_mode():
        for _ in range(3):  # warm up on a side stream, as torch.cuda.graphs asks
            model(token, position, cache)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph), torch.inference_mode():
        model(token, position, cache)
    return graph.replay


def decode_compiled(model, cache, token, position) -> Callable[[], None]:
    """torch.compile(mode="reduce-overhead"): fused kernels, replayed as CUDA graphs. The cache is
    updated in place, so its tensors are marked as static (fixed-address) inputs."""
    torch._dynamo.mark_static_address(cache.k)
    torch._dynamo.mark_static_address(cache.v)
    compiled = torch.compile(model.forward, mode="reduce-overhead", fullgraph=True)

    def step():
        with torch.inference_mode():
            compiled(token, position, cache)
    return step


# --- prefill -----------------------------------------------------------------------------------

def prefill_fn(model: ToyTransformer, prompt_len: int, compiled: bool) -> tuple[Callable[[], None], int]:
    device = model.device
    prompt = torch.randint(0, model.config.vocab_size, (1, prompt_len), device=device)
    cache = model.new_cache(1, prompt_len)
    if compiled:
        torch._dynamo.reset()  # forget the decode compilation: another mode, other shapes
    forward = torch.compile(model.forward, fullgraph=True, dynamic=False) if compiled else model.forward
    positions = torch.arange(prompt_len, device=device)

    def run():
        with torch.inference_mode():
            forward(prompt, positions, cache)

    flops = count_flops(lambda: model.prefill(prompt, model.new_cache(1, prompt_len)))
    return run, flops


# --- main ----------------------------------------------------------------------------------------

def _try(label: str, make: Callable[[], Callable[[], None]], device, warmup, repeats, calls) -> Timing | None:
    try:
        return measure(make(), device, warmup, repeats, calls, label)
    except Exception as err:  # noqa: BLE001 - a missing toolchain or an old driver must not end the run
        print(f"  {label}: did not run ({type(err).__name__}: {str(err).splitlines()[0][:160]})")
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=["cpu", "cuda"], help="default: cuda when there is one")
    parser.add_argument("--preset", help="model preset (default: toy-gpu on a GPU, toy-cpu on a CPU)")
    parser.add_argument("--prompt", type=int, help="prefill length (default 2048 on a GPU, 512 on a CPU)")
    parser.add_argument("--context", type=int, default=128, help="tokens in the cache while decoding")
    parser.add_argument("--repeats", type=int, default=7, help="timed samples per measurement")
    parser.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    parser.add_argument("--refresh", action="store_true", help="measure the CPU's bandwidth and FLOP/s again")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args(argv)

    device = torch.device(args.device) if args.device else pick_device()
    if device.type == "cuda" and not torch.cuda.is_available():
        print("no CUDA device here", file=sys.stderr)
        return 2
    gpu = device.type == "cuda"
    if not gpu:
        print(f"CPU threads: {set_cpu_threads()}")
    dtype = model_dtype(device)
    hw = detect_hardware(device, refresh=args.refresh)
    peak, bandwidth = hw.peak(dtype_name(dtype)), hw.bandwidth_bytes_per_s
    print(describe(hw, dtype))
    preset = args.preset or ("toy-gpu" if gpu else "toy-cpu")
    prompt_len = args.prompt or (2048 if gpu else 512)
    t0 = time.perf_counter()
    model = build_model(preset, device, dtype)
    print(f"{preset}: {sum(p.numel() for p in model.parameters()) / 1e9:.2f}B parameters, "
          f"{model.weight_bytes() / 1e9:.2f} GB in {dtype_name(dtype)} (built in {time.perf_counter() - t0:.1f} s)")
    if hw.l2_cache_bytes and model.weight_bytes() < 8 * hw.l2_cache_bytes:
        print(f"  warning: the weights are under 8x the {hw.l2_cache_bytes / 2**20:.0f} MiB cache; "
              "decode may be served from cache")
    bound_label = "measured copy bandwidth" if hw.measured else f"peak ({hw.source})"
    misses = []

    # Decode, batch 1.
    print(f"\ndecode, batch 1, {args.context} tokens in the cache:")
    cache, token, position = _decode_setup(model, args.context, 1)
    step_bytes = model.decode_weight_bytes() + cache.nbytes
    calls = 20 if gpu else 3
    candidates = [_try("eager", lambda: decode_eager(model, cache, token, position), device, 3, args.repeats, calls)]
    if gpu:
        candidates.append(_try("CUDA graph", lambda: decode_cuda_graph(model, cache, token, position),
                               device, 3, args.repeats, calls))
        if not args.no_compile:
            print("  compiling with torch.compile(mode='reduce-overhead') ...", flush=True)
            candidates.append(_try("torch.compile + CUDA graphs",
                                   lambda: decode_compiled(model, cache, token, position),
                                   device, 5, args.repeats, calls))
    timings = [t for t in candidates if t is not None]
    for t in timings:
        achieved = step_bytes / t.seconds
        print(f"  {t.label:28s} {t.seconds * 1e3:8.3f} ms/token (spread {t.spread * 1e3:.3f} ms): "
              f"{achieved / 1e9:8.1f} GB/s of {bandwidth / 1e9:,.1f} GB/s {bound_label} = {achieved / bandwidth:.0%}")
    best = min(timings, key=lambda t: t.seconds)
    mbu = step_bytes / best.seconds / bandwidth
    print(f"  bytes per step: {model.decode_weight_bytes() / 1e6:,.1f} MB of weights + {cache.nbytes / 1e6:,.1f} MB "
          f"of KV cache; bound {step_bytes / bandwidth * 1e3:.3f} ms")
    if not gpu:
        verdict = "meets" if mbu >= CPU_DECODE_TARGET else "MISSES"
        print(f"  target: >= {CPU_DECODE_TARGET:.0%} of the copy bandwidth: {verdict} ({mbu:.0%})")
        if mbu < CPU_DECODE_TARGET:
            misses.append("decode")
    elif any(name in hw.name for name in TARGET_GPUS):
        verdict = "meets" if mbu >= GPU_DECODE_MBU_TARGET else "MISSES"
        print(f"  target: MBU >= {GPU_DECODE_MBU_TARGET:.0%} ({best.label}): {verdict} ({mbu:.0%})")
        if mbu < GPU_DECODE_MBU_TARGET:
            misses.append("decode")
    del cache

    # Prefill, one long prompt.
    print(f"\nprefill, {prompt_len:,} tokens:")
    modes = [False] + ([True] if gpu and not args.no_compile else [])
    results = []
    for compiled in modes:
        label = "torch.compile" if compiled else "eager"
        try:
            run, flops = prefill_fn(model, prompt_len, compiled)
            repeats = args.repeats if gpu else max(3, args.repeats // 2)  # a CPU prefill takes seconds
            t = measure(run, device, 3 if compiled else 1, repeats, label=label)
        except Exception as err:  # noqa: BLE001
            print(f"  {label}: did not run ({type(err).__name__}: {str(err).splitlines()[0][:160]})")
            continue
        results.append((t, flops))
        print(f"  {label:14s} {t.seconds * 1e3:9.2f} ms (spread {t.spread * 1e3:.2f} ms), {flops / 1e9:,.0f} GFLOP: "
              f"{flops / t.seconds / 1e12:.3f} TFLOP/s of {peak / 1e12:.3f} "
              f"{'measured matmul' if hw.measured else 'peak'} = MFU {flops / t.seconds / peak:.0%}")
    if results:
        t, flops = min(results, key=lambda r: r[0].seconds)
        mfu = flops / t.seconds / peak
        print(f"  bound: {flops / peak * 1e3:.2f} ms at {peak / 1e12:.3f} TFLOP/s")
        if gpu and any(name in hw.name for name in TARGET_GPUS):
            verdict = "meets" if (mfu >= GPU_PREFILL_MFU_TARGET and prompt_len == 2048) else "MISSES"
            print(f"  target: MFU >= {GPU_PREFILL_MFU_TARGET:.0%} at 2,048 tokens: {verdict} ({mfu:.0%})")
            if verdict == "MISSES":
                misses.append("prefill")
    if misses:
        print(f"\nbelow target: {', '.join(misses)}")
    return 1 if (misses and args.strict) else 0


if __name__ == "__main__":
    sys.exit(main())
