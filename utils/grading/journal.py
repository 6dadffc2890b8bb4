"""What a grading run that stopped had recorded (Journal), so that the next run grades only the rest.

One line per submission, appended once its grades are in the course's gradebook and its files in
autograded/ and feedback/: the lesson, the student, what decided the grade (`lesson_key`: the code
that grades, the reference, the options) and the submitted files' hashes, with the submission's
result (utils/grading/result_file.py). A run that stops (its Dask scheduler lost, the grader killed)
leaves the journal in .grading-cache/; the next run keeps each grade whose key and files are
unchanged instead of grading it again; a run that grades every lesson it was asked for removes it."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from utils.grading.settings import CACHE

JOURNAL = "journal.jsonl"   # in .grading-cache/


def lesson_key(expected: dict[str, str], reference_key: str, decided_by: list) -> str:
    """What decides a lesson's grades and feedback: the files and tools that grade, the
    reference's cache key (the source notebook, the course package, the libraries) and the rest
    (lesson.Grading.decided_by: the options, the gradebook, the course id)."""
    return hashlib.sha256(json.dumps([expected, reference_key, decided_by], sort_keys=True).encode()).hexdigest()


def _digest(tree: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(tree, sort_keys=True).encode()).hexdigest()


@dataclass
class Journal:
    root: Path

    @property
    def path(self) -> Path:
        return self.root / CACHE / JOURNAL

    def entries(self) -> dict[tuple[str, str], dict]:
        found = {}
        try:
            lines = self.path.read_text().splitlines()
        except FileNotFoundError:
            return found
        for line in lines:
            try:
                e = json.loads(line)
                found[(e["lesson"], e["student"])] = e
            except (ValueError, KeyError, TypeError):   # a line cut short when the grader died
                continue
        return found

    def kept(self, lesson: str, key: str, before: dict[str, dict[str, str]]) -> dict[str, dict]:
        """{student: result} of `lesson`'s submissions that an earlier, unfinished run recorded and
        whose grades still hold (same key, same files, the graded notebook still in autograded/)."""
        entries = self.entries()
        kept = {}
        for s, tree in before.items():
            e = entries.get((lesson, s))
            folder = self.root / "autograded" / s / lesson
            if e and e.get("key") == key and e.get("submitted") == _digest(tree) \
                    and isinstance(e.get("result"), dict) and list(folder.glob("*.ipynb")):
                kept[s] = e["result"]
        return dict(sorted(kept.items()))

    def add(self, lesson: str, key: str, student: str, tree: dict[str, str], result: dict) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = {"lesson": lesson, "student": student, "key": key, "submitted": _digest(tree), "result": result}
        with open(self.path, "a") as f:
            f.write(json.dumps(line) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)
