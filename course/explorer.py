"""Lesson 2's roofline explorer: pick a model, a GPU, a batch, lengths and dtypes; see the roofline.

The explorer holds no formula of its own. Every number it shows comes from the functions the
student wrote in lesson 2, passed in as arguments, so the picture is exactly what the student's
calculator says. Under nbgrader's autograder (``NBGRADER_EXECUTION`` set) it builds nothing and
returns None, so it can stay in a graded notebook.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

import matplotlib.pyplot as plt

from course.hardware import CATALOG, get_accelerator
from course.models import PRESETS, get_model_config
from course.plotting import DECODE_COLOR, PREFILL_COLOR

# Bytes per stored element. int4 packs two values in a byte; the scales a quantized format keeps
# alongside (one per group of 32 to 128 weights) are left out.
DTYPE_BYTES = {"bf16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5}


@dataclass(frozen=True)
class Calculator:
    """The student's lesson-2 functions the explorer calls (see the lesson for their signatures)."""

    param_count: Callable
    kv_cache_bytes: Callable
    prefill_step: Callable
    decode_step: Callable
    plot_roofline: Callable


def explorer_figure(calc: Calculator, model: str, gpu: str, batch: int, prompt_len: int,
                    context_len: int, weight_dtype: str = "bf16", kv_dtype: str = "bf16"):
    """One frame of the explorer: (figure, summary text). The student's functions do the work."""
    cfg = get_model_config(model)
    hw = get_accelerator(gpu)
    w_bytes, kv_bytes = DTYPE_BYTES[weight_dtype], DTYPE_BYTES[kv_dtype]
    peak, bandwidth = hw.peak("bf16"), hw.bandwidth_bytes_per_s  # quantized weights compute in bf16
    n_params = calc.param_count(cfg)
    pre = calc.prefill_step(cfg, n_params, batch, prompt_len, peak, bandwidth, w_bytes, kv_bytes)
    dec = calc.decode_step(cfg, n_params, batch, context_len, peak, bandwidth, w_bytes, kv_bytes)
    held_bytes = n_params * w_bytes + calc.kv_cache_bytes(cfg, context_len, batch, kv_bytes)

    fig, ax = plt.subplots(figsize=(7.0, 4.2))
    calc.plot_roofline(ax, peak, bandwidth, [
        (f"prefill B={batch}, T={prompt_len}", pre["intensity"], PREFILL_COLOR),
        (f"decode B={batch}, S={context_len}", dec["intensity"], DECODE_COLOR),
    ])
    ax.set_title(f"{cfg.name}, weights {weight_dtype}, KV {kv_dtype} on {hw.name}")
    fits = "fits" if held_bytes <= hw.memory_bytes else "does NOT fit"
    summary = (
        f"prefill: {pre['intensity']:,.1f} FLOP/byte, {pre['bound']}-bound, TTFT >= {1e3 * pre['time_s']:,.2f} ms\n"
        f"decode:  {dec['intensity']:,.1f} FLOP/byte, {dec['bound']}-bound, TPOT >= {1e3 * dec['time_s']:,.2f} ms, "
        f"<= {batch / dec['time_s']:,.0f} tokens/s\n"
        f"memory:  weights + KV cache at context {context_len} = {held_bytes / 1e9:,.1f} GB of "
        f"{hw.memory_bytes / 1e9:,.0f} GB: {fits}"
    )
    return fig, summary


def roofline_explorer(param_count: Callable, kv_cache_bytes: Callable, prefill_step: Callable,
                      decode_step: Callable, plot_roofline: Callable):
    """Sliders and menus that redraw the roofline with the student's functions; None when autograding."""
    if os.environ.get("NBGRADER_EXECUTION"):
        print("The explorer is interactive; it is skipped while the notebook is autograded.")
        return None
    import ipywidgets as widgets
    from IPython.display import display

    calc = Calculator(param_count, kv_cache_bytes, prefill_step, decode_step, plot_roofline)
    powers = [2 ** k for k in range(0, 11)]
    lengths = [2 ** k for k in range(4, 16)]
    controls = {
        "model": widgets.Dropdown(options=list(PRESETS), value="llama-2-7b", description="model"),
        "gpu": widgets.Dropdown(options=list(CATALOG), value="A100 80GB SXM", description="GPU"),
        "batch": widgets.SelectionSlider(options=powers, value=1, description="batch"),
        "prompt_len": widgets.SelectionSlider(options=lengths, value=1024, description="prompt T"),
        "context_len": widgets.SelectionSlider(options=lengths, value=1024, description="context S"),
        "weight_dtype": widgets.Dropdown(options=list(DTYPE_BYTES), value="bf16", description="weights"),
        "kv_dtype": widgets.Dropdown(options=list(DTYPE_BYTES), value="bf16", description="KV cache"),
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
