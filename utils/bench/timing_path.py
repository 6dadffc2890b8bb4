"""Lesson 3's timing path on this machine, for `make gpu-check`: a decode step and a prefill eager
and replayed as CUDA graphs (course.graphs), and decode attention's bandwidth with each attention
kernel beside that of matrix-vector products over as many bytes of weights."""

from __future__ import annotations

# torch and the course's modules are imported inside the functions: gpu_check imports this module
# before it has checked that torch is installed.

GRAPH_HEADING = "## Lesson 3's timing path: a decode step eager and replayed as a CUDA graph\n\n"


def graph_check(device=None, rounds: int = 10) -> dict:
    """Lesson 3's GPU timing path on this machine (course.graphs): a small model's decode step and
    prefill, eager and replayed, must leave the same logits and cache (within 1e-2 of the largest
    logit in bf16: the same kernels, though a library may pick others under capture); both are
    timed, in turns.
    On a CPU the path is eager and nothing is captured, which the result says."""
    import torch

    from course.device import model_dtype, pick_device
    from course.graphs import replayed, timing_path
    from course.models import ModelConfig
    from course.timing import interleave, timed_call
    from course.toy_model import build_model

    device = torch.device(device) if device is not None else pick_device()
    config = ModelConfig("graph-check", n_layers=2, d_model=256, n_heads=4, n_kv_heads=2, d_ff=704, vocab_size=1024)
    model = build_model(config, device, model_dtype(device), seed=0)
    prompt = torch.randint(0, config.vocab_size, (2, 32), device=device)
    result = {"device": str(device), "path": timing_path(device), "same": {}, "ms": {}}
    for name in ("decode", "prefill"):
        outs, fns = [], {}
        for mode in ("eager", "replayed"):
            cache = model.new_cache(2, 33)
            token = model.prefill(prompt, cache).argmax(-1, keepdim=True)
            out: list = []

            def step(cache=cache, token=token, out=out, name=name):
                if name == "decode":
                    cache.length = 32
                    out[:] = [model.decode(token, cache)]
                else:
                    cache.length = 0
                    out[:] = [model.prefill(prompt, cache)]
            fn = replayed(step, device) if mode == "replayed" else step
            fn()
            outs.append((out[0].float().clone(), [t.clone() for t in cache.tensors()]))
            fns[mode] = fn
        (a, cache_a), (b, cache_b) = outs
        gap = max([(a - b).abs().max().item()]
                  + [(x.float() - y.float()).abs().max().item() for x, y in zip(cache_a, cache_b)])
        tolerance = (1e-5 if model.dtype == torch.float32 else 1e-2) * max(a.abs().max().item(), 1.0)
        result["same"][name] = gap <= tolerance
        result.setdefault("gap", {})[name] = gap
        timed = interleave(fns, rounds=rounds, warmup=2, timer=lambda f: timed_call(f, device))
        result["ms"][name] = {mode: timed[mode].median * 1e3 for mode in fns}
    return result


def graph_block(result: dict) -> str:
    lines = [f"timing path on {result['device']}: {result['path']}"]
    for name, same in result["same"].items():
        ms = result["ms"][name]
        lines.append(f"{name}: replayed {'gives the logits and cache of' if same else '**differs from**'} eager "
                     f"(largest difference {result['gap'][name]:.2e}); "
                     f"eager {ms['eager']:.3f} ms, replayed {ms['replayed']:.3f} ms (medians)")
    return "".join(f"    {line}\n" for line in lines)


ATTENTION_HEADING = "## Decode attention's bandwidth, kernel by kernel, beside the weights'\n\n"
KERNELS = ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION", "MATH")


def attention_check(device=None, batch: int | None = None, heads: int = 32, head_dim: int = 128,
                    context: int | None = None, rounds: int = 5) -> dict:
    """Decode attention as the toy model runs it (one query per sequence over `context` positions
    written, no mask; toy-gpu's 32 heads of 128) with each attention kernel alone, timed in turns
    with bare matrix-vector products over a weight matrix of as many bytes as the keys and values:
    the bandwidth each reaches (bytes read / time). A kernel that does not run these shapes here
    is named with its error. Defaults: batch 8 over 4,096 positions on a GPU, batch 1 over 256 on
    a CPU."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from course.device import model_dtype, pick_device
    from course.timing import interleave
    from utils.bench.passes import timer_for

    device = torch.device(device) if device is not None else pick_device()
    gpu = device.type == "cuda"
    batch, context = batch or (8 if gpu else 1), context or (4096 if gpu else 256)
    dtype = model_dtype(device)
    q = torch.randn(batch, heads, 1, head_dim, device=device, dtype=dtype)
    k = torch.randn(batch, heads, context, head_dim, device=device, dtype=dtype)
    v = torch.randn_like(k)
    kv_bytes = k.nbytes + v.nbytes
    weight = torch.randn(kv_bytes // (heads * head_dim * dtype.itemsize), heads * head_dim, device=device, dtype=dtype)
    x = torch.randn(1, heads * head_dim, device=device, dtype=dtype)
    fns, errors = {"matrix-vector products": lambda: F.linear(x, weight)}, {}
    for name in KERNELS:
        def attend(name=name):
            with sdpa_kernel([getattr(SDPBackend, name)]):
                return F.scaled_dot_product_attention(q, k, v)
        try:
            attend()
            fns[name.lower()] = attend
        except RuntimeError as err:
            errors[name.lower()] = str(err).splitlines()[0][:120]
    timed = interleave(fns, rounds=rounds, warmup=2, timer=timer_for(device, calls=20 if gpu else 1))
    return {"device": str(device), "dtype": str(dtype).removeprefix("torch."), "batch": batch, "context": context,
            "bytes": kv_bytes, "GBps": {name: kv_bytes / t.low / 1e9 for name, t in timed.items()}, "errors": errors}


def attention_block(result: dict) -> str:
    """The attention check's lines: each kernel's bandwidth (best run), the weights' beside them."""
    rates = dict(result["GBps"])
    weights = rates.pop("matrix-vector products")
    lines = [f"decode attention on {result['device']} in {result['dtype']}: batch {result['batch']}, one query over "
             f"{result['context']:,} positions, {result['bytes'] / 2**20:,.0f} MiB of keys and values, no mask; "
             f"best of the runs",
             f"matrix-vector products over as many bytes of weights: {weights:,.1f} GB/s"]
    for name, rate in rates.items():
        lines.append(f"{name}: {rate:,.1f} GB/s, {rate / weights:.2f}x the weights' rate")
    for name, error in result["errors"].items():
        lines.append(f"{name}: does not run these shapes here ({error})")
    return "\n".join("    " + line for line in lines) + "\n"
