"""The grading command: autograde every submission in submitted/, write feedback HTML and
grades.csv, report each student.

    python -m utils.grading [LESSON ...] [--workers N] [--cell-timeout S] [--show-hidden-tests]
                            [--db-url URL] [--course DIR] [--scheduler tcp://HOST:8786]

Exit 1 when a submission scored zero as unusable, a WARNING was printed, or feedback or the export
failed. Workers (default: the CPU cores) each run on their own cores. With --scheduler (or
DASK_SCHEDULER_ADDRESS) each submission is one task on a Dask cluster instead (utils/grading/dask/).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from utils.errors import ToolError
from utils.escaping import escaped
from utils.lessons import REPO
from utils.grading.grade_course import grade


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m utils.grading", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("lessons", nargs="*", help="lesson folders under source/ (default: all)")
    p.add_argument("--workers", type=int, default=None, help="parallel graders (default: CPU cores)")
    p.add_argument("--cell-timeout", type=float, default=None,
                   help="seconds a cell may run (default: Execute.timeout in nbgrader_config.py)")
    p.add_argument("--show-hidden-tests", action="store_true", help="show hidden tests in the feedback")
    p.add_argument("--db-url", default=None, help="gradebook URL (default: nbgrader_config.py or gradebook.db)")
    p.add_argument("--course", type=Path, default=REPO, help="course directory (default: this repository)")
    p.add_argument("--scheduler", default=None, help="grade on this Dask scheduler, tcp://HOST:8786 "
                   "(default: DASK_SCHEDULER_ADDRESS; neither: local workers); see docs/instructors.md")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        table, problems = grade(args.course, args.lessons, workers=args.workers, cell_timeout=args.cell_timeout,
                                show_hidden_tests=args.show_hidden_tests, db_url=args.db_url,
                                scheduler=args.scheduler)
    except ToolError as err:
        print(escaped(f"grade failed: {err}", keep_newlines=True), file=sys.stderr)
        return 1
    print(table)
    for p in problems:
        print(escaped(f"FAIL {p}"))
    return 1 if problems else 0
