"""A real Dask cluster on this machine's loopback, started as docs/instructors.md says (tests,
benchmarks, a rehearsal before the instructor's own machines): a `dask scheduler` without the
course's tools, `dask worker` processes each with a scratch folder of its own, optionally each in a
mount namespace where the instructor's folders are empty, from its own clone of the repository."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
from distributed import Client

from utils.errors import ToolError
from utils.lessons import REPO
from utils.processes import kill_tree


@dataclass
class LoopbackCluster:
    address: str
    scheduler: object                 # subprocess.Popen
    workers: dict[str, object]        # name -> subprocess.Popen
    scratch: dict[str, Path]          # name -> its own temporary folder
    base: Path

    def kill_worker(self, name: str) -> None:
        """SIGKILL one worker process, as if its machine went away; the grading it had started
        (nbgrader and its sandboxed kernels, in their own session) dies with it."""
        proc = self.workers[name]
        try:
            children = psutil.Process(proc.pid).children(recursive=True)
        except psutil.Error:
            children = []
        proc.kill()   # Popen's: never signals once the process is reaped
        proc.wait()
        for child in children:
            try:
                child.kill()
            except psutil.Error:
                pass


def course_clone(dest: Path) -> Path:
    """A copy of this checkout's files (git's tracked and untracked, not its ignored ones: no
    environment, no caches) at `dest`: a worker's own clone of the repository."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=REPO, capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        src = REPO / name
        if src.is_file() and not src.is_symlink():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


@contextlib.contextmanager
def loopback_cluster(workers: int, base: Path, *, allowed_failures: int | None = None,
                     timeout: float = 120.0, nanny: bool = True, hide: tuple[Path, ...] = ()):
    """A real `dask scheduler` and `workers` separate `dask worker` processes on 127.0.0.1 (free
    ports, --nthreads 1, each with its own scratch folder as TMPDIR), started as
    docs/instructors.md says: the scheduler in a folder of its own without the course's tools on
    its path, each worker with its nanny (unless `nanny` is False) and the course's tools on
    PYTHONPATH. With `hide`, every worker runs in a mount namespace of its own (bubblewrap) where
    those folders are empty, from its own clone of the repository at another path (as on a
    machine that shares no disk with the grader). A context manager that stops them all."""
    root = Path(base)
    root.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "COURSE_TOOLS")}
    if allowed_failures is not None:
        env["DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES"] = str(allowed_failures)
    tools = course_clone(root / "clone") if hide else REPO
    sched = _scheduler(root, env)
    procs = [sched]
    try:
        cluster = LoopbackCluster(_address(root, sched, timeout), sched, {}, {}, root)
        for i in range(workers):
            name = f"worker-{i + 1}"
            cluster.scratch[name] = root / name
            cluster.workers[name] = _worker(cluster.address, name, root, {**env, "PYTHONPATH": str(tools)},
                                            tools, nanny, hide)
            procs.append(cluster.workers[name])
        if workers:
            with Client(cluster.address, timeout="30s", set_as_default=False) as client:
                client.wait_for_workers(workers, timeout=timeout)
        yield cluster
    finally:
        for proc in reversed(procs):
            if proc.poll() is None:
                kill_tree(proc.pid)
                proc.wait()


def _dask() -> str:
    return str(Path(sys.executable).parent / "dask")


def _scheduler(root: Path, env: dict) -> subprocess.Popen:
    """`dask scheduler` in a folder of its own (none of the course's tools on its path)."""
    (root / "scheduler").mkdir(exist_ok=True)
    with open(root / "scheduler.log", "w") as log:
        return subprocess.Popen([_dask(), "scheduler", "--host", "127.0.0.1", "--port", "0", "--dashboard-address",
                                 "127.0.0.1:0", "--scheduler-file", str(root / "scheduler.json")],
                                cwd=root / "scheduler", env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)


def _address(root: Path, sched: subprocess.Popen, timeout: float) -> str:
    """The scheduler's address, once its scheduler file says it (ToolError if it stops or waits too long)."""
    sched_file = root / "scheduler.json"
    deadline = time.monotonic() + timeout
    while not sched_file.is_file() or not sched_file.read_text().strip():
        if sched.poll() is not None or time.monotonic() > deadline:
            raise ToolError(f"dask scheduler did not start: {(root / 'scheduler.log').read_text()[-2000:]}")
        time.sleep(0.2)
    return json.loads(sched_file.read_text())["address"]


def _worker(address: str, name: str, root: Path, env: dict, tools: Path, nanny: bool,
            hide: tuple[Path, ...]) -> subprocess.Popen:
    """One `dask worker` (--nthreads 1) with `root/name` as its scratch folder and TMPDIR; with
    `hide`, in bubblewrap: the same file system less those folders (and no way to mount them back)."""
    scratch = root / name
    scratch.mkdir(exist_ok=True)
    cmd = [_dask(), "worker", address, "--name", name, "--nthreads", "1", "--no-dashboard",
           "--host", "127.0.0.1", "--local-directory", str(scratch)] + ([] if nanny else ["--no-nanny"])
    if hide:
        hidden = [a for h in hide for a in ("--tmpfs", str(Path(h).resolve()))]
        cmd = ["bwrap", "--dev-bind", "/", "/", *hidden, "--chdir", str(tools), "--die-with-parent", "--", *cmd]
    with open(root / f"{name}.log", "w") as log:
        return subprocess.Popen(cmd, cwd=tools if hide else scratch, env={**env, "TMPDIR": str(scratch)},
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
