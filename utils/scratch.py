"""Throwaway course directories: a config with a gradebook of its own, and the chosen lessons copied
in. Every tool that builds or grades outside the course (a check, the demo, a benchmark, a test)
starts from one, so the instructor's gradebook is never touched."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from utils.lessons import REPO


def scratch_config(dest: Path, root: Path = REPO, extra: str = "") -> Path:
    """Write dest/nbgrader_config.py: the course's settings (from `root`), but always a gradebook
    of its own (SQLite in `dest`), whatever db_url the course names, then `extra`. Every tool that
    builds or grades in a throwaway course writes its config with this, so a PostgreSQL gradebook
    named in nbgrader_config.py is never touched by a check, a demo, a benchmark or a test."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    text = (Path(root) / "nbgrader_config.py").read_text()
    text += (f"\n\n# --- a scratch course: its own gradebook, never the instructor's ---\n"
             f"c.CourseDirectory.db_url = {'sqlite:///' + str(dest.resolve() / 'gradebook.db')!r}\n{extra}")
    path = dest / "nbgrader_config.py"
    path.write_text(text)
    return path


def scratch_course(root: Path, lesson_names: list[str], dest: Path | None = None, *,
                   release: bool = False, extra_config: str = "") -> Path:
    """A throwaway course directory (at `dest`, or a new temporary folder) with its own SQLite
    gradebook (scratch_config) and the chosen lessons' source/ (and release/ when asked)."""
    tmp = Path(dest) if dest is not None else Path(tempfile.mkdtemp(prefix="course-scratch-"))
    scratch_config(tmp, root, extra_config)
    ignore = shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__")
    for name in lesson_names:
        shutil.copytree(Path(root) / "source" / name, tmp / "source" / name, ignore=ignore)
        if release and (Path(root) / "release" / name).is_dir():
            shutil.copytree(Path(root) / "release" / name, tmp / "release" / name, ignore=ignore)
    return tmp
