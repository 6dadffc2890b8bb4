"""What every worker must share with the grader (the code that grades), checked on each worker
before it grades, by a Dask WorkerPlugin the grader registers (on the workers there now and on
every worker that joins later): a worker whose course package or grading tools differ, or where the
sandbox cannot run, refuses every task, with one line saying why."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

from distributed.diagnostics.plugin import WorkerPlugin

from utils.grading.fingerprint import fingerprint
from utils.sandbox.probe import start_problem, unavailable

PLUGIN = "prefill-decode-worker-check"


def worker_label(worker) -> str:
    name = str(worker.name)
    return f"{name} ({worker.address}, host {socket.gethostname()})" if name != worker.address \
        else f"{worker.address} (host {socket.gethostname()})"


def worker_problem(expected: dict[str, str], sandbox: tuple[bool, str], worker,
                   tools: Path | None = None) -> str | None:
    """None when this worker can grade with the grader's code, else one line saying why not."""
    me = worker_label(worker)
    mine = fingerprint(tools)
    differ = sorted(k for k in set(mine) | set(expected) if mine.get(k) != expected.get(k))
    if differ:
        shown = ", ".join(differ[:3]) + (f" and {len(differ) - 3} more" if len(differ) > 3 else "")
        code = [k for k in differ if k.startswith("utils/")]
        fix = ("run the grader's version of the course's tools (a clone of the same commit on its "
               "PYTHONPATH)" if code else "install the grader's version of the course package")
        return (f"worker {me} refuses: its {'grading tools' if code else 'course package'} differ from the "
                f"grader's ({shown}); it must {fix}")
    enabled, bwrap = sandbox
    problem = (unavailable(bwrap) or start_problem(bwrap)) if enabled else None
    if problem:
        return f"worker {me} refuses: the autograding sandbox cannot run there: {problem}"
    return None


class WorkerCheck(WorkerPlugin):
    """worker_problem, on each worker as it gets the plugin (in a thread: the hashing and the
    sandbox probe take seconds the worker's event loop must not wait for); kept for its tasks."""
    name = PLUGIN

    def __init__(self, expected: dict[str, str], sandbox: tuple[bool, str]):
        self.expected, self.sandbox = expected, tuple(sandbox)
        self.problem: str | None = "not checked yet"

    async def setup(self, worker) -> None:
        self.problem = await asyncio.to_thread(worker_problem, self.expected, self.sandbox, worker)


def refusal(dask_worker=None) -> str | None:
    """This worker's refusal (Client.run passes dask_worker): None where it may grade."""
    plugin = dask_worker.plugins.get(PLUGIN)
    if plugin is None:
        return f"worker {worker_label(dask_worker)} refuses: the grader's check of its code never reached it"
    return plugin.problem
