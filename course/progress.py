"""A dependency-free progress bar for sweeps that take more than a few seconds.

Writes to stdout (never stderr: nbgrader treats stderr in a graded cell as a failure) and
redraws in place, both in a notebook and in a terminal.
"""

from __future__ import annotations

import sys
import time
from typing import Iterable, Iterator, TypeVar

T = TypeVar("T")


def progress(items: Iterable[T], label: str = "", width: int = 30) -> Iterator[T]:
    """Yield from `items`, drawing ``label [#####-----] 3/6 1.2s`` as it goes."""
    items = list(items)
    total = len(items)
    start = time.perf_counter()

    def draw(done: int) -> None:
        filled = int(width * done / total) if total else width
        bar = "#" * filled + "-" * (width - filled)
        elapsed = time.perf_counter() - start
        sys.stdout.write(f"\r{label} [{bar}] {done}/{total} {elapsed:.1f}s")
        sys.stdout.flush()

    draw(0)
    for i, item in enumerate(items, 1):
        yield item
        draw(i)
    sys.stdout.write("\n")
    sys.stdout.flush()
