"""The sandbox's processes as the grader sees them: bwrap's first child (`sandbox_pid`), the
kernel's own process (`kernel_process`), and the kernel's own stdout and stderr, forwarded to the
grader's stderr marked and limited (`forward_output`).
"""

from __future__ import annotations

import codecs
import sys
import time

import psutil

from utils.escaping import escaped
from utils.sandbox.sandbox_error import SandboxError

KERNEL_LINE = "sandboxed kernel | "


def children(pid: int, recursive: bool = False) -> list[psutil.Process]:
    """The children of `pid` (all descendants where `recursive`); [] once it has ended."""
    try:
        return psutil.Process(pid).children(recursive=recursive)
    except psutil.Error:
        return []


def kernel_process(bwrap_pid: int | None) -> psutil.Process | None:
    """The kernel's process (as the grader sees it): the first descendant of bwrap that is not
    bwrap, as psutil found it (its PID and start time: signal it with utils.signals)."""
    found = [c for c in children(bwrap_pid, recursive=True) if c.name() != "bwrap"] if bwrap_pid else []
    return found[0] if found else None


def _said(process) -> str:
    """The last lines an ended process wrote to its output pipe (bwrap's own error), in one line."""
    try:
        text = process.stdout.read(8192).decode(errors="replace") if process.stdout else ""
    except (OSError, ValueError):
        text = ""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return " | ".join(lines[-3:]) or f"exit {process.returncode}, nothing printed"


def sandbox_pid(bwrap_pid: int, process=None) -> int:
    """The first process inside the sandbox (bwrap's child): its /proc/PID/root is the sandbox's.
    Returned once the sandbox is built (a process other than bwrap runs in it); where bwrap
    (`process`) ends before that, its own message says why."""
    deadline = time.monotonic() + 30
    while True:
        found = children(bwrap_pid)
        if found and any(c.name() != "bwrap" for c in children(bwrap_pid, recursive=True)):
            return found[0].pid
        if process is not None and process.poll() is not None:
            raise SandboxError(f"the autograding sandbox did not start: {_said(process)}")
        if time.monotonic() > deadline:
            raise SandboxError("the autograding sandbox did not start (bwrap built no sandbox in 30 s)")
        time.sleep(0.005)


def forward_output(pipe, limit: int) -> None:
    """Copy the kernel's own stdout and stderr (not its cells' output) to the grader's stderr, up to
    `limit` bytes, every line marked as the kernel's and escaped (utils/escaping.py: a carriage
    return or an escape sequence cannot erase the mark or pass for a line of the grader's log),
    and read the rest to its end so that the kernel never blocks on a full pipe."""
    line_start = True
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")   # a character split between reads
    with pipe:
        for chunk in iter(lambda: pipe.read1(65536), b""):
            if limit > 0:
                text = escaped(decoder.decode(chunk[:limit]), keep_newlines=True)
                marked = (KERNEL_LINE if line_start else "") + text.replace("\n", "\n" + KERNEL_LINE)
                if text.endswith("\n"):
                    marked = marked[:-len(KERNEL_LINE)]
                line_start = text.endswith("\n")
                sys.stderr.write(marked)
                sys.stderr.flush()
                limit -= len(chunk)
