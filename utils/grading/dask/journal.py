"""What a cluster run that stopped had recorded (Journal), and the outcomes the next run keeps."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

import nbformat

from utils.grading.run import CACHE
from utils.grading.steps.base import read_notes
from utils.grading.steps.verdicts import read_verdicts

JOURNAL = "cluster-journal.jsonl"   # in .grading-cache/


def lesson_key(expected: dict[str, str], reference_key: str, extra: list[str]) -> str:
    """What decides a lesson's grades on the cluster: the files and tools the workers must share,
    the reference's cache key (the source notebook, the course package, the libraries), the options."""
    return hashlib.sha256(json.dumps([expected, reference_key, list(extra)], sort_keys=True).encode()).hexdigest()


def _digest(tree: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(tree, sort_keys=True).encode()).hexdigest()


@dataclass
class Journal:
    """What a cluster run recorded, one line per submission as it is recorded (after its grades
    are in the gradebook), in the course's .grading-cache/. A run that stops (its scheduler lost)
    leaves it behind, and the next run keeps those grades instead of grading them again where
    nothing that decides them changed (the submitted files, the course files and tools, the
    reference, the options); a run that grades every lesson removes it."""
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

    def kept(self, lesson: str, key: str, before: dict[str, dict[str, str]]) -> list[str]:
        """The students of `lesson` whose grades an earlier, unfinished run recorded and still hold."""
        entries = self.entries()
        kept = []
        for s, tree in before.items():
            e = entries.get((lesson, s))
            folder = self.root / "autograded" / s / lesson
            if e and e.get("key") == key and e.get("submitted") == _digest(tree) and list(folder.glob("*.ipynb")):
                kept.append(s)
        return sorted(kept)

    def add(self, lesson: str, key: str, student: str, tree: dict[str, str]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a") as f:
            f.write(json.dumps({"lesson": lesson, "student": student, "key": key, "submitted": _digest(tree)}) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)


def resume(root: Path, out) -> None:
    """The outcome of a submission graded by an earlier run: its verdicts from autograded/."""
    nb = nbformat.read(str(next((root / "autograded" / out.student / out.lesson).glob("*.ipynb"))), as_version=4)
    out.status, out.verdicts = "graded", read_verdicts(nb)
    out.notes += [n["text"] for n in read_notes(nb) if isinstance(n.get("text"), str)]
    out.notes.append("graded and recorded by an earlier run on the cluster that stopped; kept, not graded again")
