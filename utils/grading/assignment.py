"""The lesson in the course's gradebook, built by `nbgrader generate_assignment` only when what
builds it changed: grading needs the lesson's cells and hidden tests there, and building them again
for every grading run only rewrote the same rows and release/ with identical bytes.

The build is skipped when the key recorded beside the reference cache (.grading-cache/, which no
kernel sees) is the current one and the gradebook holds each graded cell of the source as it is
now. The key covers the lesson's source folder, the reference's cache key (the source notebook,
the `course` package, the library versions), the code that grades (fingerprint.py),
nbgrader_config.py, the gradebook's URL and the course id."""

from __future__ import annotations

import hashlib
from pathlib import Path

import nbformat
from nbgrader.api import Gradebook, MissingEntry

from utils.errors import ToolError
from utils.lessons import source_notebook
from utils.processes import nbgrader
from utils.grading.fingerprint import fingerprint
from utils.grading.reference_run import cache_key
from utils.grading.settings import CACHE, CourseSettings
from utils.grading.steps.base import is_test_cell
from utils.grading.submissions import regular_files


def build_key(root: Path, lesson: str, settings: CourseSettings) -> str:
    h = hashlib.sha256(cache_key(source_notebook(root, lesson)).encode())
    folder = root / "source" / lesson
    for path in regular_files(folder):
        h.update(path.relative_to(folder).as_posix().encode() + b"\0" + path.read_bytes())
    for name, digest in sorted(fingerprint().items()):
        h.update(f"{name}\0{digest}\n".encode())
    config = root / "nbgrader_config.py"
    h.update(config.read_bytes() if config.is_file() else b"")
    h.update(f"{settings.db_url}\0{settings.course_id}".encode())
    return h.hexdigest()


def in_gradebook(root: Path, lesson: str, settings: CourseSettings) -> bool:
    """Whether the gradebook holds the lesson with each graded cell of its source as it is now."""
    source = source_notebook(root, lesson)
    cells = {c.metadata.nbgrader.grade_id: c.source for c in nbformat.read(str(source), as_version=4).cells
             if is_test_cell(c)}
    try:
        with Gradebook(settings.db_url, settings.course_id) as gb:
            gb.find_assignment(lesson)
            return all(gb.find_source_cell(gid, source.stem, lesson).source.strip() == text.strip()
                       for gid, text in cells.items())
    except MissingEntry:
        return False


def ensure_built(root: Path, lesson: str, settings: CourseSettings) -> bool:
    """Build the lesson into the gradebook unless it is there as it is now; True when it ran."""
    stamp = root / CACHE / f"built-{lesson}.key"
    key = build_key(root, lesson, settings)
    if stamp.is_file() and not stamp.is_symlink() and stamp.read_text() == key and in_gradebook(root, lesson, settings):
        return False
    built = nbgrader(["generate_assignment", lesson, "--force", f"--CourseDirectory.db_url={settings.db_url}"],
                     cwd=root, check=False)
    if built.rc != 0:
        raise ToolError(f"nbgrader generate_assignment {lesson} failed:\n{built.log[-3000:]}")
    stamp.parent.mkdir(parents=True, exist_ok=True)
    stamp.unlink(missing_ok=True)
    stamp.write_text(key)
    return True
