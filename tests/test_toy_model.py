"""The toy model (course/toy_model.py): prefill + decode equal one full forward; cache sizes."""

from __future__ import annotations

import pytest
import torch

from course.models import ModelConfig, get_model_config
from course.toy_model import ToyTransformer, build_model, count_flops, narrower

TINY = ModelConfig("tiny", n_layers=2, d_model=64, n_heads=4, n_kv_heads=2, d_ff=96, vocab_size=101)
TINY_MHA = ModelConfig("tiny-mha", n_layers=2, d_model=48, n_heads=3, n_kv_heads=3, d_ff=64, vocab_size=37)


@pytest.fixture(scope="module", params=[TINY, TINY_MHA], ids=lambda c: c.name)
def model(request) -> ToyTransformer:
    return build_model(request.param, seed=3)


def test_prefill_then_decode_equals_one_full_forward(model):
    torch.manual_seed(0)
    B, T, prompt_len = 2, 12, 5
    idx = torch.randint(0, model.config.vocab_size, (B, T))
    with torch.inference_mode():
        full = model(idx, torch.arange(T))  # (B, T, V): every position, no cache
    cache = model.new_cache(B, T + 3)  # spare slots must stay hidden by the mask
    steps = [model.prefill(idx[:, :prompt_len], cache)]
    for t in range(prompt_len, T):
        steps.append(model.decode(idx[:, t:t + 1], cache))
    got = torch.stack(steps, dim=1)  # (B, T - prompt_len + 1, V)
    torch.testing.assert_close(got, full[:, prompt_len - 1:], rtol=1e-5, atol=1e-5)
    assert cache.length == T


def test_logits_no_cache_equal_the_last_position_of_a_full_forward(model):
    idx = torch.randint(0, model.config.vocab_size, (1, 7))
    with torch.inference_mode():
        full = model(idx, torch.arange(7))
    torch.testing.assert_close(model.logits_no_cache(idx), full[:, -1])


def test_positions_matter():
    m = build_model(TINY, seed=0)
    a = m.logits_no_cache(torch.tensor([[1, 2, 3, 4]]))
    b = m.logits_no_cache(torch.tensor([[2, 1, 3, 4]]))
    assert not torch.allclose(a, b)


@pytest.mark.parametrize("dtype, nbytes", [(torch.float32, 4), (torch.bfloat16, 2)])
def test_cache_has_the_size_lesson_2_predicts(dtype, nbytes):
    m = build_model(TINY, dtype=dtype)
    B, tokens = 3, 40
    cache = m.new_cache(B, tokens)
    c = TINY
    expected = 2 * c.n_layers * c.n_kv_heads * (c.d_model // c.n_heads) * nbytes * tokens * B
    assert cache.nbytes == expected
    assert cache.k.dtype == dtype and cache.max_seq_len == tokens and cache.batch_size == B


def test_preset_caches_per_token():
    for name, nbytes in (("toy-cpu", 4), ("toy-gpu", 2)):
        c = get_model_config(name)
        with torch.device("meta"):
            m = ToyTransformer(c)
        m = m.to(torch.float32 if nbytes == 4 else torch.bfloat16)
        assert m.new_cache(1, 1).nbytes == 2 * c.n_layers * c.n_kv_heads * c.head_dim * nbytes


def test_presets_are_sized_for_their_memory():
    def weight_bytes(name: str, nbytes: int) -> int:
        with torch.device("meta"):
            return sum(p.numel() for p in ToyTransformer(get_model_config(name)).parameters()) * nbytes
    assert weight_bytes("toy-gpu", 2) >= 1e9  # bf16, far above a 50 MB L2
    assert 200e6 <= weight_bytes("toy-cpu", 4) <= 800e6  # fp32: well above an L3, decode in tens of ms


def test_seeded_weights_are_reproducible():
    a, b, c = build_model(TINY, seed=1), build_model(TINY, seed=1), build_model(TINY, seed=2)
    assert torch.equal(a.output.weight, b.output.weight)
    assert not torch.equal(a.output.weight, c.output.weight)
    assert torch.equal(a.layers[0].attention_norm.weight, torch.ones(TINY.d_model))
    assert 0.015 < a.layers[0].feed_forward.w1.weight.std().item() < 0.025


def test_cache_overflow_and_bad_tokens_are_rejected():
    m = build_model(TINY)
    cache = m.new_cache(1, 4)
    m.prefill(torch.tensor([[1, 2, 3]]), cache)
    m.decode(torch.tensor([[4]]), cache)
    with pytest.raises(ValueError, match="max_seq_len"):
        m.decode(torch.tensor([[5]]), cache)
    with pytest.raises(ValueError, match="batch"):
        m.prefill(torch.tensor([[1], [2]]), m.new_cache(1, 4))
    with pytest.raises(ValueError, match=r"\(B, 1\)"):
        m.decode(torch.tensor([[1, 2]]), m.new_cache(1, 4))
    with pytest.raises(ValueError, match="T >= 1"):
        m.prefill(torch.zeros(1, 0, dtype=torch.long), m.new_cache(1, 4))
    with pytest.raises(ValueError, match="max_seq_len"):
        m.new_cache(1, 0)


def test_count_flops_counts_matmuls_and_attention():
    m = build_model(TINY)
    T, S = 10, 16
    cache = m.new_cache(1, S)
    flops = count_flops(m.prefill, torch.randint(0, TINY.vocab_size, (1, T)), cache)
    linear = sum(p.numel() for n, p in m.named_parameters() if n.endswith("weight") and "norm" not in n
                 and "embeddings" not in n)
    attention = TINY.n_layers * 2 * (2 * T * S * TINY.d_model)  # QK^T and AV over all S slots
    assert flops == 2 * linear * T + attention


def test_decode_weight_bytes_leave_out_the_embedding_table():
    m = build_model(TINY)
    assert m.weight_bytes() == sum(p.numel() for p in m.parameters()) * 4
    assert m.weight_bytes() - m.decode_weight_bytes() == TINY.vocab_size * TINY.d_model * 4


def test_narrower_keeps_layers_and_shrinks_bytes():
    small = narrower(get_model_config("toy-cpu"))
    assert small.n_layers == 8 and small.d_model == 512 and small.head_dim == 64
    with pytest.raises(ValueError, match="n_heads"):
        narrower(TINY_MHA)
