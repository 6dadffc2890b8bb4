"""Queues for lesson 2's serving comparison (given code: read it, predict from it).

Requests arrive at random (a Poisson process of `rate` requests/s). A prefill resource serves one
prompt at a time in a fixed time D, first come first served: an M/D/1 queue, the model DistServe
(Zhong et al., OSDI 2024, section 3.1) uses for its prefill instances. Goodput is the highest rate
at which a stated share of requests (DistServe: 90 %) meets the latency targets; goodput per GPU
divides it by the GPUs used. Step times come in as numbers, from the lesson's own functions.
The formulas leave out the decode batch's random swings about its mean, a chunk's step growing with
the batch, a prompt waiting for the step already running and a decode GPU waiting for memory, so
their figures are optimistic; the seeded simulation at the end runs the steps with all of these.
"""

from __future__ import annotations

import decimal
import heapq
import math
from collections import deque
from typing import Callable

import numpy as np

# Erlang's sum below adds terms of alternating sign and growing size (about e^(R t)); it is summed in
# decimal with digits to spare for that. Past this many service times of waiting it refuses.
MAX_SERVICE_TIMES = 500


def _positive(**values: float) -> None:
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or value == math.inf:
            raise ValueError(f"{name} must be a positive finite number, got {value!r}")


def md1_mean_ttft(service_s: float, rate: float) -> float:
    """Mean TTFT (s) of an M/D/1 prefill queue: D + R D^2 / (2 (1 - R D)) (DistServe, section 3.1,
    eq. 1; the Pollaczek-Khinchine mean wait plus the service itself). inf once R D >= 1."""
    _positive(service_s=service_s, rate=rate)
    load = rate * service_s
    if load >= 1:
        return math.inf
    return service_s + rate * service_s ** 2 / (2 * (1 - load))


def md1_wait_cdf(wait_s: float, service_s: float, rate: float) -> float:
    """Share of requests that wait at most `wait_s` (s) before their service starts, in an M/D/1
    queue (Erlang 1909): (1 - rho) sum_{k=0}^{floor(t/D)} (R (kD - t))^k / k! e^{-R (kD - t)}."""
    _positive(service_s=service_s, rate=rate)
    if isinstance(wait_s, bool) or not isinstance(wait_s, (int, float)) or wait_s != wait_s:
        raise ValueError(f"wait_s must be a number of seconds, got {wait_s!r}")
    if wait_s < 0:
        return 0.0
    load = rate * service_s
    if load >= 1:
        return 0.0
    terms = math.floor(wait_s / service_s)
    if terms > MAX_SERVICE_TIMES:
        raise ValueError(f"wait_s is {terms} service times; the sum is exact only up to {MAX_SERVICE_TIMES}")
    with decimal.localcontext() as ctx:
        ctx.prec = 30 + math.ceil(0.9 * rate * wait_s)  # the largest term has about 0.87 R t digits
        r, d, t = decimal.Decimal(rate), decimal.Decimal(service_s), decimal.Decimal(wait_s)
        total = sum((r * (k * d - t)) ** k / math.factorial(k) * (r * (t - k * d)).exp() for k in range(1, terms + 1))
        total += (r * t).exp()  # k = 0 (decimal refuses 0 ** 0)
        share = float((1 - r * d) * total)
    return min(1.0, max(0.0, share))


def ttft_share(target_s: float, service_s: float, rate: float, extra_s: float = 0.0) -> float:
    """Share of requests whose TTFT, wait + service + `extra_s` (a fixed delay after the service,
    such as a KV cache transfer), is at most `target_s`."""
    return md1_wait_cdf(target_s - service_s - extra_s, service_s, rate)


def highest_rate(meets: Callable[[float], bool], upper: float, rel_tol: float = 1e-9) -> float:
    """Highest rate in (0, upper) at which `meets(rate)` holds, by bisection (`meets` holds below
    some rate and fails above it); 0.0 if it fails at every rate."""
    _positive(upper=upper)
    low, high = 0.0, upper
    if not meets(upper * rel_tol):
        return 0.0
    while high - low > rel_tol * upper:
        mid = (low + high) / 2
        low, high = (mid, high) if meets(mid) else (low, mid)
    return low


def colocated_rate(batch: int, output_tokens: int, decode_s: float, chunk_steps_s: list[float]) -> float:
    """Request rate (1/s) at which one GPU running chunked prefill holds `batch` decoding streams.

    Each request is decoded for `output_tokens` steps; each prompt takes `len(chunk_steps_s)` mixed
    steps, the other steps decode alone in `decode_s`. Little's law: streams = rate x output_tokens x
    mean step time, so rate = 1 / (output_tokens x decode_s / batch + sum over chunks (step - decode_s)).
    """
    _positive(batch=batch, output_tokens=output_tokens, decode_s=decode_s)
    extra = math.fsum(s - decode_s for s in chunk_steps_s)
    return 1 / (output_tokens * decode_s / batch + extra)


def decode_gpu_rate(batch: int, output_tokens: int, decode_s: float) -> float:
    """Requests/s one decode GPU finishes with `batch` streams each stepping every `decode_s`."""
    _positive(batch=batch, output_tokens=output_tokens, decode_s=decode_s)
    return batch / (output_tokens * decode_s)


def best_split(prefill_rate: float, decode_rate: float, max_gpus: int = 8) -> tuple[float, int, int]:
    """(goodput per GPU, prefill GPUs, decode GPUs): the split of at most `max_gpus` GPUs (one node)
    that serves the most requests/s per GPU, min(n_p x prefill_rate, n_d x decode_rate) / (n_p + n_d),
    as DistServe searches its placements. Each rate is one GPU's highest rate within the targets;
    each request goes to a GPU of its pool at random (a random share of a Poisson stream is again
    Poisson; round-robin would not be), so a router sending prompts to idle GPUs would do better."""
    best = (0.0, 0, 0)
    for n_p in range(1, max_gpus):
        for n_d in range(1, max_gpus - n_p + 1):
            per_gpu = min(n_p * prefill_rate, n_d * decode_rate) / (n_p + n_d)
            if per_gpu > best[0]:
                best = (per_gpu, n_p, n_d)
    return best


# --- a step-level simulation of the same designs ---------------------------------------------------
# The formulas above hold the service time fixed and the decode batch at its mean. The simulation
# below runs the steps themselves: Poisson arrivals (seeded), each step's time from the lesson's
# step-time model at the batch it actually carries, a new prompt waiting for the step already
# running, and no more streams than memory holds. Everything else is the formulas' model.

def _gpu(arrive: list[float], chunks: int, step_s: Callable[[int, int | None], float], output_tokens: int,
         max_batch: int) -> tuple[list[float], list[float], list[tuple[float, float, int, float]]]:
    """Run one GPU over requests reaching it at the sorted times `arrive`.

    Each needs `chunks` prefill steps (chunked prefill, one prompt at a time, first come first
    served; 0: its cache arrives ready, a decode GPU), then decodes `output_tokens` steps.
    `step_s(b, i)` is a step's time with b decoding streams and chunk i of a prompt (None: decode
    only). A prompt starts only while memory has room for its stream. Returns the time each request
    joins the decode batch (its stream gets a token at the end of each later step), the time memory
    took it (a cache that arrives with room is held at once; one that finds memory full waits for a
    stream to end; for a prompt: when it joins), and the steps as (end, duration, tokens given, start) where a run of
    equal decode steps is one entry: its tokens are steps x streams, its start the first's.
    """
    joined, held, seen = [math.nan] * len(arrive), list(arrive), [math.nan] * len(arrive)
    steps: list[tuple[float, float, int, float]] = []
    t, done_steps, finish = 0.0, 0, []  # decode steps so far; the step count at which each stream ends
    waiting: deque[int] = deque()
    nxt, prompt, chunk = 0, None, 0
    while True:
        while nxt < len(arrive) and arrive[nxt] <= t:
            waiting.append(nxt)
            seen[nxt] = t
            nxt += 1
        if chunks == 0:
            while waiting and len(finish) < max_batch:
                i = waiting.popleft()
                joined[i] = t
                if seen[i] < t:  # memory was full at the first step's end after it came
                    held[i] = t
                heapq.heappush(finish, done_steps + output_tokens)
        elif prompt is None and waiting and len(finish) < max_batch:
            prompt, chunk = waiting.popleft(), 0
        b = len(finish)
        if prompt is not None:  # one chunk, with every decoding stream
            d = step_s(b, chunk)
            t, k = t + d, 1
            chunk += 1
        elif b:  # decode alone until a stream ends or a request may act
            d = step_s(b, None)
            k = finish[0] - done_steps
            if nxt < len(arrive):
                k = max(1, min(k, math.ceil((arrive[nxt] - t) / d - 1e-9)))
            t += k * d
        elif nxt < len(arrive):  # idle until the next request
            t = max(t, arrive[nxt])
            continue
        else:
            break
        if b:
            steps.append((t, d, k * b, t - k * d))
            done_steps += k
            while finish and finish[0] <= done_steps:
                heapq.heappop(finish)
        if prompt is not None and chunk == chunks:
            joined[prompt] = held[prompt] = t
            heapq.heappush(finish, done_steps + output_tokens)
            prompt = None
    return joined, held, steps


def _arrivals(rate: float, requests: int, seed: int):
    gaps = np.random.default_rng(seed).exponential(1.0, requests)  # the same draws at every rate
    return np.cumsum(gaps) / rate


def _summary(arrive, ttft, steps, extra_gaps=None, warmup: float = 0.1) -> dict:
    """TTFTs and token gaps of the requests arriving after the first `warmup` share (the queue
    filling from empty), gaps counted up to the last arrival (the end drains the batch)."""
    arrive, ttft = np.asarray(arrive), np.asarray(ttft)
    start, end = arrive[int(warmup * len(arrive))], arrive[-1]
    s = np.array([(d, w) for t, d, w, _ in steps if start <= t <= end]).reshape(-1, 2)
    gap_s, weight = s[:, 0], s[:, 1]
    if extra_gaps is not None:  # one gap per request, e.g. the cache transfer before its second token
        keep = arrive >= start
        gap_s = np.concatenate([gap_s, np.asarray(extra_gaps)[keep]])
        weight = np.concatenate([weight, np.ones(int(keep.sum()))])
    return {"ttft_s": ttft[arrive >= start], "gap_s": gap_s, "gap_weight": weight}


def share_within(summary: dict, ttft_target_s: float, tbt_target_s: float) -> tuple[float, float]:
    """(share of requests within the TTFT target, share of token gaps within the TBT target)."""
    ttft = float(np.mean(summary["ttft_s"] <= ttft_target_s)) if len(summary["ttft_s"]) else 0.0
    w = summary["gap_weight"]
    gaps = float(w[summary["gap_s"] <= tbt_target_s].sum() / w.sum()) if w.sum() else 1.0
    return ttft, gaps


def simulate_colocated(rate: float, chunks: int, step_s: Callable[[int, int | None], float], output_tokens: int,
                       max_batch: int, requests: int = 2000, seed: int = 0) -> dict:
    """One GPU with chunked prefill at `rate` requests/s: the first token comes with the prompt's
    last chunk. Returns TTFTs (s) and token gaps (s, each weighted by the streams it delayed)."""
    _positive(rate=rate, output_tokens=output_tokens, max_batch=max_batch)
    arrive = _arrivals(rate, requests, seed)
    joined, _, steps = _gpu(arrive.tolist(), chunks, step_s, output_tokens, max_batch)
    return _summary(arrive, [j - a for j, a in zip(joined, arrive)], steps)


def simulate_pools(rate: float, prefill_gpus: int, decode_gpus: int, prefill_s: float, transfer_s: float,
                   decode_s: Callable[[int], float], output_tokens: int, max_batch: int,
                   first_token: str = "decode", requests: int = 2000, seed: int = 0) -> dict:
    """Two pools at `rate` requests/s in all, each request sent to a GPU of each pool at random.

    first_token "decode": the first token once the decode GPU holds the cache (the transfer, and a
    wait for memory where it is full, are in the TTFT); "prefill": from the prefill GPU, as
    DistServe and Splitwise count it (they delay the second token instead, one gap per request).
    """
    _positive(rate=rate, prefill_s=prefill_s, output_tokens=output_tokens, max_batch=max_batch)
    if first_token not in ("decode", "prefill"):
        raise ValueError(f"first_token must be 'decode' or 'prefill', got {first_token!r}")
    arrive = _arrivals(rate, requests, seed)
    rng = np.random.default_rng(seed + 1)
    to_prefill, to_decode = rng.integers(prefill_gpus, size=requests), rng.integers(decode_gpus, size=requests)
    free, prefilled = [0.0] * prefill_gpus, np.empty(requests)
    for i, (a, g) in enumerate(zip(arrive, to_prefill)):  # first come first served, D each
        free[g] = prefilled[i] = max(free[g], a) + prefill_s
    ready = prefilled + transfer_s
    joined, held, steps, first_step = np.empty(requests), np.empty(requests), [], np.empty(requests)
    for g in range(decode_gpus):
        mine = np.flatnonzero(to_decode == g)
        mine = mine[np.argsort(ready[mine], kind="stable")]
        j, h, s = _gpu(ready[mine].tolist(), 0, lambda b, _: decode_s(b), output_tokens, max_batch)
        joined[mine], held[mine] = j, h
        steps += s
        # a stream joins as a step starts (or the GPU idles until it comes): its second token ends that step
        starts = np.array([begin for _, _, _, begin in s] + [math.inf])
        first = np.minimum(np.searchsorted(starts, np.asarray(j) - 1e-12), len(s) - 1)
        first_step[mine] = np.asarray(j) + np.array([d for _, d, _, _ in s] + [0.0])[first]
    if first_token == "decode":
        return _summary(arrive, held - arrive, steps)
    return _summary(arrive, prefilled - arrive, steps, extra_gaps=first_step - prefilled)


def simulated_goodput(run: Callable[[float], dict], ttft_target_s: float, tbt_target_s: float, share: float,
                      upper: float, gap_share: float = 0.99) -> float:
    """Highest rate at which a simulation `run(rate)` has `share` of its requests within the TTFT
    target and `gap_share` of its token gaps within the TBT target (Sarathi-Serve's P99 TBT), to
    0.5 % of `upper`. The same seeded arrivals at every rate keep the search steady."""
    def meets(rate: float) -> bool:
        ttft, gaps = share_within(run(rate), ttft_target_s, tbt_target_s)
        return ttft >= share and gaps >= gap_share
    return highest_rate(meets, upper, 0.005)
