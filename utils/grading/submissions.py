"""The submissions of one lesson, read before anything runs: which students submitted, which
notebook of each folder to grade (a missing, unreadable, linked or other lesson's notebook scores 0
with the reason), what nbgrader will repair while grading, and the hashes that prove grading never
changed a submitted file. Every file here is hostile data: nothing is followed, executed or believed."""

from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from utils.escaping import escaped, shown
from utils.lessons import lessons, source_notebook
from utils.notebooks import nbgrader_meta
from utils.grading.steps.well_formed import well_formed
from utils.grading.student_id import id_problem


@dataclass
class Outcome:
    """What happened to one student's submission of one lesson."""
    lesson: str
    student: str
    status: str = "pending"          # graded | zero
    reason: str = ""                 # why a zero (missing, corrupt, other lesson, grading failed)
    notes: list[str] = field(default_factory=list)
    score: float | None = None
    max_score: float | None = None
    file: str | None = None          # the notebook to grade when it was saved under another name
    verdicts: dict[str, tuple[bool, str]] = field(default_factory=dict)   # grade_id -> (passed, line)
    refused_id: bool = False         # a student id the course never takes in: nothing is recorded for it

    def zero(self, reason: str) -> "Outcome":
        self.status, self.reason = "zero", reason
        return self

    def line(self) -> str:
        score = f"{self.score:g}/{self.max_score:g}" if self.score is not None and self.max_score else "-"
        # every name quoted and every character that could break a line escaped: a student or a
        # file named with a newline must not forge a line of the report
        text = f"{shown(self.lesson)}  {shown(self.student)}: {score}"
        if self.status == "zero":
            text += f"  ZERO: {escaped(self.reason)}"
        for note in self.notes:
            text += f"\n    - {escaped(note)}"
        return text


def submitted_students(root: Path, lesson: str) -> list[str]:
    base = Path(root) / "submitted"
    if not base.is_dir():
        return []
    return sorted(d.name for d in base.iterdir() if (d / lesson).is_dir())


def _ids(nb) -> list[str]:
    return [nbgrader_meta(c).get("grade_id") for c in nb.cells if nbgrader_meta(c).get("grade_id")]


def lesson_ids(root: Path) -> dict[str, tuple[str, set[str]]]:
    """{lesson: (notebook file name, its grade ids)} for every lesson in source/."""
    known = {}
    for name in lessons(root):
        path = source_notebook(root, name)
        try:
            known[name] = (path.name, set(_ids(nbformat.read(str(path), as_version=4))))
        except Exception:  # noqa: BLE001 - a broken source notebook is check's business
            known[name] = (path.name, set())
    return known


def _find_notebook(out: Outcome, folder: Path, nb_name: str, known, refused: dict[str, str]) -> Path | None:
    """The notebook to grade in a submission folder, or None (and `out` says why)."""
    others = sorted(p.name for p in folder.glob("*.ipynb") if p.name != nb_name and p.name not in refused)
    if nb_name in refused:
        out.zero(f"{shown(nb_name)} is {refused[nb_name]}; only regular files are graded (submit the notebook itself)")
        return None
    if refused:
        out.notes.append("refused (not copied for grading): " + ", ".join(f"{shown(k)} ({v})" for k, v in refused.items()))
    if (folder / nb_name).exists():
        if others:
            out.notes.append(f"other notebooks ignored: {', '.join(map(shown, others))}")
        return folder / nb_name
    for other in others:
        for name, (other_nb, _) in known.items():
            if name != out.lesson and other == other_nb:
                out.zero(f"submitted {shown(other)}, the notebook of lesson {name}, instead of {nb_name}")
                return None
    if len(others) == 1:
        out.file = others[0]
        out.notes.append(f"graded {shown(others[0])}, the only notebook in the folder, as {nb_name}")
        return folder / others[0]
    found = ", ".join(sorted(shown(p.name) for p in folder.iterdir() if p.name != "timestamp.txt")) or "nothing"
    out.zero(f"no {nb_name} in the submission (found: {found})")
    return None


def _unusable_folder(root: Path, lesson: str, student: str) -> str | None:
    """Why the submission's folder cannot be graded as it is, or None."""
    base = Path(root) / "submitted" / student
    for folder, where in ((base, shown(student)), (base / lesson, f"{shown(student)}/{lesson}")):
        if folder.is_symlink():
            return f"submitted/{where} is a symbolic link; only regular folders are graded"
    return None


def preflight(root: Path, lesson: str, student: str, known=None) -> Outcome:
    """Look at a submission before grading: is the notebook there, a regular file, readable, of this
    lesson? Also notes deleted, edited or duplicated cells (nbgrader repairs those while grading)."""
    known = known or lesson_ids(root)
    out = Outcome(lesson, student)
    folder = Path(root) / "submitted" / student / lesson
    refused = id_problem(student)
    if refused:   # never graded nor recorded under that name
        out.refused_id = True
        return out.zero(f"{refused}: rename the folder under submitted/ (nothing was recorded for it)")
    unusable = _unusable_folder(root, lesson, student)
    if unusable:
        return out.zero(unusable)
    nb_name, ids = known[lesson]
    path = _find_notebook(out, folder, nb_name, known, _irregular(folder))
    if path is None:
        return out
    try:
        nb = well_formed(nbformat.read(str(path), as_version=4))   # any type in any field: typed
    except Exception as err:  # noqa: BLE001 - any unreadable file is reported the same way
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        return out.zero(f"{shown(path.name)} is not a readable notebook ({escaped(first[:160])})")
    sub_ids = set(_ids(nb))
    if not sub_ids & ids:
        for name, (other_nb, other_ids) in known.items():
            if name != lesson and other_ids and sub_ids & other_ids:
                return out.zero(f"{shown(path.name)} holds the notebook of lesson {name} ({other_nb}), not of {lesson}")
        if out.file:
            return out.zero(f"no {nb_name} in the submission; {shown(out.file)} holds none of its graded cells")
    release = Path(root) / "release" / lesson / nb_name
    release_nb = nbformat.read(str(release), as_version=4) if release.exists() else None
    out.notes += _repairs(release_nb, nb)
    return out


def safe_preflight(root: Path, lesson: str, student: str, known) -> Outcome:
    """preflight, where a submission that still breaks it scores 0 with a one-line reason and
    every other submission is graded."""
    try:
        return preflight(root, lesson, student, known)
    except Exception as err:  # noqa: BLE001 - the submission is hostile data
        line = (str(err).strip().splitlines() or [type(err).__name__])[0][:160]
        out = Outcome(lesson, student, refused_id=id_problem(student) is not None)
        return out.zero(f"the submission could not be read for grading ({line})")


def _irregular(folder: Path) -> dict[str, str]:
    """{relative path: what it is} for every entry of a submission that is not a regular file or folder."""
    found = {}
    for p in sorted(folder.rglob("*")):
        if p.is_symlink():
            found[p.relative_to(folder).as_posix()] = "a symbolic link"
        elif not (p.is_file() or p.is_dir()):
            found[p.relative_to(folder).as_posix()] = "not a regular file"
    return found


def _repairs(release, nb) -> list[str]:
    """Differences from the release that nbgrader repairs while grading, named for the report."""
    if release is None:
        return []
    notes = []
    submitted: dict[str, list] = {}
    for cell in nb.cells:
        if nbgrader_meta(cell).get("grade_id"):
            submitted.setdefault(nbgrader_meta(cell)["grade_id"], []).append(cell)
    for gid, copies in submitted.items():
        if len(copies) > 1:
            notes.append(f"cell '{gid}' appears {len(copies)} times (copied cell); the copies are "
                         f"ignored and the last one is graded")
    for cell in release.cells:
        meta = nbgrader_meta(cell)
        gid = meta.get("grade_id")
        if not gid or meta.get("solution"):
            continue
        if gid not in submitted:
            if meta.get("grade"):
                notes.append(f"test cell '{gid}' was deleted; restored from the source and graded")
            continue
        mine = submitted[gid][-1]
        if (meta.get("grade") or meta.get("locked")) and mine.source.strip() != cell.source.strip():
            notes.append(f"locked cell '{gid}' was edited; the original was restored before grading")
        elif meta.get("grade") and nbgrader_meta(mine).get("points") != meta.get("points"):
            notes.append(f"the points of cell '{gid}' were edited; the original points were used")
    return notes


def regular_files(folder: Path) -> list[Path]:
    """The regular files under `folder`: symbolic links and devices are never followed, nor
    notebooks' checkpoints and byte code taken."""
    found = []
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if not os.path.islink(os.path.join(dirpath, d))
                             and d not in (".ipynb_checkpoints", "__pycache__"))
        for name in sorted(filenames):
            path = Path(dirpath) / name
            if path.is_file() and not path.is_symlink():
                found.append(path)
    return found


def hash_tree(folder: Path) -> dict[str, str]:
    """{path inside `folder`: sha256} of every regular file (a submission before and after
    grading); nothing behind a link, the folder's own included."""
    if Path(folder).is_symlink() or Path(folder).parent.is_symlink():
        return {}
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and not p.is_symlink()}


def copy_submission(src: Path, dest: Path, rename: str | None, nb_name: str) -> None:
    """Copy regular files and folders only (symbolic links and devices are never followed); the
    notebook saved under another name takes the lesson's."""
    def ignore(folder, names):
        return [n for n in names if os.path.islink(os.path.join(folder, n))
                or not (os.path.isfile(os.path.join(folder, n)) or os.path.isdir(os.path.join(folder, n)))]

    shutil.copytree(src, dest, ignore=ignore)
    if rename:
        (dest / rename).rename(dest / nb_name)
