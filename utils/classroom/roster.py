"""The class list into the gradebook: nbgrader's `db student import`, after every id in the file
has passed the one rule of every door (utils/grading/student_id.py)."""

from __future__ import annotations

import csv
from pathlib import Path

from utils.classroom.course_commands import in_course
from utils.errors import ToolError
from utils.escaping import shown
from utils.grading.student_id import id_problem


def import_roster(root: Path, csv_path: Path) -> list[str]:
    """Students from a CSV with columns id,first_name,last_name,email (nbgrader's format); returns
    their ids. A file holding an id the course does not take in is refused whole, each such line
    named, before anything is imported."""
    problems, ids = [], []
    with open(csv_path, newline="", encoding="utf-8-sig") as f:
        for line, row in enumerate(csv.DictReader(f), start=2):
            why = id_problem(row.get("id"))
            if why:
                problems.append(f"line {line}: {why}")
            else:
                ids.append(row["id"])
    if problems:
        raise ToolError(f"{shown(str(csv_path))}: nothing imported, {len(problems)} student id(s) refused:\n  "
                        + "\n  ".join(problems[:20]) + ("\n  ..." if len(problems) > 20 else ""))
    in_course(["db", "student", "import", str(Path(csv_path).resolve())], root)
    return ids
