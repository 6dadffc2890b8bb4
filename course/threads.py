"""How many threads PyTorch's CPU kernels run on, chosen from the cores that are free now.

`set_cpu_threads` runs one PyTorch thread per core that is free, and `interleave` (course.timing)
chooses again before every round (`follow_load`): a thread that shares its core with another
program holds up the others at every operation, so a count chosen once is stale as soon as a
neighbour starts. Importing `course` before torch also makes the waiting workers sleep rather
than spin (OMP_WAIT_POLICY=PASSIVE, course/__init__.py). A sleeping worker takes tens of
microseconds to wake, more than a decode step's attention call has work for: such small calls run
on one thread whatever the count (course.toy_model.serial_attention).
"""

from __future__ import annotations

import math
import os
import statistics
import time
from pathlib import Path

import torch


def cpu_threads() -> int:
    """Cores this process may run on (what a container or taskset allows, not the host's total)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def _own_running_threads() -> int:
    """Threads of this process that are running or ready to run now (state R): PyTorch's own
    workers, which /proc/loadavg counts among the machine's running tasks."""
    count = 0
    for stat in Path("/proc/self/task").glob("*/stat"):
        try:
            count += stat.read_text().rsplit(")", 1)[1].split()[0] == "R"
        except (OSError, IndexError):
            continue
    return max(1, count)  # at least the thread reading this


def busy_cores(samples: int = 5, interval_s: float = 0.01) -> float:
    """Cores other processes are running on now: the median of a few reads of the runnable-task
    count in /proc/loadavg, less this process's own running threads; falls back to the 1-minute
    load average."""
    counts = []
    for i in range(samples):
        try:
            running = Path("/proc/loadavg").read_text().split()[3].split("/")[0]
            counts.append(max(0, int(running) - _own_running_threads()))
        except (OSError, IndexError, ValueError):
            break
        if i + 1 < samples:
            time.sleep(interval_s)
    if counts:
        return float(statistics.median(counts))
    try:
        return float(os.getloadavg()[0])
    except (OSError, AttributeError):
        return 0.0


def free_cpu_cores(samples: int = 5, interval_s: float = 0.01) -> int:
    """Cores this process may use that nobody else is running on now (at least 1).

    PyTorch's CPU kernels split each operation among their threads and wait for the slowest: when
    another process holds one of the cores, every operation waits for the thread that shares it,
    and a small one (a decode step's attention) takes milliseconds instead of microseconds. Run no
    more threads than there are free cores.

    /proc/loadavg counts the whole machine's tasks: where this process may use only some of its
    cores (a container, taskset), their share of the busy ones is counted."""
    ours, machine = cpu_threads(), max(os.cpu_count() or 1, cpu_threads())
    busy_here = busy_cores(samples, interval_s) * ours / machine
    return max(1, min(ours, ours - math.floor(busy_here)))


# False: threads fixed by the caller (or never set); True: chosen again from the free cores before
# every round of interleave / in_turns (set_cpu_threads() without a number).
_threads_follow_load = False


def set_cpu_threads(n: int | None = None) -> int:
    """Let PyTorch's CPU kernels use `n` threads; by default the cores free now (free_cpu_cores()),
    chosen again before every round of `interleave` and `in_turns`, so that a program that starts
    or stops during a measurement changes the thread count of the next round (follow_load()).

    One thread per free core: more threads than that only make them take turns. A number fixes
    the count until the next call."""
    global _threads_follow_load
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
        raise ValueError(f"n must be a positive number of threads, got {n!r}")
    _threads_follow_load = n is None
    n = free_cpu_cores() if n is None else n
    torch.set_num_threads(n)
    return n


def follow_load() -> int:
    """When set_cpu_threads() chose the thread count from the free cores, choose it again now
    (three quick reads of the load: about 10 ms); return the threads PyTorch runs on."""
    if _threads_follow_load:
        n = free_cpu_cores(samples=3, interval_s=0.005)
        if n != torch.get_num_threads():
            torch.set_num_threads(n)
    return torch.get_num_threads()
