"""The client side of the long-lived nbgrader processes (utils/grading/nbgrader_worker.py): a pool of
idle workers per process (the grader, a Dask worker, a test process), each started when no idle
one is left and ended with the process; one request at a time each.

A worker is a new Python (`python -m utils.grading.nbgrader_worker`), which imports nbgrader and
the course's steps again (about 0.85 CPU-s), except in a process that called `fork_here(serve)`: there,
while the process runs one thread, a worker is forked from it and keeps what it imported. The
grading command calls it (utils/grading/cli.py, `command`): by the time it asks for its first worker it
has read the course's config, which imports the course's steps and with them nbgrader, and it holds
no database connection or thread yet.
"""

from __future__ import annotations

import atexit
import json
import os
import selectors
import subprocess
import sys
import threading
import time

import psutil

from utils.fork import fork_into
from utils.lessons import REPO

GRACE = 120         # seconds past a request's own limit before its worker itself is ended


class WorkerLost(RuntimeError):
    """The worker process ended or stopped answering."""


_serve = None     # fork_here(): what a worker forked from this process runs (nbgrader_worker.serve_forked)
_prepare = None   # ...and what this process does once before its first fork (nbgrader_worker.warm)


def fork_here(serve, prepare=None) -> None:
    """This process's workers are forked from it while it runs one thread (module doc); in each,
    `serve(env, cwd)` answers the requests arriving on fd 0 on fd 1 and returns its exit status.
    `prepare()` runs in this process before the first fork: what every worker would do first,
    done once for all of them. `serve` None: started anew again."""
    global _serve, _prepare
    _serve, _prepare = serve, prepare


class _Forked:
    """A worker forked from this process, seen through what the client uses of subprocess.Popen:
    its requests on its fd 0, its answers on its fd 1, its errors to /dev/null, a session of its own."""

    def __init__(self, env: dict, serve):
        global _prepare
        if _prepare is not None:
            prepare, _prepare = _prepare, None
            prepare()
        with _lock:   # the pipes of the other workers: this one must not hold them open
            others = [f.fileno() for c in _idle for f in (c.proc.stdin, c.proc.stdout) if not f.closed]
        requests_r, requests_w = os.pipe()
        answers_r, answers_w = os.pipe()
        null = os.open(os.devnull, os.O_WRONLY)
        # /dev/null in place of stderr and of the other workers' pipes, their numbers kept: nothing
        # in the worker uses them
        pid = fork_into(lambda: serve(env, str(REPO)), {0: requests_r, 1: answers_w, 2: null, **dict.fromkeys(others, null)},
                        drop=(requests_w, answers_r, null, requests_r, answers_w))
        for fd in (null, requests_r, answers_w):
            os.close(fd)
        self.pid, self.returncode = pid, None
        self.stdin, self.stdout = os.fdopen(requests_w, "w"), os.fdopen(answers_r, "r")

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                self.returncode = -1
            else:
                if pid:
                    self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired("nbgrader worker", timeout)
            time.sleep(0.01)
        return self.returncode


class _Client:
    def __init__(self, env: dict):
        if _serve is not None and threading.active_count() == 1:
            self.proc = _Forked(env, _serve)
        else:
            self.proc = subprocess.Popen([sys.executable, "-m", "utils.grading.nbgrader_worker"], cwd=REPO, env=env,
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                         start_new_session=True, text=True)

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


def start_idle(count: int, env: dict) -> None:
    """In a process that forks its workers (fork_here): forked now until `count` are idle, before
    its threads start. Elsewhere each is started when first needed."""
    while _serve is not None:
        with _lock:
            if len(_idle) >= count:
                return
        client = _Client(env)
        with _lock:
            _idle.append(client)


@atexit.register
def close_all() -> None:
    with _lock:
        clients = list(_idle)
        _idle.clear()
    for client in clients:
        client.close()
