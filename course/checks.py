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
  then ``  check: TPOT (s)``; both numbers in one notation (course.formatting: positional, grouped
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
builtin, see course/stubs.py). No IPython handler or hook is installed, and library code keeps the
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
from typing import Any, Callable

from course.formatting import expected_returned, format_pair, page_lines, ratio_note, short_lines
from course.observe import grading, observe
from course.stubs import is_stub, name_stubs, not_written_message, raising_function

__all__ = ["CheckFailed", "checking", "check_close", "check_equal", "check_raises"]

QUIZ_NAME = re.compile(r"[pq]\d+[a-z]?")  # q1, q3b (quiz answers), p1 (a graded prediction)


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
        if is_stub(err, tb):
            self._close_new_figures()
            raise CheckFailed(not_written_message(raising_function(tb), self.title)) from None
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


def _open_figures() -> set[int] | None:
    plt = sys.modules.get("matplotlib.pyplot")  # never import it ourselves: it is slow
    return set(plt.get_fignums()) if plt is not None else set()


def _quoted_name(message: str) -> str | None:
    found = re.search(r"name '([^']+)'", message)
    return found.group(1) if found else None


# --- what came back -----------------------------------------------------------------------------

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
    print(page_lines(f"ok    {label}: expected {want}, returned {shown}"))


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
    print(page_lines(f"ok    {label}: expected {want_s}, returned {got_s}"))


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
        print(page_lines(f"ok    {label}: ValueError({str(err)!r})"))
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


def _fail(label: str, message: str) -> None:
    """`message` (what was expected, what came back) first, then the check's label."""
    __tracebackhide__ = True
    raise CheckFailed(f"{message}\ncheck: {label}")


name_stubs()
