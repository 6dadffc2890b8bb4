"""What travels with a task (the workers share no disk with the grader): the lesson's config and
source/ folder, the fingerprint, the settings, the reference, the gradebook template and the
submission's regular files; and the course folder a worker makes of them."""

from __future__ import annotations

import os
from pathlib import Path

from utils.grading.dask.worker_check import fingerprint
from utils.grading.run import CACHE

SUBMISSION_LIMIT = 64 * 2**20   # bytes of one submission's files a task carries


def _tree(folder: Path) -> list[Path]:
    """The regular files under `folder`, as utils.grading.run copies a submission: symbolic links and
    devices are never followed, nor notebooks' checkpoints and byte code taken."""
    found = []
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if not os.path.islink(os.path.join(dirpath, d))
                             and d not in (".ipynb_checkpoints", "__pycache__"))
        for name in sorted(filenames):
            path = Path(dirpath) / name
            if path.is_file() and not path.is_symlink():
                found.append(path)
    return found


def tree_size(folder: Path) -> int:
    return sum(p.stat().st_size for p in _tree(folder))


def pack(folder: Path) -> dict[str, bytes]:
    """{path inside `folder`: bytes} of its regular files (_tree)."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in _tree(folder)}


def unpack(files: dict[str, bytes], folder: Path) -> None:
    for name, data in files.items():
        rel = Path(name)
        if rel.is_absolute() or ".." in rel.parts:
            raise RuntimeError(f"a task carried a file outside its folder: {name!r}")
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes(data)


def lesson_spec(root: Path, lesson: str, settings, extra: list[str], watchdog: float) -> dict:
    """What every task of `lesson` carries: nbgrader_config.py, the lesson's source/ folder, the
    fingerprint, the settings; then the reference's cache key (key_task), the reference, the
    gradebook template and the submission."""
    root = Path(root)
    return {"lesson": lesson, "config": (root / "nbgrader_config.py").read_bytes(),
            "source": pack(root / "source" / lesson), "key": None, "libraries": "",
            "expected": fingerprint(), "sandbox": (settings.sandbox, settings.bwrap),
            "course_id": settings.course_id, "extra": list(extra), "watchdog": watchdog}


def course_here(spec: dict, folder: Path) -> Path:
    """A course folder on this worker made of what the task carries."""
    folder.mkdir(parents=True)
    (folder / "nbgrader_config.py").write_bytes(spec["config"])
    unpack(spec["source"], folder / "source" / spec["lesson"])
    if spec.get("reference") is not None:
        (folder / CACHE).mkdir()
        (folder / CACHE / f"{spec['key']}.json").write_bytes(spec["reference"])
    if spec.get("submission") is not None:
        unpack(spec["submission"], folder / "submitted" / spec["student"] / spec["lesson"])
    return folder
