"""How the checks write what they say: numbers in one notation (positional, grouped from five
digits, never e-notation below 1e21), two numbers side by side with their ratio, and messages in
lines short enough for `nbgrader validate` (76 characters: an 80-column terminal, less the four
spaces it indents errors with), what matters first. Used by course.checks, course.plotting's figure
checks and the grader's verdict lines."""

from __future__ import annotations

import math
import textwrap

WIDTH = 76  # an 80-column terminal, less the four spaces `nbgrader validate` indents errors with
# What a code cell or its printed output shows in JupyterLab at 1,400 pixels with the file browser
# open is about 121 characters (a longer line scrolls, or wraps mid-word); every printed line keeps to this.
PAGE_WIDTH = 120


def page_lines(text: str, indent: str = "      ") -> str:
    """`text` wrapped at spaces to PAGE_WIDTH, each of its own lines apart: a line's later lines are
    indented by its own leading spaces and `indent` (six spaces: under an "ok    " line). A word is
    never broken (a number stays whole), and never left alone on a paragraph's last line."""
    lines: list[str] = []
    for line in text.split("\n"):
        lead = line[:len(line) - len(line.lstrip(" "))]
        wrapped = textwrap.wrap(line, PAGE_WIDTH, subsequent_indent=lead + indent, break_on_hyphens=False,
                                break_long_words=False) or [""]
        if len(wrapped) > 1 and len(wrapped[-1].split()) == 1 and len(wrapped[-2].split()) > 2:
            # never one word alone on the last line: the word before it goes down with it
            before, word = wrapped[-2].rstrip().rsplit(" ", 1)
            last = f"{lead}{indent}{word} {wrapped[-1].strip()}"
            if len(last) <= PAGE_WIDTH:
                wrapped[-2:] = [before.rstrip(), last]
        lines += wrapped
    return "\n".join(lines)


def short_lines(text: str, width: int = WIDTH) -> list[str]:
    """`text` in lines of at most `width` characters: each of its own lines wrapped at spaces,
    the second and later indented by two. `nbgrader validate` cuts a longer line (and its
    dialog does not wrap one), so what matters must come first and stay short."""
    lines: list[str] = []
    for i, paragraph in enumerate(text.split("\n")):
        indent = "" if i == 0 else "  "
        lines += textwrap.wrap(paragraph, width, initial_indent=indent, subsequent_indent="  ",
                               break_on_hyphens=False) or [indent]
    return lines


EXTREME = 1e21  # beyond this (a wildly wrong answer) digits stop helping: e-notation for both


def _grouped(digits: str) -> str:
    """Thousands separators from five digits on (12,345 and 1234): the labels' 1,000-token
    prompts are words, the checks' numbers are read side by side."""
    return f"{int(digits):,}" if len(digits) >= 5 else digits


def format_number(x: float, digits: int = 6) -> str:
    """`x` in the checks' one notation: positional, thousands grouped, never e-notation but past
    1e21. A whole number shows all its digits; any other shows `digits` significant ones (more to
    the left of the point when it is large), trailing zeros dropped."""
    if not math.isfinite(x):
        return str(x)
    if x == int(x) and abs(x) < EXTREME:
        sign, whole = ("-" if x < 0 else ""), str(abs(int(x)))
        return sign + _grouped(whole)
    if abs(x) >= EXTREME or abs(x) < 1 / EXTREME:
        return f"{x:.{digits}g}"
    decimals = max(digits - 1 - math.floor(math.log10(abs(x))), 0)
    text = f"{abs(x):.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    whole, point, fraction = text.partition(".")
    return ("-" if x < 0 else "") + _grouped(whole) + point + fraction


def format_pair(expected: float, returned: float, tell_apart: bool = True) -> tuple[str, str]:
    """Both numbers in the same notation (format_number, the same significant digits: 6, or as
    many as it takes, up to 17, to tell them apart). With `tell_apart` False (a passing check),
    two that round alike to 6 significant digits show as that one rounded number. Where one is
    beyond 1e21, both are in e-notation."""
    extreme = any(math.isfinite(v) and v != 0 and not (1 / EXTREME <= abs(v) < EXTREME) for v in (expected, returned))
    digits = 6

    def both(d: int) -> tuple[str, str]:
        if extreme:
            return f"{expected:.{d}g}", f"{returned:.{d}g}"
        return format_number(expected, d), format_number(returned, d)

    shown = both(digits)
    if not tell_apart and shown[0] != shown[1] and all(math.isfinite(v) for v in (expected, returned)):
        # values a check accepts as close, apart only by float noise (312,000,000,000,001): both rounded
        # to `digits` significant digits, where they print alike; a difference the tolerance allows
        # beyond that (a looser rel) still shows
        rounded = tuple(float(f"{v:.{digits}g}") for v in (expected, returned))
        if rounded[0] == rounded[1]:
            text = f"{rounded[0]:.{digits}g}" if extreme else format_number(rounded[0], digits)
            return text, text
    while tell_apart and digits < 17 and shown[0] == shown[1] and expected != returned:
        digits += 1
        shown = both(digits)
    return shown


def ratio_note(expected: float, returned: float) -> str:
    """' (8x the expected)', ' (1/1000 of the expected)', ' (0.995x the expected)', or ''."""
    if not (math.isfinite(expected) and math.isfinite(returned)) or expected == 0 or returned == 0:
        return ""
    r = returned / expected
    if r < 0:
        return " (the opposite sign)"
    if abs(r - 1) < 1e-3:
        return ""
    if r >= 2:
        return f" ({_factor(r)}x the expected)"
    if r <= 0.5:
        return f" (1/{_factor(1 / r)} of the expected)"
    return f" ({r:.4g}x the expected)"


def _factor(x: float) -> str:
    return format_number(round(x)) if x >= 100 else f"{x:.3g}"


def expected_returned(expected: str, returned: str, note: str = "", verb: str = "returned") -> str:
    """'expected X, returned Y (ratio)' on the first line of a CheckFailed where it fits, else
    the returned value and ratio on the line after it."""
    one = f"expected {expected}, {verb} {returned}{note}"
    return one if len(f"CheckFailed: {one}") <= WIDTH else f"expected {expected},\n{verb} {returned}{note}"
