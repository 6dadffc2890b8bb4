"""What a pass of a model runs, counted: its FLOPs by kind of kernel, its operators, its attention kernels.

- FLOPs. `count_kernel_flops` runs a function under PyTorch's FlopCounterMode (a multiply-add is
  2 FLOPs) and splits the count into the weight matmuls' FLOPs and attention's. Attention is
  counted as the kernel runs it: a causal call (is_causal=True, a prefill on an empty cache) as
  lesson 2 section 5 counts it, query j of T seeing j + 1 keys, 4 d_head FLOPs per key and head:
  4 B h_q d_h T(T + 1)/2, about half the T x T square that FlopCounterMode's own formula counts;
  any other call over every key it is given (a decode step is handed only the positions written).
  FlopCounterMode does not count PyTorch's CPU attention kernel; it is counted here the same way.
- Operators. `aten_ops` counts the ATen operators a call runs, as a Python dispatch mode sees them;
  `launches` keeps those that run a kernel. `attention_kernels` names the attention kernels the
  PyTorch profiler saw (flash, memory-efficient, cuDNN, math, or the CPU kernel).

None of them captures a CUDA graph: they run the function eagerly, once.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch.utils.flop_counter import FlopCounterMode, sdpa_flop_count


# --- FLOPs -------------------------------------------------------------------------------------

def causal_positions(new_tokens: int, keys: int) -> int:
    """Key positions that `new_tokens` queries see under a causal mask over `keys` keys, summed
    over the queries, with PyTorch's is_causal alignment (query i sees keys 0 to i): T(T + 1)/2
    when T = S, as lesson 2 counts a prefill on an empty cache."""
    return sum(min(i + 1, keys) for i in range(new_tokens))


def attention_call_flops(query_shape, key_shape, is_causal: bool) -> int:
    """FLOPs of one scaled-dot-product attention call (scores and the weighted sum of values) with
    queries (B, h_q, T, d_h) over keys (B, h_kv, S, d_h): 4 B h_q d_h per key each query sees."""
    B, heads, T, head_dim = query_shape
    keys = key_shape[-2]
    seen = causal_positions(T, keys) if is_causal else T * keys
    return 4 * B * heads * head_dim * seen


# The attention operators PyTorch's kernels run, whose FLOPs are counted by attention_call_flops. Each
# one's is_causal is found by name in the operator's own schema, wherever this torch version puts it.
ATTENTION_OPS = ("_scaled_dot_product_flash_attention", "_scaled_dot_product_flash_attention_for_cpu",
                 "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
                 "_scaled_dot_product_fused_attention_overrideable", "_scaled_dot_product_attention_math_for_mps")


def named_arguments(schema, args: tuple, kwargs: dict) -> dict:
    """A call's arguments by their names in the operator's schema (torch's FunctionSchema):
    positional ones matched to the schema's order, keyword ones as given, defaults for the rest."""
    names = [a.name for a in schema.arguments]
    named = {a.name: a.default_value for a in schema.arguments if a.has_default_value()}
    named.update(zip(names, args))
    named.update(kwargs)
    return named


def _attention_formula(schema) -> Callable[..., int]:
    def flops(query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs) -> int:
        named = named_arguments(schema, (query_shape, key_shape, value_shape, *args), kwargs)
        return attention_call_flops(query_shape, key_shape, bool(named.get("is_causal") or False))
    return flops


def _attention_mapping() -> dict:
    mapping = {}
    for name in ATTENTION_OPS:
        op = getattr(torch.ops.aten, name, None)
        if op is not None:
            mapping[op] = _attention_formula(op.default._schema)
    return mapping


@dataclass(frozen=True)
class KernelFlops:
    """A pass's FLOPs split by the two kinds of kernel a transformer block runs one after the other."""
    matmul: int  # the weight matmuls (projections, MLP, output head): they stream the weights
    attention: int  # scores and weighted sums over the keys and values: they stream the KV cache

    @property
    def total(self) -> int:
        return self.matmul + self.attention


def count_kernel_flops(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> KernelFlops:
    """FLOPs of the matmuls and attention that ``fn(*args, **kwargs)`` runs (module docstring),
    split into the weight matmuls' and attention's (every scaled-dot-product attention operator,
    whichever kernel PyTorch picked). fn runs once, eagerly."""
    with FlopCounterMode(display=False, custom_mapping=_attention_mapping()) as counter:
        fn(*args, **kwargs)
    attention = matmul = 0
    for op, flops in counter.get_flop_counts().get("Global", {}).items():
        if "scaled_dot_product" in str(op) or "attention" in str(op):
            attention += flops
        else:
            matmul += flops
    return KernelFlops(matmul=int(matmul), attention=int(attention))


def count_flops(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> int:
    """count_kernel_flops' total: the matmuls' and attention's FLOPs of ``fn(*args, **kwargs)``."""
    return count_kernel_flops(fn, *args, **kwargs).total


def full_square_flops(query_shape, key_shape) -> int:
    """FlopCounterMode's own count of one attention call: every query against every key, causal or not."""
    return int(sdpa_flop_count(tuple(query_shape), tuple(key_shape), tuple(key_shape)))


# --- operators and kernels ------------------------------------------------------------------------

VIEW_OPS = ("view", "reshape", "transpose", "select", "split", "chunk", "unsqueeze", "squeeze", "expand",
            "slice", "alias", "permute", "detach", "t.default", "unbind")


def aten_ops(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Counter:
    """How many times ``fn(*args, **kwargs)`` calls each ATen operator, by name ("aten.mm.default"),
    as a Python dispatch mode sees them (composite operators such as linear and attention count
    once each)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class _Count(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops: Counter = Counter()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops[str(func)] += 1
            return func(*args, **(kwargs or {}))

    with _Count() as counter:
        fn(*args, **kwargs)
    return counter.ops


def launches(ops: Counter) -> int:
    """The operators among aten_ops' counts that run a kernel (views only relabel memory). In
    eager PyTorch on a GPU each is one launch or a few, from the CPU, one after another: their
    number sets the least time of a step that is bound by launch overhead."""
    return sum(n for name, n in ops.items() if not any(v in name for v in VIEW_OPS))


def attention_kernels(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> list[str]:
    """Names of the attention operators and GPU kernels that ``fn(*args, **kwargs)`` ran, from the
    PyTorch profiler: which implementation PyTorch chose (flash, memory-efficient, cuDNN, math,
    or the CPU kernel)."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    with profile(activities=activities) as prof:
        fn(*args, **kwargs)
    keys = ("scaled_dot_product", "attention", "flash", "fmha", "cudnn")
    return sorted({e.name for e in prof.events() if any(k in e.name.lower() for k in keys)
                   and e.name != "aten::scaled_dot_product_attention"})
