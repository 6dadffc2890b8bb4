"""Which attention kernel lesson 3 lets PyTorch use on a GPU: the first fused kernel that gives
the math kernel's results for the toy model's passes here.

PyTorch picks among flash, memory-efficient and cuDNN attention by shape, dtype and GPU; some
versions' cuDNN kernel has given wrong results on an H100 or H200 (the toy model's docstring). A
lesson that times a kernel must first know it computes the right thing, so on a GPU
`restrict_attention` tries each fused kernel alone on a prefill and a decode step, keeps the first
whose logits agree with the math kernel's, and restricts the model to it; where none agrees it
stops with a sentence. On a CPU there is PyTorch's one CPU kernel, and nothing to choose.
"""

from __future__ import annotations

from typing import Callable

import torch

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


def agrees(model, backend: str, prompt_len: int = 48) -> tuple[bool, float]:
    """Whether a prefill and a decode step with only `backend` give the math kernel's logits, within
    1e-4 of the largest in fp32 and 5e-2 in bf16 or fp16 (two kernels round differently), and the gap."""
    prompt = torch.randint(0, model.config.vocab_size, (2, prompt_len), device=model.device,
                           generator=torch.Generator(device=model.device).manual_seed(0))
    fused, math_ = _passes(model, backend, prompt), _passes(model, "MATH", prompt)
    gap = (fused - math_).abs().max().item()
    scale = 1e-4 if model.dtype == torch.float32 else 5e-2
    return bool(gap <= scale * max(math_.abs().max().item(), 1.0)), gap


def restrict_attention(model, device: torch.device | str,
                       agree: Callable[[str], tuple[bool, float]] | None = None) -> str:
    """On a GPU, restrict `model` to the first fused attention kernel that agrees with the math
    kernel (module docstring) and return a line naming it; raise a RuntimeError with a sentence
    where none does. On a CPU, a line saying there is nothing to choose. `agree` stands in for
    agrees() in the tests."""
    from torch.nn.attention import SDPBackend

    if torch.device(device).type != "cuda":
        return "attention: PyTorch's CPU kernel (on a CPU there is no other to choose)"
    agree = agree or (lambda name: agrees(model, name))
    tried = []
    for name in FUSED:
        try:
            ok, gap = agree(name)
        except RuntimeError as err:  # this kernel does not run these shapes on this GPU
            tried.append(f"{name.lower()}: does not run here ({str(err).splitlines()[0][:80]})")
            continue
        if ok:
            model.use_attention_backends([getattr(SDPBackend, name)])
            return (f"attention: {name.lower()} only (it gives the math kernel's logits here, largest difference "
                    f"{gap:.1e}); every pass below runs it")
        tried.append(f"{name.lower()}: differs from the math kernel by {gap:.2e}")
    raise RuntimeError("no fused attention kernel of this PyTorch gives the right results on this GPU ("
                       + "; ".join(tried) + "), so lesson 3 stops here rather than time wrong results. Another "
                       "PyTorch version may; `make gpu-check` names the versions in use")
