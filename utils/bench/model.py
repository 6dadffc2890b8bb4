"""Benchmark the toy model on this machine: decode bandwidth and MBU, prefill FLOP/s and MFU.

    python -m utils.bench.model                     # the detected device and its preset
    python -m utils.bench.model --prompt 1024 --no-compile --device cpu
    python -m utils.bench.model --json figures.json # also write every figure as JSON
    python -m utils.bench.model --neighbour         # CPU decode, quiet and with a neighbour busy on one core

A benchmark, not a test: it prints what it measured next to the bound it is held against and
the course's target, and exits 0 either way (--strict: exit 1 when a target is missed).

It times only right results. Attention is restricted as lesson 3 restricts it (course.
device_attention): on a GPU to the first fused kernel whose logits are the math kernel's (some
PyTorch versions' cuDNN kernel has given wrong ones), or to --attention's kernel once it is shown to
give them. Every way of decoding and of prefilling it times is then held to the logits of the same
pass run eagerly with the math kernel; where one differs, it says so in a sentence and exits 1.

Every bound is measured in the same run as what it bounds, in turns with it (course.timing.
interleave), so that load on a shared machine hits both alike; nothing measured earlier is reused
unless --reuse says so. A utilisation above 100 % is never printed: the bound is measured again,
and if the excess persists the bound is reported as measured under other load.

Targets (docs/benchmarks.md records what was measured, and where):
  CPU          decode at batch 1 reaches >= 90 % of the rate of bare matrix-vector products over
               the same weights, measured in the same run, in turns: the median over --rounds
               rounds of each round's ratio (and is held against the read bandwidth);
  H100 / H200  decode MBU >= 60 % at batch 1 (CUDA graphs allowed); prefill MFU >= 50 % at
               2,048 tokens (a GH200 counts as an H200 here: the same Hopper GPU).

On a GPU, decode is timed three ways: eager PyTorch, one CUDA graph captured by hand, and
torch.compile(mode="reduce-overhead") (fused kernels replayed as CUDA graphs); on a CPU two: eager
and torch.compile (its small operators fused into generated C++ kernels, the matmuls PyTorch's
own). The best is held against the target. Prefill is timed eager and, on a GPU, under torch.compile.
"""

from __future__ import annotations

import course  # noqa: F401 - first: it sets the OpenMP wait policy, which libgomp reads once, when torch loads it

import argparse
import json
import sys
import time
from dataclasses import dataclass
from typing import Callable

import torch
from torch.nn.attention import SDPBackend

from course.counting import aten_ops, attention_kernels, launches
from course.detect import describe, detect_hardware
from course.device import dtype_name, model_dtype, pick_device
from course.device_attention import FUSED, restrict_attention, same_logits
from course.hardware import Accelerator
from course.probes import Held, held_against, matmul_probe, matvec_probe, read_probe
from course.readings import share
from course.threads import set_cpu_threads
from course.timing import Sampled, interleave
from course.toy_model import ToyTransformer, build_model
from utils.bench.neighbour import CPU_DECODE_ROUNDS, CPU_DECODE_TARGET, neighbour_main, share_of_products
from utils.bench.passes import (Timing, _decode_setup, decode_compiled, decode_compiled_cpu,  # noqa: F401 - Timing, measure: this module's names too
                                decode_cuda_graph, decode_eager, load_average, measure, prefill_fn, prefill_through,
                                timer_for)

GPU_DECODE_MBU_TARGET = 0.60  # H100 / H200, batch 1
GPU_PREFILL_MFU_TARGET = 0.50  # H100 / H200, 2,048 tokens
TARGET_GPUS = ("H100", "H200")


ATTENTION_BACKENDS = {"flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION", "cudnn": "CUDNN_ATTENTION",
                      "math": "MATH"}


def is_target_gpu(accelerator_name: str) -> bool:
    """The GPU targets hold for the H100, H200 and GH200 catalog entries (each name contains "H200"
    or "H100")."""
    upper = accelerator_name.upper()
    return "(MEASURED)" not in upper and any(name in upper for name in TARGET_GPUS)


# --- main ----------------------------------------------------------------------------------------

def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line; --help prints it after the module's docstring."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=["cpu", "cuda"], help="default: cuda when there is one")
    parser.add_argument("--preset", help="model preset (default: toy-gpu on a GPU, toy-cpu on a CPU)")
    parser.add_argument("--prompt", type=int, help="prefill length (default 2048 on a GPU, 512 on a CPU)")
    parser.add_argument("--context", type=int, default=128, help="tokens in the cache while decoding")
    parser.add_argument("--repeats", type=int, default=7, help="timed samples per measurement")
    parser.add_argument("--threads", type=int, help="CPU threads (default: the cores free now)")
    parser.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    parser.add_argument("--attention", choices=sorted(ATTENTION_BACKENDS),
                        help="the only attention kernel PyTorch may use, once it gives the math kernel's logits "
                             "(default on a GPU: the first fused one that does, as lesson 3 picks)")
    parser.add_argument("--reuse", action="store_true",
                        help="reuse the CPU figures recorded by an earlier run instead of measuring them now")
    parser.add_argument("--json", help="also write every figure to this JSON file")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--neighbour", action="store_true",
                        help="CPU decode against bare matrix-vector products, quiet and with a process busy on one core")
    parser.add_argument("--rounds", type=int, default=CPU_DECODE_ROUNDS,
                        help="rounds of CPU decode and the bare products (--neighbour: per condition)")
    parser.add_argument("--before", action="store_true",
                        help="--neighbour: also run as lesson 3 did before (threads fixed, OpenMP workers spinning)")
    return parser.parse_args(argv)


@dataclass
class Bench:
    """What every measurement of one run shares: the device, its figures, the dtype and the model."""

    device: torch.device
    hw: Accelerator
    dtype: torch.dtype
    model: ToyTransformer
    prompt_len: int  # tokens of the prefill measured

    @property
    def gpu(self) -> bool:
        return self.device.type == "cuda"

    @property
    def target(self) -> bool:
        """Whether the GPU targets hold here: an H100, H200 or GH200."""
        return self.gpu and is_target_gpu(self.hw.name)

    @property
    def peak(self) -> float:
        """The device's peak FLOP/s in the model's dtype."""
        return self.hw.peak(dtype_name(self.dtype))


class WrongResults(RuntimeError):
    """A pass to be timed whose logits are not those of eager attention in the math kernel, or no
    attention kernel allowed that gives them: the benchmark stops rather than time it."""


def restrict(model: ToyTransformer, device: torch.device, attention: str | None) -> str:
    """Lesson 3's restriction (course.device_attention): on a GPU the first fused attention kernel
    whose logits are the math kernel's; with --attention that kernel alone, checked the same way
    (on a CPU too). Returns the line to print; WrongResults where no kernel allowed agrees."""
    kernels = (ATTENTION_BACKENDS[attention],) if attention else FUSED
    try:
        return restrict_attention(model, device, kernels=kernels, who="the benchmark")
    except RuntimeError as err:
        raise WrongResults(str(err)) from err


def math_logits(model: ToyTransformer, run: Callable[[], torch.Tensor]) -> torch.Tensor:
    """run()'s logits, eager, with attention in the math kernel; the model's restriction kept."""
    kept = model.layers[0].attention.backends
    model.use_attention_backends([SDPBackend.MATH])
    try:
        return run().float().clone()
    finally:
        model.use_attention_backends(kept)


def check_logits(what: str, got: torch.Tensor, reference: torch.Tensor, dtype: torch.dtype) -> float:
    """The largest difference of `got` from the math kernel's logits; WrongResults, with a sentence,
    beyond course.device_attention.same_logits' tolerance."""
    same, gap = same_logits(got, reference, dtype)
    if not same:
        raise WrongResults(f"{what} gives logits that differ from eager attention in the math kernel by "
                           f"{gap:.2e} (largest logit {reference.abs().max().item():.2e}), so the benchmark "
                           f"stops rather than time wrong results")
    return gap


def build(args: argparse.Namespace, device: torch.device, record: dict) -> Bench:
    """Settle the CPU threads, the device's figures and the model, printing each; the model's
    attention is restricted as lesson 3 restricts it (restrict)."""
    gpu = device.type == "cuda"
    if not gpu:
        threads = set_cpu_threads(args.threads)
        print(f"CPU threads: {threads} (cores free now; load average {record['load_average_before']})")
        record["threads"] = threads
    dtype = model_dtype(device)
    hw = detect_hardware(device, reuse=args.reuse)
    print(describe(hw, dtype))
    record.update(device=hw.name, dtype=dtype_name(dtype), torch=torch.__version__)
    preset = args.preset or ("toy-gpu" if gpu else "toy-cpu")
    t0 = time.perf_counter()
    model = build_model(preset, device, dtype)
    print(f"{preset}: {sum(p.numel() for p in model.parameters()) / 1e9:.2f}B parameters, "
          f"{model.weight_memory_bytes() / 1e9:.2f} GB in {dtype_name(dtype)} (built in {time.perf_counter() - t0:.1f} s)")
    record["preset"] = preset
    if hw.l2_cache_bytes and model.weight_memory_bytes() < 8 * hw.l2_cache_bytes:
        print(f"  warning: the weights are under 8x the {hw.l2_cache_bytes / 2**20:.0f} MiB cache; "
              "decode may be served from cache")
    record["attention"] = restrict(model, device, args.attention)
    print(record["attention"])
    return Bench(device, hw, dtype, model, args.prompt or (2048 if gpu else 512))


def record_kernels(bench: Bench, attention: str | None, record: dict) -> None:
    """Print and record what an eager decode step launches (operators that launch kernels) and the
    attention kernels prefill and decode run, on a 16-token prompt."""
    model, device = bench.model, bench.device
    probe_cache = model.new_cache(1, 18)  # room for the two decode steps below
    probe_token = model.prefill(torch.zeros((1, 16), dtype=torch.long, device=device), probe_cache).argmax(-1, keepdim=True)
    ops = aten_ops(model.decode, probe_token, probe_cache)
    record["decode_launches"] = launches(ops)
    record["attention_kernels"] = {
        "prefill": attention_kernels(model.prefill, torch.zeros((1, 16), dtype=torch.long, device=device),
                                     model.new_cache(1, 17)),
        "decode": attention_kernels(model.decode, probe_token, probe_cache)}
    print(f"eager decode step: {record['decode_launches']} operators that launch kernels "
          f"({len(model.layers)} layers); attention kernels chosen: prefill {record['attention_kernels']['prefill']}, "
          f"decode {record['attention_kernels']['decode']}" + (f" (restricted to {attention})" if attention else ""))


def decode_steps(model: ToyTransformer, cache, token, position, gpu: bool,
                 with_compile: bool) -> dict[str, Callable[[], None]]:
    """The decode step, eager; on a GPU also captured by hand as a CUDA graph; with with_compile
    also under torch.compile (on a GPU replayed as CUDA graphs, on a CPU its small operators fused
    into generated C++ kernels). Each is run three times first (compiled, captured). A way that
    fails is named and left out: a missing compiler or an old driver must not end the run. Each
    way's logits are held to an eager step's in the math kernel (WrongResults where they differ)."""
    reference = math_logits(model, decode_eager(model, cache, token, position))
    held: list = []  # the captured graph's logits tensor, which its replays rewrite
    fns = {"eager": decode_eager(model, cache, token, position)}
    ways = [("CUDA graph", lambda *step: decode_cuda_graph(*step, out=held))] if gpu else []
    if with_compile:
        ways.append(("torch.compile + CUDA graphs", decode_compiled) if gpu else ("torch.compile", decode_compiled_cpu))
    for label, make in ways:
        try:
            if label.startswith("torch.compile"):
                mode = "(mode='reduce-overhead')" if gpu else ""
                print(f"  compiling with torch.compile{mode} ...", flush=True)
            fn = make(model, cache, token, position)
            for _ in range(3):  # compiles, captures
                fn()
            fns[label] = fn
        except Exception as err:  # noqa: BLE001 - a missing toolchain or an old driver must not end the run
            print(f"  {label}: did not run ({type(err).__name__}: {str(err).splitlines()[0][:160]})")
    gaps = []
    for label, fn in fns.items():
        got = fn()
        gaps.append(check_logits(f"decode ({label})", held[0] if got is None else got, reference, model.dtype))
    print(f"  logits of every way: those of eager attention in the math kernel (largest difference {max(gaps):.1e})")
    return fns


def decode_mode(label: str, t: Sampled, products: Sampled, step_bytes: int, bound: tuple[float, str],
                remeasure: Callable[[], float] | None, weight_ratio: float) -> dict:
    """Print one way of decoding held against its bound (remeasured by `remeasure` if it seems
    beaten) and against the bare products of the same rounds; return its figures."""
    bound_rate, bound_label = bound
    achieved = step_bytes / t.median
    held = held_against(achieved, bound_rate, what=bound_label, remeasure=remeasure)
    vs_matvec = share_of_products(t, products, weight_ratio)
    print(f"  {label:28s} {t.median * 1e3:8.3f} ms/token (min {t.low * 1e3:.3f}, max {t.high * 1e3:.3f}): "
          f"{achieved / 1e9:8.1f} GB/s = {held.percent()} of the {bound_label}; "
          f"weights at {share(vs_matvec, 1.0, 'the bare matrix-vector rate')} (median over {len(t.samples)} rounds)")
    if held.fraction is None:
        print(f"    {held.note}")
    return {"ms": t.median * 1e3, "min_ms": t.low * 1e3, "max_ms": t.high * 1e3, "GBps": achieved / 1e9,
            "utilisation": held.fraction, "of_matvec": vs_matvec}


def decode_verdict(bench: Bench, best_label: str, best_share: float, best_rate: float) -> list[str]:
    """Print the decode target's verdict for the best way of decoding (its share of the bare
    products' rate on a CPU, its MBU from best_rate in bytes/s on a target GPU); ["decode"] when
    it is missed."""
    if not bench.gpu:
        verdict = "meets" if best_share >= CPU_DECODE_TARGET else "MISSES"
        print(f"  target: decode >= {CPU_DECODE_TARGET:.0%} of the bare matrix-vector rate of this run: "
              f"{verdict} ({best_share:.0%})")
        return ["decode"] if best_share < CPU_DECODE_TARGET else []
    if not bench.target:
        return []
    mbu = best_rate / bench.hw.bandwidth_bytes_per_s
    verdict = "meets" if mbu >= GPU_DECODE_MBU_TARGET else "MISSES"
    print(f"  target: MBU >= {GPU_DECODE_MBU_TARGET:.0%} ({best_label}): {verdict} ({mbu:.0%})")
    return ["decode"] if mbu < GPU_DECODE_MBU_TARGET else []


def bench_decode(bench: Bench, args: argparse.Namespace, record: dict) -> list[str]:
    """Decode, batch 1, in turns with its two bounds: a plain read of as many bytes, and bare
    matrix-vector products over the very same weights. Returns ["decode"] when its target is missed."""
    model, device, gpu = bench.model, bench.device, bench.gpu
    print(f"\ndecode, batch 1, {args.context} tokens in the cache:")
    cache, token, position = _decode_setup(model, args.context, 1)
    step_bytes = model.decode_weight_bytes() + cache.nbytes
    calls = 20 if gpu else 1
    matvec, matvec_bytes = matvec_probe(model)
    read = read_probe(step_bytes, device)
    fns = decode_steps(model, cache, token, position, gpu, with_compile=not args.no_compile)
    probes = {"bare matrix-vector products": matvec, "read of as many bytes": read}
    rounds = args.repeats if gpu else max(args.repeats, args.rounds)  # a CPU step's share needs many rounds
    timed = interleave({**fns, **probes}, rounds=rounds, warmup=2, timer=timer_for(device, calls),
                       label="decode and its bounds")
    matvec_rate = matvec_bytes / timed["bare matrix-vector products"].low  # the best of the run
    read_rate = step_bytes / timed["read of as many bytes"].low
    bandwidth = bench.hw.bandwidth_bytes_per_s
    bound_rate = bandwidth if gpu else read_rate
    bound_label = f"peak ({bench.hw.source})" if gpu else "read bandwidth, same run"
    print(f"  bounds, same run: read {read_rate / 1e9:,.1f} GB/s; bare matrix-vector products over the same "
          f"weights {matvec_rate / 1e9:,.1f} GB/s" + (f"; datasheet {bandwidth / 1e9:,.0f} GB/s" if gpu else ""))
    record["decode"] = {"context": args.context, "bytes": step_bytes, "read_GBps": read_rate / 1e9,
                        "matvec_GBps": matvec_rate / 1e9, "bound_GBps": bound_rate / 1e9, "modes": {}}
    modes = record["decode"]["modes"]
    remeasure = None if gpu else lambda: step_bytes / min(timer_for(device)(read) for _ in range(5))
    for label in fns:
        modes[label] = decode_mode(label, timed[label], timed["bare matrix-vector products"], step_bytes,
                                   (bound_rate, bound_label), remeasure, model.decode_weight_bytes() / matvec_bytes)
    print(f"  bytes per step: {model.decode_weight_bytes() / 1e6:,.1f} MB of weights + {cache.nbytes / 1e6:,.1f} MB "
          f"of KV cache; bound {step_bytes / bound_rate * 1e3:.3f} ms")
    best_label = min(fns, key=lambda label: timed[label].median)
    return decode_verdict(bench, best_label, modes[best_label]["of_matvec"], step_bytes / timed[best_label].median)


def time_prefill(bench: Bench, compiled: bool, repeats: int) -> tuple[Sampled, int, Held] | None:
    """One prompt's prefill, eager or compiled, timed in turns with a square matmul (the
    attainable FLOP/s) on a CPU, held against that or the GPU's peak and printed: (times, FLOPs,
    held), or None when it could not run (said in a line)."""
    label = "torch.compile" if compiled else "eager"
    gpu, device = bench.gpu, bench.device
    model = bench.model
    prompt = torch.randint(0, model.config.vocab_size, (1, bench.prompt_len), device=device)
    reference = math_logits(model, prefill_through(model.forward, prompt, model.new_cache(1, bench.prompt_len)))
    try:
        run, flops = prefill_fn(model, bench.prompt_len, compiled, prompt=prompt)
        gap = check_logits(f"prefill ({label})", run(), reference, model.dtype)
        fns = {label: run}
        if not gpu:
            mm, mm_flops = matmul_probe(2048, bench.dtype, device)
            fns["matmul"] = mm
        timed = interleave(fns, rounds=repeats, warmup=3 if compiled else 1, timer=timer_for(device))
    except WrongResults:
        raise
    except Exception as err:  # noqa: BLE001 - one way that cannot run here is named and skipped; the others are timed
        print(f"  {label}: did not run ({type(err).__name__}: {str(err).splitlines()[0][:160]})")
        return None
    t = timed[label]
    rate_bound = bench.peak if gpu else mm_flops / timed["matmul"].low
    held = held_against(flops / t.median, rate_bound,
                        what="peak" if gpu else "2048^3 matmul rate, same run",
                        remeasure=None if gpu else lambda: mm_flops / min(timer_for(device)(mm) for _ in range(3)))
    print(f"  {label:14s} {t.median * 1e3:9.2f} ms (min {t.low * 1e3:.2f}, max {t.high * 1e3:.2f}), "
          f"{flops / 1e9:,.0f} GFLOP: {flops / t.median / 1e12:.3f} TFLOP/s of {held.bound / 1e12:.3f} "
          f"{'peak' if gpu else 'matmul (same run)'} = MFU {held.percent()}; logits: the math kernel's "
          f"(largest difference {gap:.1e})")
    if held.fraction is None:
        print(f"    {held.note}")
    return t, flops, held


def bench_prefill(bench: Bench, args: argparse.Namespace, record: dict) -> list[str]:
    """Prefill of one long prompt, eager and (on a GPU, unless --no-compile) compiled. Returns
    ["prefill"] when its target is missed."""
    print(f"\nprefill, {bench.prompt_len:,} tokens:")
    modes = [False] + ([True] if bench.gpu and not args.no_compile else [])
    repeats = args.repeats if bench.gpu else max(3, args.repeats // 2)  # a CPU prefill takes a second
    results = []
    record["prefill"] = {"tokens": bench.prompt_len, "modes": {}}
    for compiled in modes:
        measured = time_prefill(bench, compiled, repeats)
        if measured is None:
            continue
        t, flops, held = measured
        results.append(measured)
        record["prefill"]["modes"]["torch.compile" if compiled else "eager"] = {
            "ms": t.median * 1e3, "GFLOP": flops / 1e9, "TFLOPps": flops / t.median / 1e12,
            "bound_TFLOPps": held.bound / 1e12, "mfu": held.fraction}
    if not results:
        return []
    t, flops, held = min(results, key=lambda r: r[0].median)
    print(f"  bound: {flops / held.bound * 1e3:.2f} ms at {held.bound / 1e12:.3f} TFLOP/s")
    if not bench.target:
        return []
    mfu = flops / t.median / bench.peak
    verdict = "meets" if (mfu >= GPU_PREFILL_MFU_TARGET and bench.prompt_len == 2048) else "MISSES"
    print(f"  target: MFU >= {GPU_PREFILL_MFU_TARGET:.0%} at 2,048 tokens: {verdict} ({mfu:.0%})")
    return ["prefill"] if verdict == "MISSES" else []


def finish(record: dict, misses: list[str], json_path: str | None) -> None:
    """Print the load average after the run and the targets missed; write every figure to json_path."""
    record["load_average_after"] = load_average()
    record["missed"] = misses
    print(f"\nload average before {record['load_average_before']}, after {record['load_average_after']}")
    if misses:
        print(f"below target: {', '.join(misses)}")
    if json_path:
        with open(json_path, "w") as out:
            json.dump(record, out, indent=1)


def main(argv: list[str] | None = None) -> int:
    """Measure and print (module docstring); exit status 0, 1 when a target is missed under
    --strict or a pass gives wrong logits (WrongResults: nothing more is timed), 2 when --device
    cuda names no CUDA device."""
    args = parse_args(argv)
    if args.neighbour:
        return neighbour_main(args)
    record: dict = {"started": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "load_average_before": load_average()}
    device = torch.device(args.device) if args.device else pick_device()
    if device.type == "cuda" and not torch.cuda.is_available():
        print("no CUDA device here", file=sys.stderr)
        return 2
    try:
        bench = build(args, device, record)
        record_kernels(bench, args.attention, record)
        misses = bench_decode(bench, args, record)  # its cache and captured steps are freed before prefill
        misses += bench_prefill(bench, args, record)
    except WrongResults as err:
        print(f"benchmark: {err}", file=sys.stderr)
        return 1
    finish(record, misses, args.json)
    return 1 if (misses and args.strict) else 0


if __name__ == "__main__":
    sys.exit(main())
