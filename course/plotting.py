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


# --- reading a drawn roofline back (the checks of lesson 2's plot_roofline) --------------------

_NO_STYLE = ("None", "none", "", " ")


def _xy(line):
    """A Line2D's points with finite, positive x and y, sorted by x (two float arrays)."""
    import numpy as np

    try:
        x = np.asarray(line.get_xdata(), dtype=float).ravel()
        y = np.asarray(line.get_ydata(), dtype=float).ravel()
    except (TypeError, ValueError):  # units matplotlib converts, not numbers
        return np.empty(0), np.empty(0)
    if x.shape != y.shape:
        return np.empty(0), np.empty(0)
    keep = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    order = np.argsort(x[keep], kind="stable")
    return x[keep][order], y[keep][order]


def _has_marker(line) -> bool:
    return line.get_marker() not in (None, *_NO_STYLE)


def _has_style(line) -> bool:
    return line.get_linestyle() not in _NO_STYLE


def _describe_line(line) -> str:
    """'roofline' (200 points, line, 0.25 to 3,600 FLOP/byte)."""
    x, _ = _xy(line)
    label = str(line.get_label())
    name = repr(label) if label and not label.startswith("_") else "an unlabelled line"
    kind = "markers only" if not _has_style(line) else ("line and markers" if _has_marker(line) else "line")
    span = f", {x[0]:,.4g} to {x[-1]:,.4g} FLOP/byte" if x.size else ""
    return f"{name} ({x.size} point{'' if x.size == 1 else 's'}, {kind}{span})"


def find_roofline(ax):
    """The line the checks read as the roofline on `ax`, and one sentence on what was found.

    Candidates are the lines drawn with a line style (not markers only) through two or more
    points of positive x and y at different x. The roofline is the candidate spanning the widest
    range of x (log scale); on a tie, one drawn without markers, then the one with more points.
    Returns (Line2D or None, account).
    """
    import math

    lines = list(ax.get_lines())
    candidates = []
    for i, line in enumerate(lines):
        x, _ = _xy(line)
        if _has_style(line) and x.size >= 2 and x[-1] > x[0]:
            candidates.append(((math.log(x[-1] / x[0]), not _has_marker(line), x.size, -i), line))
    if not candidates:
        shown = "; ".join(_describe_line(line) for line in lines[:4]) + ("; ..." if len(lines) > 4 else "")
        found = f"{len(lines)} line{'' if len(lines) == 1 else 's'}: {shown}" if lines else "no line at all"
        return None, f"found no line drawn with a line style through two or more intensities ({found})"
    _, line = max(candidates, key=lambda c: c[0])
    others = [other for other in lines if other is not line]
    points = sum(not _has_style(other) for other in others)  # markers only: the plotted points
    styled = len(others) - points
    besides = [f"{points} plotted as markers only (points, never read as the roofline)"] if points else []
    besides += [f"{styled} other line{'' if styled == 1 else 's'} drawn with a line style"] if styled else []
    return line, (f"{_describe_line(line)}, the widest of {len(candidates)} line"
                  f"{'' if len(candidates) == 1 else 's'} drawn with a line style"
                  + (f"; also on the axes: {', '.join(besides)}" if besides else ""))


def read_roofline(ax, intensities) -> dict:
    """The roofline of `ax` (find_roofline) read at each of `intensities`.

    Returns {"at": heights, "top": its highest point, "account": find_roofline's sentence}. A
    height is interpolated along a straight line in log-log between the roofline's two nearest
    points (exact between points on one side of the ridge), None outside the line's span or when
    there is no roofline.
    """
    import numpy as np

    line, account = find_roofline(ax)
    if line is None:
        return {"at": [None for _ in intensities], "top": None, "account": account}
    x, y = _xy(line)
    lx, ly = np.log(x), np.log(y)
    heights = []
    for p in intensities:
        p = float(p)
        inside = x[0] <= p * (1 + 1e-9) and p * (1 - 1e-9) <= x[-1]
        heights.append(float(np.exp(np.interp(np.log(p), lx, ly))) if inside else None)
    return {"at": heights, "top": float(y.max()), "account": account}


def marker_heights(ax, intensities) -> list:
    """For each intensity, the height of the first marker drawn at it (within 1e-6 relative), from
    lines drawn with markers (not the roofline) and from scatter plots; None where there is none."""
    import numpy as np

    roof, _ = find_roofline(ax)
    points = []
    for line in ax.get_lines():
        if line is not roof and _has_marker(line):
            points += list(zip(*_xy(line)))
    for collection in ax.collections:
        try:
            offsets = np.asarray(collection.get_offsets(), dtype=float).reshape(-1, 2)
        except (TypeError, ValueError):
            continue
        points += [(float(px), float(py)) for px, py in offsets]
    found = []
    for xi in map(float, intensities):
        hits = [float(py) for px, py in points if abs(px - xi) <= 1e-6 * abs(xi)]
        found.append(hits[0] if hits else None)
    return found


def check_roofline(ax, expected: dict, rel: float = 1e-6) -> None:
    """Visible check of a drawn roofline: its height (FLOP/s) at each intensity (FLOP/byte) of
    `expected`, read by read_roofline. A failure says, in one line, which line was read as the
    roofline, why that one, and what to change. While autograding, observes each height."""
    __tracebackhide__ = True
    from course.checks import CheckFailed
    from course.formatting import expected_returned, format_pair, page_lines, ratio_note
    from course.observe import grading, observe

    intensities = [float(p) for p in expected]
    reading = read_roofline(ax, intensities)
    labels = [f"roofline at {p:g} FLOP/byte (FLOP/s)" for p in intensities]
    if grading():
        for label, height in zip(labels, reading["at"]):
            observe(label, height)
        return
    line, account = find_roofline(ax)
    if line is None:
        raise CheckFailed(f"no roofline found: draw it as a line with a line style\ncheck: roofline; e.g. "
                          f"ax.plot(x, y), not markers only; {account}")
    if _has_marker(line):
        change = "if that line is your points, draw them as markers only (linestyle='none')"
    else:
        change = "give the roofline an x value at the ridge, or a hundred log-spaced ones, so that it bends there"
    for p, label, height, want in zip(intensities, labels, reading["at"], expected.values()):
        if height is None:
            raise CheckFailed(f"the roofline does not reach {p:g} FLOP/byte\ncheck: {label}; the roofline, "
                              f"{account}: let it span at least from the smallest to the largest of the points' "
                              f"intensities and the ridge")
        close = abs(height - float(want)) <= rel * abs(float(want))
        want_s, got_s = format_pair(float(want), height, tell_apart=not close)
        if not close:
            raise CheckFailed(f"{expected_returned(want_s, got_s, ratio_note(float(want), height), 'read')}"
                              f"\ncheck: {label}, read off {account}; {change}")
        print(page_lines(f"ok    {label}: expected {want_s}, returned {got_s}"))
    print(page_lines(f"      (read off {account})"))


def check_markers(ax, expected: dict, rel: float = 1e-6) -> None:
    """Visible check of drawn points: the height (FLOP/s) of the marker at each intensity
    (FLOP/byte) of `expected`, read by marker_heights. While autograding, observes each height."""
    __tracebackhide__ = True
    from course.checks import CheckFailed
    from course.formatting import expected_returned, format_pair, page_lines, ratio_note
    from course.observe import grading, observe

    intensities = [float(p) for p in expected]
    heights = marker_heights(ax, intensities)
    labels = [f"marker at {p:g} FLOP/byte (FLOP/s)" for p in intensities]
    if grading():
        for label, height in zip(labels, heights):
            observe(label, height)
        return
    for p, label, height, want in zip(intensities, labels, heights, expected.values()):
        if height is None:
            raise CheckFailed(f"no marker at {p:g} FLOP/byte\ncheck: {label}; looked for a line drawn with a "
                              f"marker, other than the roofline, or a scatter point: give each point a marker, "
                              f"e.g. ax.plot([x], [y], marker='o', linestyle='none', label=...)")
        close = abs(height - float(want)) <= rel * abs(float(want))
        want_s, got_s = format_pair(float(want), height, tell_apart=not close)
        if not close:
            raise CheckFailed(f"{expected_returned(want_s, got_s, ratio_note(float(want), height))}"
                              f"\ncheck: {label}; a point sits at its attainable FLOP/s, on the roofline")
        print(page_lines(f"ok    {label}: expected {want_s}, returned {got_s}"))


def hidden_series(ax) -> list[str]:
    """Labels of the legend's lines that cannot be seen: a line without markers whose every point
    lies on a solid line at least as wide that is drawn over it (later at the same zorder, or at a
    higher one) or has its colour (a dotted line over a solid one of its colour shows nothing of
    its own). A figure that names a series in its legend shows it."""
    import matplotlib.colors
    import numpy as np

    lines = list(ax.get_lines())
    hidden = []
    for i, line in enumerate(lines):
        label = str(line.get_label())
        if not label or label.startswith("_") or _has_marker(line):
            continue
        x, y = _xy(line)
        for j, other in enumerate(lines):
            on_top = other.get_zorder() > line.get_zorder() or (other.get_zorder() == line.get_zorder() and j > i)
            solid = other.get_linestyle() in ("-", "solid") and other.get_linewidth() >= line.get_linewidth()
            same_colour = matplotlib.colors.same_color(other.get_color(), line.get_color())
            if other is line or not solid or not (on_top or same_colour):
                continue
            ox, oy = _xy(other)
            if x.size and ox.shape == x.shape and np.allclose(ox, x) and np.allclose(oy, y, rtol=1e-3):
                hidden.append(label)
                break
    return hidden
