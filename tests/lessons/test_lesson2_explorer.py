"""course/explorer.py: the lesson-2 roofline explorer wires the student's functions to widgets.

Fake calculator functions stand in for the student's (the explorer holds no formula itself).
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest

from course import explorer
from course.explorer import DTYPE_BYTES, Calculator, explorer_figure, roofline_explorer


def fake_calculator(calls: list | None = None, broken: bool = False) -> Calculator:
    calls = [] if calls is None else calls

    def param_count(cfg):
        if broken:
            raise NotImplementedError()
        return 1_000

    def max_batch(memory_bytes, weight_memory_bytes, kv_per_token, context_len):
        calls.append(("fit", memory_bytes, weight_memory_bytes, kv_per_token, context_len))
        return 8

    def step(kind):
        def run(cfg, batch, length, gpu, weights, cache):
            calls.append((kind, cfg.name, batch, length, gpu.name, weights, cache))
            return {"time_s": 0.004, "matmul_s": 0.003, "attention_s": 0.001, "kv_bytes": 10.0 * batch * length,
                    "matmul_intensity": 3.0 if kind == "prefill" else 0.5, "attention_intensity": 4.0}
        return run

    def plot_roofline(ax, peak, bandwidth, points):
        calls.append(("plot", peak, bandwidth, [(label, i) for label, i, _ in points]))
        ax.plot([0.1, 1.0], [1.0, 2.0], label="roofline")
        return ax

    return Calculator(param_count, max_batch, step("prefill"), step("decode"), plot_roofline)


def test_dtype_bytes():
    # int4 with a bf16 scale and zero point per group of 32 weights, as gpt-fast stores it
    assert DTYPE_BYTES == {"bf16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.625}


def test_frame_calls_the_lessons_functions_with_catalog_figures():
    calls: list = []
    fig, summary = explorer_figure(fake_calculator(calls), "llama-2-7b", "H100 SXM", batch=8,
                                   prompt_len=512, context_len=2048, weight_dtype="int4", kv_dtype="int8")
    try:
        assert ("prefill", "llama-2-7b", 8, 512, "H100 SXM", "int4", "int8") in calls
        assert ("decode", "llama-2-7b", 8, 2048, "H100 SXM", "int4", "int8") in calls
        assert ("fit", 80 * 2**30, 1_000 * 0.625, 10.0, 2048) in calls
        plotted = next(c for c in calls if c[0] == "plot")
        assert plotted[1:3] == (989e12, 3.35e12) and [i for _, i in plotted[3]] == [3.0, 0.5, 4.0]
        assert "estimate 4.00 ms per step" in summary and "attention 1.00: 25% of the step" in summary
        assert "holds 8 sequences" in summary and "(this batch fits)" in summary
    finally:
        plt.close(fig)


def test_frame_says_when_the_batch_does_not_fit():
    fig, summary = explorer_figure(fake_calculator(), "llama-2-70b", "L4", 16, 16, 16)
    plt.close(fig)
    assert "does NOT fit" in summary


def test_frame_names_an_unknown_dtype():
    with pytest.raises(ValueError, match="int3"):
        explorer_figure(fake_calculator(), "llama-2-7b", "L4", 1, 16, 16, weight_dtype="int3")


def test_skipped_under_autograding(monkeypatch, capsys):
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    assert roofline_explorer(*fake_calculator(broken=True).__dict__.values()) is None
    assert "skipped" in capsys.readouterr().out


def test_builds_widgets_and_reports_unwritten_functions(monkeypatch, capsys):
    pytest.importorskip("ipywidgets")
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    ui = roofline_explorer(*fake_calculator(broken=True).__dict__.values())
    assert ui is not None and len(ui.children) == 4
    assert "NotImplementedError" in capsys.readouterr().out
    plt.close("all")


def test_explorer_module_has_no_formula_of_its_own():
    """The explorer may only wire things up: no ridge, roofline or KV formula inside it."""
    import inspect

    source = inspect.getsource(explorer)
    for forbidden in ("np.minimum", "min(peak", "/ bandwidth", "2 * cfg.n_layers", "n_kv_heads *"):
        assert forbidden not in source, forbidden


def _marks(ax):
    """label -> (zorder, marker size in points, hollow) of each labelled point."""
    from matplotlib.collections import PathCollection
    from matplotlib.lines import Line2D

    marks = {}
    for a in ax.get_children():
        if isinstance(a, Line2D) and a.get_linestyle() in ("None", "none", "") and not a.get_label().startswith("_"):
            marks[a.get_label()] = (a.get_zorder(), a.get_markersize(), a.get_markerfacecolor() == "none")
        elif isinstance(a, PathCollection) and not a.get_label().startswith("_"):
            marks[a.get_label()] = (a.get_zorder(), float(a.get_sizes()[0]) ** 0.5, len(a.get_facecolor()) == 0)
    return marks


@pytest.mark.parametrize("style", ["plot", "scatter"])
def test_every_legend_entry_stays_visible_where_points_coincide(style):
    """Decode's matmuls at batch 1 and its attention at the same intensity (MHA): the one drawn first is
    larger and hollow, the one on top smaller, so neither hides the other."""
    def step(phase):
        return lambda cfg, batch, n, gpu, w, kv: {"time_s": 1.0, "matmul_s": 0.5, "attention_s": 0.5,
                                                   "matmul_intensity": 1.0 if phase == "decode" else 300.0,
                                                   "attention_intensity": 1.0, "kv_bytes": 1.0}

    def plot_roofline(ax, peak, bw, points):
        ax.plot([0.1, 1000.0], [0.1 * bw, peak], label="roofline")
        for label, x, color in points:
            y = min(peak, x * bw)
            if style == "plot":
                ax.plot([x], [y], marker="o", linestyle="none", color=color, label=label)
            else:
                ax.scatter([x], [y], color=color, label=label)
        return ax

    calc = Calculator(lambda cfg: 1, lambda *a: 8, step("prefill"), step("decode"), plot_roofline)
    fig, _ = explorer_figure(calc, "llama-2-7b", "H100 SXM", 1, 512, 512)
    try:
        marks = _marks(fig.axes[0])
        below, above = marks["decode matmuls, B=1"], marks["decode attention"]
        assert above[0] > below[0] and above[1] < below[1] and below[2], marks
        assert set(fig.axes[0].get_legend_handles_labels()[1]) >= {"decode matmuls, B=1", "decode attention"}
    finally:
        plt.close(fig)
