"""Lesson 2's roofline explorer: pick a model, a GPU, a batch, lengths and dtypes; see the roofline.

The explorer holds no formula of its own. Every number it shows comes from the lesson's
functions (the student's, and the lesson's prefill and decode steps built on them), passed in as
arguments, so the picture is exactly what the student's calculator says. Under nbgrader's
autograder (``NBGRADER_EXECUTION`` set) it builds nothing and returns None, so it can stay in a
graded notebook.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

import matplotlib.pyplot as plt

from course.hardware import CATALOG, get_accelerator
from course.models import PRESETS, get_model_config
from course.plotting import DECODE_COLOR, PREFILL_COLOR

# Bytes per stored element, as lesson 2 counts them. int4 as gpt-fast stores it: two values per
# byte plus a bf16 scale and a bf16 zero point per group of 32 weights (0.5 + 4/32 bytes).
DTYPE_BYTES = {"bf16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.625}
WEIGHT_DTYPES = ("bf16", "fp8", "int8", "int4")
CACHE_DTYPES = ("bf16", "fp8", "int8")


@dataclass(frozen=True)
class Calculator:
    """The lesson-2 functions the explorer calls (see the lesson for their signatures).

    prefill_step(cfg, batch, prompt_len, gpu, weights, cache) and
    decode_step(cfg, batch, context_len, gpu, weights, cache) return dicts with "time_s",
    "matmul_s", "attention_s", "matmul_intensity", "attention_intensity" and "kv_bytes".
    """

    param_count: Callable
    max_batch: Callable
    prefill_step: Callable
    decode_step: Callable
    plot_roofline: Callable


def _stack_markers(ax, labels: list[str]) -> None:
    """Keep every labelled point visible where two coincide (decode's matmuls at batch 1 and its
    attention, both near 1 FLOP/byte with MHA): the first drawn largest and hollow, each later one
    smaller and on top, so each legend entry names a mark that can be seen."""
    from matplotlib.collections import PathCollection
    from matplotlib.lines import Line2D

    artists = [a for a in ax.get_children() if isinstance(a, (Line2D, PathCollection)) and a.get_label() in labels]
    artists.sort(key=lambda a: labels.index(a.get_label()))
    for rank, artist in enumerate(artists):
        size = 13 - 3 * rank  # points: 13, 10, 7
        artist.set_zorder(3 + rank)
        if isinstance(artist, Line2D):
            artist.set_markersize(size)
            artist.set_markeredgewidth(2)
            if rank < len(artists) - 1:
                artist.set_markerfacecolor("none")
        else:
            artist.set_sizes([size ** 2])
            artist.set_linewidth(2)
            if rank < len(artists) - 1:
                artist.set_edgecolor(artist.get_facecolor())
                artist.set_facecolor("none")


def explorer_figure(calc: Calculator, model: str, gpu: str, batch: int, prompt_len: int,
                    context_len: int, weight_dtype: str = "bf16", kv_dtype: str = "bf16"):
    """One frame of the explorer: (figure, summary text). The lesson's functions do the work."""
    cfg = get_model_config(model)
    hw = get_accelerator(gpu)
    if weight_dtype not in DTYPE_BYTES or kv_dtype not in DTYPE_BYTES:
        raise ValueError(f"unknown dtype {weight_dtype!r} or {kv_dtype!r}; known: {', '.join(DTYPE_BYTES)}")
    pre = calc.prefill_step(cfg, batch, prompt_len, hw, weight_dtype, kv_dtype)
    dec = calc.decode_step(cfg, batch, context_len, hw, weight_dtype, kv_dtype)
    weight_memory = calc.param_count(cfg) * DTYPE_BYTES[weight_dtype]  # every parameter, the embedding table too
    fits = calc.max_batch(hw.memory_bytes, weight_memory, dec["kv_bytes"] / (batch * context_len), context_len)

    fig, ax = plt.subplots(figsize=(7.5, 4.4))
    points = [(f"prefill matmuls, B={batch}, T={prompt_len}", pre["matmul_intensity"], PREFILL_COLOR),
              (f"decode matmuls, B={batch}", dec["matmul_intensity"], DECODE_COLOR),
              ("decode attention", dec["attention_intensity"], "#7b3294")]
    calc.plot_roofline(ax, hw.peak("bf16"), hw.bandwidth_bytes_per_s, points)
    _stack_markers(ax, [label for label, _, _ in points])
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title(f"{cfg.name}, weights {weight_dtype}, KV {kv_dtype}, on {hw.name}")
    ms = 1e3
    summary = (
        f"prefill: estimate {ms * pre['time_s']:,.2f} ms (matmuls {ms * pre['matmul_s']:,.2f}, "
        f"attention {ms * pre['attention_s']:,.2f})\n"
        f"decode:  estimate {ms * dec['time_s']:,.2f} ms per step (matmuls {ms * dec['matmul_s']:,.2f}, "
        f"attention {ms * dec['attention_s']:,.2f}: {dec['attention_s'] / dec['time_s']:.0%} of the step), "
        f"at most {batch / dec['time_s']:,.0f} tokens/s\n"
        f"memory:  {hw.memory_bytes / 2 ** 30:,.0f} GiB holds {fits} sequences of {context_len} positions "
        + ("(this batch fits)" if fits >= batch else "(this batch does NOT fit)")
    )
    return fig, summary


def roofline_explorer(param_count: Callable, max_batch: Callable, prefill_step: Callable,
                      decode_step: Callable, plot_roofline: Callable):
    """Menus and sliders that redraw the roofline with the lesson's functions; None when autograding."""
    if os.environ.get("NBGRADER_EXECUTION"):
        print("The explorer is interactive; it is skipped while the notebook is autograded.")
        return None
    import ipywidgets as widgets
    from IPython.display import display

    calc = Calculator(param_count, max_batch, prefill_step, decode_step, plot_roofline)
    powers = [2 ** k for k in range(0, 11)]
    lengths = [2 ** k for k in range(4, 18)]
    controls = {
        "model": widgets.Dropdown(options=list(PRESETS), value="llama-2-7b", description="model"),
        "gpu": widgets.Dropdown(options=list(CATALOG), value="A100 80GB SXM", description="GPU"),
        "batch": widgets.SelectionSlider(options=powers, value=1, description="batch"),
        "prompt_len": widgets.SelectionSlider(options=lengths, value=1024, description="prompt T"),
        "context_len": widgets.SelectionSlider(options=lengths, value=1024, description="context L"),
        "weight_dtype": widgets.Dropdown(options=WEIGHT_DTYPES, value="bf16", description="weights"),
        "kv_dtype": widgets.Dropdown(options=CACHE_DTYPES, value="bf16", description="KV cache"),
    }
    out = widgets.Output()

    def redraw(**values):
        out.clear_output(wait=True)
        with out:
            try:
                fig, summary = explorer_figure(calc, **values)
            except NotImplementedError:
                print("Write the lesson's functions first: one of them still raises NotImplementedError.")
                return
            except Exception as err:  # noqa: BLE001 - show the student what their function raised
                print(f"Your functions raised {type(err).__name__}: {err}")
                return
            print(summary)
            display(fig)
            plt.close(fig)

    widgets.interactive_output(redraw, controls)
    ui = widgets.VBox([widgets.HBox(list(controls.values())[:2]),
                       widgets.HBox(list(controls.values())[2:5]),
                       widgets.HBox(list(controls.values())[5:]), out])
    display(ui)
    return ui
