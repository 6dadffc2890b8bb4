"""Signals go to processes by handle (utils/signals.py), never to a PID found by a name, read
from cgroup.procs or from a pid file: a process recorded, ended, and its PID taken by an innocent
process is never signalled. PID reuse is simulated: a record whose start time is older than the
process now at its PID, a cgroup list that named the PID before its process left, a pid file older
than the process at its number. Each beside its control, where the process meant is signalled."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from utils.signals import kill_cgroup, signal_process

pytestmark = pytest.mark.slow   # each test starts the innocent process it protects


@pytest.fixture
def innocent():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield proc
    proc.kill()
    proc.wait()


def _stale(proc) -> psutil.Process:
    """A record of a process that had `proc`'s PID and ended: the PID, an older start time."""
    record = psutil.Process(proc.pid)
    record.create_time()
    record._create_time -= 100
    record._ident = (record.pid, record._create_time)
    return record


def _alive(proc) -> bool:
    time.sleep(0.2)
    return proc.poll() is None


def test_a_recorded_process_whose_pid_was_taken_is_never_signalled(innocent):
    assert not signal_process(_stale(innocent), signal.SIGKILL) and _alive(innocent)
    assert signal_process(psutil.Process(innocent.pid), signal.SIGKILL)   # the control: the one recorded
    assert not _alive(innocent)


def test_a_cgroup_is_emptied_by_handle_never_by_a_listed_pid_that_left(innocent, tmp_path, monkeypatch):
    """cgroup.procs listed a PID; its process left the group (and ended) and the PID went to an
    innocent process before the list was acted on: the innocent one is not signalled."""
    from utils.sandbox.limits import remove_cgroup
    group = tmp_path / "course-grading-test"
    group.mkdir()
    reads = []
    real = Path.read_text

    def listed(path, *a, **k):
        if path == group / "cgroup.procs":
            reads.append(path)
            return f"{innocent.pid}\n" if len(reads) == 1 else ""
        return real(path, *a, **k)
    monkeypatch.setattr(Path, "read_text", listed)
    remove_cgroup(group)
    assert _alive(innocent) and not group.exists() and reads
    reads.clear()   # the control: a process still listed when the list is read again is killed
    monkeypatch.setattr(Path, "read_text", lambda path, *a, **k: f"{innocent.pid}\n" if path.name == "cgroup.procs"
                        else real(path, *a, **k))
    group.mkdir()
    kill_cgroup(group)
    assert not _alive(innocent)


def test_the_sandboxed_kernels_interrupt_goes_to_the_process_found(innocent):
    """SIGINT to a sandboxed kernel: the kernel's process as found in bwrap's tree, signalled
    only while it is that process."""
    from utils.sandbox.manager import _SandboxLifecycle

    class Found:
        enabled = True

        def __init__(self, record):
            self.record = record

        def kernel_process(self):
            return self.record

        def kernel_pid(self):
            return self.record.pid

    asyncio.run(_SandboxLifecycle._async_signal_kernel(Found(_stale(innocent)), signal.SIGINT))
    assert _alive(innocent)
    asyncio.run(_SandboxLifecycle._async_signal_kernel(Found(psutil.Process(innocent.pid)), signal.SIGINT))
    assert not _alive(innocent)   # the control (SIGINT ends a sleeping Python)


def test_a_tool_that_ended_keeps_its_pid_until_its_session_is_cleaned(monkeypatch, tmp_path):
    """The kernels a dead nbgrader left are found by its session id while its PID is still its own
    (ended, not reaped): no later process can hold that number. (The grading worker's forked child,
    its command a stand-in that ends at once.)"""
    from utils.grading import nbgrader_worker
    monkeypatch.setattr(nbgrader_worker, "_child", lambda request, status: None)
    seen = []
    real = nbgrader_worker.kill_tree

    def watching(pid, children_only=False):
        seen.append(psutil.Process(pid).status() if psutil.pid_exists(pid) else "gone")
        real(pid, children_only)
    monkeypatch.setattr(nbgrader_worker, "kill_tree", watching)
    answer = nbgrader_worker.Worker().handle({"cwd": str(tmp_path), "env": dict(os.environ), "steps": []})
    assert answer["killed"] is False and seen == [psutil.STATUS_ZOMBIE], seen


def _hub_config(tmp_path: Path):
    """The class's jupyterhub_config.py, read as JupyterHub reads it, over a record of a class."""
    from traitlets.config import Config
    state = tmp_path / "hub"
    state.mkdir()
    (state / "proxy_token").write_text("t" * 32)
    record = tmp_path / "classroom.json"
    record.write_text(json.dumps({"instructor": "ines", "students": ["sam"], "env": str(tmp_path / "env"),
                                  "prefix": str(tmp_path), "hub_state": str(state)}))
    c = Config()
    source = (Path(__file__).resolve().parents[1] / "utils" / "classroom" / "jupyterhub_config.py").read_text()
    os.environ["CLASSROOM_RECORD"] = str(record)
    try:
        exec(compile(source, "jupyterhub_config.py", "exec"), {"get_config": lambda: c, "__file__": str(record)})
    finally:
        del os.environ["CLASSROOM_RECORD"]
    return c, state / "jupyterhub-proxy.pid"


def test_the_hub_never_stops_a_process_that_took_its_proxys_pid(tmp_path, innocent):
    """After a crash or a reboot the proxy's pid file names a PID another process has now: the
    hub (root) leaves it alone and removes the stale file; a proxy it did start is stopped."""
    c, pid_file = _hub_config(tmp_path)
    proxy_class = c.JupyterHub.proxy_class
    pid_file.write_text(str(innocent.pid))
    os.utime(pid_file, (time.time() - 3600, time.time() - 3600))   # written before the process started
    proxy = proxy_class(pid_file=str(pid_file), auth_token="t" * 32, public_url="http://127.0.0.1:1",
                        api_url="http://127.0.0.1:2")
    proxy._check_previous_process()
    assert _alive(innocent) and not pid_file.exists()
    # the control: a proxy left running (its command line, a pid file written after it started)
    proxy_like = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "configurable-http-proxy"])
    try:
        time.sleep(0.1)
        pid_file.write_text(str(proxy_like.pid))
        proxy._check_previous_process()
        assert proxy_like.wait(5) is not None and not pid_file.exists()
    finally:
        proxy_like.kill()
        proxy_like.wait()
