"""Submissions into the course: collect from the exchange (OwnerCheckedCollect) and zip-collect
from an LMS download (IdCheckedCollector); the command line is utils/classroom/term.py.

Collecting takes from each submission only what its student owns (OwnerCheckedCollect, below):
on one server every student can write into the others' submission folders once they know their
names, and nbgrader alone would collect what was planted there.
"""

from __future__ import annotations

import datetime
import os
import shutil
import stat
from pathlib import Path

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.exchange.default.collect import ExchangeCollect
from nbgrader.utils import check_mode, ignore_patterns, parse_utc
from nbgrader.plugins.zipcollect import FileNameCollectorPlugin
from traitlets import Float, Integer

from utils.lessons import REPO
from utils.processes import nbgrader
from utils.grading.student_id import id_problem

# LMS download names: Canvas "doe_123_456_two_phases.ipynb" (also "doe_LATE_123_456_..." and a
# "-1" suffix for a resubmission), or plainly "doe_two_phases.ipynb". student_id is the part
# before the first underscore; file_id the notebook name.
LMS_REGEXP = r".*/(?P<student_id>[^/_]+)_(?:LATE_)?(?:\d+_\d+_)?(?P<file_id>[^/]+?)(?:-\d+)?\.ipynb$"


def _run(args: list[str], root: Path, exchange: Path | None = None) -> str:
    if exchange is not None:
        args = [*args, f"--Exchange.root={Path(exchange).resolve()}"]
    return nbgrader(args, cwd=Path(root)).log


REFUSED = "REFUSED"         # starts every log line of OwnerCheckedCollect about what it left out
COLLECT_CLASS = "utils.classroom.workflow.OwnerCheckedCollect"   # nbgrader_config.py names it too
ZIP_COLLECTOR = "utils.classroom.workflow.IdCheckedCollector"


# what nbgrader's submit adds to a submission and its later steps read: the time of submission
# (late penalties) and the secret that names the student's feedback file
NBGRADER_FILES = {"timestamp.txt", "submission_secret.txt"}


class OwnerCheckedCollect(ExchangeCollect):
    """nbgrader's collect (`--update`, due dates and all) that no entry in `inbound/` can stop or
    spoil: each submission is checked on its own, and one that fails a check is refused (a
    REFUSED log line, a one-line note in `refused/LESSON.txt`) while every other student is
    collected. Refused: a name that is not `STUDENT+LESSON+TIMESTAMP[+RANDOM]` with a usable
    student id and timestamp; anything but a folder; a folder the instructor cannot read; a
    submission over the size cap (`max_submission_mb`, `max_submission_files`, counted before
    anything is copied and again on every byte written, so that a file grown during the copy
    cannot land more than the cap: the partial copy is removed); and, on a shared file system
    (`check_owner`, the default), a folder not owned by the student it is named for.

    Only what the lesson needs is copied: its notebooks (the `.ipynb` files at the top of
    `release/LESSON/`) and nbgrader's `timestamp.txt` and `submission_secret.txt`. Any other
    file a student put in the submission (a module, an `nbgrader_config.py`, a folder) never
    reaches the course, where an instructor's tool opening that folder could import or run it
    with the instructor's rights; it is logged and left in the exchange.

    nbgrader's submit leaves each submission folder writable by everyone (mode 0777; the class's
    PrivateSubmit closes it) and nbgrader's collect takes the newest folder by its name, only
    warning when its owner is someone else, and raises on the first name it cannot parse. Here a
    folder named for alice but owned by bob is skipped (alice's newest own folder is collected
    instead), and a file or folder inside alice's submission that bob wrote, a link, or anything
    but a plain file or folder is not copied to submitted/. Nothing is deleted: each refused file
    is logged, copied when it is a plain file to `refused/STUDENT/LESSON/FOLDER/`, never graded,
    and left where it was in the exchange. Owners are read from the open file (fstat), so a file
    swapped between the check and the copy is not taken. With `ExchangeCollect.check_owner = False`
    (all students share one Unix account, as in some containers) owners are not checked."""

    max_submission_mb = Float(20.0, help="A submission larger than this (MB, all its files together) is "
                              "refused at collect, and the others collected.").tag(config=True)
    max_submission_files = Integer(500, help="A submission with more files and folders than this is refused "
                                   "at collect.").tag(config=True)

    def _needed(self) -> set[str]:
        """The files a submission of this lesson consists of: its released notebooks (every
        top-level notebook of the submission where release/LESSON/ holds none) and NBGRADER_FILES."""
        release = Path(self.coursedir.format_path(self.coursedir.release_directory, ".", self.coursedir.assignment_id))
        names = {p.name for p in release.glob("*.ipynb") if p.is_file()} if release.is_dir() else set()
        return names | NBGRADER_FILES if names else set()

    def _owner_uid(self, student: str) -> int | None:
        import pwd
        try:
            return pwd.getpwnam(student).pw_uid
        except KeyError:
            return None

    def _note(self, entry: str, why: str) -> None:
        """One line in refused/LESSON.txt and in the log; the entry's name as Python writes it."""
        lesson = self.coursedir.assignment_id
        line = f"{entry!r}: {why}"
        self.log.warning(f"{REFUSED} {line}")
        folder = Path(self.coursedir.root) / "refused"
        folder.mkdir(exist_ok=True)
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
        with open(folder / f"{lesson}.txt", "a") as f:
            f.write(f"{stamp} {lesson} {line}\n")

    def _record(self, path: str) -> dict | None:
        name = os.path.basename(path)
        parts = name.split("+")
        if len(parts) not in (3, 4):
            self._note(name, "not a submission's name (STUDENT+LESSON+TIMESTAMP+RANDOM); not collected")
            return None
        why = id_problem(parts[0])
        if why:   # the one rule of every door (utils/grading/student_id.py)
            self._note(name, f"not a submission's name (STUDENT+LESSON+TIMESTAMP+RANDOM): {why}; not collected")
            return None
        try:
            timestamp = parse_utc(parts[2])
            if timestamp is None:
                raise ValueError("no timestamp")
        except Exception as err:   # dateutil raises several kinds on garbage
            self._note(name, f"no usable timestamp in its name ({type(err).__name__}); not collected")
            return None
        return {"username": parts[0], "filename": name, "timestamp": timestamp}

    def _size_problem(self, path: str) -> str | None:
        """Why the submission at `path` is over the cap (None when it is not), counted with lstat
        and stopping as soon as it is over."""
        cap, total, count, unreadable = self.max_submission_mb * 1e6, 0, 0, []
        for dirpath, dirnames, filenames in os.walk(path, onerror=lambda err: unreadable.append(err.filename)):
            for name in dirnames + filenames:
                count += 1
                if count > self.max_submission_files:
                    return f"more than {self.max_submission_files} files and folders (the cap at collect)"
                try:
                    st = os.lstat(os.path.join(dirpath, name))
                except OSError:
                    continue
                if stat.S_ISREG(st.st_mode):
                    total += st.st_size
                if total > cap:
                    return f"over {self.max_submission_mb:g} MB (the cap per submission at collect)"
        if unreadable:
            return f"a folder in it the instructor cannot read ({os.path.relpath(unreadable[0], path)!r})"
        return None

    def init_src(self):
        if self.coursedir.course_id == "":
            self.fail("No course id specified. Re-run with --course flag.")
        self.course_path = os.path.join(self.root, self.coursedir.course_id)
        self.inbound_path = os.path.join(self.course_path, "inbound")
        if not os.path.isdir(self.inbound_path):
            self.fail(f"Course not found: {self.inbound_path}")
        if not check_mode(self.inbound_path, read=True, execute=True):
            self.fail(f"You don't have read permissions for the directory: {self.inbound_path}")
        with Gradebook(self.coursedir.db_url, self.coursedir.course_id) as gb:
            try:
                self.duedate = gb.find_assignment(self.coursedir.assignment_id).duedate
            except MissingEntry:
                self.duedate = None
        lesson = self.coursedir.assignment_id
        wanted = self.coursedir.student_id if self.coursedir.student_id not in ("", "*") else None
        by_student: dict[str, list[dict]] = {}
        for name in sorted(os.listdir(self.inbound_path)):
            parts = name.split("+")
            if len(parts) < 2 or parts[1] != lesson or (wanted and parts[0] != wanted):
                continue   # another lesson's, or another student's when one is asked for
            path = os.path.join(self.inbound_path, name)
            rec = self._record(path)
            if rec is None:
                continue
            st = os.lstat(path)
            if not stat.S_ISDIR(st.st_mode):
                self._note(name, "not a folder (a link, a file or a special file); not collected")
                continue
            if self.check_owner:
                uid = self._owner_uid(rec["username"])
                if uid is None or st.st_uid != uid:
                    what = f"no user {rec['username']} on this system" if uid is None else f"owned by {_user(st.st_uid)}"
                    self._note(name, f"named for {rec['username']} but {what}; not collected, left in the exchange")
                    continue
            if not os.access(path, os.R_OK | os.X_OK):
                self._note(name, f"the instructor cannot read it (mode {stat.S_IMODE(st.st_mode):04o}); not collected")
                continue
            by_student.setdefault(rec["username"], []).append(rec)
        chosen = []
        for records in by_student.values():
            records = self._sort_by_timestamp(records)
            if self.duedate is not None and self.before_duedate:
                records = [r for r in records if r["timestamp"] <= self.duedate] or records
            chosen.append(records[0])
        self.src_records = chosen

    def copy_files(self):
        """nbgrader's copy, one student at a time: a submission that fails is refused and noted,
        and the next one collected."""
        records = self.src_records
        try:
            for rec in records:
                problem = self._size_problem(os.path.join(self.inbound_path, rec["filename"]))
                if problem:
                    self._note(rec["filename"], f"{problem}; not collected, left in the exchange")
                    continue
                self.src_records = [rec]
                try:
                    super().copy_files()
                except OverCap as err:   # grown during the copy: nothing of it stays in submitted/
                    shutil.rmtree(self.coursedir.format_path(self.coursedir.submitted_directory, rec["username"],
                                                             self.coursedir.assignment_id), ignore_errors=True)
                    self._note(rec["filename"], f"{err}; not collected (its partial copy removed), left in the exchange")
                except Exception as err:   # one student's submission, whatever went wrong in it
                    self._note(rec["filename"], f"could not be collected ({type(err).__name__}: "
                                                f"{' '.join(str(err).split())[:200]}); left in the exchange")
        finally:
            self.src_records = records

    def do_copy(self, src, dest, log=None):
        """Plain files and folders only (never a link, a FIFO or a device), and with `check_owner`
        only those the student owns."""
        student = os.path.basename(src).split("+")[0]
        uid = self._owner_uid(student) if self.check_owner else None
        st = os.lstat(src)   # checked again: without the sticky bit on inbound it may have been swapped
        if not stat.S_ISDIR(st.st_mode) or (self.check_owner and st.st_uid != uid):
            self._note(os.path.basename(src), f"no longer a folder owned by {student}; not collected")
            os.makedirs(dest, exist_ok=True)
            return
        ignore = ignore_patterns(exclude=self.coursedir.ignore, include=self.coursedir.include,
                                 max_file_size=self.coursedir.max_file_size, log=self.log)
        lesson = self.coursedir.assignment_id
        refused_dir = Path(self.coursedir.root) / "refused" / student / lesson / os.path.basename(src)
        needed, left_out = self._needed(), []
        budget = [int(self.max_submission_mb * 1e6)]   # bytes still allowed, counted as they are written
        os.makedirs(dest, exist_ok=True)
        for dirpath, dirnames, filenames in os.walk(src):
            rel = os.path.relpath(dirpath, src)
            ignored = set(ignore(dirpath, dirnames + filenames))
            if rel == ".":   # only the lesson's own files, at the top; no folder
                wanted = needed or {n for n in filenames if n.endswith(".ipynb")} | NBGRADER_FILES
                extra = [n for n in dirnames + filenames if n not in ignored and (n not in wanted or n in dirnames)]
                left_out += extra
                ignored |= set(extra)
            for name in list(dirnames):
                path = os.path.join(dirpath, name)
                st = os.lstat(path)
                foreign = self.check_owner and st.st_uid != uid
                if name in ignored or foreign or not stat.S_ISDIR(st.st_mode):
                    dirnames.remove(name)
                    if name not in ignored:
                        why = f"a folder owned by {_user(st.st_uid)}, not {student}" if foreign else "a link to a folder"
                        self._refuse(path, why, None, refused_dir, rel)
                    continue
                os.makedirs(os.path.join(dest, rel, name), exist_ok=True)
            for name in filenames:
                if name in ignored:
                    continue
                path = os.path.join(dirpath, name)
                try:
                    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
                except OSError as err:
                    self._refuse(path, f"a link or unreadable ({err.strerror})", None, refused_dir, rel)
                    continue
                with os.fdopen(fd, "rb") as f:
                    st = os.fstat(f.fileno())
                    if not stat.S_ISREG(st.st_mode):
                        self._refuse(path, "not a plain file", None, refused_dir, rel)
                    elif self.check_owner and st.st_uid != uid:
                        self._refuse(path, f"written by {_user(st.st_uid)}, not {student}", f, refused_dir, rel)
                    else:
                        target = os.path.join(dest, rel, name)
                        with open(target, "wb") as out:
                            _copy_within(f, out, budget, self.max_submission_mb)
                        os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
        if left_out:
            shown = ", ".join(map(repr, sorted(left_out)[:5])) + (f" and {len(left_out) - 5} more" if len(left_out) > 5 else "")
            self.log.warning(f"{REFUSED} {src}: {shown}: not a file lesson {lesson} needs (only its notebooks "
                             "are collected); not collected, left in the exchange")

    def _refuse(self, path: str, why: str, f, refused_dir: Path, rel: str) -> None:
        kept = ""
        if f is not None:
            target = refused_dir / rel / os.path.basename(path)
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(target, "wb") as out:
                shutil.copyfileobj(f, out)
            kept = f", a copy is in {target}"
        self.log.warning(f"{REFUSED} {path}: {why}; not collected, not graded, left in the exchange{kept}")


class OverCap(Exception):
    """A submission that grew past the size cap while it was being copied."""


def _copy_within(src, out, budget: list[int], cap_mb: float, chunk: int = 1 << 20) -> None:
    """Copy the open file `src` into `out`, taking what is written from `budget[0]` (bytes left
    for the whole submission); OverCap as soon as the file holds more than is left, whatever its
    size was when it was counted (it may grow while it is read)."""
    while True:
        data = src.read(min(chunk, budget[0] + 1))
        if not data:
            return
        if len(data) > budget[0]:
            raise OverCap(f"over {cap_mb:g} MB while it was copied (it grew after it was counted; "
                          "the cap per submission at collect)")
        out.write(data)
        budget[0] -= len(data)


def _user(uid: int) -> str:
    import pwd
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def collect(root: Path, lesson: str, exchange: Path | None = None, check_owner: bool | None = None) -> list[str]:
    """Copy the latest submission of every student from the exchange into submitted/, taking
    from each only what its student owns (OwnerCheckedCollect; what it leaves out is printed).
    check_owner: None keeps the course's setting (ExchangeCollect.check_owner, on unless the
    config turns it off). Returns the students who have a submission of `lesson` afterwards."""
    args = ["collect", lesson, "--update", f"--ExchangeFactory.collect={COLLECT_CLASS}"]
    if check_owner is not None:
        args.append(f"--ExchangeCollect.check_owner={check_owner}")
    log = _run(args, root, exchange)
    for line in log.splitlines():
        if REFUSED in line:
            print("collect: " + line.split(REFUSED, 1)[1].strip())
    base = Path(root) / "submitted"
    return sorted(d.name for d in base.iterdir() if (d / lesson).is_dir()) if base.is_dir() else []


class IdCheckedCollector(FileNameCollectorPlugin):
    """nbgrader's file-name collector of zip_collect, where a file whose student id the course does
    not take in (utils/grading/student_id.py) is skipped with a REFUSED line naming why."""

    def collect(self, submitted_file: str) -> dict | None:
        info = super().collect(submitted_file)
        why = id_problem(info.get("student_id")) if info else None
        if why:
            self.log.warning(f"{REFUSED} {os.path.basename(submitted_file)!r}: {why}; not collected")
            return None
        return info


def zip_collect(root: Path, lesson: str, downloads: list[Path], regexp: str = LMS_REGEXP,
                force: bool = False) -> list[str]:
    """Submissions downloaded from an LMS (a zip of notebooks, or notebooks) into submitted/.
    The files are copied to downloaded/<lesson>/archive/ first; the downloads are not touched."""
    archive = Path(root) / "downloaded" / lesson / "archive"
    archive.mkdir(parents=True, exist_ok=True)
    for path in downloads:
        shutil.copy2(path, archive / Path(path).name)
    args = ["zip_collect", lesson, f"--ZipCollectApp.collector_plugin={ZIP_COLLECTOR}",
            f"--FileNameCollectorPlugin.named_regexp={regexp}"]
    if force:
        args.append("--force")
    # the collector is named on the command line, read before nbgrader_config.py puts the tools on the path
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    log = nbgrader(args, cwd=Path(root), env_extra={"PYTHONPATH": path}).log
    for line in log.splitlines():
        if REFUSED in line:
            print("zip-collect: " + line.split(REFUSED, 1)[1].strip())
    base = Path(root) / "submitted"
    collected = sorted(d.name for d in base.iterdir() if (d / lesson).is_dir()) if base.is_dir() else []
    skipped = [l.split("in: ", 1)[-1] for l in log.splitlines() if "did not match anything in" in l]
    if skipped:
        print(f"zip-collect: {len(skipped)} file(s) did not match the file-name pattern: {', '.join(skipped)}")
    return collected
