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


class drawing:  # noqa: N801 - used like a function: `with drawing("...") as ax:`
    """A figure with one axes for a cell that draws with a student's function.

        with drawing("the example request's token arrivals", figsize=(7, 4)) as ax:
            token_staircase(ax, 0.0, times)

    Shows the figure when the block succeeds. When the function is not written yet (or a name is
    not defined yet), the figure is closed and one line says so: no empty chart under the message
    (see course.checks.checking). Any other error shows what was drawn so far.
    """

    def __init__(self, title: str, **subplots_kw):
        from course.checks import checking

        self._checking = checking(title)
        self._subplots_kw = subplots_kw
        self.fig = self.ax = None

    def __enter__(self):
        import matplotlib.pyplot as plt

        self._checking.__enter__()
        self.fig, self.ax = plt.subplots(**self._subplots_kw)
        return self.ax

    def __exit__(self, etype, err, tb) -> bool:
        __tracebackhide__ = True
        import matplotlib.pyplot as plt

        if err is None:
            plt.show()
            return False
        return self._checking.__exit__(etype, err, tb)


def token_staircase(ax, token_times_s, send_time_s: float = 0.0, label: str | None = None,
                    color: str = DECODE_COLOR, **step_kw):
    """Draw one request's token arrivals as a staircase: tokens received (y) against time (x).

    The count is 0 from `send_time_s` until the first token, then steps up by one at each
    arrival, so the first step's width is the TTFT and the stairs' slope is one token per TPOT.
    Returns the Line2D drawn.
    """
    import numpy as np

    times = np.asarray(token_times_s, dtype=float)
    if times.ndim != 1 or times.size == 0:
        raise ValueError(f"token_times_s must be a 1-D sequence of arrival times, got shape {times.shape}")
    x = np.concatenate([[send_time_s], times])
    y = np.arange(times.size + 1)
    (line,) = ax.step(x, y, where="post", color=color, label=label, **step_kw)
    ax.set_xlabel("time since the request was sent (s)")
    ax.set_ylabel("output tokens received")
    return line
