"""Sample answers for lesson 2, keyed by solution-cell grade_id.

MISTAKES: one plausible wrong answer per exercise (applied together, the submission must score
strictly between zero and full marks). VARIANTS: other correct solutions (loops instead of closed
forms, equivalent formulas, other plotting calls, other return types); each must keep full marks.
"""

# --- plausible mistakes ------------------------------------------------------------------------

MISTAKES = {
    # Counts the reads of X and W but forgets that Y is written back.
    "matmul": '''
def matmul_cost(B, D, F, bytes_per_elem=2.0):
    for name, value in (("B", B), ("D", D), ("F", F), ("bytes_per_elem", bytes_per_elem)):
        require_positive(name, value)
    flops = 2 * B * D * F
    nbytes = bytes_per_elem * (B * D + D * F)
    return {"flops": flops, "bytes": nbytes, "intensity": flops / nbytes}
''',
    # Rejects negative bandwidths but lets zero through (ZeroDivisionError, not ValueError).
    "roofline": '''
def _check(peak_flops_per_s, bandwidth_bytes_per_s):
    if peak_flops_per_s < 0 or peak_flops_per_s != peak_flops_per_s:
        raise ValueError("peak_flops_per_s must be positive")
    if bandwidth_bytes_per_s < 0 or bandwidth_bytes_per_s != bandwidth_bytes_per_s:
        raise ValueError("bandwidth_bytes_per_s must be positive")


def ridge_point(peak_flops_per_s, bandwidth_bytes_per_s):
    _check(peak_flops_per_s, bandwidth_bytes_per_s)
    return peak_flops_per_s / bandwidth_bytes_per_s


def attainable_flops(intensity, peak_flops_per_s, bandwidth_bytes_per_s):
    require_non_negative("intensity", intensity)
    _check(peak_flops_per_s, bandwidth_bytes_per_s)
    return min(peak_flops_per_s, intensity * bandwidth_bytes_per_s)


def step_time_bounds(flops, nbytes, peak_flops_per_s, bandwidth_bytes_per_s):
    require_non_negative("flops", flops)
    require_non_negative("nbytes", nbytes)
    _check(peak_flops_per_s, bandwidth_bytes_per_s)
    c, m = flops / peak_flops_per_s, nbytes / bandwidth_bytes_per_s
    return {"compute_s": c, "memory_s": m, "lower_s": max(c, m), "upper_s": c + m,
            "bound": "compute" if c >= m else "memory"}
''',
    # Forgets grouped-query attention: K and V projections sized as if n_kv_heads == n_heads.
    "param_count": '''
def param_count(cfg):
    d, hd = cfg.d_model, cfg.head_dim
    attention = 4 * d * cfg.n_heads * hd
    mlp = (3 if cfg.gated_mlp else 2) * d * cfg.d_ff
    per_layer = attention + mlp + 2 * d
    tables = cfg.vocab_size * d * (1 if cfg.tied_embeddings else 2)
    return cfg.n_layers * per_layer + tables + d
''',
    # Uses the query heads, not the key/value heads: right for Llama-2-7B, 8x too big for 70B.
    "kv_cache": '''
def kv_bytes_per_token(cfg, bytes_per_elem=2.0):
    require_positive("bytes_per_elem", bytes_per_elem)
    return 2 * cfg.n_layers * cfg.n_heads * cfg.head_dim * bytes_per_elem


def kv_cache_bytes(cfg, n_tokens, batch=1, bytes_per_elem=2.0):
    require_non_negative("n_tokens", n_tokens)
    require_positive("batch", batch)
    return batch * n_tokens * kv_bytes_per_token(cfg, bytes_per_elem)
''',
    # Forgets that the weights occupy the memory first.
    "kv_fit": '''
def max_cached_tokens(memory_bytes, weight_bytes, kv_bytes_per_token):
    require_positive("memory_bytes", memory_bytes)
    require_non_negative("weight_bytes", weight_bytes)
    require_positive("kv_bytes_per_token", kv_bytes_per_token)
    if weight_bytes > memory_bytes:
        raise ValueError("weight_bytes exceed memory_bytes")
    return math.floor(memory_bytes / kv_bytes_per_token)


def max_batch(memory_bytes, weight_bytes, kv_bytes_per_token, context_len):
    require_positive("context_len", context_len)
    return max_cached_tokens(memory_bytes, weight_bytes, kv_bytes_per_token) // context_len
''',
    # Kaplan's attention term (2 n_layer n_ctx d_attn) instead of the lesson's 4.
    "prefill_step": '''
def prefill_step(cfg, n_params, batch, prompt_len, peak_flops_per_s, bandwidth_bytes_per_s,
                 weight_bytes=2.0, kv_bytes=2.0):
    for name, value in (("n_params", n_params), ("batch", batch), ("prompt_len", prompt_len),
                        ("peak_flops_per_s", peak_flops_per_s),
                        ("bandwidth_bytes_per_s", bandwidth_bytes_per_s),
                        ("weight_bytes", weight_bytes), ("kv_bytes", kv_bytes)):
        require_positive(name, value)
    d_attn = cfg.n_heads * cfg.head_dim
    flops = 2 * n_params * batch * prompt_len + batch * 2 * cfg.n_layers * d_attn * prompt_len ** 2
    kv = 2 * cfg.n_layers * cfg.n_kv_heads * cfg.head_dim * kv_bytes
    nbytes = n_params * weight_bytes + batch * prompt_len * kv
    c, m = flops / peak_flops_per_s, nbytes / bandwidth_bytes_per_s
    return {"flops": flops, "bytes": nbytes, "intensity": flops / nbytes, "time_s": max(c, m),
            "bound": "compute" if c >= m else "memory"}
''',
    # Reads one sequence's cache for the whole batch, as if the cache were shared like the weights.
    "decode_step": '''
def decode_step(cfg, n_params, batch, context_len, peak_flops_per_s, bandwidth_bytes_per_s,
                weight_bytes=2.0, kv_bytes=2.0):
    for name, value in (("n_params", n_params), ("batch", batch), ("context_len", context_len),
                        ("peak_flops_per_s", peak_flops_per_s),
                        ("bandwidth_bytes_per_s", bandwidth_bytes_per_s),
                        ("weight_bytes", weight_bytes), ("kv_bytes", kv_bytes)):
        require_positive(name, value)
    d_attn = cfg.n_heads * cfg.head_dim
    flops = batch * (2 * n_params + 4 * cfg.n_layers * d_attn * context_len)
    kv = 2 * cfg.n_layers * cfg.n_kv_heads * cfg.head_dim * kv_bytes
    nbytes = n_params * weight_bytes + (context_len + 1) * kv
    c, m = flops / peak_flops_per_s, nbytes / bandwidth_bytes_per_s
    return {"flops": flops, "bytes": nbytes, "intensity": flops / nbytes, "time_s": max(c, m),
            "bound": "compute" if c >= m else "memory"}
''',
    # One FLOP per parameter instead of two (a multiply-add counted once).
    "critical_batch": '''
def critical_batch(n_params, peak_flops_per_s, bandwidth_bytes_per_s, weight_bytes=2.0,
                   kv_bytes_per_seq=0.0):
    require_positive("n_params", n_params)
    require_positive("peak_flops_per_s", peak_flops_per_s)
    require_positive("bandwidth_bytes_per_s", bandwidth_bytes_per_s)
    require_positive("weight_bytes", weight_bytes)
    require_non_negative("kv_bytes_per_seq", kv_bytes_per_seq)
    ridge = peak_flops_per_s / bandwidth_bytes_per_s
    room = n_params - ridge * kv_bytes_per_seq
    if room <= 0:
        return math.inf
    return ridge * n_params * weight_bytes / room
''',
    # Tokens/s of one sequence, not of the whole batch.
    "batch_sweep": '''
def batch_sweep(batches, step):
    batches = list(batches)
    if not batches:
        raise ValueError("batches is empty")
    for b in batches:
        require_positive("batches", b)
    rows = [step(b) for b in batches]
    times = [r["time_s"] for r in rows]
    bounds = [r["bound"] for r in rows]
    compute = [b for b, bound in zip(batches, bounds) if bound == "compute"]
    return {"batch": batches, "time_s": times, "tokens_per_s": [1 / t for t in times],
            "bound": bounds, "first_compute_bound": compute[0] if compute else None}
''',
    # Plots the step time in seconds although the axis says milliseconds.
    "sweep_plot": '''
def plot_sweep(sweep):
    fig, (ax_time, ax_tps) = plt.subplots(1, 2, figsize=(10, 3.8))
    ax_time.plot(sweep["batch"], sweep["time_s"], marker="o")
    ax_time.set_ylabel("step time (ms)")
    ax_tps.plot(sweep["batch"], sweep["tokens_per_s"], marker="o")
    ax_tps.set_ylabel("tokens/s")
    for ax in (ax_time, ax_tps):
        ax.set_xscale("log")
        ax.set_xlabel("batch size")
    return fig, (ax_time, ax_tps)
''',
    # Marks every point on the bandwidth slope, forgetting the flat roof.
    "roofline_plot": '''
def plot_roofline(ax, peak_flops_per_s, bandwidth_bytes_per_s, points):
    ridge = peak_flops_per_s / bandwidth_bytes_per_s
    x = np.logspace(-1, np.log10(max([10 * ridge] + [2 * i for _, i, _ in points])), 200)
    ax.plot(x, np.minimum(peak_flops_per_s, x * bandwidth_bytes_per_s), color=BOUND_COLOR)
    for label, intensity, color in points:
        ax.plot([intensity], [intensity * bandwidth_bytes_per_s], marker="o", color=color, label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("attainable FLOP/s")
    return ax
''',
    # TPOT from the weights alone: the KV cache read is forgotten.
    "serving_limits": '''
def serving_limits(cfg, n_params, context_len, memory_bytes, peak_flops_per_s,
                   bandwidth_bytes_per_s, weight_bytes=2.0, kv_bytes=2.0):
    require_positive("memory_bytes", memory_bytes)
    require_positive("context_len", context_len)
    kv = 2 * cfg.n_layers * cfg.n_kv_heads * cfg.head_dim * kv_bytes
    free = memory_bytes - n_params * weight_bytes
    biggest = math.floor(free / (context_len * kv)) if free > 0 else 0
    if biggest < 1:
        raise ValueError("memory_bytes cannot hold the weights and one sequence")
    def tpot(b):
        return max(b * 2 * n_params / peak_flops_per_s, n_params * weight_bytes / bandwidth_bytes_per_s)
    return {"max_batch": biggest, "tpot_batch1_s": tpot(1), "tpot_max_batch_s": tpot(biggest),
            "tokens_per_s_max_batch": biggest / tpot(biggest)}
''',
    # Percentages instead of fractions.
    "utilization": '''
def mbu(bytes_moved, time_s, bandwidth_bytes_per_s):
    require_non_negative("bytes_moved", bytes_moved)
    require_positive("time_s", time_s)
    require_positive("bandwidth_bytes_per_s", bandwidth_bytes_per_s)
    return 100 * bytes_moved / time_s / bandwidth_bytes_per_s


def mfu(flops, time_s, peak_flops_per_s):
    require_non_negative("flops", flops)
    require_positive("time_s", time_s)
    require_positive("peak_flops_per_s", peak_flops_per_s)
    return 100 * flops / time_s / peak_flops_per_s
''',
    # q3: the weights-only critical batch, forgetting that each sequence reads its own cache.
    "quiz_answers": '''
q1 = "c"
q2 = "b"
q3 = "a"
q4 = "a"
''',
}

# --- alternative correct solutions ---------------------------------------------------------------

LOOPS = {
    "matmul": '''
def matmul_cost(B, D, F, bytes_per_elem=2.0):
    for name in ("B", "D", "F", "bytes_per_elem"):
        value = {"B": B, "D": D, "F": F, "bytes_per_elem": bytes_per_elem}[name]
        if not (isinstance(value, (int, float)) and value > 0):
            raise ValueError(f"{name} must be a positive number, not {value}")
    elements = 0
    for rows, cols in ((B, D), (D, F), (B, F)):  # X read, W read, Y written
        elements += rows * cols
    flops = 0
    for _ in range(2):  # the multiply, then the add
        flops += B * D * F
    nbytes = elements * bytes_per_elem
    return dict(flops=flops, bytes=nbytes, intensity=flops / nbytes)
''',
    "roofline": '''
def _need(name, value, allow_zero=False):
    ok = value >= 0 if allow_zero else value > 0
    if not ok or math.isnan(value):
        raise ValueError(f"bad {name}: {value}")


def ridge_point(peak_flops_per_s, bandwidth_bytes_per_s):
    _need("peak_flops_per_s", peak_flops_per_s)
    _need("bandwidth_bytes_per_s", bandwidth_bytes_per_s)
    return peak_flops_per_s / bandwidth_bytes_per_s


def attainable_flops(intensity, peak_flops_per_s, bandwidth_bytes_per_s):
    _need("intensity", intensity, allow_zero=True)
    ridge = ridge_point(peak_flops_per_s, bandwidth_bytes_per_s)
    if intensity >= ridge:
        return float(peak_flops_per_s)
    return intensity * bandwidth_bytes_per_s


def step_time_bounds(flops, nbytes, peak_flops_per_s, bandwidth_bytes_per_s):
    _need("flops", flops, allow_zero=True)
    _need("nbytes", nbytes, allow_zero=True)
    _need("peak_flops_per_s", peak_flops_per_s)
    _need("bandwidth_bytes_per_s", bandwidth_bytes_per_s)
    times = {"compute": flops / peak_flops_per_s, "memory": nbytes / bandwidth_bytes_per_s}
    bound = "memory"
    if times["compute"] >= times["memory"]:
        bound = "compute"
    return {"compute_s": times["compute"], "memory_s": times["memory"], "lower_s": times[bound],
            "upper_s": sum(times.values()), "bound": bound}
''',
    "param_count": '''
def param_count(cfg):
    total = cfg.vocab_size * cfg.d_model  # embedding table
    if not cfg.tied_embeddings:
        total += cfg.vocab_size * cfg.d_model  # output head
    q_width, kv_width = cfg.n_heads * cfg.head_dim, cfg.n_kv_heads * cfg.head_dim
    shapes = [(cfg.d_model, q_width), (cfg.d_model, kv_width), (cfg.d_model, kv_width), (q_width, cfg.d_model)]
    shapes += [(cfg.d_model, cfg.d_ff)] * (2 if cfg.gated_mlp else 1) + [(cfg.d_ff, cfg.d_model)]
    for _ in range(cfg.n_layers):
        for rows, cols in shapes:
            total += rows * cols
        total += cfg.d_model + cfg.d_model  # two RMSNorm weight vectors
    return total + cfg.d_model  # final norm
''',
    "kv_cache": '''
def kv_bytes_per_token(cfg, bytes_per_elem=2.0):
    if not bytes_per_elem > 0:
        raise ValueError(f"bytes_per_elem must be > 0, got {bytes_per_elem}")
    per_token = 0
    for _layer in range(cfg.n_layers):
        for _tensor in ("k", "v"):
            per_token += cfg.n_kv_heads * cfg.head_dim * bytes_per_elem
    return per_token


def kv_cache_bytes(cfg, n_tokens, batch=1, bytes_per_elem=2.0):
    if not n_tokens >= 0:
        raise ValueError(f"n_tokens must be >= 0, got {n_tokens}")
    if not batch >= 1:
        raise ValueError(f"batch must be at least 1, got {batch}")
    per_token = kv_bytes_per_token(cfg, bytes_per_elem)
    total = 0
    for _sequence in range(int(batch)):
        total += n_tokens * per_token
    return total
''',
    "kv_fit": '''
def max_cached_tokens(memory_bytes, weight_bytes, kv_bytes_per_token):
    require_positive("memory_bytes", memory_bytes)
    require_positive("kv_bytes_per_token", kv_bytes_per_token)
    require_non_negative("weight_bytes", weight_bytes)
    free = memory_bytes - weight_bytes
    if free < 0:
        raise ValueError("weight_bytes do not fit in memory_bytes")
    return int(free // kv_bytes_per_token)


def max_batch(memory_bytes, weight_bytes, kv_bytes_per_token, context_len):
    require_positive("context_len", context_len)
    tokens = max_cached_tokens(memory_bytes, weight_bytes, kv_bytes_per_token)
    sequences, _leftover = divmod(tokens, context_len)
    return int(sequences)
''',
    "prefill_step": '''
def prefill_step(cfg, n_params, batch, prompt_len, peak_flops_per_s, bandwidth_bytes_per_s,
                 weight_bytes=2.0, kv_bytes=2.0):
    args = dict(n_params=n_params, batch=batch, prompt_len=prompt_len, peak_flops_per_s=peak_flops_per_s,
                bandwidth_bytes_per_s=bandwidth_bytes_per_s, weight_bytes=weight_bytes, kv_bytes=kv_bytes)
    for name, value in args.items():
        require_positive(name, value)
    flops = 2.0 * n_params * batch * prompt_len
    kv_written = 0.0
    for _layer in range(cfg.n_layers):
        flops += batch * 2 * (2 * prompt_len * prompt_len * cfg.n_heads * cfg.head_dim)  # QK^T, then AV
        kv_written += batch * prompt_len * 2 * cfg.n_kv_heads * cfg.head_dim * kv_bytes
    nbytes = n_params * weight_bytes + kv_written
    t = step_time_bounds(flops, nbytes, peak_flops_per_s, bandwidth_bytes_per_s)
    return {"flops": flops, "bytes": nbytes, "intensity": flops / nbytes, "time_s": t["lower_s"],
            "bound": t["bound"]}
''',
    "decode_step": '''
def decode_step(cfg, n_params, batch, context_len, peak_flops_per_s, bandwidth_bytes_per_s,
                weight_bytes=2.0, kv_bytes=2.0):
    args = dict(n_params=n_params, batch=batch, context_len=context_len, peak_flops_per_s=peak_flops_per_s,
                bandwidth_bytes_per_s=bandwidth_bytes_per_s, weight_bytes=weight_bytes, kv_bytes=kv_bytes)
    for name, value in args.items():
        require_positive(name, value)
    per_token_kv = kv_bytes_per_token(cfg, kv_bytes)
    flops, nbytes = 0.0, n_params * weight_bytes
    for _sequence in range(int(batch)):
        flops += 2 * n_params + 4 * cfg.n_layers * cfg.n_heads * cfg.head_dim * context_len
        nbytes += context_len * per_token_kv + per_token_kv  # read the cache, write one entry
    t = step_time_bounds(flops, nbytes, peak_flops_per_s, bandwidth_bytes_per_s)
    return {"flops": flops, "bytes": nbytes, "intensity": flops / nbytes, "time_s": t["lower_s"],
            "bound": t["bound"]}
''',
    "critical_batch": '''
def critical_batch(n_params, peak_flops_per_s, bandwidth_bytes_per_s, weight_bytes=2.0,
                   kv_bytes_per_seq=0.0):
    require_positive("n_params", n_params)
    require_positive("peak_flops_per_s", peak_flops_per_s)
    require_positive("bandwidth_bytes_per_s", bandwidth_bytes_per_s)
    require_positive("weight_bytes", weight_bytes)
    require_non_negative("kv_bytes_per_seq", kv_bytes_per_seq)

    def compute_minus_memory(b):  # seconds; positive once compute-bound
        return b * 2 * n_params / peak_flops_per_s - (n_params * weight_bytes + b * kv_bytes_per_seq) / bandwidth_bytes_per_s

    slope = 2 * n_params / peak_flops_per_s - kv_bytes_per_seq / bandwidth_bytes_per_s
    if slope <= 0:  # the gap never closes, however large the batch
        return math.inf
    lo, hi = 0.0, 1.0
    while compute_minus_memory(hi) < 0:
        hi *= 2
    for _ in range(200):  # bisection
        mid = (lo + hi) / 2
        if compute_minus_memory(mid) < 0:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2
''',
    "batch_sweep": '''
def batch_sweep(batches, step):
    out = {"batch": [], "time_s": [], "tokens_per_s": [], "bound": [], "first_compute_bound": None}
    for b in batches:
        if not b > 0:
            raise ValueError(f"batches must hold positive batch sizes, got {b}")
        row = step(b)
        out["batch"].append(b)
        out["time_s"].append(row["time_s"])
        out["tokens_per_s"].append(b / row["time_s"])
        out["bound"].append(row["bound"])
        if row["bound"] == "compute" and out["first_compute_bound"] is None:
            out["first_compute_bound"] = b
    if not out["batch"]:
        raise ValueError("batches must not be empty")
    return out
''',
    "sweep_plot": '''
def plot_sweep(sweep):
    fig = plt.figure(figsize=(10, 4))
    ax_time = fig.add_subplot(1, 2, 1)
    ax_tps = fig.add_subplot(1, 2, 2)
    times_ms = []
    for t in sweep["time_s"]:
        times_ms.append(t * 1000)
    ax_time.semilogx(sweep["batch"], times_ms, "o-")
    ax_tps.semilogx(sweep["batch"], sweep["tokens_per_s"], "s-")
    ax_time.set(xlabel="batch", ylabel="ms per step")
    ax_tps.set(xlabel="batch", ylabel="tokens per second")
    return fig, (ax_time, ax_tps)
''',
    "roofline_plot": '''
def plot_roofline(ax, peak_flops_per_s, bandwidth_bytes_per_s, points):
    ridge = ridge_point(peak_flops_per_s, bandwidth_bytes_per_s)
    intensities = [i for _, i, _ in points]
    x, xs = min(intensities + [ridge]) / 4, []
    while x < 4 * max(intensities + [ridge]):
        xs.append(x)
        x *= 1.1
    xs.append(x)
    ax.loglog(xs, [attainable_flops(v, peak_flops_per_s, bandwidth_bytes_per_s) for v in xs], "-", color="grey")
    for label, intensity, color in points:
        y = attainable_flops(intensity, peak_flops_per_s, bandwidth_bytes_per_s)
        ax.scatter([intensity], [y], color=color, zorder=3)
        ax.annotate(label, (intensity, y))
    ax.set_xlabel("FLOP/byte")
    ax.set_ylabel("FLOP/s")
    return ax
''',
    "serving_limits": '''
def serving_limits(cfg, n_params, context_len, memory_bytes, peak_flops_per_s,
                   bandwidth_bytes_per_s, weight_bytes=2.0, kv_bytes=2.0):
    if not memory_bytes > 0:
        raise ValueError(f"memory_bytes must be > 0, got {memory_bytes}")
    if not context_len > 0:
        raise ValueError(f"context_len must be > 0, got {context_len}")
    per_seq = context_len * kv_bytes_per_token(cfg, kv_bytes)
    weights = n_params * weight_bytes
    batch = 0
    step = 1 << 20
    while step:  # grow the batch by halving steps while everything still fits
        if weights + (batch + step) * per_seq <= memory_bytes:
            batch += step
        else:
            step //= 2
    if batch == 0:
        raise ValueError("memory_bytes: the weights and one sequence's cache do not fit")
    def tpot(b):
        return decode_step(cfg, n_params, b, context_len, peak_flops_per_s, bandwidth_bytes_per_s,
                           weight_bytes, kv_bytes)["time_s"]
    return {"max_batch": batch, "tpot_batch1_s": tpot(1), "tpot_max_batch_s": tpot(batch),
            "tokens_per_s_max_batch": batch / tpot(batch)}
''',
    "utilization": '''
def mbu(bytes_moved, time_s, bandwidth_bytes_per_s):
    for name, value, zero_ok in (("bytes_moved", bytes_moved, True), ("time_s", time_s, False),
                                 ("bandwidth_bytes_per_s", bandwidth_bytes_per_s, False)):
        if math.isnan(value) or value < 0 or (value == 0 and not zero_ok):
            raise ValueError(f"{name} is impossible: {value}")
    seconds_at_peak = bytes_moved / bandwidth_bytes_per_s
    return seconds_at_peak / time_s


def mfu(flops, time_s, peak_flops_per_s):
    for name, value, zero_ok in (("flops", flops, True), ("time_s", time_s, False),
                                 ("peak_flops_per_s", peak_flops_per_s, False)):
        if math.isnan(value) or value < 0 or (value == 0 and not zero_ok):
            raise ValueError(f"{name} is impossible: {value}")
    seconds_at_peak = flops / peak_flops_per_s
    return seconds_at_peak / time_s
''',
}

FORMULAS = {
    # Intensity from its closed form; numpy for the arithmetic.
    "matmul": '''
import numpy as np

def matmul_cost(B, D, F, bytes_per_elem=2.0):
    sizes = np.array([B, D, F, bytes_per_elem], dtype=float)
    for name, value in zip(("B", "D", "F", "bytes_per_elem"), sizes):
        if not value > 0:
            raise ValueError(f"{name} = {value} is not positive")
    intensity = 2 * B * D * F / (bytes_per_elem * (B * D + D * F + B * F))
    flops = 2.0 * B * D * F
    return {"flops": flops, "bytes": flops / intensity, "intensity": intensity}
''',
    # Time as FLOPs over attainable FLOP/s; bound from intensity against the ridge.
    "prefill_step": '''
def prefill_step(cfg, n_params, batch, prompt_len, peak_flops_per_s, bandwidth_bytes_per_s,
                 weight_bytes=2.0, kv_bytes=2.0):
    for name in ("n_params", "batch", "prompt_len", "peak_flops_per_s", "bandwidth_bytes_per_s",
                 "weight_bytes", "kv_bytes"):
        require_positive(name, locals()[name])
    tokens = batch * prompt_len
    per_token_flops = 2 * n_params + 4 * cfg.n_layers * cfg.n_heads * cfg.head_dim * prompt_len
    flops = tokens * per_token_flops
    nbytes = n_params * weight_bytes + kv_cache_bytes(cfg, prompt_len, batch, kv_bytes)
    intensity = flops / nbytes
    ridge = peak_flops_per_s / bandwidth_bytes_per_s
    return {"flops": flops, "bytes": nbytes, "intensity": intensity,
            "time_s": flops / min(peak_flops_per_s, intensity * bandwidth_bytes_per_s),
            "bound": "compute" if intensity >= ridge else "memory"}
''',
    "decode_step": '''
def decode_step(cfg, n_params, batch, context_len, peak_flops_per_s, bandwidth_bytes_per_s,
                weight_bytes=2.0, kv_bytes=2.0):
    for name in ("n_params", "batch", "context_len", "peak_flops_per_s", "bandwidth_bytes_per_s",
                 "weight_bytes", "kv_bytes"):
        require_positive(name, locals()[name])
    flops = 2 * n_params * batch + 4 * cfg.n_layers * cfg.n_heads * cfg.head_dim * context_len * batch
    nbytes = n_params * weight_bytes + kv_cache_bytes(cfg, context_len + 1, batch, kv_bytes)
    intensity = flops / nbytes
    ridge = peak_flops_per_s / bandwidth_bytes_per_s
    return {"flops": flops, "bytes": nbytes, "intensity": intensity,
            "time_s": flops / attainable_flops(intensity, peak_flops_per_s, bandwidth_bytes_per_s),
            "bound": "compute" if intensity >= ridge else "memory"}
''',
    # Critical batch solved in the time domain rather than through the ridge point.
    "critical_batch": '''
def critical_batch(n_params, peak_flops_per_s, bandwidth_bytes_per_s, weight_bytes=2.0,
                   kv_bytes_per_seq=0.0):
    for name in ("n_params", "peak_flops_per_s", "bandwidth_bytes_per_s", "weight_bytes"):
        require_positive(name, locals()[name])
    require_non_negative("kv_bytes_per_seq", kv_bytes_per_seq)
    weight_time = n_params * weight_bytes / bandwidth_bytes_per_s  # paid once per step
    gain_per_seq = 2 * n_params / peak_flops_per_s - kv_bytes_per_seq / bandwidth_bytes_per_s
    return weight_time / gain_per_seq if gain_per_seq > 0 else float("inf")
''',
    # numpy arrays in, numpy arrays out.
    "batch_sweep": '''
def batch_sweep(batches, step):
    b = np.asarray(list(batches), dtype=float)
    if b.size == 0 or not np.all(b > 0):
        raise ValueError("batches must be a non-empty list of positive batch sizes")
    rows = [step(int(x) if float(x).is_integer() else x) for x in b]
    t = np.array([r["time_s"] for r in rows])
    bound = np.array([r["bound"] for r in rows])
    hits = np.flatnonzero(bound == "compute")
    return {"batch": b, "time_s": t, "tokens_per_s": b / t, "bound": bound,
            "first_compute_bound": int(b[hits[0]]) if hits.size else None}
''',
    "serving_limits": '''
def serving_limits(cfg, n_params, context_len, memory_bytes, peak_flops_per_s,
                   bandwidth_bytes_per_s, weight_bytes=2.0, kv_bytes=2.0):
    require_positive("context_len", context_len)
    require_positive("memory_bytes", memory_bytes)
    if n_params * weight_bytes > memory_bytes:
        raise ValueError("memory_bytes is smaller than the weights")
    fits = max_batch(memory_bytes, n_params * weight_bytes, kv_bytes_per_token(cfg, kv_bytes), context_len)
    if fits == 0:
        raise ValueError("memory_bytes leaves no room for one sequence's KV cache")
    out = {"max_batch": fits}
    for key, b in (("tpot_batch1_s", 1), ("tpot_max_batch_s", fits)):
        out[key] = decode_step(cfg, n_params, b, context_len, peak_flops_per_s, bandwidth_bytes_per_s,
                               weight_bytes, kv_bytes)["time_s"]
    out["tokens_per_s_max_batch"] = fits / out["tpot_max_batch_s"]
    return out
''',
    "quiz_answers": '''
q1 = " C"
q2 = "B "
q3 = "D"
q4 = "a"
''',
}

VARIANTS = {
    "loops": {k: v.strip("\n") for k, v in LOOPS.items()},
    "formulas": {k: v.strip("\n") for k, v in FORMULAS.items()},
}
MISTAKES = {k: v.strip("\n") for k, v in MISTAKES.items()}
