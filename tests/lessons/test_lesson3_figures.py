"""Lesson 3's figures show what their legends name (course.plotting.hidden_series), checked on the
lesson's own plotting code run on made-up figures."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import nbformat

from course.plotting import BOUND_COLOR, DECODE_COLOR, hidden_series
from utils.lessons import REPO

SOURCE = REPO / "source" / "03_timing_prefill_decode" / "timing_prefill_decode.ipynb"


def _batch_plot_lines() -> str:
    """The batch sweep's plotting lines, from `fig, ax = plt.subplots()` to its legend."""
    cell = next(c.source for c in nbformat.read(str(SOURCE), as_version=4).cells
                if "Decode throughput against batch size" in c.source)
    start = cell.index("fig, ax = plt.subplots()")
    return cell[start:cell.index("ax.legend()", start) + len("ax.legend()")]


def test_hidden_series_finds_a_line_under_another():
    fig, ax = plt.subplots()
    ax.plot([1, 2, 4], [1, 2, 4], ":", label="under")
    ax.plot([1, 2, 4], [1, 2, 4], "-", label="over")
    ax.plot([1, 2, 4], [1, 3, 4], "-", label="apart")
    assert hidden_series(ax) == ["under"]
    plt.close(fig)


def test_the_batch_plot_shows_the_prediction_where_it_lies_on_the_step_bound():
    """The tester's plot: the fused bound (your prediction) equal to the step bound at every batch, drawn
    under it, yet named in the legend."""
    batches = [1, 4, 16]
    bound = [100.0, 400.0, 1500.0]
    namespace = {"plt": plt, "BATCHES": batches, "rate": [80.0, 300.0, 900.0], "rate_low": [1.0] * 3,
                 "rate_high": [1.0] * 3, "DECODE_COLOR": DECODE_COLOR, "BOUND_COLOR": BOUND_COLOR,
                 "step_bound_rates": bound, "SLOTS": 24, "bw": 1.0, "peak": 1.0,
                 "predicted": lambda slots, b, bw, peak: {"tpot_s": b / bound[batches.index(b)]}}
    exec(_batch_plot_lines(), namespace)
    ax = namespace["ax"]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "your prediction" in labels and "step bound" in labels
    assert hidden_series(ax) == [], hidden_series(ax)
    plt.close("all")
