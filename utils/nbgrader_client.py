"""The client side of the long-lived nbgrader processes (utils/grading/nbgrader_worker.py): a pool of
idle workers per process (the grader, a Dask worker, a test process), each started when no idle
one is left and ended with the process; one request at a time each."""

from __future__ import annotations

import atexit
import json
import selectors
import subprocess
import sys
import threading

import psutil

from utils.lessons import REPO

GRACE = 120         # seconds past a request's own limit before its worker itself is ended


class WorkerLost(RuntimeError):
    """The worker process ended or stopped answering."""


class _Client:
    def __init__(self, env: dict):
        self.proc = subprocess.Popen([sys.executable, "-m", "utils.grading.nbgrader_worker"], cwd=REPO, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, start_new_session=True, text=True)

    def ask(self, request: dict) -> dict:
        limit = (request.get("timeout") or 0) + GRACE if request.get("timeout") else None
        try:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
            with selectors.DefaultSelector() as sel:
                sel.register(self.proc.stdout, selectors.EVENT_READ)
                if not sel.select(limit):
                    raise WorkerLost(f"the nbgrader worker gave no answer in {limit:g} s")
            line = self.proc.stdout.readline()
        except (OSError, ValueError) as err:
            raise WorkerLost(f"the nbgrader worker ended ({err})") from None
        if not line:
            raise WorkerLost(f"the nbgrader worker ended (exit {self.proc.poll()})")
        answer = json.loads(line)
        if "error" in answer:
            raise WorkerLost(f"the nbgrader worker failed: {answer['error']}")
        return answer

    def _kill(self) -> None:
        try:
            parent = psutil.Process(self.proc.pid)
            procs = parent.children(recursive=True) + [parent]
        except psutil.NoSuchProcess:
            procs = []
        for p in procs:
            try:
                p.kill()
            except psutil.Error:
                pass

    def close(self, kill: bool = False) -> None:
        if kill:
            self._kill()
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._kill()
            self.proc.wait()


_idle: list[_Client] = []
_lock = threading.Lock()


def ask(request: dict) -> dict:
    """One request answered by an idle worker of this process (one is started when none is idle)."""
    with _lock:
        client = _idle.pop() if _idle else None
    if client is None or client.proc.poll() is not None:
        client = _Client(request["env"])
    try:
        answer = client.ask(request)
    except WorkerLost:
        client.close(kill=True)
        raise
    with _lock:
        _idle.append(client)
    return answer


def run(steps: list[dict], cwd, env: dict, *, timeout: float | None = None, cpus=None,
        sandbox: str | None = None) -> dict:
    """Run nbgrader commands (`steps`: {"argv": [...], "if_graded": result file or absent}) in
    one child of a worker, in course folder `cwd`, with environment `env` (whole) and `cpus`, all
    killed after `timeout` seconds; `sandbox`: the bubblewrap the course's kernels use, checked
    once per worker. Returns {"rcs": exit status per command run (None: skipped), "seconds",
    "killed", "log"}."""
    return ask({"steps": steps, "cwd": str(cwd), "env": env, "timeout": timeout,
                "cpus": sorted(cpus) if cpus else None, "sandbox": sandbox})


def start_problem(bwrap: str, env: dict) -> str | None:
    """probe.start_problem (the trial start) made by a worker, which keeps the answer for the
    kernels it starts: the grader need not start a trial of its own."""
    return ask({"probe": True, "sandbox": bwrap, "env": env})["problem"]


@atexit.register
def close_all() -> None:
    with _lock:
        clients = list(_idle)
        _idle.clear()
    for client in clients:
        client.close()
