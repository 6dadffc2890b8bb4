"""Which attention kernel lesson 3 lets PyTorch use on a GPU: the first fused kernel that gives
the math kernel's results for the toy model's passes here.

PyTorch picks among flash, memory-efficient and cuDNN attention by shape, dtype and GPU; some
versions' cuDNN kernel has given wrong results on an H100 or H200 (the toy model's docstring). A
lesson that times a kernel must first know it computes the right thing, so on a GPU
`restrict_attention` tries each fused kernel alone on a prefill and a decode step, keeps the first
whose logits agree with the math kernel's, and restricts the model to it; where none agrees it
stops with a sentence. On a CPU there is PyTorch's one CPU kernel, and nothing to choose.
The benchmark (utils.bench.model) restricts its model the same way and holds every pass it times
to the math kernel's logits with `same_logits`.
"""

from __future__ import annotations

from typing import Callable

import torch

from course.formatting import page_lines

FUSED = ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION")  # tried in this order


def _passes(model, backend: str | None, prompt: torch.Tensor) -> torch.Tensor:
    """Logits of a prefill of `prompt` and of one decode step after it, with only `backend`."""
    from torch.nn.attention import SDPBackend

    model.use_attention_backends([getattr(SDPBackend, backend)] if backend else None)
    try:
        cache = model.new_cache(prompt.shape[0], prompt.shape[1] + 1)
        first = model.prefill(prompt, cache)
        second = model.decode(first.argmax(-1, keepdim=True), cache)
        return torch.stack([first, second]).float()
    finally:
        model.use_attention_backends(None)


def same_logits(got: torch.Tensor, math_: torch.Tensor, dtype: torch.dtype) -> tuple[bool, float]:
    """Whether logits `got` are the math kernel's `math_`, within 1e-4 of the largest in fp32 and 5e-2
    in bf16 or fp16 (two kernels round differently), and the largest difference."""
    got, math_ = got.float(), math_.float()
    gap = (got - math_).abs().max().item()
    scale = 1e-4 if dtype == torch.float32 else 5e-2
    return bool(gap <= scale * max(math_.abs().max().item(), 1.0)), gap


def agrees(model, backend: str, prompt_len: int = 48) -> tuple[bool, float]:
    """Whether a prefill and a decode step with only `backend` give the math kernel's logits
    (same_logits), and the largest difference."""
    prompt = torch.randint(0, model.config.vocab_size, (2, prompt_len), device=model.device,
                           generator=torch.Generator(device=model.device).manual_seed(0))
    return same_logits(_passes(model, backend, prompt), _passes(model, "MATH", prompt), model.dtype)


def restrict_attention(model, device: torch.device | str,
                       agree: Callable[[str], tuple[bool, float]] | None = None,
                       kernels: tuple[str, ...] = FUSED, who: str = "lesson 3") -> str:
    """On a GPU, restrict `model` to the first fused attention kernel that agrees with the math
    kernel (module docstring) and return a line naming it; raise a RuntimeError with a sentence
    (`who` stops) where none does. On a CPU, a line saying there is nothing to choose, unless
    `kernels` names the ones to try (SDPBackend names): then they are tried there too. `agree`
    stands in for agrees() in the tests."""
    from torch.nn.attention import SDPBackend

    gpu = torch.device(device).type == "cuda"
    if not gpu and kernels == FUSED:
        return "attention: PyTorch's CPU kernel (on a CPU there is no other to choose)"
    agree = agree or (lambda name: agrees(model, name))
    tried = []
    for name in kernels:
        try:
            ok, gap = agree(name)
        except RuntimeError as err:  # this kernel does not run these shapes on this GPU
            tried.append(f"{name.lower()}: does not run here ({str(err).splitlines()[0][:80]})")
            continue
        if ok:
            model.use_attention_backends([getattr(SDPBackend, name)])
            return page_lines(f"attention: {name.lower()} only (it gives the math kernel's logits here, largest "
                              f"difference {gap:.1e}); every pass below runs it", indent="  ")
        tried.append(f"{name.lower()}: differs from the math kernel by {gap:.2e}")
    raise RuntimeError(f"no {'fused ' if kernels == FUSED else ''}attention kernel of this PyTorch "
                       f"{'' if kernels == FUSED else 'allowed '}gives the right results on this "
                       f"{'GPU' if gpu else 'CPU'} (" + "; ".join(tried) + f"), so {who} stops here rather than "
                       "time wrong results. Another PyTorch version may; `make gpu-check` names the versions in use")
