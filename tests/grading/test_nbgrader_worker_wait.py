"""How a grading worker waits for the child that grades a submission (utils/grading/nbgrader_worker.py):
woken by the child's end (a pidfd), not by a poll every 20 ms; killed at its deadline as before."""

from __future__ import annotations

import os
import select
import time

import pytest

from utils.grading import nbgrader_worker


def _sleeper(seconds: float) -> int:
    pid = os.fork()
    if pid == 0:
        time.sleep(seconds)
        os._exit(0)
    return pid


@pytest.mark.slow
def test_the_worker_sleeps_until_its_child_ends(monkeypatch):
    wakeups = []
    real_select, real_sleep = select.select, time.sleep
    monkeypatch.setattr(nbgrader_worker.select, "select", lambda *a: wakeups.append(a) or real_select(*a))
    monkeypatch.setattr(nbgrader_worker.time, "sleep", lambda s: wakeups.append(s) or real_sleep(s))
    pid = _sleeper(1.5)
    try:
        assert nbgrader_worker.Worker()._wait(pid, None) is False
        assert os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None   # ended, not reaped
    finally:
        os.waitpid(pid, 0)
    # a 20 ms poll woke about 75 times; the grader's check every CHECK_EVERY (0.5 s) 3 or 4 times
    assert len(wakeups) <= 1.5 / nbgrader_worker.CHECK_EVERY + 2


@pytest.mark.slow
def test_a_child_past_its_deadline_is_killed():
    pid = _sleeper(60)
    start = time.monotonic()
    try:
        assert nbgrader_worker.Worker()._wait(pid, time.monotonic() + 0.3) is True
    finally:
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) < 0 and time.monotonic() - start < 30
