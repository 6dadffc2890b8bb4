"""Queues for lesson 2's serving comparison (given code: read it, predict from it).

Requests arrive at random (a Poisson process of `rate` requests/s). A prefill resource serves one
prompt at a time in a fixed time D, first come first served: an M/D/1 queue, the model DistServe
(Zhong et al., OSDI 2024, section 3.1) uses for its prefill instances. Goodput is the highest rate
at which a stated share of requests (DistServe: 90 %) meets the latency targets; goodput per GPU
divides it by the GPUs used. Step times come in as numbers, from the lesson's own functions.
Left out, so the figures are optimistic: the decode batch's random swings about its mean, and a
decode GPU waiting for memory to take a new cache.
"""

from __future__ import annotations

import decimal
import math
from typing import Callable

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
