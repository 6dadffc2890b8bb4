"""A pass replayed as one CUDA graph: one launch for all its kernels, which still run in order.

In eager PyTorch each operator launches its kernels from Python, one after the other: a few
microseconds of host time each, during which a GPU that has finished the previous small kernel
waits. A decode step of the toy model is several hundred such launches, so on a fast GPU eager
timing measures the host. A CUDA graph records the kernels of one call once and replays them all
with a single launch from the host; on the GPU they still run one after another, as recorded (PyTorch documentation, "CUDA semantics: CUDA Graphs"; gpt-fast and vLLM
replay their decode steps this way).

A replay redoes the recorded kernels on the recorded tensors: it is right only for a function that
does the same work on tensors that stay where they are on every call (a preallocated KV cache, a
prompt made once); Python in the function runs at capture and never again. Lesson 3's step and
pass functions are written so (they reset the cache's length themselves).

Each capture records on a stream of its own, made for it: a capture that fails part-way leaves
nothing behind on a stream another capture or the eager fallback would use; the failed graph is
reset, the device synchronised, and fn run once eagerly before it is handed back.

On a CPU there is no graph to capture: `replayed` returns the function itself and `timing_path`
says "eager". `cuda=` stands in for torch.cuda in the tests, which have no GPU.
"""

from __future__ import annotations

import warnings
from typing import Callable

import torch

EAGER = "eager"
GRAPH = "CUDA graph"
CAPTURE_WARMUP = 3  # untimed calls on a side stream before capture, as torch.cuda.graphs asks


def timing_path(device: torch.device | str) -> str:
    """How lesson 3 times a pass on `device`: "CUDA graph" on an NVIDIA (or ROCm) GPU, else "eager"."""
    return GRAPH if torch.device(device).type == "cuda" else EAGER


def path_note(device: torch.device | str) -> str:
    """One line saying how passes are timed on `device`, and why."""
    if timing_path(device) == GRAPH:
        return ("timing path: CUDA graphs (each step or pass recorded once, then replayed with one launch); "
                "eager beside it once, in section 8")
    return ("timing path: eager (on a CPU no graph is captured: each operator runs when Python calls it, "
            "and a CPU kernel's launch costs little beside its work)")


def capture(fn: Callable[[], object], warmup: int = CAPTURE_WARMUP, cuda=None) -> Callable[[], None]:
    """fn recorded as one CUDA graph, and the graph's replay: warm-up calls on a side stream (lazy
    initialisation stays out of the graph), one call under capture, then `graph.replay`."""
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 1:
        raise ValueError(f"capture: warmup must be a whole number of at least 1, not {warmup!r}")
    cuda = cuda or torch.cuda
    side = cuda.Stream()
    side.wait_stream(cuda.current_stream())
    with cuda.stream(side):
        for _ in range(warmup):
            fn()
    cuda.current_stream().wait_stream(side)
    graph = cuda.CUDAGraph()
    try:
        with cuda.graph(graph, stream=cuda.Stream()):  # a fresh stream: no state shared with another capture
            fn()
    except BaseException:
        graph.reset()  # drop what a part-way capture recorded
        cuda.synchronize()
        raise
    cuda.synchronize()
    return graph.replay


def replayed(fn: Callable[[], object], device: torch.device | str, warmup: int = CAPTURE_WARMUP,
             cuda=None) -> Callable[[], object]:
    """What lesson 3 times for fn on `device`: its CUDA graph's replay on a GPU, fn itself on a CPU.

    Where capture fails on a GPU (an operator that waits for the host, an old driver), fn itself,
    with a warning that names the error: the timings are then eager ones. fn is first run once
    eagerly and the device synchronised, so that the fallback is known to work outside a capture."""
    if timing_path(device) == EAGER:
        return fn
    try:
        return capture(fn, warmup=warmup, cuda=cuda)
    except Exception as err:  # noqa: BLE001 - a pass that cannot be captured is still timed, eagerly
        fn()  # the fallback runs clean outside any capture (an error here is fn's own, raised as it is)
        (cuda or torch.cuda).synchronize()
        warnings.warn(f"this pass could not be captured as a CUDA graph ({type(err).__name__}: "
                      f"{str(err).splitlines()[0][:160] if str(err) else ''}); it is timed eagerly", stacklevel=2)
        return fn
