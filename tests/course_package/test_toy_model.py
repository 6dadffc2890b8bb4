"""The toy model (course/toy_model.py): prefill + decode equal one full forward; cache sizes."""

from __future__ import annotations

import pytest
import torch

from course.models import ModelConfig, get_model_config
from course import toy_model
from course import counting
from course.counting import count_flops, count_kernel_flops
from course.toy_model import ToyTransformer, build_model, narrower

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
    assert cache.dtype == dtype and len(cache.k) == len(cache.v) and cache.max_seq_len == tokens and cache.batch_size == B


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
    head = m.output.weight.numel()
    # prefill on an empty cache: causal attention among its own T tokens (token j sees j + 1 of
    # them: lesson 2's 4 d_attn T(T + 1)/2 per layer), and the output head for the last position only
    attention = TINY.n_layers * 4 * TINY.d_model * T * (T + 1) // 2
    assert flops == 2 * (linear - head) * T + 2 * head + attention
    token = torch.tensor([[3]])
    step = count_flops(m.decode, token, cache)  # decode: one token over the T + 1 positions written
    assert step == 2 * linear + TINY.n_layers * 2 * (2 * (T + 1) * TINY.d_model)


def test_count_kernel_flops_splits_the_weight_matmuls_from_attention():
    m = build_model(TINY)
    linear = sum(p.numel() for n, p in m.named_parameters() if n.endswith("weight") and "norm" not in n
                 and "embeddings" not in n)
    for B, S in [(1, 16), (3, 40)]:
        cache = m.new_cache(B, S)
        cache.length = S - 1  # the FLOPs of a step do not depend on what the cache holds
        split = count_kernel_flops(m.decode, torch.zeros((B, 1), dtype=torch.long), cache)
        assert split.matmul == B * 2 * linear  # grows with the batch, over the same weights
        assert split.attention == B * TINY.n_layers * 2 * (2 * S * TINY.d_model)  # every slot, every sequence
        cache.length = S - 1
        assert split.total == count_flops(m.decode, torch.zeros((B, 1), dtype=torch.long), cache)


@pytest.mark.parametrize("T", [1, 7, 64])
def test_attention_flops_are_counted_causal_as_lesson_2_counts_them(T):
    """FlopCounterMode's own formula counts the whole T x T square of a causal prefill, which the
    kernel skips half of (7.7 % too many FLOPs in all for toy-gpu at 4,096 tokens). The count here is
    FlopCounterMode's with the causal correction (T + 1) / 2T, and lesson 2 section 5's formula."""
    from torch.utils.flop_counter import FlopCounterMode

    m = build_model(TINY)
    B, hd = 2, TINY.d_model // TINY.n_heads
    ids = torch.randint(0, TINY.vocab_size, (B, T))
    split = count_kernel_flops(m.prefill, ids, m.new_cache(B, T))
    square = TINY.n_layers * counting.full_square_flops((B, TINY.n_heads, T, hd), (B, TINY.n_kv_heads, T, hd))
    assert split.attention * 2 * T == square * (T + 1)
    assert split.attention == B * 4 * TINY.n_layers * TINY.n_heads * hd * T * (T + 1) // 2  # lesson 2, section 5
    with FlopCounterMode(display=False) as stock:  # the matmuls as PyTorch's counter has them
        m.prefill(ids, m.new_cache(B, T))
    assert split.matmul == stock.get_total_flops()  # (its CPU attention kernel has no formula)


def test_decode_weight_bytes_leave_out_the_embedding_table():
    m = build_model(TINY)
    assert m.weight_memory_bytes() == sum(p.numel() for p in m.parameters()) * 4
    assert m.weight_memory_bytes() - m.decode_weight_bytes() == TINY.vocab_size * TINY.d_model * 4


def test_narrower_keeps_layers_and_shrinks_bytes():
    small = narrower(get_model_config("toy-cpu"))
    assert small.n_layers == 8 and small.d_model == 512 and small.head_dim == 64
    with pytest.raises(ValueError, match="n_heads"):
        narrower(TINY_MHA)


def _record_attention(monkeypatch):
    calls = []
    original = torch.nn.functional.scaled_dot_product_attention

    def recording(q, k, v, attn_mask=None, is_causal=False, **kwargs):
        calls.append({"q": tuple(q.shape), "k": tuple(k.shape), "mask": None if attn_mask is None else
                      tuple(attn_mask.shape), "is_causal": is_causal})
        return original(q, k, v, attn_mask=attn_mask, is_causal=is_causal, **kwargs)

    monkeypatch.setattr(toy_model.F, "scaled_dot_product_attention", recording)
    return calls


def test_prefill_on_an_empty_cache_is_causal_over_its_own_tokens(monkeypatch):
    """No T x S mask where the cache is empty: the kernel may skip the masked half (is_causal)."""
    m = build_model(TINY)
    calls = _record_attention(monkeypatch)
    cache = m.new_cache(1, 32)
    m.prefill(torch.randint(0, TINY.vocab_size, (1, 10)), cache)
    assert len(calls) == TINY.n_layers
    assert all(c["is_causal"] and c["mask"] is None and c["k"][2] == 10 for c in calls), calls
    calls.clear()
    m.decode(torch.tensor([[4]]), cache)  # decode: over the 11 positions written, no mask (a GPU's flash kernel may run it)
    assert all(not c["is_causal"] and c["mask"] is None and c["k"][2] == 11 for c in calls), calls
    calls.clear()
    m.prefill(torch.randint(0, TINY.vocab_size, (1, 5)), cache)  # a second chunk sees the cache: masked
    assert all(c["mask"] == (5, 32) for c in calls), calls


def test_prefill_computes_logits_of_the_last_position_only():
    m = build_model(TINY)
    idx = torch.randint(0, TINY.vocab_size, (2, 9))
    with torch.inference_mode():
        full = m(idx, torch.arange(9))
    assert torch.allclose(m.logits_no_cache(idx), full[:, -1], atol=1e-5)
    assert torch.allclose(m.prefill(idx, m.new_cache(2, 9)), full[:, -1], atol=1e-5)
    linear = sum(p.numel() for n, p in m.named_parameters() if p.ndim == 2 and "embeddings" not in n)
    head = m.output.weight.numel()

    def attention(T):  # causal: lesson 2's 4 d_attn T(T + 1)/2 per layer and sequence, batch 2
        return TINY.n_layers * 2 * 4 * TINY.d_model * T * (T + 1) // 2

    for fn in (m.logits_no_cache, lambda ids: m.prefill(ids, m.new_cache(2, 9))):
        extra = count_flops(fn, idx) - count_flops(fn, idx[:, :1])  # 8 more tokens, the head still once
        assert extra == 2 * 2 * (linear - head) * 8 + attention(9) - attention(1)


def test_decode_step_op_count_and_attention_kernel():
    """About 600 kernels per eager decode step of toy-gpu (12 layers) is what makes it launch-bound on
    a GPU: the count is checked per layer, so that a change that adds launches shows here."""
    m = build_model(ModelConfig("tiny12", n_layers=12, d_model=64, n_heads=4, n_kv_heads=4, d_ff=96, vocab_size=97))
    cache = m.new_cache(1, 8)
    m.prefill(torch.tensor([[1, 2, 3]]), cache)
    ops = counting.aten_ops(m.decode, torch.tensor([[4]]), cache)
    per_layer = (counting.launches(ops) - 12) / 12  # less the embedding, final norm, head and positions
    assert 30 <= per_layer <= 50, (per_layer, ops.most_common(10))


def test_attention_kernel_is_reported_and_can_be_chosen():
    from torch.nn.attention import SDPBackend
    m = build_model(TINY)
    ids = torch.tensor([[1, 2, 3]])
    chosen = counting.attention_kernels(m.prefill, ids, m.new_cache(1, 8))
    assert chosen == ["aten::_scaled_dot_product_flash_attention_for_cpu"], chosen
    m.use_attention_backends([SDPBackend.MATH])
    chosen = counting.attention_kernels(m.prefill, ids, m.new_cache(1, 8))
    assert "aten::_scaled_dot_product_flash_attention_for_cpu" not in chosen and chosen, chosen
    m.use_attention_backends(None)
    assert counting.attention_kernels(m.prefill, ids, m.new_cache(1, 8)) == [
        "aten::_scaled_dot_product_flash_attention_for_cpu"]


def test_small_cpu_attention_runs_on_one_thread_and_gives_the_threads_back(monkeypatch):
    """A decode step's attention (one query over a short cache) runs on one CPU thread: splitting it
    costs more than it saves when the workers sleep between operations. A large call keeps every
    thread, and the count is given back after the call, even when it fails."""
    seen = []
    real = toy_model.F.scaled_dot_product_attention

    def spy(*args, **kwargs):
        seen.append(torch.get_num_threads())
        if kwargs.get("attn_mask") is not None and kwargs["attn_mask"].dtype == torch.float64:
            raise RuntimeError("refused")
        return real(*args, **kwargs)

    monkeypatch.setattr(toy_model.F, "scaled_dot_product_attention", spy)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        def call(S, mask_dtype=torch.bool):
            q, k = torch.randn(1, 16, 1, 64), torch.randn(1, 4, S, 64)
            mask = torch.ones(1, S, dtype=mask_dtype)
            return toy_model.attend(q, k, k.clone(), mask, True)

        small = 128  # 16 heads x 128 keys: 2,048 scores
        large = toy_model.SERIAL_ATTENTION_SCORES // 16
        call(small)
        call(large)
        assert seen == [1, 2]
        assert torch.get_num_threads() == 2
        with pytest.raises(RuntimeError, match="refused"):
            call(small, torch.float64)
        assert torch.get_num_threads() == 2
        q, k = torch.randn(2, 4, 3, 8), torch.randn(2, 2, 5, 8)
        mask = torch.rand(3, 5) > 0.3
        mask[:, 0] = True
        assert torch.equal(toy_model.attend(q, k, k, mask, True), real(q, k, k, attn_mask=mask, enable_gqa=True))
    finally:
        torch.set_num_threads(before)


def test_shallower_keeps_every_width_and_the_head_and_drops_layers():
    """The grading model of lesson 3: fewer layers, the same widths, embedding table and head."""
    cfg = toy_model.shallower(TINY, 1)
    assert (cfg.n_layers, cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.d_ff, cfg.vocab_size) == (1, 64, 4, 2, 96, 101)
    assert cfg.name == "tiny/1-layers"
    full, one = build_model(TINY), build_model(cfg)
    per_layer = sum(p.numel() for p in full.layers[0].parameters())
    assert sum(p.numel() for p in one.parameters()) == sum(p.numel() for p in full.parameters()) - per_layer
    for bad in (0, 3, 1.0, True):
        with pytest.raises(ValueError, match="n_layers"):
            toy_model.shallower(TINY, bad)


def _model_after_a_prompt():
    """The tiny model and a cache of 8 slots holding a 3-token prompt."""
    m = build_model(TINY)
    cache = m.new_cache(1, 8)
    m.prefill(torch.tensor([[1, 2, 3]]), cache)
    return m, cache


def _compiled_call(m, cache, backend=lambda keep: keep, **forward_kwargs):
    """The graphs torch.compile hands its backend (`backend(keep)`, where keep records each one)
    for one pass of token 4 at position 3 over `cache`, and the pass's output."""
    graphs = []

    def keep(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    try:
        step = torch.compile(m.forward, backend=backend(keep), fullgraph=True)
        with torch.inference_mode():
            out = step(torch.tensor([[4]]), torch.tensor([3]), cache, **forward_kwargs)
    finally:
        torch._dynamo.reset()
    return graphs, out


def test_under_compile_a_small_cpu_attention_is_one_operator_on_one_thread(monkeypatch):
    """A compiled graph cannot change the thread count part-way, so under torch.compile a decode
    step's small attention call is one_thread_attention, an operator that runs PyTorch's attention
    on one thread and gives the count back; its results are attention's."""
    m, cache = _model_after_a_prompt()
    graphs, compiled = _compiled_call(m, cache, written=4)
    targets = [str(node.target) for node in graphs[0].graph.nodes if node.op == "call_function"]
    assert sum(t.startswith("course.one_thread_attention") for t in targets) == TINY.n_layers, targets
    assert not any("scaled_dot_product" in t for t in targets), targets
    cache.length = 3
    with torch.inference_mode():
        eager = m(torch.tensor([[4]]), torch.tensor([3]), cache, written=4)
    torch.testing.assert_close(compiled, eager)

    seen, real = [], toy_model.F.scaled_dot_product_attention
    monkeypatch.setattr(toy_model.F, "scaled_dot_product_attention",
                        lambda *a, **kw: seen.append(torch.get_num_threads()) or real(*a, **kw))
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        q, k, v = torch.randn(1, 4, 1, 16), torch.randn(1, 2, 6, 16), torch.randn(1, 2, 6, 16)
        out = toy_model.one_thread_attention(q, k, v, True, False)
        assert seen == [1] and torch.get_num_threads() == 2 and out.is_contiguous()
        torch.testing.assert_close(out, real(q, k, v, enable_gqa=True))
    finally:
        torch.set_num_threads(before)


@pytest.mark.slow
def test_decode_compiled_by_inductor_on_a_cpu_gives_eager_logits():
    """The compiled CPU decode step the benchmark times (generated C++ kernels, one_thread_attention
    called as it is) computes what the eager step computes. Slow: Inductor runs the C++ compiler."""
    from utils.bench.passes import _decode_setup, decode_compiled_cpu
    m = build_model(TINY)
    cache, token, position = _decode_setup(m, context=5, batch=1)
    with torch.inference_mode():
        eager = m(token, position, cache, written=6)
    torch._dynamo.reset()
    try:
        # one compilation (the C++ compiler is most of this test's time): the step the benchmark
        # times, which returns its logits; its compiling call wrote this position's keys and values
        # again, the same ones, so the step after it reads the cache eager read
        step = decode_compiled_cpu(m, cache, token, position)
        torch.testing.assert_close(step(), eager)
    finally:
        torch._dynamo.reset()


def test_compiled_decode_updates_each_layer_cache_in_place():
    """Under torch.compile the cache writes must stay per-layer buffer updates: the functional graph
    AOTAutograd hands the compiler writes exactly the 2 x n_layers cache buffers (index_put, which
    Inductor turns back into an in-place update of the input), each of one layer's size, and never builds a tensor holding every layer's cache (which a cache stored
    as one (n_layers, ...) tensor forces: a copy of the whole cache per layer)."""
    from torch._dynamo.backends.common import aot_autograd
    m, cache = _model_after_a_prompt()
    graphs, _ = _compiled_call(m, cache, backend=lambda keep: aot_autograd(fw_compiler=keep))
    assert len(graphs) == 1
    layer_shape = tuple(cache.k[0].shape)
    copies, shapes = [], []
    for node in graphs[0].graph.nodes:
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor):
            shapes.append(tuple(val.shape))
        if node.op == "call_function" and ("index_put" in str(node.target) or "scatter" in str(node.target)):
            copies.append(tuple(node.args[0].meta["val"].shape))
    assert copies == [layer_shape] * (2 * TINY.n_layers), copies  # one write per layer buffer, nothing larger
    assert not any(len(s) == 5 and s[0] == TINY.n_layers for s in shapes)
