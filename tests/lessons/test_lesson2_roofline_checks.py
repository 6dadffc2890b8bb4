"""course/plotting.py's roofline readers, used by exercise H's visible checks and hidden part: the
roofline is found as the widest line drawn with a line style whatever else is drawn, and a
failure says in one line which line was read and what to change."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest

from course.checks import CheckFailed
from course.plotting import check_markers, check_roofline, find_roofline, marker_heights, read_roofline

PEAK, BW = 312e12, 2.039e12  # an A100: ridge at 153 FLOP/byte
RIDGE = PEAK / BW
EXPECTED = {1.0: 2.039e12, 20.0: 4.078e13, 900.0: 312e12}


def attainable(x):
    return np.minimum(PEAK, np.asarray(x, dtype=float) * BW)


@pytest.fixture
def ax():
    fig, ax = plt.subplots()
    yield ax
    plt.close(fig)


def points(ax, xs=(1.0, 900.0), **kw):
    for x in xs:
        ax.plot([x], [float(attainable(x))], marker="o", linestyle="none", label=f"at {x:g}", **kw)


def test_a_roof_of_three_points_is_read_exactly_and_decorations_are_ignored(ax):
    xs = [1.0, RIDGE, 900.0]
    ax.plot(xs, attainable(xs), "k.--")
    ax.axvline(RIDGE, linestyle=":")
    ax.axhline(PEAK, linestyle=":")
    points(ax)
    reading = read_roofline(ax, list(EXPECTED))
    assert reading["at"] == pytest.approx(list(EXPECTED.values()), rel=1e-12)
    assert reading["top"] == pytest.approx(PEAK)
    check_roofline(ax, EXPECTED)
    check_markers(ax, {1.0: 2.039e12, 900.0: 312e12})


def test_points_drawn_as_one_line_do_not_hide_a_roof_with_fewer_points(ax):
    """The old rule took the line with the most points: here that is the points' own line."""
    roof = ax.plot([1.0, RIDGE, 900.0], attainable([1.0, RIDGE, 900.0]), "-")[0]
    xs = [1.0, 10.0, 100.0, 900.0]
    ax.plot(xs, attainable(xs), "o-", label="points")
    assert find_roofline(ax)[0] is roof
    check_roofline(ax, EXPECTED)


def test_a_connected_points_line_wider_than_the_roof_is_named_in_the_message(ax):
    ax.plot([1.0, 10.0], attainable([1.0, 10.0]), "-")
    ax.plot([1.0, 900.0], attainable([1.0, 900.0]), "o-", label="points")
    with pytest.raises(CheckFailed) as failed:
        check_roofline(ax, EXPECTED)
    message = str(failed.value)
    assert message.startswith("expected 40,780,000,000,000,\nread 18,") and "\ncheck: roofline at 20 FLOP/byte" in message
    assert "'points' (2 points, line and markers" in message and "markers only (linestyle='none')" in message


def test_a_roof_that_cuts_the_corner_is_told_to_bend_at_the_ridge(ax):
    ax.plot([0.5, 1800.0], attainable([0.5, 1800.0]))
    points(ax)
    with pytest.raises(CheckFailed) as failed:
        check_roofline(ax, EXPECTED)
    message = str(failed.value)
    assert message.startswith("expected 2,039,000,000,000,\nread 1,655,006,641,905 (0.8117x the expected)\n"
                              "check: roofline at 1 FLOP/byte (FLOP/s), read off ")
    assert "(2 points, line, 0.5 to 1,800 FLOP/byte)" in message and "x value at the ridge" in message


def test_a_roof_short_of_the_ridge_is_told_how_far_to_reach(ax):
    xs = np.logspace(0, np.log10(16), 100)
    ax.plot(xs, attainable(xs))
    points(ax, (1.0, 16.0))
    assert read_roofline(ax, [1.0, 100.0])["at"][1] is None
    with pytest.raises(CheckFailed, match="^the roofline does not reach 100 FLOP/byte\ncheck: .*: let it span at least from the smallest"):
        check_roofline(ax, {100.0: 2.039e14})


def test_markers_only_say_that_no_roofline_was_found(ax):
    ax.scatter([1.0, 900.0], attainable([1.0, 900.0]))
    ax.plot([1.0, 10.0, 900.0], attainable([1.0, 10.0, 900.0]), "o", linestyle="none")
    with pytest.raises(CheckFailed) as failed:
        check_roofline(ax, EXPECTED)
    assert str(failed.value).endswith("found no line drawn with a line style through two or more intensities "
                                      "(1 line: an unlabelled line (3 points, markers only, 1 to 900 FLOP/byte))")
    assert read_roofline(ax, [1.0]) == {"at": [None], "top": None, "account": find_roofline(ax)[1]}


def test_marker_heights_skip_the_roofline_and_read_scatter_points(ax):
    xs = np.logspace(-1, 4, 200)
    ax.plot(xs, attainable(xs), "o-")  # a roofline drawn with markers is not a point
    ax.scatter([20.0], [4.078e13])
    assert marker_heights(ax, [20.0, 1.0]) == [pytest.approx(4.078e13), None]
    with pytest.raises(CheckFailed, match="^no marker at 1 FLOP/byte\ncheck: marker at 1 FLOP/byte .*looked for a line drawn with a marker"):
        check_markers(ax, {1.0: 2.039e12})


def test_while_autograding_the_checks_only_observe(ax, monkeypatch):
    import course.observe

    seen = []
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    monkeypatch.setattr(course.observe, "observe", lambda label, value, *a, **k: seen.append((label, value)))
    ax.plot([0.5, 1800.0], attainable([0.5, 1800.0]))  # wrong, yet nothing is judged here
    check_roofline(ax, {1.0: 2.039e12, 5000.0: 312e12})
    check_markers(ax, {1.0: 2.039e12})
    assert [label for label, _ in seen] == ["roofline at 1 FLOP/byte (FLOP/s)", "roofline at 5000 FLOP/byte (FLOP/s)",
                                            "marker at 1 FLOP/byte (FLOP/s)"]
    assert seen[0][1] != pytest.approx(2.039e12) and seen[1][1] is None and seen[2][1] is None


def test_the_account_names_the_plotted_points_as_points_not_lines(ax):
    """A tester read '(2 other lines on the axes)' as two stray lines; they were the two markers."""
    ax.plot([1.0, RIDGE, 900.0], attainable([1.0, RIDGE, 900.0]), label="roofline")
    points(ax)
    account = find_roofline(ax)[1]
    assert account.endswith("; also on the axes: 2 plotted as markers only (points, never read as the roofline)")
    ax.plot([1.0, 2.0], [1e12, 2e12], "--")
    assert find_roofline(ax)[1].endswith("2 plotted as markers only (points, never read as the roofline), "
                                         "1 other line drawn with a line style")
