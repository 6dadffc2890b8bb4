"""One result file per graded notebook: what grading decided, as plain data.

The last autograde step (steps/write_result.py, WriteResult) writes it, in the nbgrader process that
graded, once the verdicts are in and nbgrader has saved the scores; a step that fails writes the
reason instead. The runner that ran nbgrader (local, or a Dask task on a worker) reads it and
returns it as it is, and the grader records it (lesson.py): nothing is read back out of a
notebook's outputs or parsed out of a log.

    {"lesson": ..., "student": ..., "notebook": ...,
     "verdicts": {grade_id: [passed, line]},   # every graded test cell, in notebook order
     "notes": [text, ...],                     # what the steps did (never scored)
     "score": points, "max_score": points, "late_penalty": points,
     "time_budget": {"budget_s", "used_s",     # the notebook's time budget (steps/execute.py):
                     "reference_s", "floor_s", # floor + multiple x the reference run, capped by
                     "multiple", "limit_s"},   # notebook_timeout; None without a reference run
     "reason": ""}                             # why it was not graded; then nothing else counts

It lies in .grading-cache/results/LESSON/STUDENT/NOTEBOOK.json of the folder nbgrader graded in,
which no kernel sees: for a grading run, a fresh work folder (work.py) removed once the result is
read, so no file of an earlier run is ever taken for this one's.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from utils.grading.settings import CACHE

RESULTS = "results"


def result_path(root: Path, lesson: str, student: str, notebook: str) -> Path:
    return Path(root) / CACHE / RESULTS / lesson / student / f"{notebook}.json"


def write_result(path: Path, data: dict) -> None:
    """Write `data` to `path` whole or not at all (a reader never sees half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".result-")
    with os.fdopen(fd, "w") as f:
        json.dump(data, f)
    os.replace(tmp, path)


def read_result(path: Path) -> dict | None:
    """The result at `path`, or None where there is none (or it is not one)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def graded(result: dict | None) -> bool:
    """Did grading finish this notebook: a verdict for every graded cell, and no failure?"""
    return bool(result) and not result.get("reason") and isinstance(result.get("verdicts"), dict)


def verdicts(result: dict) -> dict[str, tuple[bool, str]]:
    return {gid: (bool(v[0]), str(v[1])) for gid, v in result.get("verdicts", {}).items()}

