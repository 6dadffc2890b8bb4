"""Lesson 3's GPU timing path without a GPU (course/graphs.py): which path each device gets, that
capture and replay are called as a CUDA graph needs them, and that a replayed decode step and
prefill leave the same cache and logits as eager ones (a fake CUDA layer on the CPU). `make
gpu-check` runs the same path on a real GPU (utils/bench/gpu_check.py: graph_check)."""

from __future__ import annotations

from contextlib import contextmanager

import pytest
import torch

from course import graphs
from course.formatting import page_lines
from course.models import ModelConfig
from course.toy_model import build_model
from utils.lessons import REPO

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

    def CUDAGraph(self):  # noqa: N802 - torch.cuda's name
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
    fn = lambda: None  # noqa: E731 - a stand-in callable
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


def test_a_pass_that_cannot_be_captured_stops_with_a_sentence_never_timed_eagerly():
    """A capture that fails part-way: the graph is reset, the device synchronised, and the failure
    raised with a sentence; the pass is never handed back to be timed eagerly (Python's launches)."""
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
    with pytest.raises(RuntimeError, match="could not be captured as a CUDA graph.*operation not permitted"
                                           ".*not the model, so it stops here"):
        graphs.replayed(fn, "cuda", warmup=1, cuda=cuda)
    assert cuda.events[-4:] == ["capture begins", "recorded", "graph reset", "synchronize"], cuda.events
    assert len(calls) == 1  # the warm-up only: nothing ran eagerly after the failure
    with pytest.raises(ValueError, match="warmup"):
        graphs.capture(fn, warmup=0, cuda=FakeCuda())


def _greedy(model, prompt, n_out):
    """The loop of lesson 3's generate(): one prefill, then a decode per token."""
    cache = model.new_cache(prompt.shape[0], prompt.shape[1] + n_out)
    tokens = [model.prefill(prompt, cache).argmax(-1, keepdim=True)]
    while len(tokens) < n_out:
        tokens.append(model.decode(tokens[-1], cache).argmax(-1, keepdim=True))
    return torch.cat(tokens, dim=1)


def test_a_whole_request_replays_as_cuda_graphs_with_the_eager_tokens(monkeypatch):
    """The prompt sweep's requests on a GPU (the fake layer): the prefill and each decode position
    captured once, at the first request; later requests only replay, and every request gives the
    tokens the eager model gives."""
    cuda = FakeCuda()
    real = graphs.replayed
    monkeypatch.setattr(graphs, "replayed", lambda fn, device, cuda=None: real(fake.kernel(fn), device, cuda=fake))
    fake = cuda
    model = build_model(TINY, seed=3)
    prompt = torch.randint(0, TINY.vocab_size, (2, 7), generator=torch.Generator().manual_seed(2))
    assert graphs.for_requests(model, prompt, 4, "cpu") is model  # a CPU: the model itself
    served = graphs.for_requests(model, prompt, 4, "cuda")
    assert isinstance(served, graphs.RequestGraphs)
    eager = _greedy(model, prompt, 4)
    assert torch.equal(_greedy(served, prompt, 4), eager)
    assert served.captures == 4 and cuda.events.count("capture begins") == 4  # the prefill and 3 decode positions
    replays = cuda.events.count("replay")
    other = torch.randint(0, TINY.vocab_size, (2, 7), generator=torch.Generator().manual_seed(5))
    assert torch.equal(_greedy(served, other, 4), _greedy(model, other, 4))
    assert served.captures == 4 and cuda.events.count("replay") == replays + 4  # replayed, nothing captured again
    with pytest.raises(ValueError, match="batch 2"):
        served.new_cache(1, 11)


def test_bench_captures_through_the_course(monkeypatch):
    """utils/bench/model.py's hand-captured decode is course.graphs.capture, not a copy of it."""
    from utils.bench import model as bench
    from utils.bench import passes

    seen = []
    monkeypatch.setattr(passes, "capture", lambda fn: seen.append(fn) or "replay")
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

    import nbformat

    from course.counting import count_kernel_flops

    path = REPO / "source" / "03_timing_prefill_decode" / "timing_prefill_decode.ipynb"
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


def test_attention_is_restricted_to_a_kernel_that_gives_the_right_results():
    """On a GPU (the fake: a model on the CPU, its kernels' agreement given) the first fused kernel that
    agrees with the math kernel is the only one allowed; where none agrees, the lesson stops with a
    sentence, never a silent mismatch. On a CPU nothing is chosen."""
    from torch.nn.attention import SDPBackend

    from course.device_attention import agrees, restrict_attention

    model = build_model(TINY, seed=3)
    assert "CPU kernel" in restrict_attention(model, "cpu") and model.layers[0].attention.backends is None
    verdicts = {"FLASH_ATTENTION": (False, 0.7), "EFFICIENT_ATTENTION": (True, 1e-3), "CUDNN_ATTENTION": (True, 0.0)}
    said = restrict_attention(model, "cuda", agree=verdicts.get)
    assert "efficient_attention only" in said
    assert all(layer.attention.backends == [SDPBackend.EFFICIENT_ATTENTION] for layer in model.layers)

    def broken(name):
        if name == "CUDNN_ATTENTION":
            raise RuntimeError("No available kernel. Aborting execution.")
        return False, 0.5

    with pytest.raises(RuntimeError, match="no fused attention kernel.*flash_attention: differs.*5.00e-01.*cudnn_attention: "
                                           "does not run here.*lesson 3 stops here rather than time wrong results"):
        restrict_attention(build_model(TINY, seed=3), "cuda", agree=broken)
    ok, gap = agrees(model, "FLASH_ATTENTION", prompt_len=9)  # on a CPU: its flash kernel against the math one
    assert ok and gap < 1e-4 and model.layers[0].attention.backends is None  # left as it was found


def _cell(marker: str) -> str:

    import nbformat

    path = REPO / "source" / "03_timing_prefill_decode" / "timing_prefill_decode.ipynb"
    return next(c.source for c in nbformat.read(str(path), as_version=4).cells
                if c.cell_type == "code" and marker in c.source)


def test_the_prompt_sweep_runs_generate_on_replayed_passes_on_a_gpu():
    """The prompt sweep (section 5) as a GPU runs it: your generate() is handed, for each point, the
    object course.graphs.for_requests makes for that request (its passes replayed as CUDA graphs), not
    the eager model, whose few hundred launches a step would be timed instead."""
    import ast

    from course.timing import Sampled

    source = _cell("def request_sweep(")
    tree = ast.parse(source)
    wanted = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "request_sweep"]
    handed = []

    class HW:
        measured, bandwidth_bytes_per_s = False, 3.35e12

    def generate(m, prompt, n_out):
        handed.append(m)
        return {"ttft_s": 1.0, "tpot_s": 0.1, "e2e_s": 1.7}

    def in_turns(points, run, **kwargs):
        return {p: [run(p)] for p in points}

    model = object()
    namespace = {"HW": HW, "PEAK_FLOPS": 989e12, "generate": generate, "in_turns": in_turns, "model": model,
                 "DEVICE": torch.device("cuda"), "ROUNDS": 1, "WEIGHT_BYTES": 1,
                 "for_requests": lambda m, prompt, n_out, device: ("served", m, n_out, str(device)),
                 "sampled": lambda runs, key: [Sampled(str(p), [r[0][key]]) for p, r in runs.items()]}
    exec(compile(ast.Module(body=wanted, type_ignores=[]), "request_sweep", "exec"), namespace)
    namespace["request_sweep"]([16, 64], lambda p: (torch.zeros((1, p), dtype=torch.long), 4), "prompt length")
    assert handed and all(m == ("served", model, 4, "cuda") for m in handed), handed


def test_the_batch_sweep_on_a_gpu_goes_past_its_own_t_star():
    """The batch sweep's sizes on a GPU come from that GPU's own T* (an H100 SXM in bf16: about 295),
    not a list fixed in advance that stopped at 128."""
    import ast

    from course.timing import batches_past

    source = _cell("PROMPT_LENS, BATCHES = ")
    first = ast.parse(source).body[0]
    assert isinstance(first, ast.If) and "cuda" in ast.unparse(first.test)

    class HW:
        bandwidth_bytes_per_s = 3.35e12

    namespace = {"DEVICE": torch.device("cuda"), "HW": HW, "PEAK_FLOPS": 989e12, "DTYPE": torch.bfloat16,
                 "batches_past": batches_past}
    exec(compile(ast.Module(body=[first], type_ignores=[]), "batch sizes", "exec"), namespace)
    t_star = 989e12 / 3.35e12 * 2 / 2
    assert max(namespace["BATCHES"]) >= 2 * t_star and namespace["BATCHES"][0] == 1, namespace["BATCHES"]
    assert batches_past(295.2) == [1, 4, 16, 64, 256, 1024]
    with pytest.raises(ValueError, match="t_star"):
        batches_past(0)


def test_counting_flops_captures_no_graph_to_throw_away():
    """Wherever the lesson keeps only the FLOPs of prefill_run or make_decode_step (`[1]`), it asks
    for no graph (graph=False): on a GPU a capture made only to be thrown away costs memory and time."""
    import ast

    import nbformat

    path = REPO / "source" / "03_timing_prefill_decode" / "timing_prefill_decode.ipynb"
    thrown = []
    for cell in nbformat.read(str(path), as_version=4).cells:
        if cell.cell_type != "code" or cell.source.lstrip().startswith("%"):
            continue
        try:
            tree = ast.parse(cell.source)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Call)
                    and getattr(node.value.func, "id", "") == "prefill_run"
                    and ast.unparse(node.slice) == "1"
                    and not any(k.arg == "graph" and ast.unparse(k.value) == "False" for k in node.value.keywords)):
                thrown.append(ast.unparse(node))
    assert not thrown, thrown


def test_the_first_request_runs_generate_on_replayed_passes_on_a_gpu(monkeypatch):
    """Section 3's request (the lesson's first timed generate) as a GPU runs it, through the fake CUDA
    layer: the warm-up request captures the prefill and every decode position, and the request whose
    times are printed and drawn runs every pass as a replay (32 of them, nothing captured, no pass
    outside a replay), as the set-up's line says of every step."""
    import time

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cuda, replaying = FakeCuda(), []

    def replayed(fn, device, cuda=None):
        replay = real(fake.kernel(fn), device, cuda=fake)

        def marked():
            replaying.append(True)
            try:
                replay()
            finally:
                replaying.pop()
        return marked

    real, fake = graphs.replayed, cuda
    monkeypatch.setattr(graphs, "replayed", replayed)
    model = build_model(TINY, seed=3)
    passes = []  # (kind, inside a replay) of every pass the model runs
    for name in ("prefill", "decode"):
        def counted(*args, method=getattr(model, name), name=name):  # noqa: B008 - each pass bound when defined
            passes.append((name, bool(replaying)))
            return method(*args)
        monkeypatch.setattr(model, name, counted)

    solution = {"torch": torch, "time": time, "synchronize": lambda: None, "token_ids": lambda **kw: None,
                "integers": lambda **kw: None}
    exec(_cell("def generate("), solution)  # the reference generate()
    requests = []

    def generate(m, prompt, n_out):
        before = (cuda.events.count("capture begins"), cuda.events.count("replay"), len(passes))
        out = solution["generate"](m, prompt, n_out)
        ran = passes[before[2]:]
        requests.append((n_out, cuda.events.count("capture begins") - before[0],
                         cuda.events.count("replay") - before[1], sum(inside for _, inside in ran), len(ran)))
        return out

    def for_requests(m, prompt, n_out, device):  # the tensors stay on the CPU; course.graphs is told it is a GPU
        assert device == torch.device("cpu")
        return graphs.for_requests(m, prompt, n_out, "cuda")

    namespace = {"torch": torch, "plt": plt, "model": model, "cfg": model.config, "DEVICE": torch.device("cpu"),
                 "generate": generate, "for_requests": for_requests, "PREFILL_COLOR": "C0", "DECODE_COLOR": "C1",
                 "page_lines": page_lines}   # as the lesson's set-up cell imports it
    source = _cell("request = generate(").replace("(1, 128)", "(1, 12)")  # a shorter prompt: the same path
    exec(compile(source, "section 3", "exec"), namespace)
    plt.close("all")
    *warm_up, timed = requests
    assert timed == (32, 0, 32, 32, 32), requests  # 32 tokens: 32 replays, no capture, every pass inside one
    assert sum(r[1] for r in warm_up) == 32, requests  # the prefill and 31 decode positions, captured once
