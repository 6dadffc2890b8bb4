"""Grading throughput on loopback Dask clusters (a benchmark, not a test):

    python -m utils.bench.cluster [LESSON...] --workers 1 2

grades utils.authoring.demo's sample class (three students per lesson) on a loopback cluster
(utils.grading.dask.loopback) of each size, each on a fresh copy of the course, with the whole
`python -m utils.grading --scheduler` command; the reference runs are made and timed first, apart."""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

from distributed import Client

from utils.authoring.demo import place_samples
from utils.lessons import REPO, lessons
from utils.scratch import scratch_course
from utils.grading.dask.loopback import loopback_cluster
from utils.grading.dask.payload import lesson_spec
from utils.grading.dask.cluster_runner import task
from utils.grading.dask.worker_check import PLUGIN, WorkerCheck
from utils.grading.fingerprint import fingerprint
from utils.grading.grade_course import grade_lessons
from utils.grading.settings import CACHE, course_settings


def bench(workers: list[int], names: list[str] | None = None, say=print) -> list[dict]:
    """Grade the sample class (utils.authoring.demo's three students per lesson) on loopback clusters of each
    size in `workers`, each on a fresh copy of the course; the reference runs are made once first
    (a 1-worker cluster, fresh cache: their times) and copied into every later copy. One dict per
    run: workers, submissions, seconds, per minute, load average before and after."""
    names = names or lessons(REPO)
    base = Path(tempfile.mkdtemp(prefix="cluster-bench-"))
    try:
        first = _course(base / "reference", names)
        for lesson, (wall, kernel) in _references(first, names, base / "cluster-reference").items():
            say(f"reference run of {lesson}: {wall:.1f} s as a task ({kernel:.1f} s kernel time)")
        results = []
        for n in workers:
            c = _course(base / f"w{n}", names)
            shutil.copytree(first / CACHE, c / CACHE, ignore=shutil.ignore_patterns("*.lock"))
            r = _one_run(c, names, n, base / f"cluster-{n}")
            say(f"{n} worker(s): {r['submissions']} submissions in {r['seconds']:.0f} s = {r['per_minute']:.2f}/min; "
                f"load average {' '.join(r['load_before'])} -> {' '.join(r['load_after'])}; shares {r['shares']}")
            results.append(r)
        return results
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _course(dest: Path, names: list[str]) -> Path:
    course = scratch_course(REPO, names, dest, release=True)
    place_samples(course)
    return course


def _references(course: Path, names: list[str], base: Path) -> dict[str, tuple[float, float]]:
    """Each lesson's reference task alone (no submissions) on a 1-worker cluster, into the course's
    cache; lesson -> (wall seconds of the task, kernel seconds)."""
    refs = {}
    settings = course_settings(course)
    with loopback_cluster(1, base) as cl, Client(cl.address, timeout="30s", set_as_default=False) as client:
        client.register_plugin(WorkerCheck(fingerprint(), (settings.sandbox, settings.bwrap)), name=PLUGIN)
        for lesson in names:
            spec = lesson_spec(course, lesson)
            spec.update(client.submit(task("key_task"), spec, pure=False).result())
            start = time.perf_counter()
            info = client.submit(task("reference_task"), spec, pure=False).result()
            refs[lesson] = (time.perf_counter() - start, info["kernel_seconds"])
            (course / CACHE).mkdir(exist_ok=True)
            (course / CACHE / f"{info['key']}.json").write_bytes(info["json"])
    return refs


def _load() -> list[str]:
    return Path("/proc/loadavg").read_text().split()[:3]


def _one_run(course: Path, names: list[str], n: int, base: Path) -> dict:
    with loopback_cluster(n, base) as cl:
        load0, start = _load(), time.perf_counter()
        run = grade_lessons(course, names, scheduler=cl.address, quiet=True)
        seconds, load1 = time.perf_counter() - start, _load()
    return {"workers": n, "submissions": len(run.outcomes), "seconds": seconds,
            "per_minute": 60 * len(run.outcomes) / seconds, "load_before": load0, "load_after": load1,
            "shares": run.cluster.get("workers", {})}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m utils.bench.cluster",
                                     description="Grading throughput on loopback Dask clusters (a benchmark).")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("lessons", nargs="*")
    args = parser.parse_args(argv)
    bench(args.workers, args.lessons or None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
