"""Sample answers for lesson 1 (source/01_two_phases): plausible mistakes and other correct solutions.

Keys are the solution cells' grade_ids; each value is the whole cell as a student would leave it.
"""

MISTAKES = {
    # TPOT averaged over all n tokens instead of the n - 1 gaps after the first one.
    "request_metrics": '''
def request_metrics(send_time_s, token_times_s):
    """TTFT, TPOT and end-to-end latency (s) of one streamed request, by vLLM's definitions."""
    if math.isnan(send_time_s):
        raise ValueError("send_time_s is NaN")
    times = list(token_times_s)
    if len(times) < 2:
        raise ValueError("token_times_s needs at least two tokens for TPOT")
    if any(math.isnan(t) for t in times):
        raise ValueError("token_times_s contains NaN")
    if times[0] < send_time_s:
        raise ValueError("token_times_s starts before send_time_s")
    if any(b <= a for a, b in zip(times, times[1:])):
        raise ValueError("token_times_s must be strictly increasing")
    ttft = times[0] - send_time_s
    e2e = times[-1] - send_time_s
    return {"ttft_s": ttft, "tpot_s": e2e / len(times), "e2e_s": e2e}
''',
    # One decode pass charged to every output token, the first one included (n instead of n - 1).
    "latency_model": '''
def ttft_model(prompt_tokens, prefill_tokens_per_s, queue_s=0.0):
    """Predicted time to first token (s)."""
    require_positive("prompt_tokens", prompt_tokens)
    require_positive("prefill_tokens_per_s", prefill_tokens_per_s)
    require_non_negative("queue_s", queue_s)
    return queue_s + prompt_tokens / prefill_tokens_per_s


def e2e_model(prompt_tokens, output_tokens, prefill_tokens_per_s, tpot_s, queue_s=0.0):
    """Predicted end-to-end latency (s)."""
    require_positive("output_tokens", output_tokens)
    require_positive("tpot_s", tpot_s)
    return ttft_model(prompt_tokens, prefill_tokens_per_s, queue_s) + output_tokens * tpot_s
''',
    # No colours passed: matplotlib draws both bars in its first default colour.
    "phase_bar_chart": '''
def phase_bar_chart(ax, prefill_ms, decode_ms):
    """Draw one request's prefill and decode times (ms) as two bars; return ax."""
    require_non_negative("prefill_ms", prefill_ms)
    require_non_negative("decode_ms", decode_ms)
    ax.bar(["prefill", "decode"], [prefill_ms, decode_ms])
    ax.set_ylabel("time (ms)")
    return ax
''',
    # The decode step's bytes leave out the KV cache it reads.
    "flops_and_bytes": '''
def decode_step_flops(n_params):
    require_positive("n_params", n_params)
    return 2 * n_params


def prefill_flops(n_params, n_tokens):
    require_positive("n_params", n_params)
    require_positive("n_tokens", n_tokens)
    return 2 * n_params * n_tokens


def decode_step_bytes(n_params, bytes_per_param, context_tokens, kv_bytes_per_token):
    require_positive("n_params", n_params)
    require_positive("bytes_per_param", bytes_per_param)
    require_non_negative("context_tokens", context_tokens)
    require_non_negative("kv_bytes_per_token", kv_bytes_per_token)
    return n_params * bytes_per_param


def prefill_bytes(n_params, bytes_per_param, n_tokens, kv_bytes_per_token):
    require_positive("n_params", n_params)
    require_positive("bytes_per_param", bytes_per_param)
    require_positive("n_tokens", n_tokens)
    require_non_negative("kv_bytes_per_token", kv_bytes_per_token)
    return n_params * bytes_per_param + n_tokens * kv_bytes_per_token
''',
    # The ridge point upside down: bytes per FLOP instead of FLOPs per byte.
    "intensity_and_ridge": '''
def arithmetic_intensity(flops, bytes_):
    require_non_negative("flops", flops)
    require_positive("bytes_", bytes_)
    return flops / bytes_


def ridge_point(peak_flops_per_s, bandwidth_bytes_per_s):
    require_positive("peak_flops_per_s", peak_flops_per_s)
    require_positive("bandwidth_bytes_per_s", bandwidth_bytes_per_s)
    return bandwidth_bytes_per_s / peak_flops_per_s


def bound_resource(intensity, ridge):
    require_non_negative("intensity", intensity)
    require_positive("ridge", ridge)
    return "compute" if intensity >= ridge else "memory"
''',
    # The roofline bound taken as the sum of compute and memory time (that is the upper bound).
    "time_bounds": '''
def min_decode_step_time_s(bytes_, bandwidth_bytes_per_s):
    require_positive("bytes_", bytes_)
    require_positive("bandwidth_bytes_per_s", bandwidth_bytes_per_s)
    return bytes_ / bandwidth_bytes_per_s


def min_step_time_s(flops, bytes_, peak_flops_per_s, bandwidth_bytes_per_s):
    require_non_negative("flops", flops)
    require_non_negative("bytes_", bytes_)
    require_positive("peak_flops_per_s", peak_flops_per_s)
    require_positive("bandwidth_bytes_per_s", bandwidth_bytes_per_s)
    return flops / peak_flops_per_s + bytes_ / bandwidth_bytes_per_s
''',
    # Question 1 right; question 2 blames attention's quadratic cost.
    "quiz_answers": '''
q1 = "b"
q2 = "a"
''',
}

VARIANTS = {
    # Loops instead of closed forms, hand-written input checks instead of the given helpers.
    "loops": {
        "request_metrics": '''
def request_metrics(send_time_s, token_times_s):
    if send_time_s != send_time_s:
        raise ValueError("send_time_s is NaN")
    times = list(token_times_s)
    if not times:
        raise ValueError("token_times_s is empty")
    if len(times) == 1:
        raise ValueError("token_times_s: TPOT is undefined for a single output token")
    previous = send_time_s
    gaps = []
    for i, t in enumerate(times):
        if t != t:
            raise ValueError(f"token_times_s[{i}] is NaN")
        if i == 0 and t < send_time_s:
            raise ValueError("token_times_s: first token before send_time_s")
        if i > 0:
            if t <= previous:
                raise ValueError(f"token_times_s not increasing at index {i}")
            gaps.append(t - previous)
        previous = t
    total = 0.0
    for gap in gaps:
        total += gap
    return {"ttft_s": times[0] - send_time_s, "tpot_s": total / len(gaps), "e2e_s": times[-1] - send_time_s}
''',
        "latency_model": '''
def ttft_model(prompt_tokens, prefill_tokens_per_s, queue_s=0.0):
    for name, value in [("prompt_tokens", prompt_tokens), ("prefill_tokens_per_s", prefill_tokens_per_s)]:
        if math.isnan(value) or value <= 0:
            raise ValueError(f"{name} must be positive, got {value}")
    if math.isnan(queue_s) or queue_s < 0:
        raise ValueError(f"queue_s must be >= 0, got {queue_s}")
    return queue_s + prompt_tokens * (1.0 / prefill_tokens_per_s)


def e2e_model(prompt_tokens, output_tokens, prefill_tokens_per_s, tpot_s, queue_s=0.0):
    for name, value in [("output_tokens", output_tokens), ("tpot_s", tpot_s)]:
        if math.isnan(value) or value <= 0:
            raise ValueError(f"{name} must be positive, got {value}")
    t = ttft_model(prompt_tokens, prefill_tokens_per_s, queue_s)
    for _ in range(output_tokens - 1):
        t += tpot_s
    return t
''',
        "phase_bar_chart": '''
def phase_bar_chart(ax, prefill_ms, decode_ms):
    for name, value in [("prefill_ms", prefill_ms), ("decode_ms", decode_ms)]:
        if math.isnan(value) or value < 0:
            raise ValueError(f"{name} must be >= 0, got {value}")
    for x, height, colour in [(0, prefill_ms, PREFILL_COLOR), (1, decode_ms, DECODE_COLOR)]:
        ax.bar(x, height, color=colour, width=0.6)
    ax.set_xticks([0, 1])
    ax.set_xticklabels(["prefill", "decode"])
    ax.set_ylabel("milliseconds (ms)")
    return ax
''',
        "flops_and_bytes": '''
def decode_step_flops(n_params):
    require_positive("n_params", n_params)
    return n_params + n_params  # one multiply and one add per parameter


def prefill_flops(n_params, n_tokens):
    require_positive("n_params", n_params)
    require_positive("n_tokens", n_tokens)
    total = 0
    for _ in range(n_tokens):
        total += decode_step_flops(n_params)
    return total


def decode_step_bytes(n_params, bytes_per_param, context_tokens, kv_bytes_per_token):
    require_positive("n_params", n_params)
    require_positive("bytes_per_param", bytes_per_param)
    require_non_negative("context_tokens", context_tokens)
    require_non_negative("kv_bytes_per_token", kv_bytes_per_token)
    total = n_params * bytes_per_param
    for _ in range(int(context_tokens)):
        total += kv_bytes_per_token
    return total


def prefill_bytes(n_params, bytes_per_param, n_tokens, kv_bytes_per_token):
    require_positive("n_tokens", n_tokens)
    return decode_step_bytes(n_params, bytes_per_param, n_tokens, kv_bytes_per_token)
''',
        "intensity_and_ridge": '''
def arithmetic_intensity(flops, bytes_):
    if not flops >= 0:
        raise ValueError(f"flops must be >= 0, got {flops}")
    if not bytes_ > 0:
        raise ValueError(f"bytes_ must be > 0, got {bytes_}")
    return flops * (1.0 / bytes_)


def ridge_point(peak_flops_per_s, bandwidth_bytes_per_s):
    if not peak_flops_per_s > 0:
        raise ValueError(f"peak_flops_per_s must be > 0, got {peak_flops_per_s}")
    if not bandwidth_bytes_per_s > 0:
        raise ValueError(f"bandwidth_bytes_per_s must be > 0, got {bandwidth_bytes_per_s}")
    return arithmetic_intensity(peak_flops_per_s, bandwidth_bytes_per_s)


def bound_resource(intensity, ridge):
    if not intensity >= 0:
        raise ValueError(f"intensity must be >= 0, got {intensity}")
    if not ridge > 0:
        raise ValueError(f"ridge must be > 0, got {ridge}")
    if intensity < ridge:
        return "memory"
    return "compute"
''',
        "time_bounds": '''
def min_step_time_s(flops, bytes_, peak_flops_per_s, bandwidth_bytes_per_s):
    require_non_negative("flops", flops)
    require_non_negative("bytes_", bytes_)
    require_positive("peak_flops_per_s", peak_flops_per_s)
    require_positive("bandwidth_bytes_per_s", bandwidth_bytes_per_s)
    compute_s = flops / peak_flops_per_s
    memory_s = bytes_ / bandwidth_bytes_per_s
    if compute_s > memory_s:
        return compute_s
    return memory_s


def min_decode_step_time_s(bytes_, bandwidth_bytes_per_s):
    require_positive("bytes_", bytes_)
    return min_step_time_s(0, bytes_, 1.0, bandwidth_bytes_per_s)
''',
        "quiz_answers": '''
q1 = " B"
q2 = "D "
''',
    },
    # numpy throughout, numpy scalars returned, categorical bars drawn one at a time.
    "numpy": {
        "request_metrics": '''
def request_metrics(send_time_s, token_times_s):
    if np.isnan(send_time_s):
        raise ValueError("send_time_s is NaN")
    t = np.asarray(token_times_s, dtype=float)
    if t.size < 2:
        raise ValueError(f"token_times_s has {t.size} token(s); TPOT needs two or more")
    if np.isnan(t).any():
        raise ValueError("token_times_s contains NaN")
    if t[0] < send_time_s or np.any(np.diff(t) <= 0):
        raise ValueError("token_times_s must start after send_time_s and increase strictly")
    return {"ttft_s": t[0] - send_time_s, "tpot_s": np.diff(t).mean(), "e2e_s": t[-1] - send_time_s}
''',
        "phase_bar_chart": '''
def phase_bar_chart(ax, prefill_ms, decode_ms):
    require_non_negative("prefill_ms", prefill_ms)
    require_non_negative("decode_ms", decode_ms)
    ax.bar("prefill", prefill_ms, color=PREFILL_COLOR, alpha=0.9)
    ax.bar("decode", decode_ms, color=DECODE_COLOR, alpha=0.9)
    ax.set_ylabel("ms")
    return ax
''',
        "flops_and_bytes": '''
def decode_step_flops(n_params):
    require_positive("n_params", n_params)
    return np.float64(2.0) * n_params


def prefill_flops(n_params, n_tokens):
    require_positive("n_tokens", n_tokens)
    return decode_step_flops(n_params) * n_tokens


def decode_step_bytes(n_params, bytes_per_param, context_tokens, kv_bytes_per_token):
    require_positive("n_params", n_params)
    require_positive("bytes_per_param", bytes_per_param)
    require_non_negative("context_tokens", context_tokens)
    require_non_negative("kv_bytes_per_token", kv_bytes_per_token)
    return np.dot([n_params, context_tokens], [bytes_per_param, kv_bytes_per_token])


def prefill_bytes(n_params, bytes_per_param, n_tokens, kv_bytes_per_token):
    require_positive("n_params", n_params)
    require_positive("bytes_per_param", bytes_per_param)
    require_positive("n_tokens", n_tokens)
    require_non_negative("kv_bytes_per_token", kv_bytes_per_token)
    return np.dot([n_params, n_tokens], [bytes_per_param, kv_bytes_per_token])
''',
        "time_bounds": '''
def min_decode_step_time_s(bytes_, bandwidth_bytes_per_s):
    require_positive("bytes_", bytes_)
    require_positive("bandwidth_bytes_per_s", bandwidth_bytes_per_s)
    return np.divide(bytes_, bandwidth_bytes_per_s)


def min_step_time_s(flops, bytes_, peak_flops_per_s, bandwidth_bytes_per_s):
    require_non_negative("flops", flops)
    require_non_negative("bytes_", bytes_)
    require_positive("peak_flops_per_s", peak_flops_per_s)
    require_positive("bandwidth_bytes_per_s", bandwidth_bytes_per_s)
    return np.max([flops / peak_flops_per_s, bytes_ / bandwidth_bytes_per_s])
''',
    },
}
