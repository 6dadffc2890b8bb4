"""Lesson 3's GPU timing path without a GPU (course/graphs.py): which path each device gets, that
capture and replay are called as a CUDA graph needs them, and that a replayed decode step and
prefill leave the same cache and logits as eager ones (a fake CUDA layer on the CPU). `make
gpu-check` runs the same path on a real GPU (utils/bench/gpu_check.py: graph_check)."""

from __future__ import annotations

from contextlib import contextmanager

import pytest
import torch

from course import graphs
from course.models import ModelConfig
from course.toy_model import build_model

TINY = ModelConfig("tiny", n_layers=2, d_model=64, n_heads=4, n_kv_heads=2, d_ff=96, vocab_size=97)


class FakeCuda:
    """torch.cuda as course.graphs uses it. Work is a call of `kernel(fn)`: run at once, except
    while a graph captures, when it is recorded and not run (as CUDA queues nothing during capture);
    replay runs what was recorded, in order."""

    def __init__(self):
        self.events: list[str] = []
        self.default = "default stream"
        self.now = self.default
        self.capturing = None

    def kernel(self, fn):
        def launch():
            if self.capturing is not None:
                self.capturing.recorded.append(fn)
                self.events.append("recorded")
            else:
                self.events.append(f"ran on {self.now}")
                fn()
        return launch

    def Stream(self):  # noqa: N802 - torch.cuda's name
        cuda = self

        class Stream:
            name = "side stream"

            def wait_stream(self, other):
                cuda.events.append(f"side waits for {getattr(other, 'name', other)}")
        return Stream()

    def current_stream(self):
        cuda = self

        class Current:
            name = self.now

            def wait_stream(self, other):
                cuda.events.append(f"{self.name} waits for {other.name}")
        return Current()

    @contextmanager
    def stream(self, s):
        before, self.now = self.now, s.name
        try:
            yield
        finally:
            self.now = before

    def CUDAGraph(self):  # noqa: N802
        cuda = self

        class Graph:
            def __init__(self):
                self.recorded = []

            def replay(self):
                cuda.events.append("replay")
                for fn in self.recorded:
                    fn()

            def reset(self):
                cuda.events.append("graph reset")
                self.recorded = []
        return Graph()

    @contextmanager
    def graph(self, g, stream=None):
        assert stream is not None and stream.name == "side stream", "a capture records on a fresh stream of its own"
        self.events.append("capture begins")
        self.capturing = g
        try:
            yield
        finally:
            self.capturing = None
            self.events.append("capture ends")

    def synchronize(self):
        self.events.append("synchronize")


def test_the_path_chosen_per_device():
    assert graphs.timing_path("cpu") == graphs.EAGER and graphs.timing_path(torch.device("cuda")) == graphs.GRAPH
    assert "no graph is captured" in graphs.path_note("cpu") and "CUDA graphs" in graphs.path_note("cuda")
    fn = lambda: None  # noqa: E731
    assert graphs.replayed(fn, "cpu") is fn  # on a CPU the function itself: nothing captured


def test_capture_warms_up_on_a_side_stream_records_once_and_replays():
    cuda, calls = FakeCuda(), []
    replay = graphs.replayed(cuda.kernel(lambda: calls.append(1)), "cuda", warmup=2, cuda=cuda)
    assert cuda.events == ["side waits for default stream", "ran on side stream", "ran on side stream",
                           "default stream waits for side stream", "capture begins", "recorded", "capture ends",
                           "synchronize"]
    assert len(calls) == 2  # the warm-up ran; the captured call did not
    replay()
    replay()
    assert cuda.events[-2:] == ["replay", "replay"] and len(calls) == 4


def test_a_replayed_decode_step_gives_the_eager_results():
    """The lesson's decode-step function (it resets the cache's length, so every call is the same work),
    replayed through the fake layer: the same logits and the same cache as eager calls."""
    model = build_model(TINY, seed=3)
    prompt = torch.randint(0, TINY.vocab_size, (2, 9), generator=torch.Generator().manual_seed(1))

    def step_of(cache, token, out):
        def one_step():
            cache.length = 9
            out[:] = [model.decode(token, cache)]
        return one_step

    results = []
    for mode in ("eager", "graph"):
        cache = model.new_cache(2, 10)
        token = model.prefill(prompt, cache).argmax(-1, keepdim=True)
        out = []
        step = step_of(cache, token, out)
        cuda = FakeCuda()
        fn = cuda.kernel(step) if mode == "graph" else step
        timed = graphs.replayed(fn, "cuda", cuda=cuda) if mode == "graph" else graphs.replayed(fn, "cpu")
        out.clear()
        timed()
        results.append((out[0].clone(), [t.clone() for t in cache.tensors()]))
        if mode == "graph":
            assert cuda.events.count("recorded") == 1 and cuda.events[-1] == "replay"
    (eager_logits, eager_cache), (graph_logits, graph_cache) = results
    assert torch.equal(eager_logits, graph_logits)
    assert all(torch.equal(a, b) for a, b in zip(eager_cache, graph_cache))


def test_a_pass_that_cannot_be_captured_is_timed_eagerly_and_said_so():
    """A capture that fails part-way: the graph is reset, the device synchronised, and the function
    run once eagerly (outside any capture) before it is handed back to be timed eagerly."""
    class Broken(FakeCuda):
        @contextmanager
        def graph(self, g, stream=None):
            self.events.append("capture begins")
            self.capturing = g
            try:
                yield
                raise RuntimeError("operation not permitted when stream is capturing")
            finally:
                self.capturing = None

    cuda, calls = Broken(), []
    fn = cuda.kernel(lambda: calls.append(1))
    with pytest.warns(UserWarning, match="could not be captured as a CUDA graph.*timed eagerly"):
        assert graphs.replayed(fn, "cuda", warmup=1, cuda=cuda) is fn
    assert cuda.events[-6:] == ["capture begins", "recorded", "graph reset", "synchronize", "ran on default stream",
                                "synchronize"], cuda.events
    assert len(calls) == 2  # the warm-up and the eager run after the failure: nothing recorded ran
    with pytest.raises(ValueError, match="warmup"):
        graphs.capture(fn, warmup=0, cuda=FakeCuda())


def test_bench_captures_through_the_course(monkeypatch):
    """utils/bench/model.py's hand-captured decode is course.graphs.capture, not a copy of it."""
    from utils.bench import model as bench

    seen = []
    monkeypatch.setattr(bench, "capture", lambda fn: seen.append(fn) or "replay")
    model = build_model(TINY, seed=3)
    cache, token, position = bench._decode_setup(model, 4, 1)
    assert bench.decode_cuda_graph(model, cache, token, position) == "replay" and len(seen) == 1


def test_the_eager_step_beside_its_replay_claims_only_what_the_runs_show():
    from course.readings import graph_reading, knee_factors
    from course.timing import Sampled

    eager, graph = Sampled("eager", [4.0e-3, 4.2e-3, 4.4e-3]), Sampled("graph", [1.5e-3, 1.6e-3, 1.7e-3])
    said = graph_reading(eager, graph)
    assert "cost 2.600 ms of each eager step" in said and "(2.62x)" in said
    assert "cannot tell" in graph_reading(eager, Sampled("graph", [3.9e-3, 4.1e-3, 4.5e-3]))
    assert "the slower here" in graph_reading(graph, eager)  # never a saving the runs contradict
    level = [Sampled(f"{t}", [1e-3] * 3) for t in (1, 2, 4)]
    assert "no FLOP/s can be read" in knee_factors([1, 2, 4], level, [1, 2, 4], 1e-3, 1e12, 5.0)
    with pytest.raises(ValueError, match="read_s"):
        knee_factors([1, 2, 4], level, [1, 2, 4], 0.0, 1e12, 5.0)


def _lesson_helpers(replay):
    """make_decode_step and prefill_run as lesson 3 defines them (its section 2 cell), with
    `replayed` standing for course.graphs.replayed as a GPU would run it."""
    import ast
    from pathlib import Path

    import nbformat

    from course.counting import count_kernel_flops

    path = Path(__file__).resolve().parents[1] / "source" / "03_timing_prefill_decode" / "timing_prefill_decode.ipynb"
    cell = next(c for c in nbformat.read(str(path), as_version=4).cells if "def make_decode_step(" in c.source)
    tree = ast.parse(cell.source)
    wanted = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in ("make_decode_step", "prefill_run")]
    namespace = {"torch": torch, "DEVICE": torch.device("cpu"), "replayed": replay,
                 "count_kernel_flops": count_kernel_flops}
    exec(compile(ast.Module(body=wanted, type_ignores=[]), str(path), "exec"), namespace)
    return namespace["make_decode_step"], namespace["prefill_run"]


def test_the_lessons_steps_replay_on_a_gpu_and_count_their_flops_eagerly():
    """The lesson's helpers as a GPU runs them (a fake CUDA layer): graph=True hands the step to the
    capture, graph=False does not; a pass's FLOPs are counted before capture (a replay runs no
    operator FlopCounterMode could see), and the replayed step leaves the eager step's cache."""
    cuda = FakeCuda()
    handed = []

    def replay(fn, device):
        handed.append(fn)
        return graphs.replayed(cuda.kernel(fn), "cuda", cuda=cuda)

    make_decode_step, prefill_run = _lesson_helpers(replay)
    model = build_model(TINY, seed=3)
    torch.manual_seed(0)
    eager, eager_cache = make_decode_step(model, 6, batch=2, graph=False)
    assert not handed
    torch.manual_seed(0)
    step, cache = make_decode_step(model, 6, batch=2)
    assert len(handed) == 1 and cuda.events.count("recorded") == 1
    eager()
    step()
    assert cuda.events[-1] == "replay"
    assert all(torch.equal(a, b) for a, b in zip(eager_cache.tensors(), cache.tensors()))
    _, flops_eager = prefill_run(model, 5, graph=False)
    _, flops = prefill_run(model, 5)
    assert flops.total == flops_eager.total > 0 and len(handed) == 2
