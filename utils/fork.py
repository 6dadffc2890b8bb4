"""A child forked with its file descriptors rearranged, which runs one function and exits: what
the grading's long-lived nbgrader processes do to start a worker (utils/nbgrader_client.py) and a
child per command (utils/grading/nbgrader_worker.py)."""

from __future__ import annotations

import os
import sys
import traceback


def fork_into(run, fds: dict[int, int], drop=()) -> int:
    """Fork, and return the child's PID. In the child, each descriptor of `fds` ({target: source})
    becomes a copy of its source, those in `drop` are closed (unless one is a target), `run()` runs
    and what it returns is the child's exit status (1, its traceback on the child's fd 2, where it
    raises): the child never returns. What this process had buffered for stdout and stderr is
    written first, so that the child cannot write it a second time."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            for target, source in fds.items():
                os.dup2(source, target)
            for fd in drop:
                if fd not in fds:
                    os.close(fd)
            code = run()
        except BaseException:  # noqa: BLE001 - the child's own end: said on its fd 2, exit 1
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    return pid
