"""The instructor's repeated steps around grading, over nbgrader (see docs/instructors.md).

    python -m utils.classroom.workflow roster students.csv          # nbgrader db student import
    python -m utils.classroom.workflow release LESSON               # generate_assignment + release_assignment
    python -m utils.classroom.workflow collect LESSON               # collect --update from the exchange
    python -m utils.classroom.workflow zip-collect LESSON FILE...   # LMS downloads (zip or .ipynb) -> submitted/
    python -m utils.classroom.workflow feedback LESSON [--show-hidden-tests]   # generate + release feedback
    python -m utils.classroom.workflow rehearsal DIR                # a tiny two-lesson course to rehearse on

Grading itself is `python -m utils.grading`, the class report `python -m utils.grading.report`.
Every command takes --exchange DIR (default: nbgrader's Exchange.root,
/usr/local/share/nbgrader/exchange, or what an nbgrader_config.py sets) and --course DIR (default:
this repository).

Collecting from the exchange is in collect.py (only what each student owns), the LMS import in
lms_import.py (each upload attributed by the name the LMS gave it, read under caps per student).
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

from utils.classroom.collect import (COLLECT_CLASS, NBGRADER_FILES, REFUSED, OverCap,  # noqa: F401 (re-exported)
                                     OwnerCheckedCollect, collect)
from utils.classroom.lms_import import (LMS_REGEXP, ZIP_COLLECTOR, IdCheckedCollector,  # noqa: F401 (re-exported)
                                        ImportCaps, lms_import, zip_collect)
from utils.classroom.rehearsal import rehearsal_course
from utils.errors import ToolError
from utils.escaping import escaped, shown
from utils.lessons import REPO
from utils.processes import nbgrader
from utils.grading.student_id import id_problem


def _run(args: list[str], root: Path, exchange: Path | None = None) -> str:
    if exchange is not None:
        args = [*args, f"--Exchange.root={Path(exchange).resolve()}"]
    return nbgrader(args, cwd=Path(root)).log


def import_roster(root: Path, csv_path: Path) -> str:
    """Students from a CSV with columns id,first_name,last_name,email (nbgrader's format). A file
    holding an id the course does not take in (utils/grading/student_id.py) is refused whole,
    each such line named, before anything is imported."""
    problems = []
    with open(csv_path, newline="", encoding="utf-8-sig") as f:
        for line, row in enumerate(csv.DictReader(f), start=2):
            why = id_problem(row.get("id"))
            if why:
                problems.append(f"line {line}: {why}")
    if problems:
        raise ToolError(f"{shown(str(csv_path))}: nothing imported, {len(problems)} student id(s) refused:\n  "
                        + "\n  ".join(problems[:20]) + ("\n  ..." if len(problems) > 20 else ""))
    return _run(["db", "student", "import", str(Path(csv_path).resolve())], root)


def release(root: Path, lesson: str, exchange: Path | None = None) -> str:
    """Build the student version from source/ and put it in the exchange for students to fetch."""
    _run(["generate_assignment", lesson, "--force"], root)
    return _run(["release_assignment", lesson, "--force"], root, exchange)


def feedback(root: Path, lesson: str, exchange: Path | None = None, show_hidden_tests: bool = False,
             release_to_students: bool = True) -> list[Path]:
    """Feedback HTML for every graded submission (hidden tests left out unless asked), released
    to the exchange for students to fetch. Returns the HTML files."""
    args = ["generate_feedback", lesson, "--force"]
    if show_hidden_tests:
        args.append("--HideHiddenTests.enabled=False")
    _run(args, root)
    if release_to_students:
        _run(["release_feedback", lesson], root, exchange)
    return sorted((Path(root) / "feedback").glob(f"*/{lesson}/*.html"))


# --- the student side, for rehearsals and tests ------------------------------------------------

# Each simulated student keeps nbgrader's submission cache in their own folder, as on a hub where
# every student has a home: fetch_feedback looks there for the student's own submissions.
def _as_student(home: Path, student: str, course_id: str) -> list[str]:
    return [f"--course={course_id}", f"--student={student}", f"--Exchange.cache={Path(home).resolve() / '.nbgrader_cache'}"]


def student_fetch(home: Path, lesson: str, student: str, exchange: Path, course_id: str) -> Path:
    """What a student's `nbgrader fetch_assignment` does, in folder `home`."""
    home = Path(home)
    home.mkdir(parents=True, exist_ok=True)
    _run(["fetch_assignment", lesson, *_as_student(home, student, course_id)], home, exchange)
    return home / lesson


def student_submit(home: Path, lesson: str, student: str, exchange: Path, course_id: str) -> str:
    return _run(["submit", lesson, *_as_student(home, student, course_id)], Path(home), exchange)


def student_fetch_feedback(home: Path, lesson: str, student: str, exchange: Path, course_id: str) -> list[Path]:
    _run(["fetch_feedback", lesson, *_as_student(home, student, course_id)], Path(home), exchange)
    return sorted(Path(home).glob(f"{lesson}/feedback/*/*.html"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--course", type=Path, default=REPO, help="course directory (default: this repository)")
    parser.add_argument("--exchange", type=Path, default=None, help="nbgrader exchange folder")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("roster").add_argument("csv", type=Path)
    for name in ("release", "collect"):
        sub.add_parser(name).add_argument("lesson")
    z = sub.add_parser("zip-collect")
    z.add_argument("lesson")
    z.add_argument("files", nargs="+", type=Path)
    z.add_argument("--regexp", default=LMS_REGEXP)
    z.add_argument("--force", action="store_true", help="replace earlier extracted/collected files")
    f = sub.add_parser("feedback")
    f.add_argument("lesson")
    f.add_argument("--show-hidden-tests", action="store_true")
    f.add_argument("--no-release", action="store_true", help="only write feedback/, do not release it")
    sub.add_parser("rehearsal").add_argument("dir", type=Path)
    args = parser.parse_args(argv)
    root = args.course
    try:
        if args.command == "roster":
            import_roster(root, args.csv)
            print(f"imported students from {args.csv}")
        elif args.command == "release":
            release(root, args.lesson, args.exchange)
            print(f"released {args.lesson}")
        elif args.command == "collect":
            students = collect(root, args.lesson, args.exchange)
            print(f"{args.lesson}: {len(students)} submission(s) in submitted/: {', '.join(map(shown, students))}")
        elif args.command == "zip-collect":
            students = zip_collect(root, args.lesson, args.files, args.regexp, args.force)
            print(f"{args.lesson}: {len(students)} submission(s) in submitted/: {', '.join(map(shown, students))}")
        elif args.command == "feedback":
            files = feedback(root, args.lesson, args.exchange, args.show_hidden_tests, not args.no_release)
            print(f"{args.lesson}: {len(files)} feedback file(s)"
                  + ("" if args.no_release else ", released to the exchange"))
        elif args.command == "rehearsal":
            rehearsal_course(args.dir)
            print(f"rehearsal course in {args.dir}: lessons 01_tiny and 02_other built")
    except ToolError as err:
        print(escaped(f"{args.command} failed: {err}", keep_newlines=True), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
