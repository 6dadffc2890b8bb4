"""Where the lessons are: the repository, its lesson folders under source/, each lesson's one source
notebook, and the lessons a command line names. Standard library only (the class server's set-up
imports it before the environment exists)."""

from __future__ import annotations

from pathlib import Path

from utils.errors import ToolError

REPO = Path(__file__).resolve().parents[1]


def lessons(root: Path = REPO) -> list[str]:
    """Lesson folders under source/ that hold a notebook, in teaching order."""
    src = Path(root) / "source"
    if not src.is_dir():
        return []
    return sorted(d.name for d in src.iterdir() if d.is_dir() and any(d.glob("*.ipynb")))


def source_notebook(root: Path, lesson: str) -> Path:
    notebooks = sorted((Path(root) / "source" / lesson).glob("*.ipynb"))
    if len(notebooks) != 1:
        raise ToolError(f"{lesson}: expected exactly one notebook in source/{lesson}, found {len(notebooks)}")
    return notebooks[0]


def resolve_lessons(names: list[str], root: Path = REPO) -> list[str]:
    """The lessons named on a command line (all when none), with a clear error for unknown ones."""
    known = lessons(root)
    if not names:
        return known
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ToolError(f"unknown lesson(s) {', '.join(unknown)}; known: {', '.join(known) or 'none'}")
    return names
