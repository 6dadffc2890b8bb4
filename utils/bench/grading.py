"""Grading throughput: how long `python -m utils.grading` takes for a class, serial and in parallel.

    python -m utils.bench.grading [--submissions 50 | --students N] [--workers 1 2] [--lessons ...] [--rehearsal]
    python -m utils.bench.grading --sandbox-cost ROUNDS [--students N] [--workers 1] [--lessons ...]
    python -m utils.bench.grading --cpu ROUNDS [--students 8] [--workers 1] [--lessons ...] [--breakdown]

--cpu: CPU seconds per submission of `python -m utils.grading` (sandbox, feedback and export
included) beside stock nbgrader's (plain `nbgrader autograde` then `generate_feedback` on the same
submissions in a scratch course of its own, no course plugins, no sandbox), run in alternation,
per lesson; CPU counted for every process either starts, re-parented ones included (cpu.py).
--breakdown: each run's CPU per submission by kind of process as well (breakdown.py).

A benchmark, not a test: it builds a scratch course from the lessons in source/ (or, with
--rehearsal or when source/ has none, the two tiny lessons of the rehearsal course,
utils/classroom/rehearsal.py), has enough
students submit every lesson to make --submissions notebook submissions (50 by default: 17
students x 3 lessons = 51; every fifth student with the lesson's sample mistakes from
utils/authoring/samples, the others the reference solution), then grades the class once per --workers
value, each time on a fresh copy, and prints wall time, submissions (one lesson of one student)
per minute and the speed-up over the first --workers value, then for each lesson its own
submissions per minute (lessons are graded one after another, each by all the workers). Grading
includes building the gradebook entries, autograde, feedback HTML and the grades.csv export, as
`python -m utils.grading` does. The reference solution's run, which grading makes once per lesson
(then cached in .grading-cache/), is made and timed first, apart: it is a fixed cost per lesson
and class, not a cost per submission, so the rates are those of a class of any size. The load
average is printed before and after every run: on a shared machine, read the figures with it.

    make bench-grading BENCH_GRADING_ARGS="--students 10"
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

from utils.lessons import REPO, lessons, source_notebook
from utils.notebooks import submission_from
from utils.scratch import scratch_config, scratch_course
from utils.processes import nbgrader, nbgrader_env
from utils.nbgrader_client import close_all
from utils.bench.breakdown import show
from utils.bench.cpu import measure
from utils.grading.assignment import ensure_built
from utils.grading.settings import course_settings
from utils.grading.reference_run import reference_for
from utils.grading.grade_course import grade_lessons
from utils.authoring.samples_io import load_samples
from utils.classroom.rehearsal import rehearsal_course


def prepare(base: Path, names: list[str] | None, students: int, rehearsal: bool) -> tuple[Path, list[str]]:
    """A scratch course with `students` submissions of every lesson and the reference solution's
    observations cached (printed: seconds per lesson); no grading yet."""
    course = base / "course"
    if rehearsal:
        rehearsal_course(course)
        names = ["01_tiny", "02_other"]
    else:
        names = names or lessons(REPO)
        scratch_course(REPO, names, course)
        for lesson in names:
            nbgrader(["generate_assignment", lesson, "--force"], cwd=course)
    for lesson in names:
        src = source_notebook(course, lesson)
        reference = nbformat.read(str(src), as_version=4)
        release = nbformat.read(str(course / "release" / lesson / src.name), as_version=4)
        mistakes = {} if rehearsal else load_samples(lesson)[0]
        good = submission_from(release, reference, {})
        wrong = submission_from(release, reference, mistakes) if mistakes else good
        for i in range(students):
            folder = course / "submitted" / f"student{i:03d}" / lesson
            folder.mkdir(parents=True)
            nbformat.write(wrong if i % 5 == 4 else good, str(folder / src.name))
    for lesson in names:
        load = os.getloadavg()[0]
        start = time.perf_counter()
        reference_for(source_notebook(course, lesson), course / ".grading-cache")
        print(f"reference run of {lesson}: {time.perf_counter() - start:.1f} s (load average {load:.2f} before; "
              f"once per lesson, cached for every run below)", flush=True)
    return course, names


def run_once(prepared: Path, names: list[str], workers: int, cell_timeout: float | None,
             sandboxed: bool = True) -> dict:
    course = Path(tempfile.mkdtemp(prefix=f"bench-w{workers}-")) / "course"
    shutil.copytree(prepared, course)
    # the copy grades into its own gradebook; without the sandbox only when measuring its cost
    scratch_config(course, prepared, "" if sandboxed else "\nc.SandboxKernelManager.enabled = False\n")
    start = time.perf_counter()
    run = grade_lessons(course, names, workers=workers, cell_timeout=cell_timeout, quiet=True)
    seconds = time.perf_counter() - start
    zero = [f"{o.lesson}/{o.student}: {o.reason}" for o in run.outcomes if o.status != "graded"]
    shutil.rmtree(course.parent, ignore_errors=True)
    return {"workers": workers, "seconds": seconds, "notebooks": run.submissions, "problems": zero,
            "lessons": run.lesson_seconds, "record": run.record_seconds, "feedback": run.feedback_seconds}


def sandbox_cost(prepared: Path, names: list[str], workers: int, cell_timeout: float | None, rounds: int) -> int:
    """Grade the same class with and without the sandbox, alternating, and print seconds per submission."""
    times: dict[bool, list[float]] = {True: [], False: []}
    for i in range(rounds):
        for sandboxed in ((True, False) if i % 2 == 0 else (False, True)):
            load = os.getloadavg()[0]
            r = run_once(prepared, names, workers, cell_timeout, sandboxed)
            per = r["seconds"] / r["notebooks"]
            times[sandboxed].append(per)
            print(f"round {i + 1} {'sandbox   ' if sandboxed else 'no sandbox'}: {per:.2f} s per submission "
                  f"(load average {load:.2f} before)" + (f", not graded: {r['problems'][:3]}" if r["problems"] else ""),
                  flush=True)
    on, off = statistics.median(times[True]), statistics.median(times[False])
    print(f"median: {on:.2f} s with the sandbox, {off:.2f} s without: {100 * (on - off) / off:+.1f} %")
    return 0


STOCK_CONFIG = ("c = get_config()  # noqa: F821\n# stock nbgrader: none of the course's steps, no sandbox\n"
                "c.CourseDirectory.course_id = 'stock'\nc.Execute.timeout = 300\n")


def stock_course(prepared: Path, dest: Path, names: list[str]) -> Path:
    """The same lessons and submissions in a course with nbgrader's stock configuration."""
    dest.mkdir(parents=True)
    (dest / "nbgrader_config.py").write_text(STOCK_CONFIG)
    ignore = shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__")
    for lesson in names:
        shutil.copytree(prepared / "source" / lesson, dest / "source" / lesson, ignore=ignore)
    shutil.copytree(prepared / "submitted", dest / "submitted")
    for lesson in names:
        subprocess.run([sys.executable, "-m", "nbgrader", "generate_assignment", lesson, "--force"], cwd=dest,
                       env=nbgrader_env(), check=True, capture_output=True)
    return dest


def _copy(course: Path) -> Path:
    dest = Path(tempfile.mkdtemp(prefix="bench-cpu-")) / "course"
    shutil.copytree(course, dest)
    return dest


def _merge(parts: list[dict | None]) -> dict:
    out: dict[str, float] = {}
    for p in parts:
        for k, v in (p or {}).items():
            out[k] = out.get(k, 0.0) + v
    return out


def project_cpu(prepared: Path, lesson: str, workers: int, breakdown: bool = False) -> tuple[float, int, dict]:
    """CPU seconds of `python -m utils.grading LESSON` on a fresh copy (the lesson built into the
    copy's gradebook first, apart: it is made once per change of the source), and the graded count."""
    course = _copy(prepared)
    try:
        scratch_config(course, prepared)
        ensure_built(course, lesson, course_settings(course))
        close_all()   # the measurement needs this process without children
        m = measure([sys.executable, "-m", "utils.grading", lesson, "--course", str(course), "--workers",
                     str(workers)], cwd=REPO, env=nbgrader_env(), breakdown=breakdown)
        graded = len(list((course / "feedback").glob(f"*/{lesson}/*.html")))
        return m.cpu, graded, _merge([m.parts])
    finally:
        shutil.rmtree(course.parent, ignore_errors=True)


def stock_cpu(stock: Path, lesson: str, breakdown: bool = False) -> tuple[float, int, dict]:
    """CPU seconds of stock `nbgrader autograde` then `nbgrader generate_feedback` on a fresh copy."""
    course = _copy(stock)
    try:
        cpu, parts = 0.0, []
        for command in ("autograde", "generate_feedback"):
            m = measure([sys.executable, "-m", "nbgrader", command, lesson, "--force"], cwd=course, env=nbgrader_env(),
                        breakdown=breakdown)
            cpu += m.cpu
            parts.append({k.replace("driver", command): v for k, v in (m.parts or {}).items()})
        graded = len(list((course / "feedback").glob(f"*/{lesson}/*.html")))
        return cpu, graded, _merge(parts)
    finally:
        shutil.rmtree(course.parent, ignore_errors=True)


def cpu_compare(prepared: Path, names: list[str], students: int, workers: int, rounds: int, base: Path,
                breakdown: bool = False) -> int:
    """Per lesson, CPU seconds per submission of the course's grading and of stock nbgrader, alternating."""
    stock = stock_course(prepared, base / "stock", names)
    close_all()
    for lesson in names:
        per: dict[str, list[float]] = {"project": [], "stock": []}
        for i in range(rounds):
            for which in (("project", "stock") if i % 2 == 0 else ("stock", "project")):
                load = os.getloadavg()[0]
                cpu, graded, parts = (project_cpu(prepared, lesson, workers, breakdown) if which == "project"
                                      else stock_cpu(stock, lesson, breakdown))
                per[which].append(cpu / students)
                print(f"{lesson} round {i + 1} {which:7}: {cpu / students:.2f} CPU-s per submission "
                      f"({graded}/{students} feedback pages; load average {load:.2f} before, "
                      f"{os.getloadavg()[0]:.2f} after)", flush=True)
                if breakdown:
                    print(show(parts, students), flush=True)
        mine, theirs = statistics.median(per["project"]), statistics.median(per["stock"])
        print(f"{lesson}: median {mine:.2f} CPU-s per submission, stock nbgrader {theirs:.2f}: ratio {mine / theirs:.2f}",
              flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--submissions", type=int, default=50,
                        help="notebook submissions in all, spread evenly over the lessons (default 50)")
    parser.add_argument("--students", type=int, default=None,
                        help="students, each submitting every lesson (overrides --submissions)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--lessons", nargs="*", default=None, help="lessons from source/ (default: all)")
    parser.add_argument("--rehearsal", action="store_true", help="grade the rehearsal course's two tiny lessons instead")
    parser.add_argument("--cell-timeout", type=float, default=None)
    parser.add_argument("--sandbox-cost", type=int, default=0, metavar="ROUNDS",
                        help="instead: grade ROUNDS times with the autograding sandbox and without, "
                             "alternating, with the first --workers value, and print the cost")
    parser.add_argument("--cpu", type=int, default=0, metavar="ROUNDS",
                        help="instead: CPU seconds per submission beside stock nbgrader's, ROUNDS alternating "
                             "runs per lesson, with the first --workers value")
    parser.add_argument("--breakdown", action="store_true",
                        help="with --cpu: each run's CPU per submission by kind of process as well")
    args = parser.parse_args(argv)
    rehearsal = args.rehearsal or not lessons(REPO)
    base = Path(tempfile.mkdtemp(prefix="bench-grading-"))
    try:
        n_lessons = 2 if rehearsal else len(args.lessons or lessons(REPO))
        students = args.students or -(-args.submissions // n_lessons)
        prepared, names = prepare(base, args.lessons, students, rehearsal)
        print(f"grading {students} students x {len(names)} lesson(s) = {students * len(names)} submissions ({', '.join(names)}"
              f"{', rehearsal course' if rehearsal else ''}) on {os.cpu_count()} CPU core(s)", flush=True)
        if args.cpu:
            close_all()
            return cpu_compare(prepared, names, students, args.workers[0], args.cpu, base, args.breakdown)
        if args.sandbox_cost:
            return sandbox_cost(prepared, names, args.workers[0], args.cell_timeout, args.sandbox_cost)
        results = []
        for workers in args.workers:
            before = os.getloadavg()
            r = run_once(prepared, names, workers, args.cell_timeout)
            after = os.getloadavg()
            results.append(r)
            print(f"workers={workers}: {r['seconds']:.0f} s, {60 * r['notebooks'] / r['seconds']:.2f} "
                  f"submissions/min ({60 * students / r['seconds']:.2f} students' whole course/min), "
                  f"speed-up x{results[0]['seconds'] / r['seconds']:.2f}; load average (1, 5 min) "
                  f"{before[0]:.2f} {before[1]:.2f} before, {after[0]:.2f} {after[1]:.2f} after"
                  + (f", {len(r['problems'])} not graded: {r['problems'][:3]}" if r["problems"] else ""),
                  flush=True)
            n = max(1, r["notebooks"])
            print(f"    the grader's own recording {r['record']:.1f} s ({1000 * r['record'] / n:.0f} ms per submission); "
                  f"feedback HTML in the work folders {r['feedback']:.1f} s ({r['feedback'] / n:.2f} s per submission)",
                  flush=True)
            print("    per lesson: " + ", ".join(f"{k} {v:.0f} s = {60 * students / v:.2f} submissions/min"
                                             for k, v in r["lessons"].items()), flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
