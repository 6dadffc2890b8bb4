"""Sample answers for lesson 1 (source/01_two_phases): plausible mistakes and other correct solutions.

Keys are the solution cells' grade_ids; each value is the whole cell as a student would leave it.
Each mistake is a misconception the lesson teaches against and must lose the points of its idea
only (one graded cell each):
  request_metrics      TPOT averaged over all n tokens, not the n - 1 gaps
                       (one token handled: NaN)                                -> request_metrics_tpot
  token_arrival_times  a decode pass charged to the first token as well        -> token_arrivals_first_last
  flops_and_bytes      one FLOP per multiply-add; the decode step's bytes
                       leave out the KV cache it reads                         -> phase_flops, phase_bytes
  quiz_answers         q2: both floors move with bandwidth                     -> quiz_q2
  prediction           p1: a compute-bound prefill taken to run near peak      -> quiz_p1
"""

MISTAKES = {
    "request_metrics": '''
def request_metrics(send_time_s, token_times_s):
    times = as_token_times(send_time_s, token_times_s)
    ttft = times[0] - send_time_s
    e2e = times[-1] - send_time_s
    tpot = e2e / len(times) if len(times) > 1 else float("nan")
    return {"ttft_s": ttft, "tpot_s": tpot, "e2e_s": e2e}
''',
    "token_arrival_times": '''
def token_arrival_times(prompt_tokens, output_tokens, prefill_tokens_per_s, tpot_s, queue_s=0.0):
    ttft = queue_s + prompt_tokens / prefill_tokens_per_s
    return [ttft + k * tpot_s for k in range(1, output_tokens + 1)]
''',
    "flops_and_bytes": '''
def decode_step_flops(n_params):
    return n_params


def prefill_flops(n_params, n_tokens):
    return n_params * n_tokens


def decode_step_bytes(n_params, bytes_per_param, context_tokens, kv_bytes_per_token):
    return n_params * bytes_per_param


def prefill_bytes(n_params, bytes_per_param, n_tokens, kv_bytes_per_token):
    return n_params * bytes_per_param + n_tokens * kv_bytes_per_token


def arithmetic_intensity(flops, bytes_):
    return flops / bytes_
''',
    "quiz_answers": '''
q1 = "c"
q2 = "b"
q3 = "d"
''',
    # Compute-bound taken to mean that the pass runs near peak FLOP/s.
    "prediction": '''
p1 = "a"
''',
}

VARIANTS = {
    # Loops instead of closed forms; no use of the given helper, only the one check the idea needs.
    "loops": {
        "request_metrics": '''
def request_metrics(send_time_s, token_times_s):
    times = list(token_times_s)
    if len(times) == 1:  # one token, no gap: TPOT is NaN
        return {"ttft_s": times[0] - send_time_s, "tpot_s": float("nan"), "e2e_s": times[0] - send_time_s}
    gaps = []
    for earlier, later in zip(times, times[1:]):
        gaps.append(later - earlier)
    total = 0.0
    for gap in gaps:
        total += gap
    return {"ttft_s": times[0] - send_time_s, "tpot_s": total / len(gaps), "e2e_s": times[-1] - send_time_s}
''',
        "token_arrival_times": '''
def token_arrival_times(prompt_tokens, output_tokens, prefill_tokens_per_s, tpot_s, queue_s=0.0):
    t = queue_s + prompt_tokens * (1.0 / prefill_tokens_per_s)
    out = []
    for _ in range(output_tokens):
        out.append(t)
        t += tpot_s
    return out
''',
        "flops_and_bytes": '''
def decode_step_flops(n_params):
    return n_params + n_params  # one multiply and one add per parameter


def prefill_flops(n_params, n_tokens):
    total = 0
    for _ in range(n_tokens):
        total += decode_step_flops(n_params)
    return total


def decode_step_bytes(n_params, bytes_per_param, context_tokens, kv_bytes_per_token):
    total = n_params * bytes_per_param
    for _ in range(int(context_tokens)):
        total += kv_bytes_per_token
    return total


def prefill_bytes(n_params, bytes_per_param, n_tokens, kv_bytes_per_token):
    return decode_step_bytes(n_params, bytes_per_param, n_tokens, kv_bytes_per_token)


def arithmetic_intensity(flops, bytes_):
    return flops * (1.0 / bytes_)
''',
        "quiz_answers": '''
q1 = " C"
q2 = "A "
q3 = "d"
''',
    },
    # numpy throughout, numpy scalars returned.
    "numpy": {
        "request_metrics": '''
def request_metrics(send_time_s, token_times_s):
    t = as_token_times(send_time_s, token_times_s)
    tpot = np.diff(t).mean() if t.size > 1 else np.float64(np.nan)
    return {"ttft_s": t[0] - send_time_s, "tpot_s": tpot, "e2e_s": t[-1] - send_time_s}
''',
        "token_arrival_times": '''
def token_arrival_times(prompt_tokens, output_tokens, prefill_tokens_per_s, tpot_s, queue_s=0.0):
    ttft = queue_s + prompt_tokens / prefill_tokens_per_s
    return np.linspace(ttft, ttft + (output_tokens - 1) * tpot_s, output_tokens)
''',
        "flops_and_bytes": '''
def decode_step_flops(n_params):
    return np.float64(2.0) * n_params


def prefill_flops(n_params, n_tokens):
    return decode_step_flops(n_params) * n_tokens


def decode_step_bytes(n_params, bytes_per_param, context_tokens, kv_bytes_per_token):
    return np.dot([n_params, context_tokens], [bytes_per_param, kv_bytes_per_token])


def prefill_bytes(n_params, bytes_per_param, n_tokens, kv_bytes_per_token):
    return np.dot([n_params, n_tokens], [bytes_per_param, kv_bytes_per_token])


def arithmetic_intensity(flops, bytes_):
    return np.divide(flops, bytes_)
''',
    },
    # A careful student: validates every input by hand, with its own messages.
    "validating": {
        "request_metrics": '''
def request_metrics(send_time_s, token_times_s):
    if send_time_s != send_time_s:
        raise ValueError("send_time_s is NaN")
    times = [float(t) for t in token_times_s]
    if not times:
        raise ValueError("token_times_s is empty")
    if any(t != t for t in times) or times[0] < send_time_s:
        raise ValueError("token_times_s holds NaN or starts before send_time_s")
    if len(times) < 2:
        tpot = math.nan  # a single output token has no gap
    else:
        tpot = (times[-1] - times[0]) / (len(times) - 1)
    return {"ttft_s": times[0] - send_time_s, "tpot_s": tpot, "e2e_s": times[-1] - send_time_s}
''',
    },
}
