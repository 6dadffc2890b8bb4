"""Submissions downloaded from an LMS into submitted/ (`python -m utils.classroom.workflow
zip-collect LESSON FILE...`).

A download is a notebook the LMS named, or the LMS's archive (.zip) of such files; each file the
LMS named is one student's upload. The student id comes only from that name (read with the
file-name pattern by nbgrader's FileNameCollectorPlugin and the course's id rule): an upload that is
itself an archive belongs whole to its student, whatever the names inside it say.

Each student is read on their own, in memory, under caps per student (`ImportCaps`, the numbers of
collect's): archives inside an upload, entries, and bytes, checked on the sizes an archive declares
before anything of it is read and again on the bytes as they are read (a zip's declared size can
lie). A student whose uploads break a rule (an entry named with `..` or an absolute path, a link or
device in an archive, two notebooks of one name, over a cap, an archive that cannot be read) is
refused alone: named with the reason in the printed list and in refused/LESSON.txt, while every
other student is collected. Nothing of a student is written until all their uploads passed, and
then only the lesson's notebooks, under names the course chose (never a path from an archive).
"""

from __future__ import annotations

import datetime
import io
import logging
import os
import re
import shutil
import stat
import zipfile
import zlib
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from nbgrader.plugins.zipcollect import FileNameCollectorPlugin
from nbgrader.utils import find_all_notebooks, parse_utc

from utils.classroom.collect import REFUSED, OwnerCheckedCollect
from utils.errors import ToolError
from utils.escaping import escaped, shown
from utils.grading.student_id import id_problem

# LMS download names: Canvas "doe_123_456_two_phases.ipynb" (also "doe_LATE_123_456_..." and a
# "-1" suffix for a resubmission), or plainly "doe_two_phases.ipynb". student_id is the part
# before the first underscore; file_id the notebook name.
LMS_REGEXP = r".*/(?P<student_id>[^/_]+)_(?:LATE_)?(?:\d+_\d+_)?(?P<file_id>[^/]+?)(?:-\d+)?\.ipynb$"
ZIP_COLLECTOR = "utils.classroom.lms_import.IdCheckedCollector"
ARCHIVES = (".zip",)
UNOPENED = (".gz", ".tgz", ".tar", ".bz2", ".xz", ".7z", ".rar")   # archives the import does not open


@dataclass(frozen=True)
class ImportCaps:
    """What one student's uploads may hold, all together: bytes read (the archives and what they
    hold), entries (files and folders in archives), and archives inside an upload (depth 1: the
    upload is an archive; 2: it holds another)."""
    max_bytes: int = int(OwnerCheckedCollect.max_submission_mb.default_value * 1e6)
    max_entries: int = OwnerCheckedCollect.max_submission_files.default_value
    max_depth: int = 2


@dataclass
class ImportResult:
    collected: list[str]                                    # students with a submission of the lesson now
    refused: dict[str, str] = field(default_factory=dict)   # student -> why nothing of theirs was taken
    unattributed: list[str] = field(default_factory=list)   # uploads with no usable student id, and why
    unmatched: list[str] = field(default_factory=list)      # notebooks the file-name pattern does not match
    left_out: list[str] = field(default_factory=list)       # files in uploads that are not the lesson's


class IdCheckedCollector(FileNameCollectorPlugin):
    """nbgrader's file-name collector, where a file whose student id the course does not take in
    (utils/grading/student_id.py) is skipped with a REFUSED line naming why."""

    def collect(self, submitted_file: str) -> dict | None:
        info = super().collect(submitted_file)
        why = id_problem(info.get("student_id")) if info else None
        if why:
            self.log.warning(escaped(f"{REFUSED} {shown(os.path.basename(submitted_file))}: {why}; not collected"))
            return None
        return info


class Refused(Exception):
    """One student's uploads broke a rule: nothing of theirs is collected."""


@dataclass
class _Upload:
    name: str            # as the instructor sees it: DOWNLOAD or DOWNLOAD/ENTRY
    declared: int        # its size as its container says
    open: object         # () -> a binary stream of its bytes
    problem: str | None  # why its entry is unsafe, if it is
    file_id: str = ""
    timestamp: object = None


def _entry_problem(info: zipfile.ZipInfo) -> str | None:
    """Why a zip entry is refused on its own (None when it is not): a name that leaves the folder
    it would be unpacked in, or an entry that is not a plain file or folder."""
    name = info.filename
    parts = name.replace("\\", "/").split("/")
    if name.startswith(("/", "\\")) or re.match(r"[A-Za-z]:", name) or ".." in parts or "\0" in name:
        return f"the archive entry {shown(name)} has an unsafe name (an absolute path or '..')"
    kind = stat.S_IFMT(info.external_attr >> 16)
    if kind and kind not in (stat.S_IFREG, stat.S_IFDIR):
        what = "a link" if kind == stat.S_IFLNK else "a device, pipe or socket"
        return f"the archive entry {shown(name)} is {what}, not a plain file"
    return None


class _Student:
    """One student's uploads read under the caps; `notebooks` maps a notebook's name in
    submitted/ to its bytes."""

    def __init__(self, caps: ImportCaps, released: set[str], result: ImportResult):
        self.caps, self.released, self.result = caps, released, result
        self.bytes_left, self.entries_left = caps.max_bytes, caps.max_entries
        self.notebooks: dict[str, tuple[bytes, str]] = {}
        self.others: dict[str, tuple[bytes, str]] = {}   # plain-named notebooks the release does not name
        self.timestamp = None

    def read(self, stream, declared: int, name: str) -> bytes:
        if declared > self.bytes_left:
            raise Refused(f"{shown(name)} declares {declared} bytes, over the cap of {self.caps.max_bytes} "
                          "bytes per student")
        data = bytearray()
        with stream:
            while chunk := stream.read(min(1 << 20, self.bytes_left - len(data) + 1)):
                data += chunk
                if len(data) > self.bytes_left:
                    raise Refused(f"{shown(name)} holds more than the cap of {self.caps.max_bytes} bytes per "
                                  f"student (it declared {declared})")
        self.bytes_left -= len(data)
        return bytes(data)

    def take(self, up: _Upload, depth: int = 0) -> None:
        if up.problem:
            raise Refused(up.problem)
        lower = up.name.lower()
        if lower.endswith(".ipynb"):
            self._notebook(up.file_id or os.path.basename(up.name.replace("\\", "/")), up, depth)
        elif lower.endswith(ARCHIVES):
            self._archive(up, depth + 1)
        elif lower.endswith(UNOPENED):
            raise Refused(f"{shown(up.name)} is an archive the import does not open (only .zip)")
        else:
            self.result.left_out.append(f"{shown(up.name)} (not a notebook)")

    def _notebook(self, file_id: str, up: _Upload, depth: int) -> None:
        plain = re.fullmatch(r"[\w@+-][\w.@+-]*\.ipynb", file_id) is not None
        if self.released and file_id not in self.released:
            if plain and file_id not in self.others:   # kept aside: graded only if it is the one notebook
                self.others[file_id] = (self.read(up.open(), up.declared, up.name), up.name)
            else:
                self.result.left_out.append(f"{shown(up.name)} (not a notebook of the lesson)")
            return
        if not plain and not self.released:
            self.result.left_out.append(f"{shown(up.name)} (not a notebook's plain name)")
            return
        data = self.read(up.open(), up.declared, up.name)
        if file_id in self.notebooks:
            first = self.notebooks[file_id][1]
            newer = depth == 0 and up.timestamp is not None and self.timestamp is not None and up.timestamp > self.timestamp
            if not newer:
                raise Refused(f"two notebooks {file_id}: {shown(first)} and {shown(up.name)}; which one is the "
                              "submission is unclear (ask for one)")
        self.notebooks[file_id] = (data, up.name)
        if up.timestamp is not None and (self.timestamp is None or up.timestamp > self.timestamp):
            self.timestamp = up.timestamp

    def _archive(self, up: _Upload, depth: int) -> None:
        if depth > self.caps.max_depth:
            raise Refused(f"{shown(up.name)} is an archive {depth} deep in an upload, over the cap of "
                          f"{self.caps.max_depth}")
        data = self.read(up.open(), up.declared, up.name)
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as zf:
                entries = zf.infolist()
                if len(entries) > self.entries_left:
                    raise Refused(f"{shown(up.name)} holds {len(entries)} entries; with the student's others "
                                  f"over the cap of {self.caps.max_entries} per student")
                declared = sum(e.file_size for e in entries)
                if declared > self.bytes_left:
                    raise Refused(f"{shown(up.name)} declares {declared} bytes unpacked, over the cap of "
                                  f"{self.caps.max_bytes} bytes per student")
                self.entries_left -= len(entries)
                for e in entries:
                    if not e.is_dir() or _entry_problem(e):
                        self.take(_Upload(f"{up.name}/{e.filename}", e.file_size, lambda e=e: zf.open(e),
                                          _entry_problem(e)), depth)
        except (zipfile.BadZipFile, zipfile.LargeZipFile, RuntimeError, NotImplementedError, EOFError,
                zlib.error, OSError, ValueError) as err:
            raise Refused(f"{shown(up.name)} could not be read as a zip ({type(err).__name__}: "
                          f"{escaped(' '.join(str(err).split())[:160])})") from None


def _uploads(downloads: list[Path], extracted: Path, stack: ExitStack, result: ImportResult) -> list[tuple[str, _Upload]]:
    """Every upload the LMS named, with the path the file-name pattern reads (the one nbgrader's
    zip_collect would have extracted it to)."""
    found = []
    for path in downloads:
        path = Path(path)
        if path.suffix.lower() in ARCHIVES:
            try:
                zf = stack.enter_context(zipfile.ZipFile(path))
                entries = zf.infolist()
            except (zipfile.BadZipFile, OSError) as err:
                result.unattributed.append(f"{shown(path.name)}: not a readable zip ({type(err).__name__}); "
                                           "nothing in it collected")
                continue
            for e in entries:
                if e.is_dir() and not _entry_problem(e):
                    continue
                up = _Upload(f"{path.name}/{e.filename}", e.file_size, lambda zf=zf, e=e: zf.open(e), _entry_problem(e))
                found.append((os.path.join(extracted, path.stem, e.filename), up))
        else:
            up = _Upload(path.name, path.stat().st_size, lambda path=path: open(path, "rb"), None)
            found.append((os.path.join(extracted, path.name), up))
    return found


def lms_import(root: Path, lesson: str, downloads: list[Path], regexp: str = LMS_REGEXP, force: bool = False,
               caps: ImportCaps = ImportCaps()) -> ImportResult:
    """Submissions downloaded from an LMS (a zip of uploads, or uploads) into submitted/. The
    downloads are copied to downloaded/LESSON/archive/ and never changed."""
    root = Path(root).resolve()
    missing = [str(p) for p in downloads if not Path(p).is_file()]
    if missing:
        raise ToolError(f"not a file: {', '.join(shown(m) for m in missing)}")
    base = root / "downloaded" / lesson
    (base / "archive").mkdir(parents=True, exist_ok=True)
    for path in downloads:
        shutil.copy2(path, base / "archive" / Path(path).name)
    release = root / "release" / lesson
    released = set(find_all_notebooks(str(release))) if release.is_dir() else set()
    quiet = logging.getLogger("utils.classroom.lms_import.collector")
    quiet.addHandler(logging.NullHandler())
    quiet.propagate = False
    collector = IdCheckedCollector(named_regexp=regexp, log=quiet)
    result = ImportResult(collected=[])
    with ExitStack() as stack:
        by_student: dict[str, list[_Upload]] = {}
        for path, up in _uploads(downloads, base / "extracted", stack, result):
            is_archive = path.lower().endswith(ARCHIVES)
            as_named = path[: -len(".zip")] + ".ipynb" if is_archive else path
            if not as_named.lower().endswith(".ipynb"):
                result.left_out.append(f"{shown(up.name)} (not a notebook or a .zip)")
                continue
            info = collector.collect(as_named)
            if not info:
                match = re.match(regexp, as_named)
                why = id_problem(match.groupdict().get("student_id")) if match else None
                (result.unattributed.append(f"{shown(up.name)}: {why}") if why else result.unmatched.append(shown(up.name)))
                continue
            up.file_id = "" if is_archive else os.path.splitext(info["file_id"])[0] + ".ipynb"
            try:
                up.timestamp = parse_utc(info["timestamp"]) if info.get("timestamp") else None
            except Exception:   # dateutil raises several kinds on garbage
                up.timestamp = None
            by_student.setdefault(info["student_id"], []).append(up)
        taken = {}
        for student, uploads in by_student.items():
            one = _Student(caps, released, result)
            try:
                for up in uploads:
                    one.take(up)
                if not one.notebooks and len(one.others) == 1:   # grading takes the one notebook there is
                    one.notebooks = one.others
                else:
                    result.left_out += [f"{shown(name)} (not a notebook of the lesson)" for _, name in one.others.values()]
                if not one.notebooks:
                    raise Refused("no notebook of the lesson in " + ", ".join(shown(u.name) for u in uploads))
            except Refused as err:
                result.refused[student] = str(err)
                continue
            taken[student] = one
    for student, one in taken.items():
        dest = root / "submitted" / student / lesson
        if dest.exists() and any(dest.iterdir()) and not force:
            result.refused[student] = f"submitted/{student}/{lesson} holds an earlier submission (--force replaces it)"
            continue
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir(parents=True)
        for file_id, (data, _) in one.notebooks.items():
            (dest / file_id).write_bytes(data)
        if one.timestamp is not None:
            (dest / "timestamp.txt").write_text(one.timestamp.isoformat(" "))
    _note(root, lesson, result)
    submitted = root / "submitted"
    result.collected = sorted(d.name for d in submitted.iterdir() if (d / lesson).is_dir()) if submitted.is_dir() else []
    return result


def _note(root: Path, lesson: str, result: ImportResult) -> None:
    """The refusals, one line each, in refused/LESSON.txt (as collect writes them)."""
    lines = [f"{shown(s)}: {why}" for s, why in result.refused.items()] + result.unattributed
    if not lines:
        return
    (root / "refused").mkdir(exist_ok=True)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    with open(root / "refused" / f"{lesson}.txt", "a") as f:
        f.writelines(f"{stamp} {lesson} zip-collect {escaped(line)}\n" for line in lines)


def zip_collect(root: Path, lesson: str, downloads: list[Path], regexp: str = LMS_REGEXP,
                force: bool = False, caps: ImportCaps = ImportCaps()) -> list[str]:
    """lms_import, with what it refused and skipped printed (every name escaped). Returns the
    students who have a submission of `lesson` afterwards."""
    result = lms_import(root, lesson, downloads, regexp, force, caps)
    for student, why in result.refused.items():
        print(escaped(f"zip-collect: refused {shown(student)}: {why}; nothing of theirs collected"))
    for line in result.unattributed:
        print(escaped(f"zip-collect: refused {line}; not collected"))
    if result.unmatched:
        print(escaped(f"zip-collect: {len(result.unmatched)} file(s) did not match the file-name pattern: "
                      + ", ".join(result.unmatched)))
    if result.left_out:
        print(escaped(f"zip-collect: left out {len(result.left_out)} file(s) that are not the lesson's notebooks: "
                      + ", ".join(result.left_out[:10]) + (" ..." if len(result.left_out) > 10 else "")))
    return result.collected
