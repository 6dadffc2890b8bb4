"""Sample answers for lesson 2, keyed by solution-cell grade_id.

MISTAKES: one plausible wrong answer per exercise (applied together, the submission must score
strictly between zero and full marks, and each loses only its own exercise's points).
MORE_MISTAKES: further misconceptions, name -> (solution cell, source), each graded on its own and
losing only its cell's points. VARIANTS:
other correct solutions (loops, other formulas, reusing earlier functions, other plotting calls,
the approximate n^2/2 causal count); each must keep full marks.
"""

# --- plausible mistakes ------------------------------------------------------------------------

MISTAKES = {
    # Counts the reads of X and W but forgets that Y is written back.
    "matmul": '''
def matmul_cost(T, D, F, bytes_per_elem=2.0):
    flops = 2 * T * D * F
    nbytes = bytes_per_elem * (T * D + D * F)
    return {"flops": flops, "bytes": nbytes, "intensity": flops / nbytes}
''',
    # Takes the no-overlap sum for the roofline bound (and the max for the no-overlap time).
    "roofline": '''
def ridge_point(peak_flops_per_s, bandwidth_bytes_per_s):
    return peak_flops_per_s / bandwidth_bytes_per_s


def attainable_flops(intensity, peak_flops_per_s, bandwidth_bytes_per_s):
    return min(peak_flops_per_s, intensity * bandwidth_bytes_per_s)


def roofline_time(flops, nbytes, peak_flops_per_s, bandwidth_bytes_per_s):
    c, m = flops / peak_flops_per_s, nbytes / bandwidth_bytes_per_s
    return {"compute_s": c, "memory_s": m, "bound_s": c + m, "no_overlap_s": max(c, m),
            "binding": "compute" if c >= m else "memory"}
''',
    # Forgets grouped-query attention: K and V projections sized as if n_kv_heads == n_heads.
    "param_count": '''
def param_count(cfg):
    d, hd = cfg.d_model, cfg.head_dim
    attention = 4 * d * cfg.n_heads * hd
    mlp = (3 if cfg.gated_mlp else 2) * d * cfg.d_ff
    tables = cfg.vocab_size * d * (1 if cfg.tied_embeddings else 2)
    return cfg.n_layers * (attention + mlp + 2 * d) + tables + d


def streamed_params(cfg):
    return param_count(cfg) - (0 if cfg.tied_embeddings else cfg.vocab_size * cfg.d_model)
''',
    # Uses the query heads, not the key/value heads: right for Llama-2-7B, 8x too big for 70B.
    "kv_cache": '''
def kv_bytes_per_token(cfg, bytes_per_elem=2.0):
    return 2 * cfg.n_layers * cfg.n_heads * cfg.head_dim * bytes_per_elem


def max_batch(memory_bytes, weight_memory_bytes, kv_per_token, context_len):
    return max(0, math.floor((memory_bytes - weight_memory_bytes) / (context_len * kv_per_token)))
''',
    # The full T x T square in prefill, as a plain kernel computes it, not the causal half.
    "attention_flops": '''
def attention_flops(cfg, new_tokens, cached_tokens=0):
    d_attn = cfg.n_heads * cfg.head_dim
    return 4 * cfg.n_layers * d_attn * new_tokens * (cached_tokens + new_tokens)
''',
    # One roofline for the whole step: all FLOPs and all bytes lumped into a single max.
    "step_time": '''
def step_time(matmul_flops, weight_bytes, attn_flops, kv_bytes, peak_flops_per_s, bandwidth_bytes_per_s):
    matmul_s = max(matmul_flops / peak_flops_per_s, weight_bytes / bandwidth_bytes_per_s)
    attention_s = max(attn_flops / peak_flops_per_s, kv_bytes / bandwidth_bytes_per_s)
    lumped = max((matmul_flops + attn_flops) / peak_flops_per_s,
                 (weight_bytes + kv_bytes) / bandwidth_bytes_per_s)
    return {"matmul_s": matmul_s, "attention_s": attention_s, "time_s": lumped}
''',
    # A multiply-add counted as one FLOP: T* comes out twice too large.
    "ridge_in_tokens": '''
def ridge_in_tokens(peak_flops_per_s, bandwidth_bytes_per_s, bytes_per_weight=2.0):
    return peak_flops_per_s / bandwidth_bytes_per_s * bytes_per_weight
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
    # The additive model: the chunk run as its own step after the decode step, each reading the
    # weights, which is what chunked prefill avoids.
    "mixed_step": '''
def mixed_step(decode, chunk, peak_flops_per_s, bandwidth_bytes_per_s):
    alone = [step_time(s["matmul_flops"], s["weight_bytes"], s["attn_flops"], s["kv_bytes"], peak_flops_per_s,
                       bandwidth_bytes_per_s) for s in (decode, chunk)]
    return {key: alone[0][key] + alone[1][key] for key in ("matmul_s", "attention_s", "time_s")}
''',
    # The free-ride chunk: stops where chunk tokens stop riding free in the matmuls (T* - B, bf16),
    # rounded to the tile, instead of the largest step within the TBT target.
    "chunk_for_tbt": '''
def chunk_for_tbt(decode, chunk_of, tbt_target_s, peak_flops_per_s, bandwidth_bytes_per_s, tile=128):
    free_ride = math.floor(peak_flops_per_s / bandwidth_bytes_per_s - decode["tokens"])
    return max(0, (decode["tokens"] + free_ride) // tile * tile - decode["tokens"])
''',
    # p1: the rate at which the mean TTFT reaches the target, as if a mean said what 90 % of
    # requests get.
    "p1": '''
p1 = "b"
''',
    # q1: attention's share of the FLOPs, not of the time.
    "quiz_answers": '''
q1 = "a"
q2 = "d"
q3 = "a"
q4 = "c"
''',
}

MORE_MISTAKES = {
    # Compute-bound whenever the intensity is above 1 FLOP/byte, ignoring the ridge.
    "bound_above_one_flop_per_byte": ("roofline", '''
def ridge_point(peak_flops_per_s, bandwidth_bytes_per_s):
    return peak_flops_per_s / bandwidth_bytes_per_s


def attainable_flops(intensity, peak_flops_per_s, bandwidth_bytes_per_s):
    return min(peak_flops_per_s, intensity * bandwidth_bytes_per_s)


def roofline_time(flops, nbytes, peak_flops_per_s, bandwidth_bytes_per_s):
    c, m = flops / peak_flops_per_s, nbytes / bandwidth_bytes_per_s
    return {"compute_s": c, "memory_s": m, "bound_s": max(c, m), "no_overlap_s": c + m,
            "binding": "compute" if flops / nbytes > 1 else "memory"}
'''),
    # Leaves the embedding table out of N even when the output head is that table: a tied model's
    # head is read every step all the same.
    "tied_head_left_out": ("param_count", '''
def param_count(cfg):
    d, hd = cfg.d_model, cfg.head_dim
    attention = 2 * d * cfg.n_heads * hd + 2 * d * cfg.n_kv_heads * hd
    mlp = (3 if cfg.gated_mlp else 2) * d * cfg.d_ff
    tables = cfg.vocab_size * d * (1 if cfg.tied_embeddings else 2)
    return cfg.n_layers * (attention + mlp + 2 * d) + tables + d


def streamed_params(cfg):
    return param_count(cfg) - cfg.vocab_size * cfg.d_model
'''),
    # The roofline drawn only across the points' intensities: when every point is memory-bound it
    # stops short of the ridge and never shows the flat roof.
    "roofline_short_of_the_ridge": ("roofline_plot", '''
def plot_roofline(ax, peak_flops_per_s, bandwidth_bytes_per_s, points):
    xs = np.logspace(np.log10(min(i for _, i, _ in points)), np.log10(max(i for _, i, _ in points)), 200)
    ax.plot(xs, np.minimum(peak_flops_per_s, xs * bandwidth_bytes_per_s), color=BOUND_COLOR)
    for label, intensity, color in points:
        ax.plot([intensity], [min(peak_flops_per_s, intensity * bandwidth_bytes_per_s)], "o", color=color, label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("attainable FLOP/s")
    return ax
'''),
    # The roofline through its two ends only, without a point at the ridge: a straight line in
    # log-log that cuts the corner between the bandwidth slope and the flat roof.
    "roofline_cuts_the_corner": ("roofline_plot", '''
def plot_roofline(ax, peak_flops_per_s, bandwidth_bytes_per_s, points):
    ridge = peak_flops_per_s / bandwidth_bytes_per_s
    xs = [min([ridge] + [i for _, i, _ in points]) / 2, max([ridge] + [i for _, i, _ in points]) * 2]
    ax.plot(xs, [min(peak_flops_per_s, x * bandwidth_bytes_per_s) for x in xs], color=BOUND_COLOR)
    for label, intensity, color in points:
        ax.plot([intensity], [min(peak_flops_per_s, intensity * bandwidth_bytes_per_s)], "o", color=color, label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("attainable FLOP/s")
    return ax
'''),
    # Decode's and the chunk's attention as one kernel, one max over their FLOPs and bytes together,
    # when the step's bound adds its kernels' bounds (section 6).
    "attention_as_one_kernel": ("mixed_step", '''
def mixed_step(decode, chunk, peak_flops_per_s, bandwidth_bytes_per_s):
    matmul_s = max((decode["matmul_flops"] + chunk["matmul_flops"]) / peak_flops_per_s,
                   decode["weight_bytes"] / bandwidth_bytes_per_s)
    attention_s = max((decode["attn_flops"] + chunk["attn_flops"]) / peak_flops_per_s,
                      (decode["kv_bytes"] + chunk["kv_bytes"]) / bandwidth_bytes_per_s)
    return {"matmul_s": matmul_s, "attention_s": attention_s, "time_s": matmul_s + attention_s}
'''),
    # A token does not attend to itself: n(n-1)/2 pairs in prefill, c positions in decode.
    "attention_without_the_diagonal": ("attention_flops", '''
def attention_flops(cfg, new_tokens, cached_tokens=0):
    d_attn = cfg.n_heads * cfg.head_dim
    return 4 * cfg.n_layers * d_attn * (new_tokens * cached_tokens + new_tokens * (new_tokens - 1) / 2)
'''),
    # Attention's width taken from the key/value heads, n_kv_heads * head_dim: right where every
    # query head has its own (Llama-2-7B), 4x too few FLOPs under grouped-query attention (Llama-3-8B).
    "attention_width_from_kv_heads": ("attention_flops", '''
def attention_flops(cfg, new_tokens, cached_tokens=0):
    d_attn = cfg.n_kv_heads * cfg.head_dim
    return 4 * cfg.n_layers * d_attn * (new_tokens * cached_tokens + new_tokens * (new_tokens + 1) / 2)
'''),
    # A tie, compute time equal to memory time, called memory-bound: the text says "compute" when the
    # compute time is at least the memory time.
    "tie_called_memory_bound": ("roofline", '''
def ridge_point(peak_flops_per_s, bandwidth_bytes_per_s):
    return peak_flops_per_s / bandwidth_bytes_per_s


def attainable_flops(intensity, peak_flops_per_s, bandwidth_bytes_per_s):
    return min(peak_flops_per_s, intensity * bandwidth_bytes_per_s)


def roofline_time(flops, nbytes, peak_flops_per_s, bandwidth_bytes_per_s):
    c, m = flops / peak_flops_per_s, nbytes / bandwidth_bytes_per_s
    return {"compute_s": c, "memory_s": m, "bound_s": max(c, m), "no_overlap_s": c + m,
            "binding": "compute" if c > m else "memory"}
'''),
}

# --- alternative correct solutions ---------------------------------------------------------------

LOOPS = {
    "matmul": '''
def matmul_cost(T, D, F, bytes_per_elem=2.0):
    elements = 0
    for rows, cols in ((T, D), (D, F), (T, F)):  # X read, W read, Y written
        elements += rows * cols
    flops = 0
    for _ in range(2):  # the multiply, then the add
        flops += T * D * F
    nbytes = elements * bytes_per_elem
    return dict(flops=flops, bytes=nbytes, intensity=flops / nbytes)
''',
    "roofline": '''
def ridge_point(peak_flops_per_s, bandwidth_bytes_per_s):
    return peak_flops_per_s / bandwidth_bytes_per_s


def attainable_flops(intensity, peak_flops_per_s, bandwidth_bytes_per_s):
    if intensity >= ridge_point(peak_flops_per_s, bandwidth_bytes_per_s):
        return float(peak_flops_per_s)
    return intensity * bandwidth_bytes_per_s


def roofline_time(flops, nbytes, peak_flops_per_s, bandwidth_bytes_per_s):
    times = {"compute": flops / peak_flops_per_s, "memory": nbytes / bandwidth_bytes_per_s}
    bound = "compute" if times["compute"] >= times["memory"] else "memory"
    return {"compute_s": times["compute"], "memory_s": times["memory"], "bound_s": times[bound],
            "no_overlap_s": sum(times.values()), "binding": bound}
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


def streamed_params(cfg):
    head = cfg.vocab_size * cfg.d_model  # the output head is always streamed
    blocks_and_norms = param_count(cfg) - cfg.vocab_size * cfg.d_model * (1 if cfg.tied_embeddings else 2)
    return blocks_and_norms + head
''',
    "kv_cache": '''
def kv_bytes_per_token(cfg, bytes_per_elem=2.0):
    per_token = 0
    for _layer in range(cfg.n_layers):
        for _tensor in ("k", "v"):
            per_token += cfg.n_kv_heads * cfg.head_dim * bytes_per_elem
    return per_token


def max_batch(memory_bytes, weight_memory_bytes, kv_per_token, context_len):
    per_sequence = context_len * kv_per_token
    batch = 0
    step = 1 << 40
    while step:  # grow the batch by halving steps while everything still fits
        if weight_memory_bytes + (batch + step) * per_sequence <= memory_bytes:
            batch += step
        else:
            step //= 2
    return batch
''',
    "attention_flops": '''
def attention_flops(cfg, new_tokens, cached_tokens=0):
    positions = 0
    for j in range(1, int(new_tokens) + 1):  # new token j sees the cache and j new positions
        positions += cached_tokens + j
    flops = 0
    for _layer in range(cfg.n_layers):
        flops += 2 * positions * cfg.n_heads * cfg.head_dim  # QK^T
        flops += 2 * positions * cfg.n_heads * cfg.head_dim  # AV
    return flops
''',
    # Reuses roofline_time from exercise B.
    "step_time": '''
def step_time(matmul_flops, weight_bytes, attn_flops, kv_bytes, peak_flops_per_s, bandwidth_bytes_per_s):
    parts = {}
    for name, flops, nbytes in (("matmul_s", matmul_flops, weight_bytes), ("attention_s", attn_flops, kv_bytes)):
        parts[name] = roofline_time(flops, nbytes, peak_flops_per_s, bandwidth_bytes_per_s)["bound_s"]
    parts["time_s"] = parts["matmul_s"] + parts["attention_s"]
    return parts
''',
    # Reuses step_time: the shared matmuls with decode's attention, then the chunk's attention kernel.
    "mixed_step": '''
def mixed_step(decode, chunk, peak_flops_per_s, bandwidth_bytes_per_s):
    both = step_time(decode["matmul_flops"] + chunk["matmul_flops"], chunk["weight_bytes"], decode["attn_flops"],
                     decode["kv_bytes"], peak_flops_per_s, bandwidth_bytes_per_s)
    chunk_attention = step_time(0.0, 0.0, chunk["attn_flops"], chunk["kv_bytes"], peak_flops_per_s,
                                bandwidth_bytes_per_s)["attention_s"]
    return {"matmul_s": both["matmul_s"], "attention_s": both["attention_s"] + chunk_attention,
            "time_s": both["time_s"] + chunk_attention}
''',
    # One chunk token at a time up to the largest within the target, then T rounded down to the tile.
    "chunk_for_tbt": '''
def chunk_for_tbt(decode, chunk_of, tbt_target_s, peak_flops_per_s, bandwidth_bytes_per_s, tile=128):
    largest = 0
    while mixed_step(decode, chunk_of(largest + 1), peak_flops_per_s, bandwidth_bytes_per_s)["time_s"] <= tbt_target_s:
        largest += 1
    aligned = (decode["tokens"] + largest) // tile * tile
    return aligned - decode["tokens"] if aligned > decode["tokens"] else 0
''',
    "ridge_in_tokens": '''
def ridge_in_tokens(peak_flops_per_s, bandwidth_bytes_per_s, bytes_per_weight=2.0):
    # Bisection on compute time minus weight-streaming time, per parameter.
    def gap(b):
        return 2 * b / peak_flops_per_s - bytes_per_weight / bandwidth_bytes_per_s
    lo, hi = 0.0, 1.0
    while gap(hi) < 0:
        hi *= 2
    for _ in range(200):
        mid = (lo + hi) / 2
        if gap(mid) < 0:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2
''',
    # np.logspace exactly between the extreme intensities; scatter markers; the earlier functions.
    "roofline_plot": '''
def plot_roofline(ax, peak_flops_per_s, bandwidth_bytes_per_s, points):
    ridge = ridge_point(peak_flops_per_s, bandwidth_bytes_per_s)
    intensities = [i for _, i, _ in points] + [ridge]
    xs = np.logspace(np.log10(min(intensities)), np.log10(max(intensities)), 50)
    ax.loglog(xs, [attainable_flops(v, peak_flops_per_s, bandwidth_bytes_per_s) for v in xs], "-", color="grey")
    for label, intensity, color in points:
        y = attainable_flops(intensity, peak_flops_per_s, bandwidth_bytes_per_s)
        ax.scatter([intensity], [y], color=color, zorder=3, label=label)
    ax.set_xlabel("FLOP/byte")
    ax.set_ylabel("FLOP/s")
    return ax
''',
}

FORMULAS = {
    # Intensity from its closed form; numpy for the arithmetic.
    "matmul": '''
import numpy as np

def matmul_cost(T, D, F, bytes_per_elem=2.0):
    intensity = 2 * T * D * F / (bytes_per_elem * (T * D + D * F + T * F))
    flops = np.float64(2.0) * T * D * F
    return {"flops": flops, "bytes": flops / intensity, "intensity": intensity}
''',
    # The binding resource from the intensity against the ridge (a tie is compute-bound).
    "roofline": '''
def ridge_point(peak_flops_per_s, bandwidth_bytes_per_s):
    return peak_flops_per_s / bandwidth_bytes_per_s


def attainable_flops(intensity, peak_flops_per_s, bandwidth_bytes_per_s):
    return float(np.minimum(peak_flops_per_s, intensity * bandwidth_bytes_per_s))


def roofline_time(flops, nbytes, peak_flops_per_s, bandwidth_bytes_per_s):
    compute_s, memory_s = flops / peak_flops_per_s, nbytes / bandwidth_bytes_per_s
    at_or_past_ridge = flops / nbytes >= ridge_point(peak_flops_per_s, bandwidth_bytes_per_s)
    return {"compute_s": compute_s, "memory_s": memory_s, "bound_s": max(compute_s, memory_s),
            "no_overlap_s": compute_s + memory_s, "binding": "compute" if at_or_past_ridge else "memory"}
''',
    # Per block times layers, the head counted once whether tied or not.
    "param_count": '''
def param_count(cfg):
    d = cfg.d_model
    q, kv = cfg.n_heads * cfg.head_dim, cfg.n_kv_heads * cfg.head_dim
    block = d * (2 * q + 2 * kv) + d * cfg.d_ff * (3 if cfg.gated_mlp else 2) + 2 * d
    return cfg.n_layers * block + d + cfg.vocab_size * d + (0 if cfg.tied_embeddings else cfg.vocab_size * d)


def streamed_params(cfg):
    d = cfg.d_model
    q, kv = cfg.n_heads * cfg.head_dim, cfg.n_kv_heads * cfg.head_dim
    block = d * (2 * q + 2 * kv) + d * cfg.d_ff * (3 if cfg.gated_mlp else 2) + 2 * d
    return cfg.n_layers * block + d + cfg.vocab_size * d
''',
    "kv_cache": '''
def kv_bytes_per_token(cfg, bytes_per_elem=2.0):
    return cfg.n_layers * 2 * cfg.n_kv_heads * cfg.head_dim * bytes_per_elem


def max_batch(memory_bytes, weight_memory_bytes, kv_per_token, context_len):
    tokens = (memory_bytes - weight_memory_bytes) // kv_per_token
    return int(max(tokens, 0) // context_len)
''',
    # The approximate causal count the text allows: n^2 / 2 pairs instead of n(n+1)/2.
    "attention_flops": '''
def attention_flops(cfg, new_tokens, cached_tokens=0):
    return 4 * cfg.n_layers * cfg.n_heads * cfg.head_dim * (new_tokens * cached_tokens + new_tokens ** 2 / 2)
''',
    "step_time": '''
import numpy as np

def step_time(matmul_flops, weight_bytes, attn_flops, kv_bytes, peak_flops_per_s, bandwidth_bytes_per_s):
    compute = np.array([matmul_flops, attn_flops]) / peak_flops_per_s
    memory = np.array([weight_bytes, kv_bytes]) / bandwidth_bytes_per_s
    floors = np.maximum(compute, memory)
    return {"matmul_s": floors[0], "attention_s": floors[1], "time_s": floors.sum()}
''',
    # The roofline through exactly three points (its two ends and the ridge, drawn with small
    # markers), a ridge line and a peak line drawn across the axes, each point its own plot call.
    "roofline_plot": '''
def plot_roofline(ax, peak_flops_per_s, bandwidth_bytes_per_s, points):
    ridge = peak_flops_per_s / bandwidth_bytes_per_s
    xs = sorted({min(i for _, i, _ in points), ridge, max(i for _, i, _ in points)})
    ax.plot(xs, [min(peak_flops_per_s, x * bandwidth_bytes_per_s) for x in xs], "k.--", label="roofline")
    ax.axvline(ridge, color="0.7", linestyle=":")
    ax.axhline(peak_flops_per_s, color="0.7", linestyle=":")
    for label, intensity, color in points:
        ax.plot(intensity, min(peak_flops_per_s, intensity * bandwidth_bytes_per_s), "s", color=color, label=label)
    ax.set(xscale="log", yscale="log", xlabel="FLOP per byte", ylabel="FLOP per second")
    return ax
''',
    # Reuses ridge_point from exercise B.
    "ridge_in_tokens": '''
def ridge_in_tokens(peak_flops_per_s, bandwidth_bytes_per_s, bytes_per_weight=2.0):
    return bytes_per_weight * ridge_point(peak_flops_per_s, bandwidth_bytes_per_s) / 2
''',
    "mixed_step": '''
def mixed_step(decode, chunk, peak_flops_per_s, bandwidth_bytes_per_s):
    flops = decode["matmul_flops"] + chunk["matmul_flops"]
    matmul_s = max(flops / peak_flops_per_s, decode["weight_bytes"] / bandwidth_bytes_per_s)  # one read
    attention_s = 0.0
    for part in (decode, chunk):  # two attention kernels, each on its own roofline
        attention_s += max(part["attn_flops"] / peak_flops_per_s, part["kv_bytes"] / bandwidth_bytes_per_s)
    return {"matmul_s": matmul_s, "attention_s": attention_s, "time_s": matmul_s + attention_s}
''',
    # Bisection over whole tiles (the step's time grows with the chunk).
    "chunk_for_tbt": '''
def chunk_for_tbt(decode, chunk_of, tbt_target_s, peak_flops_per_s, bandwidth_bytes_per_s, tile=128):
    def fits(tiles):
        chunk = tiles * tile - decode["tokens"]
        return chunk > 0 and mixed_step(decode, chunk_of(chunk), peak_flops_per_s,
                                        bandwidth_bytes_per_s)["time_s"] <= tbt_target_s
    first = decode["tokens"] // tile + 1
    if not fits(first):
        return 0
    lo, hi = first, 2 * first
    while fits(hi):
        lo, hi = hi, 2 * hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo * tile - decode["tokens"]
''',
    # p1 in capitals, with a space: the format check accepts it.
    "p1": '''
p1 = " C"
''',
    "quiz_answers": '''
q1 = " B"
q2 = "D "
q3 = "a"
q4 = "C"
''',
}

VARIANTS = {
    "loops": {k: v.strip("\n") for k, v in LOOPS.items()},
    "formulas": {k: v.strip("\n") for k, v in FORMULAS.items()},
}
MISTAKES = {k: v.strip("\n") for k, v in MISTAKES.items()}
MORE_MISTAKES = {k: (gid, v.strip("\n")) for k, (gid, v) in MORE_MISTAKES.items()}
