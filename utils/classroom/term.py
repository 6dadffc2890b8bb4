"""The instructor's steps around grading through a term, over nbgrader (docs/instructors.md):

    python -m utils.classroom.term roster students.csv          # nbgrader db student import (roster.py)
    python -m utils.classroom.term release LESSON               # generate_assignment + release_assignment (release.py)
    python -m utils.classroom.term collect LESSON               # collect --update from the exchange, owners checked
    python -m utils.classroom.term zip-collect LESSON FILE...   # LMS downloads (zip or .ipynb) -> submitted/
    python -m utils.classroom.term feedback LESSON [--show-hidden-tests]   # generate + release feedback (feedback.py)
    python -m utils.classroom.term rehearsal DIR                # a tiny two-lesson course to rehearse on (rehearsal.py)

Grading itself is `python -m utils.grading`, the class report `python -m utils.grading.report`.
Every command takes --exchange DIR (default: nbgrader's Exchange.root,
/usr/local/share/nbgrader/exchange, or what an nbgrader_config.py sets) and --course DIR (default:
this repository).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from utils.classroom.feedback import feedback
from utils.classroom.rehearsal import rehearsal_course
from utils.classroom.release import release
from utils.classroom.roster import import_roster
from utils.classroom.collect import collect
from utils.classroom.lms_import import LMS_REGEXP, zip_collect
from utils.errors import ToolError
from utils.escaping import escaped, shown
from utils.lessons import REPO


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m utils.classroom.term", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--course", type=Path, default=REPO, help="course directory (default: this repository)")
    p.add_argument("--exchange", type=Path, default=None, help="nbgrader exchange folder")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("roster", help="import the class list").add_argument("csv", type=Path)
    sub.add_parser("release", help="build a lesson and release it to the exchange").add_argument("lesson")
    sub.add_parser("collect", help="collect submissions from the exchange").add_argument("lesson")
    z = sub.add_parser("zip-collect", help="collect submissions downloaded from an LMS")
    z.add_argument("lesson")
    z.add_argument("files", nargs="+", type=Path)
    z.add_argument("--regexp", default=LMS_REGEXP)
    z.add_argument("--force", action="store_true", help="replace earlier extracted/collected files")
    f = sub.add_parser("feedback", help="generate feedback and release it to the exchange")
    f.add_argument("lesson")
    f.add_argument("--show-hidden-tests", action="store_true")
    f.add_argument("--no-release", action="store_true", help="only write feedback/, do not release it")
    sub.add_parser("rehearsal", help="a throwaway course of two tiny lessons").add_argument("dir", type=Path)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    root = args.course
    try:
        if args.command == "roster":
            ids = import_roster(root, args.csv)
            print(f"imported {len(ids)} student(s) from {args.csv}")
        elif args.command == "release":
            notebooks = release(root, args.lesson, args.exchange)
            print(f"released {args.lesson}: {', '.join(p.name for p in notebooks)}")
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
