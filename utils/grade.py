"""Autograde every submission in submitted/, write feedback HTML and grades.csv, print scores.

    python -m utils.grade [LESSON ...]

Submissions are read from submitted/<student>/<lesson>/ and never modified; graded copies go to
autograded/, feedback to feedback/, the gradebook to gradebook.db (SQLite), grades to grades.csv.
A submission that cannot be graded is reported by name; the others are graded all the same.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from utils.coursedir import REPO, ToolError, nbgrader, read_scores, resolve_lessons, score_table


def submitted_students(root: Path, lesson: str) -> list[str]:
    base = Path(root) / "submitted"
    if not base.is_dir():
        return []
    return sorted(d.name for d in base.iterdir() if (d / lesson).is_dir())


def grade(root: Path = REPO, names: list[str] | None = None) -> tuple[str, list[str]]:
    """Grade; return (score table, list of problems naming lesson and student)."""
    problems: list[str] = []
    graded_lessons = []
    for lesson in resolve_lessons(names or [], root):
        students = submitted_students(root, lesson)
        if not students:
            print(f"{lesson}: no submissions")
            continue
        start = time.perf_counter()
        # The gradebook needs the lesson's cells and hidden tests; building records them
        # (and rewrites release/ with identical bytes).
        nbgrader(["generate_assignment", lesson, "--force"], cwd=root)
        proc = nbgrader(["autograde", lesson, "--force"], cwd=root, check=False)
        nbgrader(["generate_feedback", lesson, "--force"], cwd=root, check=False)
        graded = {r.student for r in read_scores(root, [lesson])}
        for student in students:
            if student not in graded:
                problems.append(f"{lesson}: submission of {student!r} could not be graded; see the log")
        if proc.returncode != 0:
            log = Path(root) / "autograde.log"
            log.write_text(proc.stdout + proc.stderr)
        print(f"{lesson}: graded {len(students)} submission(s) in {time.perf_counter() - start:.1f} s")
        graded_lessons.append(lesson)
    if graded_lessons:
        nbgrader(["export", "--to", "grades.csv"], cwd=root)
        print(f"wrote {Path(root) / 'grades.csv'} and feedback/ (HTML per student and lesson)")
    table = score_table(read_scores(root, graded_lessons))
    return table, problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("lessons", nargs="*", help="lesson folders under source/ (default: all)")
    args = parser.parse_args(argv)
    try:
        table, problems = grade(REPO, args.lessons)
    except ToolError as err:
        print(f"grade failed: {err}", file=sys.stderr)
        return 1
    print(table)
    for p in problems:
        print(f"FAIL {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
