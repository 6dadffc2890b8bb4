"""Visible checks: print what was expected next to what the student's code returned.

These helpers only compare; they never compute an exercise's answer. The graded hidden tests do
not use them (a student's cell could replace anything imported here).
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from typing import Any, Callable, Iterator


class CheckFailed(AssertionError):
    """A visible check did not pass; the message says what was expected and what came back."""

    def _render_traceback_(self) -> list[str]:
        # IPython shows this list instead of a traceback: the one line that says what to fix.
        return [f"CheckFailed: {self}"]


@contextmanager
def checking(title: str) -> Iterator[None]:
    """Wrap the visible checks of a graded cell, so that an exercise not written yet, or a quiz
    question not answered yet, is reported in one line naming it instead of a traceback.

        with checking("Exercise A: request_metrics"):
            check_close("TTFT (s)", request_metrics(0.0, [0.4, 0.43])["ttft_s"], 0.4)
    """
    try:
        yield
    except NotImplementedError:
        raise CheckFailed(f"{title}: not written yet; replace `raise NotImplementedError()` "
                          f"in the exercise cell above with your code, run it, then run this cell") from None
    except NameError as err:
        name = getattr(err, "name", None) or str(err)
        raise CheckFailed(f"{title}: `{name}` is not defined yet; run the cell above "
                          f"(and every cell before it) first") from None


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return repr(value)


def check_close(label: str, returned: Any, expected: float, rel: float = 1e-6, abs_tol: float = 0.0) -> None:
    """Pass if `returned` is a real number within `rel` (relative) of `expected`.

    Prints one line either way: ``ok   label: expected X, returned Y``.
    """
    number = isinstance(returned, (int, float)) and not isinstance(returned, bool)
    if not number:
        try:  # numpy and torch scalars
            number = hasattr(returned, "item") and isinstance(returned.item(), (int, float))
            returned = returned.item() if number else returned
        except (TypeError, ValueError, RuntimeError):
            number = False
    if not number:
        _fail(label, f"expected a number close to {_fmt(expected)}, returned {_fmt(returned)} "
                     f"of type {type(returned).__name__}")
    if not math.isclose(float(returned), expected, rel_tol=rel, abs_tol=abs_tol):
        _fail(label, f"expected {_fmt(expected)}, returned {_fmt(float(returned))}")
    print(f"ok    {label}: expected {_fmt(expected)}, returned {_fmt(float(returned))}")


def check_equal(label: str, returned: Any, expected: Any) -> None:
    """Pass if `returned == expected`; prints expected against returned."""
    if returned != expected:
        _fail(label, f"expected {_fmt(expected)}, returned {_fmt(returned)}")
    print(f"ok    {label}: expected {_fmt(expected)}, returned {_fmt(returned)}")


def check_raises(label: str, func: Callable[..., Any], *args: Any, names: str | None = None, **kwargs: Any) -> None:
    """Pass if ``func(*args, **kwargs)`` raises ValueError whose message mentions `names`.

    Use it to check that impossible input (a negative bandwidth, zero tokens, NaN) is rejected
    with an error that names the bad argument.
    """
    try:
        result = func(*args, **kwargs)
    except ValueError as err:
        if names is not None and names not in str(err):
            _fail(label, f"expected a ValueError naming {names!r}, got ValueError({str(err)!r})")
        print(f"ok    {label}: ValueError({str(err)!r})")
        return
    except NotImplementedError:
        _fail(label, "the function is not written yet (it raised NotImplementedError)")
    except Exception as err:  # noqa: BLE001 - we report whatever the student raised
        _fail(label, f"expected a ValueError, got {type(err).__name__}({err})")
    _fail(label, f"expected a ValueError, but the call returned {_fmt(result)}")


def _fail(label: str, message: str) -> None:
    print(f"FAIL  {label}: {message}")
    raise CheckFailed(f"{label}: {message}")
