"""One look for every figure in the course: phase colours, labels, units."""

from __future__ import annotations

import matplotlib

PREFILL_COLOR = "#1f77b4"  # blue: the parallel, compute-bound phase
DECODE_COLOR = "#d62728"  # red: the sequential, bandwidth-bound phase
BOUND_COLOR = "#555555"  # grey: predicted bounds and rooflines
PHASE_COLORS = {"prefill": PREFILL_COLOR, "decode": DECODE_COLOR}


def use_course_style() -> None:
    """Apply the course's matplotlib defaults (readable sizes, light grid, no top/right spines)."""
    matplotlib.rcParams.update({
        "figure.figsize": (7.0, 4.0),
        "figure.dpi": 100,
        "axes.grid": True,
        "grid.alpha": 0.3,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "axes.titlesize": 12,
        "axes.labelsize": 11,
        "legend.frameon": False,
    })
