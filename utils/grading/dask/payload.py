"""What the reference's tasks carry (the workers share no disk with the grader): the lesson's config
and source/ folder, and the course folder a worker makes of them; and the limit on a submission's
files, which its grading task carries packed (work.pack) with what its work folder is made of
(work.lesson_files)."""

from __future__ import annotations

from pathlib import Path

from utils.grading.settings import CACHE
from utils.grading.submissions import regular_files
from utils.grading.work import pack, unpack

SUBMISSION_LIMIT = 64 * 2**20   # bytes of one submission's files a task carries


def tree_size(folder: Path) -> int:
    return sum(p.stat().st_size for p in regular_files(folder))


def lesson_spec(root: Path, lesson: str) -> dict:
    """What the reference's tasks carry: nbgrader_config.py and the lesson's source/ folder; then
    the reference's cache key as a worker computed it (key, libraries, keyed_by)."""
    root = Path(root)
    return {"lesson": lesson, "config": (root / "nbgrader_config.py").read_bytes(),
            "source": pack(root / "source" / lesson), "key": None, "libraries": ""}


def course_here(spec: dict, folder: Path) -> Path:
    """A course folder on this worker made of what a reference task carries."""
    folder.mkdir(parents=True)
    (folder / "nbgrader_config.py").write_bytes(spec["config"])
    unpack(spec["source"], folder / "source" / spec["lesson"])
    (folder / CACHE).mkdir()
    return folder
