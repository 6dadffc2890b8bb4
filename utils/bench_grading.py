"""Grading throughput: how long `utils.grade` takes for a class, serial and in parallel.

    python -m utils.bench_grading [--submissions 50 | --students N] [--workers 1 2] [--lessons ...] [--sandbox]

A benchmark, not a test: it builds a scratch course from the lessons in source/ (or, with
--sandbox or when source/ has none, the two tiny sandbox lessons of utils.workflow), has enough
students submit every lesson to make --submissions notebook submissions (50 by default: 17
students x 3 lessons = 51; every fifth student with the lesson's sample mistakes from
utils/samples, the others the reference solution), then grades the class once per --workers
value, each time on a fresh copy, and prints wall time, submissions (one lesson of one student)
per minute and the speed-up over the first --workers value. Grading includes building the gradebook entries,
autograde, feedback HTML and the grades.csv export, as `python -m utils.grade` does.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import nbformat

from utils.coursedir import REPO, lessons, source_notebook, submission_from
from utils.grade import grade_lessons, run_nbgrader
from utils.samples_io import load_samples
from utils.workflow import sandbox


def prepare(base: Path, names: list[str] | None, students: int, use_sandbox: bool) -> tuple[Path, list[str]]:
    """A scratch course with `students` submissions of every lesson; no grading yet."""
    course = base / "course"
    if use_sandbox:
        sandbox(course)
        names = ["01_tiny", "02_other"]
    else:
        names = names or lessons(REPO)
        course.mkdir(parents=True)
        shutil.copy2(REPO / "nbgrader_config.py", course / "nbgrader_config.py")
        for lesson in names:
            shutil.copytree(REPO / "source" / lesson, course / "source" / lesson,
                            ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
            rc, log, _ = run_nbgrader(["generate_assignment", lesson, "--force"], cwd=course)
            if rc != 0:
                raise SystemExit(f"could not build {lesson}:\n{log[-2000:]}")
    for lesson in names:
        src = source_notebook(course, lesson)
        reference = nbformat.read(str(src), as_version=4)
        release = nbformat.read(str(course / "release" / lesson / src.name), as_version=4)
        mistakes = {} if use_sandbox else load_samples(lesson)[0]
        good = submission_from(release, reference, {})
        wrong = submission_from(release, reference, mistakes) if mistakes else good
        for i in range(students):
            folder = course / "submitted" / f"student{i:03d}" / lesson
            folder.mkdir(parents=True)
            nbformat.write(wrong if i % 5 == 4 else good, str(folder / src.name))
    return course, names


def run_once(prepared: Path, names: list[str], workers: int, cell_timeout: float | None) -> dict:
    course = Path(tempfile.mkdtemp(prefix=f"bench-w{workers}-")) / "course"
    shutil.copytree(prepared, course)
    start = time.perf_counter()
    run = grade_lessons(course, names, workers=workers, cell_timeout=cell_timeout, quiet=True)
    seconds = time.perf_counter() - start
    zero = [f"{o.lesson}/{o.student}: {o.reason}" for o in run.outcomes if o.status != "graded"]
    shutil.rmtree(course.parent, ignore_errors=True)
    return {"workers": workers, "seconds": seconds, "notebooks": run.submissions, "problems": zero,
            "lessons": run.lesson_seconds}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--submissions", type=int, default=50,
                        help="notebook submissions in all, spread evenly over the lessons (default 50)")
    parser.add_argument("--students", type=int, default=None,
                        help="students, each submitting every lesson (overrides --submissions)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--lessons", nargs="*", default=None, help="lessons from source/ (default: all)")
    parser.add_argument("--sandbox", action="store_true", help="grade the tiny sandbox lessons instead")
    parser.add_argument("--cell-timeout", type=float, default=None)
    args = parser.parse_args(argv)
    use_sandbox = args.sandbox or not lessons(REPO)
    base = Path(tempfile.mkdtemp(prefix="bench-grading-"))
    try:
        n_lessons = 2 if use_sandbox else len(args.lessons or lessons(REPO))
        students = args.students or -(-args.submissions // n_lessons)
        prepared, names = prepare(base, args.lessons, students, use_sandbox)
        print(f"grading {students} students x {len(names)} lesson(s) = {students * len(names)} submissions ({', '.join(names)}"
              f"{', sandbox' if use_sandbox else ''}) on {os.cpu_count()} CPU core(s)", flush=True)
        results = []
        for workers in args.workers:
            r = run_once(prepared, names, workers, args.cell_timeout)
            results.append(r)
            print(f"workers={workers}: {r['seconds']:.0f} s, {60 * r['notebooks'] / r['seconds']:.2f} "
                  f"submissions/min ({60 * students / r['seconds']:.2f} students' whole course/min), "
                  f"speed-up x{results[0]['seconds'] / r['seconds']:.2f}"
                  + (f", {len(r['problems'])} not graded: {r['problems'][:3]}" if r["problems"] else ""),
                  flush=True)
            print("    per lesson: " + ", ".join(f"{k} {v:.0f} s" for k, v in r["lessons"].items()), flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
