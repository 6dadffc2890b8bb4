"""Visible checks: a few short lines that say first what was expected and what came back.

These helpers only compare; they never compute an exercise's answer. The graded hidden tests do
not use them (a student's cell could replace anything imported here).

Every graded test cell wraps its visible checks in ``checking``:

    with checking("Exercise A: request_metrics"):
        m = request_metrics(0.0, np.array([0.4, 0.43, 0.46]))
        check_close("TTFT (s)", m["ttft_s"], 0.4)

A failure is then a few lines, not a traceback: IPython prints an exception's
``_render_traceback_()`` in place of its traceback, and frames of this module carry
``__tracebackhide__`` so that IPython leaves them out of any other traceback a check passes on.
No line is longer than 76 characters (``nbgrader validate`` indents by four and cuts longer lines;
an 80-column terminal shows the rest), and what matters comes on the first line:

- a check that fails: ``CheckFailed: expected 0.03, returned 0.02985 (0.995x the expected)``,
  then ``  check: TPOT (s)``; both numbers in one notation (format_number: positional, grouped
  from five digits, never e-notation below 1e21), their ratio when they differ by more than
  rounding; where both do not fit one line, the returned value goes on the next;
- an exercise not written yet (``raise NotImplementedError()`` still in place): the function's
  name first, then what to do;
- a quiz not answered or a function not run yet (``NameError`` in the test cell itself): what is
  missing, then which cell to run or how to answer;
- a figure created inside the block is closed when the exercise is not written yet, so no empty
  chart appears under the message.

Outside any check (a given cell that calls a function not written yet, an answer cell's own stub),
the stub's exception says in one line which function is not written yet: importing this module
gives the notebook's namespace its own ``NotImplementedError`` (``Stub``, a subclass of the
builtin, see name_stubs). No IPython handler or hook is installed, and library code keeps the
builtin.

Any other error raised inside the student's code (a ``TypeError`` in their function, say) passes
through unchanged, with the student's frames and without this module's.

While nbgrader autogrades (``course.observe.grading()``), the checks judge nothing: each hands
the value it was given to ``course.observe.observe`` and returns, and the grader, outside the
student's process, compares it with the reference solution's (see course/observe.py).
"""

from __future__ import annotations

import math
import re
import sys
import textwrap
from pathlib import Path
from typing import Any, Callable

from course.observe import grading, observe

__all__ = ["CheckFailed", "checking", "check_close", "check_equal", "check_raises"]

QUIZ_NAME = re.compile(r"[pq]\d+[a-z]?")  # q1, q3b (quiz answers), p1 (a graded prediction)


WIDTH = 76  # an 80-column terminal, less the four spaces `nbgrader validate` indents errors with


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


class CheckFailed(AssertionError):
    """A visible check did not pass. The message's first line says what was expected and what
    came back (or what is missing); the lines after it say which check, and what to do."""

    def _render_traceback_(self) -> list[str]:
        # IPython (and so Jupyter and nbgrader's Validate) shows this list instead of a
        # traceback: a few short lines that say what to fix.
        return short_lines(f"{type(self).__name__}: {self}")


class checking:  # noqa: N801 - used like a function: `with checking("Exercise A: ..."):`
    """Wrap the visible checks of a graded cell (or a cell that draws a student's figure).

    Reports in one line: a failed check (its label, then both numbers), and, prefixed with
    ``[title]``, an exercise not written yet, a name not defined yet; a quiz question not answered
    yet says how to answer. Figures opened inside the block are
    closed when the exercise is not written yet, so no empty chart is left under the message.
    """

    def __init__(self, title: str):
        self.title = str(title)
        self._figures: set[int] | None = None

    def __enter__(self) -> "checking":
        self._figures = _open_figures()
        return self

    def __exit__(self, etype, err, tb) -> bool:
        __tracebackhide__ = True
        if err is None:
            return False
        if isinstance(err, CheckFailed):
            # The numbers come first, then the check's own label (see short_lines).
            raise err.with_traceback(None) from None
        raised_here = tb is not None and tb.tb_next is None  # in the test cell, not in a function
        if _is_stub(err, tb):
            self._close_new_figures()
            raise CheckFailed(not_written_message(_raising_function(tb), self.title)) from None
        if isinstance(err, NameError) and raised_here:
            self._close_new_figures()
            name = getattr(err, "name", None) or _quoted_name(str(err)) or "a name"
            where = "" if self.title == name else f" [{self.title}]"
            if QUIZ_NAME.fullmatch(name):
                raise CheckFailed(f"{name} is not answered yet: write {name} = \"a\" (your letter, in quotes)"
                                  f"\nin the answer cell above, then run that cell and this one{where}") from None
            raise CheckFailed(f"`{name}` is not defined yet: run the cells above this one"
                              f"\nfrom the top (Run > Run All Above Selected Cell){where}") from None
        if raised_here and isinstance(err, TypeError) and "'NoneType'" in str(err):
            raise CheckFailed(f"your function returned None: does it end with `return ...`?"
                              f"\n[{self.title}] {err}") from None
        if raised_here and isinstance(err, KeyError):
            raise CheckFailed(f"the returned value has no key {err}"
                              f"\n[{self.title}] check the spelling of the keys the exercise asks for") from None
        return False  # the student's own error: shown with their frames, ours hidden

    def _close_new_figures(self) -> None:
        if self._figures is None or "matplotlib.pyplot" not in sys.modules:
            return
        plt = sys.modules["matplotlib.pyplot"]
        for number in set(plt.get_fignums()) - self._figures:
            plt.close(number)


def not_written_message(function: str | None, title: str | None = None) -> str:
    """What a `raise NotImplementedError()` stub says: which function to write, first."""
    where = f"[{title}] " if title else ""
    if function is None:  # the stub sits at the top level of the cell that ran: an answer cell
        return (f"this cell is not answered yet: write your answer here"
                f"\n{where}in place of `raise NotImplementedError()`, then run this cell")
    return (f"`{function}` is not written yet"
            f"\n{where}write it in its cell above, in place of `raise NotImplementedError()`, "
            f"then run that cell and this one")


class Stub(NotImplementedError):
    """What `raise NotImplementedError()` raises in a lesson's own cells: name_stubs() puts this
    name in the notebook's namespace (and nowhere else: the library code keeps the builtin, and
    no IPython handler or hook is installed). A stub left in a student's function is shown as one
    line naming the function to write, wherever the function is called from; any other
    NotImplementedError (one with a message, or raised in a library) keeps its usual traceback."""

    @property
    def _render_traceback_(self):
        tb = self.__traceback__
        if not _is_stub(self, tb):
            raise AttributeError("_render_traceback_")  # IPython then formats the usual traceback
        first = not_written_message(_raising_function(tb)).split("\n")[0]
        return lambda: short_lines(f"NotImplementedError: {first}")


Stub.__name__ = "NotImplementedError"  # as the cell's error and the grader name it (pickle keeps the qualname, Stub)


def name_stubs(shell: Any = None) -> bool:
    """Give the running notebook (IPython's user namespace) Stub as NotImplementedError; False
    outside IPython. Called once when this module is imported (every lesson's setup cell)."""
    if shell is None:
        ipython = sys.modules.get("IPython")
        shell = ipython.get_ipython() if ipython is not None else None
    if shell is None:
        return False
    shell.user_ns.setdefault("NotImplementedError", Stub)
    return True


def _open_figures() -> set[int] | None:
    plt = sys.modules.get("matplotlib.pyplot")  # never import it ourselves: it is slow
    return set(plt.get_fignums()) if plt is not None else set()


_LIBRARY_PATHS = ("site-packages", "dist-packages", str(Path(__file__).parent))


def _is_stub(err: BaseException, tb) -> bool:
    """A student's `raise NotImplementedError()` stub: no message, raised in the student's own
    code, not in a library (torch raises NotImplementedError, with a message, for an operation a
    backend lacks) nor in this package."""
    if not isinstance(err, NotImplementedError) or str(err):
        return False
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    filename = tb.tb_frame.f_code.co_filename if tb is not None else ""
    return not any(part in filename for part in _LIBRARY_PATHS)


def _raising_function(tb) -> str | None:
    """Name of the function that raised, if it is a function (not a cell's top level)."""
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    name = tb.tb_frame.f_code.co_name if tb is not None else None
    return name if name and not name.startswith("<") else None


def _quoted_name(message: str) -> str | None:
    found = re.search(r"name '([^']+)'", message)
    return found.group(1) if found else None


# --- numbers: one format for both, and their ratio -------------------------------------------

def _number(value: Any) -> float | None:
    """`value` as a float if it is a real number (Python, numpy or torch scalar), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    item = getattr(value, "item", None)
    if not callable(item) or tuple(getattr(value, "shape", ())) != ():
        return None  # an array is not a number, even with one element
    try:
        inner = item()  # numpy and torch scalars
    except (TypeError, ValueError, RuntimeError):
        return None
    if isinstance(inner, (int, float)) and not isinstance(inner, bool):
        return float(inner)
    return None


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
    many as it takes, up to 17, to tell them apart). Where one is beyond 1e21, both are in
    e-notation."""
    extreme = any(math.isfinite(v) and v != 0 and not (1 / EXTREME <= abs(v) < EXTREME) for v in (expected, returned))
    digits = 6

    def both(d: int) -> tuple[str, str]:
        if extreme:
            return f"{expected:.{d}g}", f"{returned:.{d}g}"
        return format_number(expected, d), format_number(returned, d)

    shown = both(digits)
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


def _describe(value: Any) -> str:
    if value is None:
        return "None (type NoneType): does the function end with `return ...`?"
    text = repr(value)
    if len(text) > 80:
        text = text[:77] + "..."
    return f"{text} of type {type(value).__name__}"


# --- the checks --------------------------------------------------------------------------------

def check_close(label: str, returned: Any, expected: float, rel: float = 1e-6, abs_tol: float = 0.0) -> None:
    """Pass if `returned` is a real number within `rel` (relative) or `abs_tol` of `expected`.

    Prints ``ok    label: expected X, returned Y``; raises CheckFailed with both numbers in the
    same format (and their ratio) otherwise.
    """
    __tracebackhide__ = True
    if grading():
        return observe(label, returned, "close", rel=rel, abs_tol=abs_tol)
    got = _number(returned)
    if got is None:
        _fail(label, f"expected a number close to {format_pair(expected, expected)[0]}, "
                     f"returned {_describe(returned)}")
    close = math.isclose(got, float(expected), rel_tol=rel, abs_tol=abs_tol)
    want, shown = format_pair(float(expected), got, tell_apart=not close)
    if not close:
        _fail(label, expected_returned(want, shown, ratio_note(float(expected), got)))
    print(f"ok    {label}: expected {want}, returned {shown}")


def check_equal(label: str, returned: Any, expected: Any) -> None:
    """Pass if `returned == expected`; prints expected against returned."""
    __tracebackhide__ = True
    if grading():
        return observe(label, returned, "exact")
    want, got = _number(expected), _number(returned)
    if want is not None and got is not None:
        want_s, got_s = format_pair(want, got)
        note = ratio_note(want, got)
    else:
        want_s, got_s, note = repr(expected), repr(returned), ""
        if returned is None:
            got_s = _describe(None)
    try:
        same = bool(returned == expected)
    except (TypeError, ValueError):  # numpy arrays compare element-wise
        same = False
    if not same:
        _fail(label, expected_returned(want_s, got_s, note))
    print(f"ok    {label}: expected {want_s}, returned {got_s}")


def check_raises(label: str, func: Callable[..., Any], *args: Any, names: str | None = None, **kwargs: Any) -> None:
    """Pass if ``func(*args, **kwargs)`` raises ValueError whose message mentions `names`.

    For the course's own functions and given helpers: impossible input (a negative bandwidth,
    zero tokens, NaN) is rejected with an error that names the bad argument.
    """
    __tracebackhide__ = True
    if grading():
        return observe(label, _outcome(func, args, kwargs, names), "exact")
    try:
        result = func(*args, **kwargs)
    except ValueError as err:
        if names is not None and names not in str(err):
            _fail(label, f"expected a ValueError naming {names!r}, got ValueError({str(err)!r})")
        print(f"ok    {label}: ValueError({str(err)!r})")
        return
    except NotImplementedError:
        name = getattr(func, "__name__", "the function")
        _fail(label, f"`{name}` is not written yet (it raised NotImplementedError)")
    except Exception as err:  # noqa: BLE001 - we report whatever the student raised
        _fail(label, f"expected a ValueError, got {type(err).__name__}({err})")
    _fail(label, f"expected a ValueError, but the call returned {_describe(result)}")


def _outcome(func: Callable[..., Any], args: tuple, kwargs: dict, names: str | None) -> str:
    """What a call did, as the grader compares it: the exception it raised, or that it returned."""
    try:
        func(*args, **kwargs)
    except ValueError as err:
        return "ValueError" if names is None or names in str(err) else "ValueError without the name"
    except Exception as err:  # noqa: BLE001 - whatever the student raised is the observation
        return type(err).__name__
    return "returned"


def expected_returned(expected: str, returned: str, note: str = "", verb: str = "returned") -> str:
    """'expected X, returned Y (ratio)' on the first line of a CheckFailed where it fits, else
    the returned value and ratio on the line after it."""
    one = f"expected {expected}, {verb} {returned}{note}"
    return one if len(f"CheckFailed: {one}") <= WIDTH else f"expected {expected},\n{verb} {returned}{note}"


def _fail(label: str, message: str) -> None:
    """`message` (what was expected, what came back) first, then the check's label."""
    __tracebackhide__ = True
    raise CheckFailed(f"{message}\ncheck: {label}")


name_stubs()
