"""Transformer configurations: published models and the course's toy models.

Only the shapes live here. Counting parameters, FLOPs and bytes from a configuration is what
the students write in lesson 2.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelConfig:
    """Shape of a decoder-only transformer (Llama-style unless a field says otherwise)."""

    name: str
    n_layers: int  # transformer blocks
    d_model: int  # residual-stream width
    n_heads: int  # query heads
    n_kv_heads: int  # key/value heads; < n_heads means grouped-query attention (GQA)
    d_ff: int  # hidden width of the MLP
    vocab_size: int  # rows of the embedding table
    head_dim: int | None = None  # per-head width; None means d_model // n_heads
    gated_mlp: bool = True  # SwiGLU-style MLP with three matrices instead of two
    tied_embeddings: bool = False  # output projection shares the embedding table
    source: str = ""  # where the shape comes from

    def __post_init__(self) -> None:
        for field_name in ("n_layers", "d_model", "n_heads", "n_kv_heads", "d_ff", "vocab_size"):
            value = getattr(self, field_name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{field_name} must be a positive integer, got {value!r}")
        if self.n_kv_heads > self.n_heads:
            raise ValueError(f"n_kv_heads ({self.n_kv_heads}) cannot exceed n_heads ({self.n_heads})")
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"n_heads ({self.n_heads}) must be a multiple of n_kv_heads ({self.n_kv_heads})")
        if self.head_dim is None:
            if self.d_model % self.n_heads:
                raise ValueError(f"n_heads ({self.n_heads}) does not divide d_model ({self.d_model})")
            object.__setattr__(self, "head_dim", self.d_model // self.n_heads)
        elif isinstance(self.head_dim, bool) or not isinstance(self.head_dim, int) or self.head_dim <= 0:
            raise ValueError(f"head_dim must be a positive integer, got {self.head_dim!r}")

    @property
    def gqa_group_size(self) -> int:
        """Query heads that share one key/value head (1 = plain multi-head attention)."""
        return self.n_heads // self.n_kv_heads


PRESETS: dict[str, ModelConfig] = {
    c.name: c
    for c in [
        ModelConfig("llama-2-7b", n_layers=32, d_model=4096, n_heads=32, n_kv_heads=32, d_ff=11008,
                    vocab_size=32000, source="Llama 2 paper (Touvron et al. 2023); HF config.json"),
        ModelConfig("llama-2-13b", n_layers=40, d_model=5120, n_heads=40, n_kv_heads=40, d_ff=13824,
                    vocab_size=32000, source="Llama 2 paper (Touvron et al. 2023); HF config.json"),
        ModelConfig("llama-2-70b", n_layers=80, d_model=8192, n_heads=64, n_kv_heads=8, d_ff=28672,
                    vocab_size=32000, source="Llama 2 paper (Touvron et al. 2023); HF config.json"),
        ModelConfig("llama-3-8b", n_layers=32, d_model=4096, n_heads=32, n_kv_heads=8, d_ff=14336,
                    vocab_size=128256, source="Meta Llama 3 model card; HF config.json"),
        # Lesson 2 holds Sarathi-Serve's published token budgets against this one (7,241,732,096 parameters).
        ModelConfig("mistral-7b", n_layers=32, d_model=4096, n_heads=32, n_kv_heads=8, d_ff=14336,
                    vocab_size=32000, source="mistralai/Mistral-7B-Instruct-v0.2, config.json on Hugging Face"),
        # The course's toy models (lesson 3, course/toy_model.py). Sizes chosen so decode reads
        # its weights from main memory, not from cache. toy-cpu: 107M parameters, 428 MB in fp32,
        # larger than the last-level cache of laptop and desktop CPUs (a few MB to about a hundred),
        # though not of every server CPU (some carry several hundred MB): the lesson prints the ratio
        # for the machine it runs on. GQA with 4 query heads per KV head; a decode step takes tens to
        # hundreds of ms on 2 cores, depending on their load. toy-gpu: 2.69B parameters, 5.4 GB in
        # bf16, of which a pass streams N = 2.56B, 5.12 GB (all but the embedding table, of which it
        # reads one row per token; over 100x the H100's 50 MB L2), Llama-7B widths with 12 layers; plain multi-head
        # attention, so PyTorch's masked attention kernels need no GQA support.
        ModelConfig("toy-cpu", n_layers=8, d_model=1024, n_heads=16, n_kv_heads=4, d_ff=2816,
                    vocab_size=8192, source="this course"),
        ModelConfig("toy-gpu", n_layers=12, d_model=4096, n_heads=32, n_kv_heads=32, d_ff=11008,
                    vocab_size=32000, source="this course"),
    ]
}


def get_model_config(name: str) -> ModelConfig:
    """A preset by name; an unknown name raises a ValueError listing the known ones."""
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown model preset {name!r}; known: {', '.join(PRESETS)}") from None
