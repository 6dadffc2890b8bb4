"""Sample answers for lesson 3 (source/03_timing_prefill_decode): plausible mistakes and other
correct solutions.

Keys are the solution cells' grade_ids; each value is the whole cell as a student would leave it.
The stubs' given argument checks (course/validate.py) are kept, except by the "loops" variant,
which deletes them: no grade depends on input validation.
"""

MISTAKES = {
    # No sync() before reading the clock at the end of a run: on a GPU this times the launch only.
    "time_fn": '''
def time_fn(fn, warmup=2, repeats=5, clock=time.perf_counter, sync=synchronize):
    """Time fn() `repeats` times, after `warmup` untimed calls; durations in seconds."""
    integers(at_least=0, warmup=warmup)
    integers(at_least=1, repeats=repeats)
    for _ in range(warmup):
        fn()
    sync()
    times = []
    for _ in range(repeats):
        start = clock()
        fn()
        times.append(clock() - start)
    return {"times_s": times, "median_s": statistics.median(times), "spread_s": max(times) - min(times)}
''',
    # The start clock read straight after new_cache, without sync(): on a GPU the cache's
    # zero-fill is still queued, and its time lands in TTFT.
    "generate": '''
def generate(model, prompt, n_out, clock=time.perf_counter, sync=synchronize):
    """Greedy generation of n_out tokens after prompt (B, T)."""
    token_ids(prompt=prompt)
    integers(at_least=1, n_out=n_out)
    cache = model.new_cache(prompt.shape[0], prompt.shape[1] + n_out)
    start = clock()
    token = model.prefill(prompt, cache).argmax(dim=-1, keepdim=True)
    sync()
    times = [clock() - start]
    tokens = [token]
    for _ in range(n_out - 1):
        token = model.decode(token, cache).argmax(dim=-1, keepdim=True)
        sync()
        times.append(clock() - start)
        tokens.append(token)
    tpot = (times[-1] - times[0]) / (n_out - 1) if n_out > 1 else float("nan")
    return {"tokens": torch.cat(tokens, dim=1), "token_times_s": times,
            "ttft_s": times[0], "tpot_s": tpot, "e2e_s": times[-1]}
''',
    # A decode step predicted like a prefill: its matmuls do 2 N B FLOPs per prompt token, so the
    # predicted TPOT grows with the prompt as TTFT does.
    "predict_bounds": '''
def predict_bounds(prompt_len, batch, n_params, weight_bytes, kv_bytes_per_token, bandwidth, peak_flops):
    integers(at_least=1, prompt_len=prompt_len, batch=batch)
    positive(n_params=n_params, weight_bytes=weight_bytes, bandwidth=bandwidth, peak_flops=peak_flops)
    non_negative(kv_bytes_per_token=kv_bytes_per_token)
    memory = (weight_bytes + batch * prompt_len * kv_bytes_per_token) / bandwidth
    compute = 2 * n_params * batch * prompt_len / peak_flops
    return {"ttft_s": max(compute, memory), "tpot_s": max(compute, memory)}
''',
    # The KV cache a decode step reads is left out of the bytes.
    "decode_mbu": '''
def decode_mbu(weight_bytes, kv_bytes, tpot_s, peak_bytes_per_s):
    """(achieved bytes/s, MBU as a fraction) of one decode step."""
    non_negative(weight_bytes=weight_bytes, kv_bytes=kv_bytes)
    positive(tpot_s=tpot_s, peak_bytes_per_s=peak_bytes_per_s)
    achieved = weight_bytes / tpot_s
    return achieved, achieved / peak_bytes_per_s
''',
    # MFU returned in percent, not as a fraction.
    "prefill_mfu": '''
def prefill_mfu(flops, prefill_s, peak_flops_per_s):
    """(achieved FLOP/s, MFU as a fraction) of one prefill."""
    non_negative(flops=flops)
    positive(prefill_s=prefill_s, peak_flops_per_s=peak_flops_per_s)
    achieved = flops / prefill_s
    return achieved, 100 * achieved / peak_flops_per_s
''',
    # Each step sees the prompt and only the newest token, not every token generated so far.
    "generate_without_cache": '''
def generate_without_cache(model, prompt, n_out):
    """Greedy generation that recomputes the whole sequence for every token; (B, n_out) ids."""
    token_ids(prompt=prompt)
    integers(at_least=1, n_out=n_out)
    sequence, out = prompt, []
    for _ in range(n_out):
        token = model.logits_no_cache(sequence).argmax(dim=-1, keepdim=True)
        out.append(token)
        sequence = torch.cat([prompt, token], dim=1)
    return torch.cat(out, dim=1)
''',
    # Question 1 answered with the common misconception that Python waits for the GPU.
    "quiz_answers": '''
q1 = "a"
q2 = "b"
q3 = "c"
q4 = "b"
''',
    # T* taken for the knee whatever the fixed part: right only where the extra time adds to every
    # pass; one hidden behind the long passes' FLOPs puts the knee near 2 T*.
    "p3": '''
p3 = "b"
''',
}

# More plausible timing mistakes, each with the graded cells it must lose (and only those);
# tests/lessons/test_lesson3_mistakes.py runs every graded cell of the lesson against each.
TIMING_MISTAKES = {
    # The start clock read before new_cache: the cache's allocation is counted in every token's time.
    "start_before_new_cache": ({"generate": '''
def generate(model, prompt, n_out, clock=time.perf_counter, sync=synchronize):
    token_ids(prompt=prompt)
    integers(at_least=1, n_out=n_out)
    sync()
    start = clock()
    cache = model.new_cache(prompt.shape[0], prompt.shape[1] + n_out)
    token = model.prefill(prompt, cache).argmax(dim=-1, keepdim=True)
    sync()
    times, tokens = [clock() - start], [token]
    for _ in range(n_out - 1):
        token = model.decode(token, cache).argmax(dim=-1, keepdim=True)
        sync()
        times.append(clock() - start)
        tokens.append(token)
    tpot = (times[-1] - times[0]) / (n_out - 1) if n_out > 1 else float("nan")
    return {"tokens": torch.cat(tokens, dim=1), "token_times_s": times,
            "ttft_s": times[0], "tpot_s": tpot, "e2e_s": times[-1]}
'''}, {"generate_timing_tests"}),
    # No sync() anywhere: every clock read sees only the launches (all times come out 0 on the fake).
    "never_synchronised": ({"generate": '''
def generate(model, prompt, n_out, clock=time.perf_counter, sync=synchronize):
    token_ids(prompt=prompt)
    integers(at_least=1, n_out=n_out)
    cache = model.new_cache(prompt.shape[0], prompt.shape[1] + n_out)
    start = clock()
    token = model.prefill(prompt, cache).argmax(dim=-1, keepdim=True)
    times, tokens = [clock() - start], [token]
    for _ in range(n_out - 1):
        token = model.decode(token, cache).argmax(dim=-1, keepdim=True)
        times.append(clock() - start)
        tokens.append(token)
    tpot = (times[-1] - times[0]) / (n_out - 1) if n_out > 1 else float("nan")
    return {"tokens": torch.cat(tokens, dim=1), "token_times_s": times,
            "ttft_s": times[0], "tpot_s": tpot, "e2e_s": times[-1]}
'''}, {"generate_timing_tests"}),
    # TPOT averaged over all n tokens, the first one (the prefill) included.
    "tpot_over_all_tokens": ({"generate": '''
def generate(model, prompt, n_out, clock=time.perf_counter, sync=synchronize):
    """Greedy generation of n_out tokens after prompt (B, T)."""
    token_ids(prompt=prompt)
    integers(at_least=1, n_out=n_out)
    cache = model.new_cache(prompt.shape[0], prompt.shape[1] + n_out)
    sync()
    start = clock()
    token = model.prefill(prompt, cache).argmax(dim=-1, keepdim=True)
    sync()
    times = [clock() - start]
    tokens = [token]
    for _ in range(n_out - 1):
        token = model.decode(token, cache).argmax(dim=-1, keepdim=True)
        sync()
        times.append(clock() - start)
        tokens.append(token)
    return {"tokens": torch.cat(tokens, dim=1), "token_times_s": times,
            "ttft_s": times[0], "tpot_s": times[-1] / n_out, "e2e_s": times[-1]}
'''}, {"generate_timing_tests"}),
    # time_fn synchronises after fn but reads the start clock with the previous work still queued.
    "time_fn_start_unsynchronised": ({"time_fn": '''
def time_fn(fn, warmup=2, repeats=5, clock=time.perf_counter, sync=synchronize):
    integers(at_least=0, warmup=warmup)
    integers(at_least=1, repeats=repeats)
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = clock()
        fn()
        sync()
        times.append(clock() - start)
    return {"times_s": times, "median_s": statistics.median(times), "spread_s": max(times) - min(times)}
'''}, {"time_fn_tests"}),
}

VARIANTS = {
    # Chained clock reads (one read ends a run and starts the next), numpy statistics, a
    # preallocated token tensor, the MBU and MFU as one division each.
    "chained_numpy": {
        "time_fn": '''
import numpy as np

def time_fn(fn, warmup=2, repeats=5, clock=time.perf_counter, sync=synchronize):
    integers(at_least=0, warmup=warmup)
    integers(at_least=1, repeats=repeats)
    for i in range(warmup):
        fn()
    sync()
    marks = [clock()]
    for i in range(repeats):
        fn()
        sync()
        marks.append(clock())
    times = np.diff(np.array(marks))
    return {"times_s": times, "median_s": float(np.median(times)), "spread_s": float(np.ptp(times))}
''',
        "generate": '''
def generate(model, prompt, n_out, clock=time.perf_counter, sync=synchronize):
    token_ids(prompt=prompt)
    integers(at_least=1, n_out=n_out)
    B, T = prompt.shape
    cache = model.new_cache(batch_size=B, max_seq_len=T + n_out)
    tokens = torch.zeros((B, n_out), dtype=torch.long, device=prompt.device)
    stamps = []
    sync()
    t_start = clock()
    for i in range(n_out):
        if i == 0:
            logits = model.prefill(prompt, cache)
        else:
            logits = model.decode(tokens[:, i - 1:i], cache)
        tokens[:, i] = torch.argmax(logits, dim=-1)
        sync()
        stamps.append(clock() - t_start)
    tpot = (stamps[-1] - stamps[0]) / (n_out - 1) if n_out > 1 else math.nan
    return dict(tokens=tokens, token_times_s=stamps, ttft_s=stamps[0], tpot_s=tpot, e2e_s=stamps[-1])
''',
        "decode_mbu": '''
def decode_mbu(weight_bytes, kv_bytes, tpot_s, peak_bytes_per_s):
    non_negative(weight_bytes=weight_bytes, kv_bytes=kv_bytes)
    positive(tpot_s=tpot_s, peak_bytes_per_s=peak_bytes_per_s)
    return (weight_bytes + kv_bytes) / tpot_s, (weight_bytes + kv_bytes) / (tpot_s * peak_bytes_per_s)
''',
        "prefill_mfu": '''
def prefill_mfu(flops, prefill_s, peak_flops_per_s):
    non_negative(flops=flops)
    positive(prefill_s=prefill_s, peak_flops_per_s=peak_flops_per_s)
    return flops / prefill_s, flops / (prefill_s * peak_flops_per_s)
''',
        "generate_without_cache": '''
def generate_without_cache(model, prompt, n_out):
    token_ids(prompt=prompt)
    integers(at_least=1, n_out=n_out)
    new = []
    for _ in range(n_out):
        ids = torch.cat([prompt] + new, dim=1)
        new.append(torch.argmax(model.logits_no_cache(ids), dim=-1).unsqueeze(1))
    return torch.cat(new, dim=1)
''',
        "quiz_answers": '''
q1 = " D "
q2 = "B"
q3 = "c"
q4 = " B"
''',
        "p1": '''
p1 = " B "
''',
        "p2": '''
p2 = "C"
''',
        "p3": '''
p3 = "a "
''',
    },
    # Plain loops everywhere: a hand-written median, a running list of generated tokens; the given
    # argument checks deleted (they are not graded).
    "loops": {
        "time_fn": '''
def time_fn(fn, warmup=2, repeats=5, clock=time.perf_counter, sync=synchronize):
    i = 0
    while i < warmup:
        fn()
        i += 1
    times = []
    for _ in range(repeats):
        sync()
        a = clock()
        fn()
        sync()
        b = clock()
        times.append(b - a)
    s = sorted(times)
    n = len(s)
    median = s[n // 2] if n % 2 == 1 else (s[n // 2 - 1] + s[n // 2]) / 2
    return {"times_s": times, "median_s": median, "spread_s": s[-1] - s[0]}
''',
        "generate": '''
def generate(model, prompt, n_out, clock=time.perf_counter, sync=synchronize):
    cache = model.new_cache(prompt.shape[0], prompt.shape[1] + n_out - 1)
    sync()
    start = clock()
    logits = model.prefill(prompt, cache)
    out, times = [], []
    for step in range(n_out):
        if step > 0:
            logits = model.decode(out[-1], cache)
        out.append(logits.argmax(-1)[:, None])
        sync()
        times.append(clock() - start)
    ttft = times[0]
    e2e = times[-1]
    tpot = float("nan")
    if n_out > 1:
        tpot = (e2e - ttft) / (n_out - 1)
    return {"tokens": torch.cat(out, 1), "token_times_s": times, "ttft_s": ttft, "tpot_s": tpot, "e2e_s": e2e}
''',
        "predict_bounds": '''
def predict_bounds(prompt_len, batch, n_params, weight_bytes, kv_bytes_per_token, bandwidth, peak_flops):
    def floor(tokens):
        compute = 2 * n_params * tokens / peak_flops
        memory = (weight_bytes + (kv_bytes_per_token * prompt_len) * batch) / bandwidth
        if compute > memory:
            return compute
        return memory
    return {"ttft_s": floor(batch * prompt_len), "tpot_s": floor(batch)}
''',
        "p1": '''
# TTFT: 2NP FLOPs grow with P past T*; TPOT: the same weights, a slightly longer cache
p1 = "b"
''',
        "p2": '''
p2 = " c"
''',
        "p3": '''
p3 = "A"
''',
    },
    # Harmless extra clock reads: a wall-clock total and a "launched at" stamp read while work is
    # still queued, neither used in a returned time. Only the times returned are graded.
    "extra_clock_reads": {
        "time_fn": '''
def time_fn(fn, warmup=2, repeats=5, clock=time.perf_counter, sync=synchronize):
    integers(at_least=0, warmup=warmup)
    integers(at_least=1, repeats=repeats)
    began = clock()
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        sync()
        start = clock()
        fn()
        launched = clock() - start  # how long the launch took: not the work
        sync()
        times.append(clock() - start)
    total = clock() - began
    return {"times_s": times, "median_s": statistics.median(times), "spread_s": max(times) - min(times)}
''',
        "generate": '''
def generate(model, prompt, n_out, clock=time.perf_counter, sync=synchronize):
    token_ids(prompt=prompt)
    integers(at_least=1, n_out=n_out)
    received = clock()
    cache = model.new_cache(prompt.shape[0], prompt.shape[1] + n_out)
    sync()
    start = clock()
    token = model.prefill(prompt, cache).argmax(dim=-1, keepdim=True)
    queued_at = clock()
    sync()
    times, tokens = [clock() - start], [token]
    for _ in range(n_out - 1):
        token = model.decode(token, cache).argmax(dim=-1, keepdim=True)
        sync()
        times.append(clock() - start)
        tokens.append(token)
    tpot = (times[-1] - times[0]) / (n_out - 1) if n_out > 1 else float("nan")
    return {"tokens": torch.cat(tokens, dim=1), "token_times_s": times,
            "ttft_s": times[0], "tpot_s": tpot, "e2e_s": times[-1]}
''',
    },
    # A clock helper that always synchronises first; the cache made and waited for before the start.
    "synced_helper": {
        "time_fn": '''
def time_fn(fn, warmup=2, repeats=5, clock=time.perf_counter, sync=synchronize):
    integers(at_least=0, warmup=warmup)
    integers(at_least=1, repeats=repeats)

    def now():
        sync()
        return clock()

    for _ in range(warmup):
        fn()
    times = []
    while len(times) < repeats:
        t0 = now()
        fn()
        times.append(now() - t0)
    return {"times_s": times, "median_s": statistics.median(times), "spread_s": max(times) - min(times)}
''',
        "generate": '''
def generate(model, prompt, n_out, clock=time.perf_counter, sync=synchronize):
    token_ids(prompt=prompt)
    integers(at_least=1, n_out=n_out)

    def now():
        sync()
        return clock()

    sync()
    cache = model.new_cache(prompt.shape[0], prompt.shape[1] + n_out)
    start = now()
    token = model.prefill(prompt, cache).argmax(-1, keepdim=True)
    tokens, times = [token], [now() - start]
    for _ in range(1, n_out):
        token = model.decode(token, cache).argmax(-1, keepdim=True)
        tokens.append(token)
        times.append(now() - start)
    return {"tokens": torch.cat(tokens, 1), "token_times_s": times, "ttft_s": times[0],
            "tpot_s": (times[-1] - times[0]) / (n_out - 1) if n_out > 1 else math.nan, "e2e_s": times[-1]}
''',
    },
}

# Further misconceptions of one exercise, name -> (solution cell, source): each must lose only the
# graded cell(s) of that exercise, visibly (the batch-8 check) and when graded.
MORE_MISTAKES = {
    # The FLOPs of one request only: a batch of B prompts computes as one.
    "batch_left_out_of_flops": ("predict_bounds", '''
def predict_bounds(prompt_len, batch, n_params, weight_bytes, kv_bytes_per_token, bandwidth, peak_flops):
    memory = (weight_bytes + batch * prompt_len * kv_bytes_per_token) / bandwidth
    return {"ttft_s": max(2 * n_params * prompt_len / peak_flops, memory),
            "tpot_s": max(2 * n_params / peak_flops, memory)}
'''),
    # One cache of T tokens, as if the batch shared it: B x T x kv_bytes_per_token read as T x kv_bytes_per_token.
    "batch_left_out_of_kv_bytes": ("predict_bounds", '''
def predict_bounds(prompt_len, batch, n_params, weight_bytes, kv_bytes_per_token, bandwidth, peak_flops):
    memory = (weight_bytes + prompt_len * kv_bytes_per_token) / bandwidth
    return {"ttft_s": max(2 * n_params * batch * prompt_len / peak_flops, memory),
            "tpot_s": max(2 * n_params * batch / peak_flops, memory)}
'''),
}
MORE_MISTAKES = {k: (gid, v.strip("\n")) for k, (gid, v) in MORE_MISTAKES.items()}
