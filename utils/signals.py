"""Signals sent to processes by handle, never to a number: a PID found by a name, read from a
cgroup's list or a file names whatever process took that number after the one meant ended (on a
busy grading server, PIDs come round within minutes). Every signal the tools send goes through
here:

    signal_process(proc, sig)   `proc` a psutil.Process (its PID and start time, recorded when it
                                was found): a pidfd is opened, the process behind it checked to be
                                the one recorded, and the signal sent through the pidfd
    kill_cgroup(group)          cgroup v2's cgroup.kill where there is one; else each PID listed,
                                by a pidfd opened before the list is read again: a process is
                                signalled only while it is still in the group
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import psutil


def _pidfd(pid: int) -> int | None:
    """A pidfd for `pid`, None where no process has it; OSError where pidfds are not available."""
    try:
        return os.pidfd_open(pid)
    except ProcessLookupError:
        return None


def signal_process(proc: psutil.Process, sig: int = signal.SIGKILL) -> bool:
    """Send `sig` to the process `proc` recorded, never to a later process with its PID. Returns
    whether it was sent."""
    try:
        fd = _pidfd(proc.pid)
    except (AttributeError, OSError):   # no pidfd here: psutil checks the start time, then signals
        try:
            proc.send_signal(sig)
            return True
        except psutil.Error:
            return False
    if fd is None:
        return False
    try:
        # the fd holds whatever process has the PID now: the one recorded only if it started when it did
        if not proc.is_running():
            return False
        signal.pidfd_send_signal(fd, sig)
        return True
    except (ProcessLookupError, psutil.Error):
        return False
    finally:
        os.close(fd)


def _listed(group: Path) -> set[int]:
    try:
        return {int(p) for p in (group / "cgroup.procs").read_text().split()}
    except (OSError, ValueError):
        return set()


def kill_cgroup(group: Path) -> None:
    """SIGKILL every process in the cgroup `group`."""
    kill = group / "cgroup.kill"
    if kill.exists():
        try:
            kill.write_text("1")
            return
        except OSError:
            pass
    fds = {}
    try:
        for pid in _listed(group):
            try:
                fd = _pidfd(pid)
            except OSError:   # no pidfd here: psutil's start time, read now, is the best handle left
                try:
                    proc = psutil.Process(pid)
                    if pid in _listed(group):
                        signal_process(proc)
                except psutil.Error:
                    pass
                continue
            if fd is not None:
                fds[pid] = fd
        # read again with every fd open: a PID still listed is the process its fd holds (a listed
        # process is alive or a zombie, so its PID is not another's)
        still = _listed(group)
        for pid, fd in fds.items():
            if pid in still:
                try:
                    signal.pidfd_send_signal(fd, signal.SIGKILL)
                except ProcessLookupError:
                    pass
    finally:
        for fd in fds.values():
            os.close(fd)
