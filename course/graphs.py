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
nothing behind on a stream another capture would use; the failed graph is reset, the device
synchronised, and the failure raised with a sentence: a pass that cannot be captured is never
timed eagerly in its place (that would time Python's launches, not the model).

`RequestGraphs` serves a whole request (lesson 3's prompt sweep runs the student's generate() on
it): the prefill of its prompt and each of its decode steps, one graph per position (a step's
attention reads the positions written so far, so each position is a pass of its own shape).

On a CPU there is no graph to capture: `replayed` returns the function itself and `timing_path`
says "eager". `cuda=` stands in for torch.cuda in the tests, which have no GPU.
"""

from __future__ import annotations

from typing import Callable

import torch

from course.formatting import page_lines

EAGER = "eager"
GRAPH = "CUDA graph"
CAPTURE_WARMUP = 3  # untimed calls on a side stream before capture, as torch.cuda.graphs asks


def timing_path(device: torch.device | str) -> str:
    """How lesson 3 times a pass on `device`: "CUDA graph" on an NVIDIA (or ROCm) GPU, else "eager"."""
    return GRAPH if torch.device(device).type == "cuda" else EAGER


def path_note(device: torch.device | str) -> str:
    """How passes are timed on `device`, and why (lines that fit the page)."""
    if timing_path(device) == GRAPH:
        return page_lines("timing path: CUDA graphs (each step or pass recorded once, then replayed with one launch); "
                          "eager beside it once, in section 8", indent="  ")
    return page_lines("timing path: eager (on a CPU no graph is captured: each operator runs when Python calls it, "
                      "and a CPU kernel's launch costs little beside its work)", indent="  ")


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

    Where capture fails on a GPU (an operator that waits for the host, an old driver), a
    RuntimeError says so and why: the lesson stops rather than time Python's launches instead."""
    if timing_path(device) == EAGER:
        return fn
    try:
        return capture(fn, warmup=warmup, cuda=cuda)
    except Exception as err:
        first = str(err).splitlines()[0][:160] if str(err) else ""
        raise RuntimeError(
            f"this pass could not be captured as a CUDA graph ({type(err).__name__}: {first}). Lesson 3 times "
            f"every pass on a GPU as a CUDA graph; timed eagerly, it would measure Python launching a few hundred "
            f"kernels, not the model, so it stops here. Check the driver and the PyTorch build "
            f"(`make gpu-check` names both)") from err


class RequestGraphs:
    """A model's prefill and decode for requests of one shape (batch, prompt length, output tokens),
    each pass replayed as a CUDA graph: the interface generate() uses (new_cache, prefill, decode).

    The cache is made once and handed back by every new_cache call (the graphs read and write its
    tensors); a prompt and a token are copied into tensors of its own before each replay. Each
    graph is captured at its first call, so a warm-up request captures them all. Python runs at
    capture only: the cache's length is set here, around each replay."""

    def __init__(self, model, batch: int, prompt_len: int, n_out: int, device: torch.device | str, cuda=None):
        self.model, self.config, self.device, self._cuda = model, model.config, torch.device(device), cuda
        self.max_seq_len = prompt_len + n_out
        self.cache = model.new_cache(batch, self.max_seq_len)
        self._prompt = torch.zeros((batch, prompt_len), dtype=torch.long, device=model.device)
        self._token = torch.zeros((batch, 1), dtype=torch.long, device=model.device)
        self._replays: dict[tuple[str, int], Callable[[], object]] = {}
        self._logits: dict[tuple[str, int], torch.Tensor] = {}
        self.captures = 0

    def new_cache(self, batch_size: int, max_seq_len: int):
        """The graphs' own cache, emptied: room for the request (a decode step reads only the positions
        written, so a cache asked with more room is the same work)."""
        if batch_size != self.cache.batch_size or max_seq_len < self.max_seq_len - 1:
            raise ValueError(f"these graphs serve batch {self.cache.batch_size} with {self.max_seq_len - 1} positions "
                             f"or more, not batch {batch_size} with {max_seq_len}")
        self.cache.length = 0
        return self.cache

    def _replay(self, key: tuple[str, int], run: Callable[[], torch.Tensor]) -> torch.Tensor:
        if key not in self._replays:
            def recorded() -> None:
                self._logits[key] = run()
            self._replays[key] = replayed(recorded, self.device, cuda=self._cuda)
            self.captures += 1
        self._replays[key]()
        return self._logits[key]

    def prefill(self, idx: torch.Tensor, cache) -> torch.Tensor:
        if cache is not self.cache or tuple(idx.shape) != tuple(self._prompt.shape) or cache.length != 0:
            raise ValueError(f"these graphs prefill a {tuple(self._prompt.shape)} prompt into their own empty cache")
        self._prompt.copy_(idx)

        def run() -> torch.Tensor:
            self.cache.length = 0
            return self.model.prefill(self._prompt, self.cache)

        logits = self._replay(("prefill", 0), run)
        self.cache.length = self._prompt.shape[1]
        return logits

    def decode(self, token: torch.Tensor, cache) -> torch.Tensor:
        if cache is not self.cache or tuple(token.shape) != tuple(self._token.shape):
            raise ValueError(f"these graphs decode a {tuple(self._token.shape)} token with their own cache")
        position = cache.length
        self._token.copy_(token)

        def run() -> torch.Tensor:
            self.cache.length = position
            return self.model.decode(self._token, self.cache)

        logits = self._replay(("decode", position), run)
        self.cache.length = position + 1
        return logits


def for_requests(model, prompt: torch.Tensor, n_out: int, device: torch.device | str, cuda=None):
    """What lesson 3's prompt sweep runs its requests of this shape on: the model itself on a CPU,
    its passes replayed as CUDA graphs (RequestGraphs) on a GPU."""
    if timing_path(device) == EAGER:
        return model
    return RequestGraphs(model, prompt.shape[0], prompt.shape[1], n_out, device, cuda=cuda)
