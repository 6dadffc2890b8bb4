"""The tasks, run on the workers: the reference's cache key, the reference run, one submission's
grading (work.grade_in_folder, as a local run grades), each from what the task carries. The grader
sends them by value (runner.task): a scheduler started as `dask scheduler` has Dask but not the
course's tools. Every task refuses, in one line, on a worker the grader's check refused
(worker_check.py) or whose reference key differs from the lesson's."""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
import time
from collections import Counter
from pathlib import Path

from distributed import get_worker

from utils.lessons import REPO, source_notebook
from utils.grading.dask.payload import course_here
from utils.grading.dask.worker_check import refusal, worker_label
from utils.grading.fingerprint import library_versions
from utils.grading.reference_run import notebook_key, reference_for
from utils.grading.settings import CACHE
from utils.grading.work import grade_in_folder, kernel_threads

def _checked_worker():
    worker = get_worker()
    problem = refusal(worker)
    if problem:
        raise RuntimeError(problem)
    return worker


def _same_key(key: dict, notebook: bytes, worker) -> None:
    """Refuse (one line naming what differs) where this worker's reference key is not the one
    the lesson's tasks carry (that of the worker that told the grader its key)."""
    if notebook_key(notebook) == key["key"]:
        return
    mine, theirs = Counter(library_versions().splitlines()), Counter(key.get("libraries", "").splitlines())
    differ = sorted((mine - theirs) + (theirs - mine))
    shown = "; ".join(f"{'here' if mine[line] > theirs[line] else 'there'}: {line}"
                      + (f" ({max(mine[line], theirs[line])} times)" if min(mine[line], theirs[line]) else "")
                      for line in differ[:4]) + (f" and {len(differ) - 4} more" if len(differ) > 4 else "")
    raise RuntimeError(f"worker {worker_label(worker)} refuses: its installed libraries differ from those of "
                       f"{key.get('keyed_by', 'the worker that ran the reference')} ({shown or 'the same versions'}"
                       f"; the reference's cache key covers every distribution this Python finds, its path "
                       f"included: install the same pinned versions on every machine, with the same PYTHONPATH)")


def key_task(spec: dict) -> dict:
    """The reference's cache key of the lesson as a worker computes it (the libraries it finds),
    with what it is made of: the key every task of the lesson is then held to."""
    worker = _checked_worker()
    scratch = Path(tempfile.mkdtemp(prefix=f"cluster-key-{spec['lesson']}-"))
    try:
        course = course_here(spec, scratch / "course")
        return {"key": notebook_key(source_notebook(course, spec["lesson"]).read_bytes()),
                "libraries": library_versions(), "keyed_by": f"worker {worker_label(worker)}"}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def reference_task(spec: dict) -> dict:
    """The lesson's reference run, on a worker, from the source notebook the task carries; its
    observations go back to the grader, which keeps them in its .grading-cache/."""
    worker = _checked_worker()
    scratch = Path(tempfile.mkdtemp(prefix=f"cluster-reference-{spec['lesson']}-"))
    try:
        course = course_here(spec, scratch / "course")
        source = source_notebook(course, spec["lesson"])
        _same_key(spec, source.read_bytes(), worker)
        start = time.perf_counter()
        ref = reference_for(source, course / CACHE)
        data = (course / CACHE / f"{spec['key']}.json").read_bytes()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return {"key": spec["key"], "json": data, "ran": not ref.cached, "kernel_seconds": ref.seconds,
            "seconds": time.perf_counter() - start, "worker": worker_label(worker)}


def grade_task(files: dict, key: dict, student: str, submission: dict[str, bytes], rename: str | None) -> dict:
    """Grade one submission on this worker (work.grade_in_folder: the same work folder, sandbox,
    verdicts and feedback as a local run), from what the task carries: the worker needs no access
    to the grader's files. Returns the WorkDone as plain data, with who graded it."""
    worker = _checked_worker()
    _same_key(key, files["source"][files["notebook"]], worker)
    # always given explicitly: Dask's nanny sets OMP/MKL/OPENBLAS_NUM_THREADS to 1 for its worker
    # (distributed.nanny.pre-spawn-environ), which every kernel would otherwise inherit
    env = {**kernel_threads(getattr(worker.state, "nthreads", 1) or 1), "COURSE_TOOLS": str(REPO)}
    done = grade_in_folder(files, {student: (submission, rename)}, env=env)
    done.worker, done.address = worker_label(worker), worker.address
    return dataclasses.asdict(done)
