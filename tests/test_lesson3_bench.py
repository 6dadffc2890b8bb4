"""utils/bench.py's parts on a tiny model (the benchmark itself runs with `python -m utils.bench`)."""

from __future__ import annotations

import time

import torch

from course.models import ModelConfig
from course.toy_model import build_model
from utils import bench

TINY = ModelConfig("tiny", n_layers=1, d_model=32, n_heads=2, n_kv_heads=2, d_ff=48, vocab_size=50)


def test_measure_reports_the_median_per_call():
    t = bench.measure(lambda: time.sleep(0.002), torch.device("cpu"), warmup=1, repeats=3, calls=2, label="sleep")
    assert t.label == "sleep" and 0.0015 < t.seconds < 0.1 and t.spread >= 0


def test_decode_and_prefill_pieces_run_and_count():
    model = build_model(TINY)
    cache, token, position = bench._decode_setup(model, context=5, batch=2)
    assert token.shape == (2, 1) and position.tolist() == [5] and cache.max_seq_len == 6
    step = bench.decode_eager(model, cache, token, position)
    before = cache.k.clone()
    step()
    assert not torch.equal(before, cache.k)  # the step wrote slot 5
    run, flops = bench.prefill_fn(model, 8, compiled=False)
    run()
    linear = sum(p.numel() for n, p in model.named_parameters() if n.endswith("weight") and "norm" not in n
                 and "embeddings" not in n)
    assert flops == 2 * linear * 8 + 2 * 2 * 8 * 8 * TINY.d_model
