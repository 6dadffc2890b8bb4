"""Graded cells observe; the grader judges.

While a notebook is autograded (nbgrader sets ``NBGRADER_EXECUTION=autograde``), a graded test
cell decides nothing inside the student's kernel. It calls the student's functions and hands each
result to ``observe(label, value, rule)``, which only emits the value as plain data:

    observe("TTFT (s), sent at 100.0", metrics["ttft_s"])            # numbers: relative tolerance
    observe("calls, in order", [c.kind for c in fake.calls], "exact")
    observe("q1", q1, "choice")                                       # a letter: case and spaces ignored

Each call becomes one ``display_data`` output whose only MIME type is ``MIME``, holding
``{"label", "rule", "rel", "abs", "value"}`` as JSON. The grader, outside the student's process,
runs the same cells on the reference solution, and a graded cell scores only when every
observation the reference made is present, in the same order, and matches the reference's value
under the rule the reference declared (see utils/grading). Hidden tests pass inputs and observe
results; they never compute or hold an expected value.

Outside autograding (working through a lesson, nbgrader's Validate) ``observe`` does nothing;
the visible checks in ``course.checks`` say there, in one line, what they expected and what came
back. Nothing here is trusted by the grader: it only reads the data.
"""

from __future__ import annotations

import math
import os
from typing import Any

__all__ = ["MIME", "RULES", "grading", "observe", "plain", "describe_figure"]

MIME = "application/vnd.course.observation+json"
RULES = ("close", "exact", "choice")
MAX_ITEMS = 20_000  # numbers in one observation; observe summaries of anything larger


def grading() -> bool:
    """True while nbgrader autogrades this notebook: observations are emitted, nothing is judged."""
    return os.environ.get("NBGRADER_EXECUTION") == "autograde"


def observe(label: str, value: Any, rule: str = "close", *, rel: float = 1e-6, abs_tol: float = 0.0) -> None:
    """Emit `value` under `label` for the grader (only while autograding; otherwise nothing).

    rule: "close" (numbers, or nested lists of numbers, within `rel` relative or `abs_tol`
    absolute; NaN matches NaN), "exact" (equal as plain data), "choice" (a string, compared with
    case and surrounding spaces ignored).
    """
    if rule not in RULES:
        raise ValueError(f"observe: rule must be one of {', '.join(RULES)}, not {rule!r}")
    if not grading():
        return
    from IPython.display import display

    payload = {"label": str(label), "rule": rule, "rel": float(rel), "abs": float(abs_tol), "value": plain(value)}
    display({MIME: payload}, raw=True)


def plain(value: Any, _budget: list[int] | None = None) -> Any:
    """`value` as JSON data: numbers, strings, booleans, None, lists and dicts with string keys.

    numpy and torch scalars become numbers, arrays and tensors nested lists, tuples lists;
    non-finite floats become {"float": "nan" | "inf" | "-inf"} (JSON has no NaN); anything else
    becomes {"type": name}, which matches no number. Over MAX_ITEMS numbers: {"too_large": n}.
    """
    budget = [MAX_ITEMS] if _budget is None else _budget
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"float": "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")}
    tolist = getattr(value, "tolist", None)
    if callable(tolist) and hasattr(value, "shape"):   # numpy and torch: scalars and arrays
        size = 1
        for n in tuple(value.shape):
            size *= int(n)
        if size > budget[0]:
            return {"too_large": size}
        try:
            if hasattr(value, "detach"):
                value = value.detach().cpu()
            converted = value.tolist()
        except Exception:  # noqa: BLE001 - an object that only looks like an array
            return {"type": type(value).__name__}
        return plain(converted, budget)
    if isinstance(value, (list, tuple)):
        if len(value) > budget[0]:
            return {"too_large": len(value)}
        budget[0] -= len(value)
        return [plain(v, budget) for v in value]
    if isinstance(value, dict):
        budget[0] -= len(value)
        return {str(k): plain(v, budget) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    item = getattr(value, "item", None)   # other scalar types with .item()
    if callable(item):
        try:
            inner = item()
        except Exception:  # noqa: BLE001 - the student's object, whatever it raises: only its type is shown
            return {"type": type(value).__name__}
        if isinstance(inner, (bool, int, float)):
            return plain(inner, budget)
    return {"type": type(value).__name__}


def describe_figure(fig: Any) -> dict:
    """A matplotlib figure as plain data: per axes its scales, labels, title and each line's data."""
    axes = []
    for ax in fig.get_axes():
        lines = [{"label": str(line.get_label()),
                  "x": plain(list(map(float, line.get_xdata()))),
                  "y": plain(list(map(float, line.get_ydata())))} for line in ax.get_lines()]
        axes.append({"xscale": ax.get_xscale(), "yscale": ax.get_yscale(), "xlabel": ax.get_xlabel(),
                     "ylabel": ax.get_ylabel(), "title": ax.get_title(), "lines": lines})
    return {"axes": axes}
