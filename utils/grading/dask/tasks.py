"""The tasks, run on the workers: the reference's cache key, the reference run, one submission's
grading, each in a course folder made of what the task carries. The grader sends them by value
(utils.grading.dask.runner.task): a scheduler started as `dask scheduler` has Dask but not the course's tools."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections import Counter
from pathlib import Path

from distributed import get_worker

from utils.grading.dask.payload import course_here
from utils.grading.dask.worker_check import worker_label, worker_problem
from utils.coursedir import REPO, source_notebook
from utils.grading.run import CACHE, THREAD_VARS, CourseSettings, Grading, Outcome, Plan, run_worker
from utils.grading.reference import _library_versions, cache_key, reference_for

KERNEL_THREADS_ENV = "COURSE_KERNEL_THREADS"   # a worker's kernels' library threads, instead of the split


def kernel_threads(nthreads: int, environ=None) -> dict[str, str]:
    """The numeric libraries' threads (OpenMP, MKL, OpenBLAS, numexpr) of each kernel on a worker
    that grades `nthreads` submissions at once: its cores split between them, or
    COURSE_KERNEL_THREADS where the worker's environment sets it. Always given to the kernel
    explicitly: Dask's nanny sets OMP/MKL/OPENBLAS_NUM_THREADS to 1 in its worker's environment
    (distributed.nanny.pre-spawn-environ), which every kernel would otherwise inherit."""
    environ = os.environ if environ is None else environ
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    chosen = environ.get(KERNEL_THREADS_ENV, "").strip()
    n = int(chosen) if chosen.isdigit() and int(chosen) > 0 else max(1, cores // max(1, nthreads))
    return {v: str(n) for v in THREAD_VARS}


def _worker():
    return get_worker()


def _refused(spec: dict, worker) -> None:
    problem = worker_problem(spec["expected"], tuple(spec["sandbox"]), worker)
    if problem:
        raise RuntimeError(problem)


def _same_key(spec: dict, course: Path, worker) -> None:
    """Refuse (one line naming what differs) where this worker's reference key is not the one
    the lesson's tasks carry (that of the worker that told the grader its key)."""
    if cache_key(source_notebook(course, spec["lesson"])) == spec["key"]:
        return
    mine, theirs = Counter(_library_versions().splitlines()), Counter(spec.get("libraries", "").splitlines())
    differ = sorted((mine - theirs) + (theirs - mine))
    shown = "; ".join(f"{'here' if mine[line] > theirs[line] else 'there'}: {line}"
                      + (f" ({max(mine[line], theirs[line])} times)" if min(mine[line], theirs[line]) else "")
                      for line in differ[:4]) + (f" and {len(differ) - 4} more" if len(differ) > 4 else "")
    raise RuntimeError(f"worker {worker_label(worker)} refuses: its installed libraries differ from those of "
                       f"{spec.get('keyed_by', 'the worker that ran the reference')} ({shown or 'the same versions'}"
                       f"; the reference's cache key covers every distribution this Python finds, its path "
                       f"included: install the same pinned versions on every machine, with the same PYTHONPATH)")


def key_task(spec: dict) -> dict:
    """The reference's cache key of the lesson as a worker computes it (the libraries it finds),
    with what it is made of: the key every task of the lesson is then held to."""
    worker = _worker()
    _refused(spec, worker)
    scratch = Path(tempfile.mkdtemp(prefix=f"cluster-key-{spec['lesson']}-"))
    try:
        course = course_here({**spec, "reference": None, "submission": None}, scratch / "course")
        return {"key": cache_key(source_notebook(course, spec["lesson"])), "libraries": _library_versions(),
                "keyed_by": f"worker {worker_label(worker)}"}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def reference_task(spec: dict) -> dict:
    """The lesson's reference run, on a worker, from the source notebook the task carries; its
    observations go back to the grader, which keeps them in its .grading-cache/."""
    worker = _worker()
    _refused(spec, worker)
    scratch = Path(tempfile.mkdtemp(prefix=f"cluster-reference-{spec['lesson']}-"))
    try:
        course = course_here(spec, scratch / "course")
        _same_key(spec, course, worker)
        start = time.perf_counter()
        ref = reference_for(source_notebook(course, spec["lesson"]), course / CACHE)
        data = (course / CACHE / f"{spec['key']}.json").read_bytes()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return {"key": spec["key"], "json": data, "ran": not ref.cached, "kernel_seconds": ref.seconds,
            "seconds": time.perf_counter() - start, "worker": worker_label(worker)}


def grade_task(spec: dict, ref: dict) -> dict:
    """Autograde one submission on this worker (utils.grading.run.run_worker: the same work folder,
    sandbox and verdicts as a local run), in a course folder made of what the task carries: the
    worker needs no access to the grader's files. Returns what the grader records."""
    worker = _worker()
    lesson, student = spec["lesson"], spec["student"]
    _refused(spec, worker)
    start = time.perf_counter()
    scratch = Path(tempfile.mkdtemp(prefix=f"cluster-{lesson}-"))
    try:
        course = course_here(spec, scratch / "course")
        _same_key(spec, course, worker)
        template = scratch / "gradebook.db"
        template.write_bytes(spec["template"])
        enabled, bwrap = spec["sandbox"]
        settings = CourseSettings(spec["course_id"], f"sqlite:///{template}", enabled, bwrap)
        g = Grading(course, settings, 1, list(spec["extra"]), spec["watchdog"], False, lambda *a: None)
        p = Plan(lesson, [student], {student: Outcome(lesson, student, file=spec["file"])}, {},
                 course / CACHE / f"{spec['key']}.json")
        env = {**kernel_threads(getattr(worker.state, "nthreads", 1) or 1), "COURSE_TOOLS": str(REPO)}
        result = run_worker(g, p, [student], env, None)
        try:
            graded = {}
            if student in result.graded:
                graded = {nb.name: nb.read_bytes() for nb in result.graded[student].glob("*.ipynb")
                          if nb.is_file() and not nb.is_symlink()}
            gradebook = (result.work / "gradebook.db").read_bytes() if graded else b""
        finally:
            shutil.rmtree(result.work, ignore_errors=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return {"graded": graded, "gradebook": gradebook, "rc": result.rc, "log": result.log[-20000:],
            "killed": result.killed, "worker": worker_label(worker), "address": worker.address,
            "seconds": time.perf_counter() - start}

