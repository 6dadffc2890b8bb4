"""A toy decoder-only transformer to time prefill and decode on (lesson 3).

Llama-shaped and written to be read top to bottom: RMSNorm, attention with rotary positions and
optional grouped key/value heads (GQA), a gated (SwiGLU) MLP. As in gpt-fast, one
``forward(idx, input_pos, cache)`` serves both phases of a request:

    prefill  the whole prompt in one pass; its keys and values are written into the cache;
    decode   one token per pass; it attends over everything the cache holds.

The KV cache is preallocated for the whole request and updated in place, never reallocated: one
key tensor and one value tensor per layer, as gpt-fast keeps them, so that under torch.compile
each layer's write is an in-place update of its own buffer (a slice of one tensor holding every
layer would be copied out and written back whole, layer by layer). Prefill on an empty cache
attends causally among its own tokens (is_causal=True: the kernel skips the masked half of the
T x T square); a decode step attends over the positions written so far, its own included, and
over nothing else: no mask, so that a GPU may run its fused kernels (flash attention reads the
cache at bandwidth). Prefill and the no-cache pass compute logits for the last position only:
nothing reads the others. What a pass runs is counted in course.counting.
Weights are random, drawn from a seed: the tokens it generates are gibberish, but every matrix
has the shape of a real model's, so the time it takes is real. Nothing is downloaded.

Shapes in comments: B batch, T tokens in this pass, S cache slots (max_seq_len), d d_model,
nh query heads, nkv key/value heads, hd head_dim, V vocab_size.
"""

from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from course.models import ModelConfig, get_model_config


@dataclass
class KVCache:
    """Keys and values of every layer, preallocated for a whole request and written in place."""

    k: list[torch.Tensor]  # one (B, nkv, S, hd) tensor per layer
    v: list[torch.Tensor]  # one (B, nkv, S, hd) tensor per layer
    length: int = 0  # positions written so far: prompt tokens plus decoded tokens

    @property
    def batch_size(self) -> int:
        return self.k[0].shape[0]

    @property
    def max_seq_len(self) -> int:
        return self.k[0].shape[2]

    @property
    def dtype(self) -> torch.dtype:
        return self.k[0].dtype

    @property
    def nbytes(self) -> int:
        """Bytes the cache occupies: what a decode step reads of it when every slot is written."""
        return sum(t.nbytes for t in self.k) + sum(t.nbytes for t in self.v)

    def tensors(self) -> list[torch.Tensor]:
        """Every buffer of the cache (to mark them as static inputs for torch.compile, say)."""
        return [*self.k, *self.v]


class RMSNorm(nn.Module):
    """x / sqrt(mean(x^2) + eps) * weight, computed in fp32 whatever the model's dtype."""

    def __init__(self, dim: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # PyTorch's own RMSNorm, one operator instead of five (in fp32 .float() and .type_as() are no-ops)
        normed = F.rms_norm(x.float(), (x.shape[-1],), eps=self.eps)
        return normed.type_as(x) * self.weight


def rope_angles(input_pos: torch.Tensor, head_dim: int, base: float = 10000.0) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of the rotary angles at these positions, laid out for apply_rope, each (T, hd):
    (cos, cos) and (-sin, sin) over a head's two halves. Made once per pass, used by every layer."""
    inv_freq = base ** -(torch.arange(0, head_dim, 2, device=input_pos.device, dtype=torch.float32) / head_dim)
    angles = input_pos.float()[:, None] * inv_freq[None, :]  # (T, hd/2)
    cos, sin = angles.cos(), angles.sin()
    return torch.cat([cos, cos], dim=-1), torch.cat([-sin, sin], dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate pairs (x1, x2) of each head's halves by the position's angles, x is (B, h, T, hd):
    (x1 cos - x2 sin, x2 cos + x1 sin), written as x * (cos, cos) + (x2, x1) * (-sin, sin)."""
    x32 = x.float()
    x1, x2 = x32.chunk(2, dim=-1)  # (B, h, T, hd/2) each
    return (x32 * cos + torch.cat([x2, x1], dim=-1) * sin).type_as(x)  # (B, h, T, hd)


# Below this many attention scores (B * nh * T * S) a call runs on one CPU thread. PyTorch's CPU
# attention kernel splits every call over its threads, one head at a time, however little work
# there is; the course's threads sleep while they wait (OMP_WAIT_POLICY=PASSIVE, course/__init__.py),
# and waking one costs more than it saves on a decode step's single query over a short cache. On
# a 2-core VM (toy-cpu's 16 heads, batch 1): 66 us on one thread, 94 us on two at 129 keys; two
# threads were faster from about 512 keys (8,192 scores) up. Measured in docs/benchmarks.md.
SERIAL_ATTENTION_SCORES = 8192


class _OneThread:
    """Run the block on one PyTorch CPU thread, then give back the count it had."""

    def __enter__(self) -> None:
        self.threads = torch.get_num_threads()
        if self.threads > 1:
            torch.set_num_threads(1)

    def __exit__(self, *exc: object) -> None:
        if self.threads > 1:
            torch.set_num_threads(self.threads)


def serial_attention(q: torch.Tensor, k: torch.Tensor) -> bool:
    """Whether attention of queries q (B, nh, T, hd) over keys k (B, nkv, S, hd) runs on one CPU
    thread: on a CPU, with fewer than SERIAL_ATTENTION_SCORES scores."""
    B, nh, T, _ = q.shape
    return q.device.type == "cpu" and B * nh * T * k.shape[-2] < SERIAL_ATTENTION_SCORES


@torch.library.custom_op("course::one_thread_attention", mutates_args=())
def one_thread_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, enable_gqa: bool,
                         causal: bool) -> torch.Tensor:
    """A small unmasked attention call on one CPU thread, as one operator: what attend does for
    such a call, in a form torch.compile calls as it is (a compiled graph cannot change PyTorch's
    thread count part-way through). Returns (B, nh, T, hd), contiguous."""
    with _OneThread():
        return F.scaled_dot_product_attention(q, k, v, enable_gqa=enable_gqa, is_causal=causal).contiguous()


@one_thread_attention.register_fake
def _one_thread_attention_shape(q, k, v, enable_gqa, causal):
    return q.new_empty(q.shape)


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, enable_gqa: bool,
           backends: list | None = None, causal: bool = True) -> torch.Tensor:
    """PyTorch's fused attention: masked when a mask is given, else causal among the pass's own
    tokens (causal=True) or over every key given (causal=False: a decode step's one query over the
    positions written). `backends` (torch.nn.attention.SDPBackend values) restricts the kernels
    PyTorch may pick; masked attention may pick cuDNN on an H100 or H200, which some PyTorch
    versions get wrong with a mask. A small call on a CPU runs on one thread (serial_attention);
    under torch.compile an unmasked one does so through one_thread_attention."""
    kwargs = dict(attn_mask=mask) if mask is not None else dict(is_causal=causal)
    serial = serial_attention(q, k)
    if serial and torch.compiler.is_compiling():
        if mask is None and not backends:
            return one_thread_attention(q, k, v, enable_gqa, causal)
        serial = False  # masked or restricted: PyTorch's own threads
    threads = _OneThread() if serial else contextlib.nullcontext()
    with threads:
        if backends:
            from torch.nn.attention import sdpa_kernel
            with sdpa_kernel(backends):
                return F.scaled_dot_product_attention(q, k, v, enable_gqa=enable_gqa, **kwargs)
        return F.scaled_dot_product_attention(q, k, v, enable_gqa=enable_gqa, **kwargs)


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_dim = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
        # q, k and v come out of one matmul (one weight read, one kernel), as in gpt-fast.
        self.wqkv = nn.Linear(cfg.d_model, (cfg.n_heads + 2 * cfg.n_kv_heads) * cfg.head_dim, bias=False)
        self.wo = nn.Linear(cfg.n_heads * cfg.head_dim, cfg.d_model, bias=False)
        self.backends: list | None = None  # set by ToyTransformer.use_attention_backends

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, mask: torch.Tensor | None,
                input_pos: torch.Tensor, kv: tuple[torch.Tensor, torch.Tensor] | None,
                written: int | None = None) -> torch.Tensor:
        B, T, _ = x.shape
        nh, nkv, hd = self.n_heads, self.n_kv_heads, self.head_dim
        q, k, v = self.wqkv(x).split([nh * hd, nkv * hd, nkv * hd], dim=-1)
        q = q.view(B, T, nh, hd).transpose(1, 2)  # (B, nh, T, hd)
        k = k.view(B, T, nkv, hd).transpose(1, 2)  # (B, nkv, T, hd)
        v = v.view(B, T, nkv, hd).transpose(1, 2)  # (B, nkv, T, hd)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        if kv is not None:
            k_cache, v_cache = kv  # (B, nkv, S, hd) each: this layer's own buffers
            k_cache[:, :, input_pos] = k  # write this pass's keys and values in place
            v_cache[:, :, input_pos] = v
            if written is not None:  # a decode step: the positions written so far, its own included
                k, v = k_cache[:, :, :written], v_cache[:, :, :written]  # (B, nkv, written, hd)
            elif mask is not None:  # attend over every slot; the mask hides those not written yet
                k, v = k_cache, v_cache
        # Each group of nh/nkv query heads shares one key/value head (enable_gqa). No mask and no
        # `written`: causal among this pass's own tokens (prefill on an empty cache, or no cache).
        y = attend(q, k, v, mask, nkv != nh, self.backends, causal=written is None)  # (B, nh, T, hd)
        y = y.transpose(1, 2).reshape(B, T, nh * hd)  # (B, T, nh*hd)
        return self.wo(y)  # (B, T, d)


class GatedMLP(nn.Module):
    """SwiGLU: w2(silu(w1 x) * w3 x)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.w1 = nn.Linear(cfg.d_model, cfg.d_ff, bias=False)
        self.w3 = nn.Linear(cfg.d_model, cfg.d_ff, bias=False)
        self.w2 = nn.Linear(cfg.d_ff, cfg.d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))  # (B, T, d_ff) inside, (B, T, d) out


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.attention_norm = RMSNorm(cfg.d_model)
        self.attention = Attention(cfg)
        self.ffn_norm = RMSNorm(cfg.d_model)
        self.feed_forward = GatedMLP(cfg)

    def forward(self, x, cos, sin, mask, input_pos, kv, written=None):
        x = x + self.attention(self.attention_norm(x), cos, sin, mask, input_pos, kv, written)
        return x + self.feed_forward(self.ffn_norm(x))


class ToyTransformer(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        if cfg.tied_embeddings or not cfg.gated_mlp:
            raise ValueError(f"{cfg.name}: the toy model has untied embeddings and a gated MLP")
        if cfg.head_dim % 2:
            raise ValueError(f"{cfg.name}: rotary positions need an even head_dim, got {cfg.head_dim}")
        self.config = cfg
        self.tok_embeddings = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.layers = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.norm = RMSNorm(cfg.d_model)
        self.output = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)

    def forward(self, idx: torch.Tensor, input_pos: torch.Tensor, cache: KVCache | None = None,
                fresh: bool = False, last_only: bool = False, written: int | None = None) -> torch.Tensor:
        """Logits (B, T, V) for tokens idx (B, T) at positions input_pos (T,); (B, 1, V), the
        last position's, with last_only.

        With a cache, the pass writes its keys and values at input_pos and attends over the whole
        cache, masked; with fresh=True (the cache is empty: the pass starts at position 0) it
        attends causally among its own tokens, as it does without a cache; with `written` (a
        one-token pass: the positions written once it has written its own) it attends over those
        positions of the cache, unmasked.
        """
        if written is not None and (idx.shape[1] != 1 or cache is None or not 0 < written <= cache.max_seq_len):
            raise ValueError(f"written= is for a one-token pass over a cache, 1 to its max_seq_len positions; "
                             f"got {idx.shape[1]} tokens and written={written!r}")
        x = self.tok_embeddings(idx)  # (B, T, d)
        cos, sin = rope_angles(input_pos, self.config.head_dim)  # (T, hd) each
        mask = None  # causal among the tokens of idx
        if cache is not None and not fresh and written is None:
            key_pos = torch.arange(cache.max_seq_len, device=idx.device)
            mask = key_pos[None, :] <= input_pos[:, None]  # (T, S): a query sees keys at or before it
        for i, layer in enumerate(self.layers):
            kv = None if cache is None else (cache.k[i], cache.v[i])
            x = layer(x, cos, sin, mask, input_pos, kv, written)
        if last_only:
            x = x[:, -1:]  # the only position whose next token is wanted
        return self.output(self.norm(x))  # (B, T, V)

    def use_attention_backends(self, backends: list | None) -> None:
        """Restrict the attention kernels PyTorch may choose (a list of
        torch.nn.attention.SDPBackend, e.g. [SDPBackend.FLASH_ATTENTION]); None: PyTorch's choice."""
        for layer in self.layers:
            layer.attention.backends = list(backends) if backends else None

    # --- the two phases, and the cache they share ------------------------------------------

    def new_cache(self, batch_size: int, max_seq_len: int) -> KVCache:
        """An empty cache with room for max_seq_len positions of batch_size sequences."""
        for name, value in (("batch_size", batch_size), ("max_seq_len", max_seq_len)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        cfg, weight = self.config, self.output.weight
        shape = (batch_size, cfg.n_kv_heads, max_seq_len, cfg.head_dim)

        def buffers() -> list[torch.Tensor]:
            return [torch.zeros(shape, device=weight.device, dtype=weight.dtype) for _ in range(cfg.n_layers)]

        return KVCache(buffers(), buffers())

    @torch.inference_mode()
    def prefill(self, idx: torch.Tensor, cache: KVCache) -> torch.Tensor:
        """Run the whole prompt idx (B, T) through the model in one pass; fill the cache.

        Returns the logits (B, V) of the token that follows the prompt."""
        input_pos = self._next_positions(idx, cache)  # (T,)
        logits = self(idx, input_pos, cache, fresh=cache.length == 0, last_only=True)  # (B, 1, V)
        cache.length += idx.shape[1]
        return logits[:, -1]

    @torch.inference_mode()
    def decode(self, token: torch.Tensor, cache: KVCache) -> torch.Tensor:
        """Run one new token (B, 1) per sequence through the model, reading the cache.

        Returns the logits (B, V) of the token after it."""
        if token.ndim != 2 or token.shape[1] != 1:
            raise ValueError(f"token must have shape (B, 1), one new token per sequence; got {tuple(token.shape)}")
        input_pos = self._next_positions(token, cache)  # (1,)
        logits = self(token, input_pos, cache, written=cache.length + 1)  # (B, 1, V): over the written positions
        cache.length += 1
        return logits[:, -1]

    @torch.inference_mode()
    def logits_no_cache(self, idx: torch.Tensor) -> torch.Tensor:
        """Logits (B, V) of the token after idx (B, T), recomputed over all of idx: no cache."""
        self._check_tokens(idx)
        input_pos = torch.arange(idx.shape[1], device=idx.device)  # (T,)
        return self(idx, input_pos, last_only=True)[:, -1]

    def _check_tokens(self, idx: torch.Tensor) -> None:
        if not isinstance(idx, torch.Tensor) or idx.ndim != 2 or idx.shape[1] == 0:
            shape = tuple(idx.shape) if isinstance(idx, torch.Tensor) else type(idx).__name__
            raise ValueError(f"tokens must be a (B, T) tensor of token ids with T >= 1; got {shape}")

    def _next_positions(self, idx: torch.Tensor, cache: KVCache) -> torch.Tensor:
        self._check_tokens(idx)
        B, T = idx.shape
        if B != cache.batch_size:
            raise ValueError(f"tokens have batch {B}, the cache was made for batch {cache.batch_size}")
        if cache.length + T > cache.max_seq_len:
            raise ValueError(f"the cache holds {cache.max_seq_len} positions; {cache.length} are used and "
                             f"{T} more do not fit: make it with a larger max_seq_len")
        # Positions are made on the device from host integers: no copy, no wait for the device.
        return torch.arange(cache.length, cache.length + T, device=idx.device)

    # --- sizes of the real module ----------------------------------------------------------

    def weight_memory_bytes(self) -> int:
        """Weight memory: the bytes every parameter holds, the embedding table included."""
        return sum(p.nbytes for p in self.parameters())

    def decode_weight_bytes(self) -> int:
        """Weight bytes, N b_w: what every forward pass streams of the weights, all but the embedding
        table, of which it reads one row per token (gpt-fast counts "bandwidth achieved" the same way)."""
        return self.weight_memory_bytes() - self.tok_embeddings.weight.nbytes

    @property
    def device(self) -> torch.device:
        return self.output.weight.device

    @property
    def dtype(self) -> torch.dtype:
        return self.output.weight.dtype


def build_model(config: ModelConfig | str, device: str | torch.device = "cpu",
                dtype: torch.dtype = torch.float32, seed: int = 0) -> ToyTransformer:
    """A ToyTransformer with weights drawn from `seed` (normal, std 0.02; norms at 1), in eval mode.

    The module is laid out on the meta device first and its storage allocated once, directly
    on `device` in `dtype`, so a multi-gigabyte GPU model never passes through host memory.
    """
    cfg = get_model_config(config) if isinstance(config, str) else config
    device = torch.device(device)
    with torch.device("meta"):
        model = ToyTransformer(cfg).to(dtype)
    model = model.to_empty(device=device)
    generator = torch.Generator(device=device).manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.fill_(1.0)
            else:
                p.normal_(0.0, 0.02, generator=generator)
    return model.eval().requires_grad_(False)


def narrower(config: ModelConfig, factor: int = 2) -> ModelConfig:
    """The same model with every width divided by `factor`: as many layers, kernels and launches,
    about factor**2 times fewer weight bytes. For telling launch overhead from bandwidth."""
    for name in ("d_model", "n_heads", "n_kv_heads", "d_ff"):
        if getattr(config, name) % factor:
            raise ValueError(f"{config.name}: {name}={getattr(config, name)} is not divisible by {factor}")
    return ModelConfig(f"{config.name}/{factor}-width", n_layers=config.n_layers,
                       d_model=config.d_model // factor, n_heads=config.n_heads // factor,
                       n_kv_heads=config.n_kv_heads // factor, d_ff=config.d_ff // factor,
                       vocab_size=config.vocab_size, head_dim=config.head_dim,
                       source=f"{config.name}, widths divided by {factor}")


def shallower(config: ModelConfig, n_layers: int) -> ModelConfig:
    """The same model with n_layers layers (every width as it is): the embedding table and the
    output head unchanged, the per-layer weights and KV cache n_layers / config.n_layers of theirs."""
    if isinstance(n_layers, bool) or not isinstance(n_layers, int) or not 1 <= n_layers <= config.n_layers:
        raise ValueError(f"{config.name}: n_layers must be a whole number from 1 to {config.n_layers}, got {n_layers!r}")
    return dataclasses.replace(config, name=f"{config.name}/{n_layers}-layers", n_layers=n_layers,
                               source=f"{config.name}, {n_layers} of its {config.n_layers} layers")
