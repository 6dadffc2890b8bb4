"""Argument checks for the functions the lessons ask students to write.

An exercise is graded on its idea, not on input validation, so its stub calls these in given lines
before the student's code: a bad argument then gets a clear error that names it, whatever the
student wrote below. Each check takes the arguments by keyword, so the error names them:

    integers(at_least=1, repeats=repeats)
    positive(tpot_s=tpot_s, peak_bytes_per_s=peak_bytes_per_s)

A wrong type raises TypeError, a value out of range ValueError; both name the argument.
"""

from __future__ import annotations

import math
import numbers

import torch


def _number(name: str, value: object) -> float:
    if torch.is_tensor(value) and value.numel() == 1:
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number, got {type(value).__name__} {value!r}")
    return float(value)


def integers(at_least: int = 0, **values: object) -> None:
    """Each value a whole number (int, not bool) of at least `at_least`."""
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise TypeError(f"{name} must be an integer, got {type(value).__name__} {value!r}")
        if value < at_least:
            raise ValueError(f"{name} must be an integer >= {at_least}, got {value!r}")


def non_negative(**values: object) -> None:
    """Each value a number >= 0 (NaN refused): sizes, counts of bytes or FLOPs."""
    for name, value in values.items():
        if not _number(name, value) >= 0:  # NaN fails every comparison
            raise ValueError(f"{name} cannot be negative or NaN, got {value!r}")


def positive(**values: object) -> None:
    """Each value a finite number > 0: a time or a rate that divides or scales a result."""
    for name, value in values.items():
        x = _number(name, value)
        if not (x > 0 and math.isfinite(x)):
            raise ValueError(f"{name} must be a finite number > 0, got {value!r}")


def token_ids(**values: object) -> None:
    """Each value a (B, T) integer tensor of token ids with B >= 1 and T >= 1."""
    for name, value in values.items():
        if not torch.is_tensor(value):
            raise TypeError(f"{name} must be a (B, T) tensor of token ids, got {type(value).__name__}")
        if value.ndim != 2 or value.shape[0] < 1 or value.shape[1] < 1:
            raise ValueError(f"{name} must be a (B, T) tensor of token ids with at least one sequence and one "
                             f"token; got shape {tuple(value.shape)}")
        if value.dtype.is_floating_point or value.dtype.is_complex or value.dtype == torch.bool:
            raise ValueError(f"{name} must hold integer token ids, got dtype {value.dtype}")
