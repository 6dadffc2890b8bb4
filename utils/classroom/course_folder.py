"""The course on the class server: the clone the class is set up from closed to everyone but its
owner (it holds source/, every lesson's solutions and hidden tests), and the instructor's own
copy of the course, theirs alone."""

from __future__ import annotations

import os
import pwd
import shutil
from pathlib import Path

from utils.classroom.owned import closed_to_others, folder
from utils.classroom.room import REPO, Classroom

# what a copy of the checkout leaves out: git's data, environments, caches, and any class's results
NOT_COPIED = (".git", ".venv", "__pycache__", ".ipynb_checkpoints", ".pytest_cache", "autograded", "submitted",
              "feedback", "gradebook.db", "grades.csv", "build", "*.egg-info", ".grading-cache", "refused")


def close_checkout(room: Classroom, repo: Path = REPO) -> None:
    """Closed to everyone but its owner (and root), whoever cloned it, before anything else."""
    closed_to_others(room, repo, ": the checkout holds source/, every lesson's hidden tests; no student may read it")


def course_directory(room: Classroom) -> None:
    """The instructor's course directory: a copy of this checkout when missing, every file the
    instructor's, the folder mode 0700 (source/ and the gradebook hold the answers)."""
    pw = pwd.getpwnam(room.instructor)
    course = Path(room.course_dir)
    if not course.exists():
        shutil.copytree(REPO, course, ignore=shutil.ignore_patterns(*NOT_COPIED), symlinks=True)
        room.did(f"copied the course repository to {course}")
    changed = 0
    for dirpath, dirnames, filenames in os.walk(course):
        for p in [dirpath, *(os.path.join(dirpath, n) for n in dirnames + filenames)]:
            if os.lstat(p).st_uid != pw.pw_uid:
                os.lchown(p, pw.pw_uid, pw.pw_gid)
                changed += 1
    if changed:
        room.did(f"{course}: {changed} file(s) handed to {room.instructor}")
    folder(room, course, uid=pw.pw_uid, mode=0o700, what="", create=False)
