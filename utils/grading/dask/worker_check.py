"""What every worker must share with the grader (the code that grades), checked on each worker
before it grades: a worker whose course package or grading tools differ, or where the sandbox
cannot run, refuses in one line."""

from __future__ import annotations

import asyncio
import hashlib
import socket
from pathlib import Path

import utils
from utils.grading.reference import _course_files
from utils.sandbox.probe import start_problem, unavailable


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def tools_files(tools: Path | None = None) -> list[tuple[str, Path]]:
    """(name, path) of every file of the course's tools that grade (`utils/`, where this Python
    imports them from, or under `tools`): the graders, the sandbox, the work folders."""
    folder = Path(tools) / "utils" if tools is not None else Path(utils.__file__).resolve().parent
    return [(f"utils/{p.relative_to(folder).as_posix()}", p) for p in sorted(folder.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"]


def fingerprint(tools: Path | None = None) -> dict[str, str]:
    """{name: sha256} of the code that grades: the files of the `course` package this Python
    imports (the one the kernels get) and the course's tools (`utils/`, tools_files). The lesson's
    files, the reference and the submissions travel with the tasks, so they cannot differ."""
    files = {f"course package: {name}": _sha(path) for name, path in _course_files()}
    files.update((name, _sha(path)) for name, path in tools_files(tools))
    return files


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


async def check_worker(expected: dict[str, str], sandbox: tuple[bool, str], dask_worker=None) -> str | None:
    """worker_problem on every worker at once (Client.run passes dask_worker), in a thread: the
    hashing and the sandbox probe take seconds the worker's event loop must not wait for."""
    return await asyncio.to_thread(worker_problem, expected, tuple(sandbox), dask_worker)
