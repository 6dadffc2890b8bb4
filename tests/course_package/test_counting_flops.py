"""course.counting counts attention's FLOPs from each attention operator's is_causal, found by name in
the operator's own schema: the positions of its arguments have moved between torch versions. Checked
on the installed torch against counts by hand."""

from __future__ import annotations

import types

import pytest
import torch
import torch.nn.functional as F

from course import counting

B, H, T, D = 2, 3, 7, 16


def _hand(T: int, S: int, causal: bool) -> int:
    """4 d_h FLOPs per key each query sees, per head and sequence (lesson 2's count)."""
    seen = sum(min(i + 1, S) for i in range(T)) if causal else T * S
    return 4 * B * H * D * seen


def _installed_attention_ops() -> list[str]:
    """Every forward attention operator of the installed torch that takes is_causal."""
    names = []
    for name in dir(torch.ops.aten):
        if name.startswith("_scaled_dot_product") and "backward" not in name:
            op = getattr(torch.ops.aten, name)
            if any(a.name == "is_causal" for a in op.default._schema.arguments):
                names.append(name)
    return names


def test_every_attention_operator_of_this_torch_is_counted():
    mapped = {str(op).removeprefix("aten.") for op in counting._attention_mapping()}
    assert "_scaled_dot_product_flash_attention_for_cpu" in mapped
    assert set(_installed_attention_ops()) <= mapped, set(_installed_attention_ops()) - mapped


@pytest.mark.parametrize("name", _installed_attention_ops())
def test_is_causal_is_read_by_name_wherever_the_schema_puts_it(name):
    """Each operator's formula, called as FlopCounterMode calls it (shapes, then the operator's other
    arguments positionally in its schema's order, or by keyword), counts causal only when is_causal is."""
    op = getattr(torch.ops.aten, name)
    schema = op.default._schema
    formula = counting._attention_mapping()[op]
    q, k = (B, H, T, D), (B, H, T + 2, D)
    for causal in (True, False):
        args = []
        for arg in schema.arguments[3:]:
            if arg.name == "is_causal":
                args.append(causal)
                break
            args.append(arg.default_value if arg.has_default_value() else None)
        assert formula(q, k, k, *args) == _hand(T, T + 2, causal), (name, causal)
        assert formula(q, k, k, is_causal=causal) == _hand(T, T + 2, causal), (name, causal)
    assert formula(q, k, k) == _hand(T, T + 2, False)  # is_causal left to its default: False


def test_a_schema_whose_is_causal_moved_is_still_read_by_name():
    """As another torch version may order them: is_causal first after the tensors, then at the end."""
    def schema(*names):
        return types.SimpleNamespace(arguments=[types.SimpleNamespace(
            name=n, has_default_value=lambda n=n: n not in ("query", "key", "value"),
            default_value=False if n == "is_causal" else 0.0) for n in names])

    q = (B, H, T, D)
    early = counting._attention_formula(schema("query", "key", "value", "is_causal", "dropout_p", "scale"))
    late = counting._attention_formula(schema("query", "key", "value", "dropout_p", "scale", "other", "is_causal"))
    assert early(q, q, q, True, 0.0, None) == _hand(T, T, True)
    assert late(q, q, q, 0.0, None, True) == _hand(T, T, False)  # positions 3-5: no is_causal among them
    assert late(q, q, q, 0.0, None, None, True) == _hand(T, T, True)


@pytest.mark.parametrize("causal", [True, False])
def test_the_cpu_kernel_is_counted_by_hand_on_this_torch(causal):
    """The installed torch's own FlopCounterMode run: the public call, and the CPU kernel's operator
    called with is_causal positionally and by keyword."""
    q, k, v = (torch.randn(B, H, T, D) for _ in range(3))
    public = counting.count_kernel_flops(F.scaled_dot_product_attention, q, k, v, is_causal=causal)
    assert public.attention == _hand(T, T, causal) and public.matmul == 0
    op = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
    assert counting.count_flops(op, q, k, v, 0.0, causal) == _hand(T, T, causal)
    assert counting.count_flops(op, q, k, v, is_causal=causal) == _hand(T, T, causal)
