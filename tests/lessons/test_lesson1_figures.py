"""What lesson 1 draws and prints fits where a student reads it (runs two given cells, a few seconds).

- the staircase's inset (the first 1.2 s): its tick labels stay inside the main axes, clear of the
  main x axis and of the main axes' tick labels and legend;
- the FlopCounterMode table: every line fits 76 columns, so JupyterLab never wraps one mid-word,
  and its columns line up.
"""

from __future__ import annotations

import contextlib
import io

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import nbformat
import pytest

from utils.lessons import REPO
from utils.notebooks import nbgrader_meta, strip_markers

SOURCE = REPO / "source" / "01_two_phases" / "two_phases.ipynb"


@pytest.fixture(scope="module")
def cells():
    return nbformat.read(str(SOURCE), as_version=4).cells


def given(cells, marker: str) -> str:
    found = [c.source for c in cells if c.cell_type == "code" and marker in c.source
             and not nbgrader_meta(c).get("solution") and not nbgrader_meta(c).get("grade")]
    assert len(found) == 1, f"{len(found)} given cells hold {marker!r}"
    return found[0]


def test_the_insets_tick_labels_clear_the_main_axis(cells, monkeypatch):
    ns: dict = {}
    setup = next(c.source for c in cells if nbgrader_meta(c).get("grade_id") == "setup")
    exec(setup.replace("%matplotlib inline", ""), ns)
    exec(next(strip_markers(c.source) for c in cells if nbgrader_meta(c).get("solution")
              and "def token_arrival_times" in c.source), ns)
    monkeypatch.setattr(plt, "show", lambda *a, **k: None)  # keep the figure to measure it
    plot = given(cells, "inset_axes")
    exec(plot.split("\nbase = ")[0], ns)  # the figure; the lines after it print from its data
    ax, zoom = ns["ax"], ns["zoom"]
    renderer = ax.figure.canvas.get_renderer()
    inset, main = zoom.get_tightbbox(renderer), ax.get_window_extent(renderer)
    margin = 10 / 72 * ax.figure.dpi  # 10 points: a tick label's height
    assert inset.y0 >= main.y0 + margin, f"the inset's tick labels reach {inset.y0 - main.y0:.1f} px above the x axis"
    assert main.x0 <= inset.x0 and inset.x1 <= main.x1 and inset.y1 <= main.y1
    main_labels = [t.get_window_extent(renderer) for t in ax.get_xticklabels() + ax.get_yticklabels() if t.get_text()]
    assert main_labels and not any(label.overlaps(inset) for label in main_labels)
    assert not ax.get_legend().get_window_extent(renderer).overlaps(inset)
    plt.close("all")


def test_the_flop_counter_table_fits_without_wrapping(cells):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(given(cells, "FlopCounterMode(display=False)"), {})
    lines = out.getvalue().rstrip("\n").split("\n")
    assert len(lines) >= 5 and all(len(line) <= 76 for line in lines), "\n".join(lines)
    header, *rows = [line for line in lines[:5]]
    assert all(len(row) == len(header) for row in rows), lines  # columns line up under the header
