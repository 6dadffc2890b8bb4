"""Stand-ins for a clock, an accelerator and a model, to check timing code without timing anything.

A real measurement depends on the machine; these do not. FakeDevice behaves like a GPU as far
as a timer can tell: work is *queued* by a call and the clock only moves when you synchronize,
so a timer that forgets to wait reads the launch, not the work. Every clock read, wait and call
is logged in FakeDevice.events, in order.

    dev = FakeDevice()
    fn = dev.work([0.5, 0.25])      # a function whose calls queue 0.5 s, then 0.25 s of work
    fn(); dev.clock()               # -> 0.0: nothing has waited for the work yet
    dev.synchronize(); dev.clock()  # -> 0.5

RecordingModel has the interface of course.toy_model.ToyTransformer (new_cache, prefill, decode,
logits_no_cache). Every one of its calls, new_cache included (a real cache is zero-filled by a
kernel), queues a fixed time on a FakeDevice, and is recorded.

clock_hints(dev) wraps a timer's visible checks: when a check fails, its message also names the
first clock read that would mistime a GPU (work still queued, or the start read before the
request's setup) and what to change. Grading judges only the values a timer returns: on a device
whose clock only moves at sync(), every such mistake shows as a wrong time, and a harmless extra
clock read changes nothing. check_clock_reads(dev) is the strict form (any such read fails).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import torch

from course.checks import CheckFailed
from course.observe import grading


class FakeDevice:
    """An accelerator whose clock advances only when the host waits for queued work."""

    def __init__(self, start_s: float = 0.0):
        self.now_s = float(start_s)  # what clock() returns
        self.queued_s = 0.0  # work launched but not yet waited for
        self.events: list[str] = []  # "clock", "sync", or the label of each call, in order

    def clock(self) -> float:
        """Read the time (seconds); use in place of time.perf_counter."""
        self.events.append("clock")
        return self.now_s

    def synchronize(self) -> None:
        """Wait for every queued piece of work; use in place of course.device.synchronize."""
        self.events.append("sync")
        self.now_s += self.queued_s
        self.queued_s = 0.0

    def launch(self, seconds: float, label: str = "call") -> None:
        """Queue `seconds` of work, as an asynchronous kernel launch does."""
        self.events.append(label)
        self.queued_s += seconds

    def work(self, durations: Sequence[float], label: str = "call") -> Callable[[], None]:
        """A function whose n-th call queues durations[n] seconds of work (error past the end)."""
        remaining = list(durations)

        def fn() -> None:
            if not remaining:
                raise RuntimeError(f"called more than the {len(durations)} times planned")
            self.launch(remaining.pop(0), label)

        return fn

    def clock_reads_waited(self) -> bool:
        """True when every clock read came after a sync() that followed the last call before it."""
        return self.first_unwaited_read() is None

    def first_unwaited_read(self) -> tuple[int, list[str]] | None:
        """(number of the clock read, counting from 1; labels of the work still queued at it) for
        the first clock read made while launched work had not been waited for; None if none."""
        queued: list[str] = []
        reads = 0
        for event in self.events:
            if event == "clock":
                reads += 1
                if queued:
                    return reads, queued
            elif event == "sync":
                queued = []
            else:
                queued.append(event)
        return None


def _ordinal(n: int) -> str:
    return {1: "1st", 2: "2nd", 3: "3rd"}.get(n, f"{n}th")


def clock_read_problem(dev: FakeDevice, start_after: str | None = None) -> str | None:
    """What would mistime a GPU in `dev`'s event log, in one sentence, or None: a clock read while
    work was still queued (no sync() before it), or, with `start_after`, a first clock read (the
    start) before the call named `start_after` (e.g. "new_cache")."""
    if start_after is not None:
        reads_before = 0
        for event in dev.events:
            if event == start_after:
                break
            reads_before += event == "clock"
        else:
            reads_before = 0  # never called: the other checks say so
        if reads_before:
            return (f"the start clock was read before {start_after}(), so the time of {start_after} is "
                    f"counted in every token's time; call {start_after}() first, then sync(), "
                    f"then read the start time")
    found = dev.first_unwaited_read()
    if found is not None:
        n, queued = found
        work = ", ".join(dict.fromkeys(queued))
        return (f"the {_ordinal(n)} clock read came while the work of {work} was still queued; "
                f"on a GPU that reads the launch, not the work: call sync() right before "
                f"every clock read")
    return None


def check_clock_reads(dev: FakeDevice, start_after: str | None = None) -> None:
    """A check of where a timer reads its clock: fail, saying what to change, on any
    clock_read_problem. Stricter than the grading (a harmless extra read while work is queued
    fails it); the lesson's cells use clock_hints instead. Does nothing while autograding."""
    __tracebackhide__ = True
    if grading():
        return
    label = "clock reads"
    problem = clock_read_problem(dev, start_after)
    if problem:
        print(f"FAIL  {label}: {problem}")
        raise CheckFailed(f"{problem}\ncheck: {label}")
    reads = dev.events.count("clock")
    print(f"ok    {label}: all {reads} came after sync()" + (f", the first after {start_after}()" if start_after else ""))


class clock_hints:  # noqa: N801 - used like a function: `with checking(...), clock_hints(dev):`
    """Wrap the visible checks of a timer run on `dev`: when one fails, its one line also says
    which clock read would mistime a GPU (clock_read_problem), if any. A timer that returns the
    right times passes, whatever extra clock reads it makes."""

    def __init__(self, dev: FakeDevice, start_after: str | None = None):
        self.dev, self.start_after = dev, start_after

    def __enter__(self) -> "clock_hints":
        return self

    def __exit__(self, etype, err, tb) -> bool:
        __tracebackhide__ = True
        if isinstance(err, CheckFailed):
            problem = clock_read_problem(self.dev, self.start_after)
            if problem:
                raise type(err)(f"{err}\nthe likely cause: {problem}") from None
        return False


@dataclass
class FakeCache:
    """What RecordingModel.new_cache hands out: it only counts positions."""

    batch_size: int
    max_seq_len: int
    length: int = 0


@dataclass
class Call:
    kind: str  # "prefill", "decode" or "no_cache"
    tokens: list[list[int]]  # the token ids passed in, one list per sequence
    cache: FakeCache | None


@dataclass
class RecordingModel:
    """A model that takes `prefill_s` per prefill and `decode_s` per decode on `device`.

    Its next token is a fixed function of the last token it was given, so a test can predict
    every token of a greedy loop. `calls` records each call, in order."""

    device: FakeDevice
    new_cache_s: float = 0.05  # zero-filling the cache: a kernel, queued like the others
    prefill_s: float = 0.4
    decode_s: float = 0.03
    no_cache_s_per_token: float = 0.01
    vocab_size: int = 50
    calls: list[Call] = field(default_factory=list)
    caches: list[FakeCache] = field(default_factory=list)

    def next_token(self, token: int) -> int:
        return (7 * token + 3) % self.vocab_size

    def _logits(self, last: torch.Tensor) -> torch.Tensor:
        """(B, V) logits whose argmax is next_token of each sequence's last token."""
        rows = [self.next_token(int(t)) for t in last.tolist()]
        logits = torch.zeros(len(rows), self.vocab_size)
        logits[torch.arange(len(rows)), torch.tensor(rows)] = 1.0
        return logits

    def new_cache(self, batch_size: int, max_seq_len: int) -> FakeCache:
        cache = FakeCache(batch_size, max_seq_len)
        self.caches.append(cache)
        self.device.launch(self.new_cache_s, "new_cache")
        return cache

    def prefill(self, idx: torch.Tensor, cache: FakeCache) -> torch.Tensor:
        self._record("prefill", idx, cache, self.prefill_s)
        return self._logits(idx[:, -1])

    def decode(self, token: torch.Tensor, cache: FakeCache) -> torch.Tensor:
        self._record("decode", token, cache, self.decode_s)
        return self._logits(token[:, -1])

    def logits_no_cache(self, idx: torch.Tensor) -> torch.Tensor:
        self._record("no_cache", idx, None, self.no_cache_s_per_token * idx.shape[1])
        return self._logits(idx[:, -1])

    def _record(self, kind: str, idx: torch.Tensor, cache: FakeCache | None, seconds: float) -> None:
        if not isinstance(idx, torch.Tensor) or idx.ndim != 2:
            raise TypeError(f"{kind}: expected a (B, T) tensor of token ids, got {idx!r}")
        self.calls.append(Call(kind, idx.tolist(), cache))
        if cache is not None:
            cache.length += idx.shape[1]
            if cache.length > cache.max_seq_len:
                raise ValueError(f"{kind}: the cache holds {cache.max_seq_len} positions, "
                                 f"{cache.length} were written")
        self.device.launch(seconds, kind)
