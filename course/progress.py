"""A dependency-free progress bar for work that takes more than a few seconds.

Writes to stdout (never stderr: nbgrader treats stderr in a graded cell as a failure) and
redraws in place, both in a notebook and in a terminal. It shows what is done, what remains and,
once something is done, an estimate of the time left:

    prompt length [##########--------------------] 4/12 calls, 3.1 s, about 6 s left
"""

from __future__ import annotations

import sys
import time
from typing import Iterable, Iterator, TypeVar

T = TypeVar("T")


class Progress:
    """A bar of `total` steps; call advance() as each step ends (several per item, if an item is
    long), and close() at the end."""

    def __init__(self, total: int, label: str = "", unit: str = "", width: int = 30):
        if isinstance(total, bool) or not isinstance(total, int) or total < 0:
            raise ValueError(f"total must be a whole number of steps >= 0, got {total!r}")
        self.total, self.label, self.unit, self.width = total, label, unit, width
        self.done = 0
        self.start = time.perf_counter()
        self._shown = 0  # length of the line drawn last: a shorter one is padded to cover it
        self._draw()

    def _draw(self, end: str = "") -> None:
        filled = int(self.width * self.done / self.total) if self.total else self.width
        bar = "#" * filled + "-" * (self.width - filled)
        elapsed = time.perf_counter() - self.start
        left = ""
        if 0 < self.done < self.total:
            left = f", about {elapsed / self.done * (self.total - self.done):.0f} s left"
        unit = f" {self.unit}" if self.unit else ""
        line = f"{self.label} [{bar}] {self.done}/{self.total}{unit}, {elapsed:.1f} s{left}"
        # A carriage return moves back without erasing, in a terminal as in JupyterLab: spaces
        # cover what is left of a longer line drawn before (", about 3 s left" at the end).
        sys.stdout.write(f"\r{line.ljust(self._shown)}{end}")
        sys.stdout.flush()
        self._shown = len(line)

    def advance(self, steps: int = 1) -> None:
        self.done = min(self.total, self.done + steps)
        self._draw()

    def close(self) -> None:
        self.done = self.total
        self._draw(end="\n")


def progress(items: Iterable[T], label: str = "", width: int = 30) -> Iterator[T]:
    """Yield from `items`, drawing ``label [#####-----] 3/6, 1.2 s, about 1 s left`` as it goes."""
    items = list(items)
    bar = Progress(len(items), label, width=width)
    for item in items:
        yield item
        bar.advance()
    bar.close()
