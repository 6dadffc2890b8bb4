"""Lesson 1's figures on the four-GPU example's tensor-parallel exchanges, from the model's shapes
(quick: no notebook is run)."""

from __future__ import annotations

import json

from utils.lessons import REPO

SOURCE = REPO / "source" / "01_two_phases" / "two_phases.ipynb"


def markdown() -> str:
    nb = json.loads(SOURCE.read_text())
    return "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")


def test_two_all_reduces_a_layer_of_one_vector_each_at_batch_1():
    """Megatron-LM's split: one all-reduce after attention and one after the MLP in every layer, each
    of the layer's output for each token, d_model bf16 numbers."""
    from course.models import PRESETS

    m = PRESETS["llama-2-70b"]
    all_reduces, vector_bytes = 2 * m.n_layers, m.d_model * 2
    assert (all_reduces, m.d_model, vector_bytes) == (160, 8192, 16 * 1024)
    text = " ".join(markdown().split())
    assert f"{all_reduces} a token here. At batch 1 each carries one {m.d_model:,}-wide bf16 vector " \
           f"({vector_bytes / 1e3:.1f} KB)" in text
    # on an A100's NVLink (600 GB/s both directions, 300 one way) 16.4 KB take about 0.05 us, far below
    # the microseconds a collective's launch and synchronisation take: latency, not bandwidth
    assert vector_bytes / 300e9 < 1e-7
