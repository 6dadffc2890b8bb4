"""Autograde every submission in submitted/, write feedback HTML and grades.csv, report each student.

    python -m utils.grade [LESSON ...] [--workers N] [--cell-timeout S] [--show-hidden-tests] [--course DIR]

Submissions are read from submitted/<student>/<lesson>/ and never modified: each is copied (regular
files only; symbolic links are refused) into a private work folder and graded there, every kernel
in a bubblewrap sandbox that sees only that copy (utils/sandbox.py; grading stops when the sandbox
cannot run). The command also compares the submitted files' hashes before and after. Graded copies go
to autograded/, feedback to feedback/ (hidden tests left out unless --show-hidden-tests), grades
to the gradebook (SQLite gradebook.db, or nbgrader's CourseDirectory.db_url) and grades.csv.

One bad submission never stops the others, and every submission gets a line saying what happened:
  - a notebook that is missing, unreadable (corrupt JSON) or belongs to another lesson scores 0
    in every graded cell, with the reason;
  - a deleted test cell is restored and graded, an edited locked cell is restored from the source,
    a copied cell with a duplicate grade id is ignored (nbgrader grades the last copy) - reported;
  - an endless loop is interrupted after the per-cell limit (Execute.timeout, 300 s in
    nbgrader_config.py); a kernel that ignores the interrupt, or dies (os._exit), is replaced, the
    cells before it are re-run and grading goes on, so earlier cells keep their points;
  - a warning on stderr in a correct graded cell costs nothing; gigantic outputs are cut;
  - a notebook saved under another name, alone in its folder, is graded; edited cell roles are
    restored from the gradebook;
  - a test cell that did not run to its end, or ran after the submission changed a builtin it
    uses or IPython's hooks, scores 0; code that reaches into the interpreter, the kernel or
    processes is reported (REVIEW) for the instructor to read.
  (utils/nbgrader_plugins.py does the kernel and output parts inside nbgrader, utils/review.py
  the reading.) The command exits 1 when a submission scored zero as unusable, when a REVIEW
  or WARNING line was printed, or when the feedback or grades.csv export failed.

Grading runs in parallel worker processes (--workers, default: the number of CPU cores), each on
its own cores (CPU affinity, which the kernels inherit; see the benchmark in docs). With the
SQLite gradebook each worker writes its own copy of it and this command merges the results into
gradebook.db one at a time, so SQLite never sees two writers; with a database server (PostgreSQL
db_url) the workers write to it directly.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import queue
import re
import shutil
import sys
import tempfile
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from utils.coursedir import (REPO, ToolError, log_tail, lessons, nbgrader_meta, resolve_lessons,
                             run_nbgrader, score_table, source_notebook)
from utils.nbgrader_plugins import parse_events
from utils.review import review

# Seconds one submission may take before its grading process is killed as stalled. Far above the
# sum of the per-cell limits a real lesson needs; only a grader stuck outside any cell reaches it.
DEFAULT_WATCHDOG = 1800


# --- the course's nbgrader settings ---------------------------------------------------------

@dataclass
class CourseSettings:
    course_id: str
    db_url: str
    sandbox: bool = True        # SandboxKernelManager.enabled
    bwrap: str = "bwrap"        # SandboxKernelManager.bwrap

    @property
    def sqlite_path(self) -> Path | None:
        if self.db_url.startswith("sqlite:///"):
            return Path(self.db_url[len("sqlite:///"):])
        return None


def course_settings(root: Path, db_url: str | None = None) -> CourseSettings:
    """course_id and db_url as nbgrader will see them in course directory `root`."""
    from traitlets.config.loader import PyFileConfigLoader

    root = Path(root).resolve()
    cfg = PyFileConfigLoader("nbgrader_config.py", path=str(root)).load_config() \
        if (root / "nbgrader_config.py").exists() else None
    section = cfg.CourseDirectory if cfg is not None and "CourseDirectory" in cfg else {}
    course_id = section.get("course_id") or "default_course"
    url = db_url or section.get("db_url") or f"sqlite:///{root / 'gradebook.db'}"
    box = cfg.SandboxKernelManager if cfg is not None and "SandboxKernelManager" in cfg else {}
    return CourseSettings(str(course_id), str(url), bool(box.get("enabled", True)), str(box.get("bwrap", "bwrap")))


def require_sandbox(settings: CourseSettings) -> None:
    """Stop before grading anything when the sandbox is on but cannot run here."""
    from utils.sandbox import OPT_OUT, unavailable

    problem = unavailable(settings.bwrap) if settings.sandbox else None
    if problem:
        raise ToolError(f"the autograding sandbox cannot run: {problem}. Nothing was graded. Student code "
                        f"must not run with the grader's rights; to grade without the sandbox (only "
                        f"inside a container without network, secrets or the course folder) set "
                        f"`{OPT_OUT}` in nbgrader_config.py (see docs/instructors.md)")


THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS")


# --- what was submitted -----------------------------------------------------------------------

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

    def line(self) -> str:
        score = f"{self.score:g}/{self.max_score:g}" if self.score is not None and self.max_score else "-"
        text = f"{self.lesson}  {self.student}: {score}"
        if self.status == "zero":
            text += f"  ZERO: {self.reason}"
        for note in self.notes:
            text += f"\n    - {note}"
        return text


def submitted_students(root: Path, lesson: str) -> list[str]:
    base = Path(root) / "submitted"
    if not base.is_dir():
        return []
    return sorted(d.name for d in base.iterdir() if (d / lesson).is_dir())


def _ids(nb) -> list[str]:
    return [nbgrader_meta(c).get("grade_id") for c in nb.cells if nbgrader_meta(c).get("grade_id")]


def _lesson_ids(root: Path) -> dict[str, tuple[str, set[str]]]:
    """{lesson: (notebook file name, its grade ids)} for every lesson in source/."""
    known = {}
    for name in lessons(root):
        path = source_notebook(root, name)
        try:
            known[name] = (path.name, set(_ids(nbformat.read(str(path), as_version=4))))
        except Exception:  # noqa: BLE001 - a broken source notebook is check's business
            known[name] = (path.name, set())
    return known


def preflight(root: Path, lesson: str, student: str, known=None) -> Outcome:
    """Look at a submission before grading: is the notebook there, a regular file, readable, of this
    lesson? Also notes deleted, edited or duplicated cells (nbgrader repairs those while grading)."""
    known = known or _lesson_ids(root)
    out = Outcome(lesson, student)
    folder = Path(root) / "submitted" / student / lesson
    nb_name, ids = known[lesson]
    refused = _irregular(folder)
    path = folder / nb_name
    others = sorted(p.name for p in folder.glob("*.ipynb") if p.name != nb_name and p.name not in refused)
    if nb_name in refused:
        return _zero(out, f"{nb_name} is {refused[nb_name]}; only regular files are graded (submit the notebook itself)")
    if refused:
        out.notes.append("refused (not copied for grading): " + ", ".join(f"{k} ({v})" for k, v in refused.items()))
    if not path.exists():
        for other in others:
            for name, (other_nb, _) in known.items():
                if name != lesson and other == other_nb:
                    return _zero(out, f"submitted {other}, the notebook of lesson {name}, instead of {nb_name}")
        if len(others) == 1:
            path = folder / others[0]
            out.file = others[0]
            out.notes.append(f"graded {others[0]}, the only notebook in the folder, as {nb_name}")
        else:
            found = ", ".join(sorted(p.name for p in folder.iterdir() if p.name != "timestamp.txt")) or "nothing"
            return _zero(out, f"no {nb_name} in the submission (found: {found})")
    try:
        nb = nbformat.read(str(path), as_version=4)
    except Exception as err:  # noqa: BLE001 - any unreadable file is reported the same way
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        return _zero(out, f"{path.name} is not a readable notebook ({first[:160]})")
    sub_ids = _ids(nb)
    if not set(sub_ids) & ids:
        for name, (other_nb, other_ids) in known.items():
            if name != lesson and other_ids and set(sub_ids) & other_ids:
                return _zero(out, f"{path.name} holds the notebook of lesson {name} ({other_nb}), not of {lesson}")
        if out.file:
            return _zero(out, f"no {nb_name} in the submission; {out.file} holds none of its graded cells")
    if others and not out.file:
        out.notes.append(f"other notebooks ignored: {', '.join(others)}")
    out.notes += _tampering(root, lesson, nb)
    release = Path(root) / "release" / lesson / nb_name
    out.notes += review(nb, nbformat.read(str(release), as_version=4) if release.exists() else None)
    return out


def _zero(out: Outcome, reason: str) -> Outcome:
    out.status, out.reason = "zero", reason
    return out


def _irregular(folder: Path) -> dict[str, str]:
    """{relative path: what it is} for every entry of a submission that is not a regular file or folder."""
    found = {}
    for p in sorted(folder.rglob("*")):
        if p.is_symlink():
            found[p.relative_to(folder).as_posix()] = "a symbolic link"
        elif not (p.is_file() or p.is_dir()):
            found[p.relative_to(folder).as_posix()] = "not a regular file"
    return found


def _copy_submission(src: Path, dest: Path, rename: str | None, nb_name: str) -> None:
    """Copy regular files and folders only (symbolic links and devices are never followed)."""
    def ignore(folder, names):
        return [n for n in names if os.path.islink(os.path.join(folder, n))
                or not (os.path.isfile(os.path.join(folder, n)) or os.path.isdir(os.path.join(folder, n)))]

    shutil.copytree(src, dest, ignore=ignore)
    if rename:
        (dest / rename).rename(dest / nb_name)


def _tampering(root: Path, lesson: str, nb) -> list[str]:
    """Differences from the release that nbgrader repairs while grading, named for the report."""
    release = Path(root) / "release" / lesson / source_notebook(root, lesson).name
    if not release.exists():
        return []
    rel = nbformat.read(str(release), as_version=4)
    notes = []
    submitted: dict[str, list] = {}
    for cell in nb.cells:
        gid = nbgrader_meta(cell).get("grade_id")
        if gid:
            submitted.setdefault(gid, []).append(cell)
    for gid, copies in submitted.items():
        if len(copies) > 1:
            notes.append(f"cell '{gid}' appears {len(copies)} times (copied cell); the copies are "
                         f"ignored and the last one is graded")
    for cell in rel.cells:
        meta = nbgrader_meta(cell)
        gid = meta.get("grade_id")
        if not gid or meta.get("solution"):
            continue
        locked = meta.get("grade") or meta.get("locked")
        if gid not in submitted:
            if meta.get("grade"):
                notes.append(f"test cell '{gid}' was deleted; restored from the source and graded")
            continue
        mine = submitted[gid][-1]
        if locked and mine.source.strip() != cell.source.strip():
            notes.append(f"locked cell '{gid}' was edited; the original was restored before grading")
        elif meta.get("grade") and nbgrader_meta(mine).get("points") != meta.get("points"):
            notes.append(f"the points of cell '{gid}' were edited; the original points were used")
    return notes


def _hash_tree(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and not p.is_symlink()}


# --- grading ----------------------------------------------------------------------------------

EVENT_NOTES = {
    "timeout": "cell '{cell}' ran past the {seconds} s limit and was interrupted (0 for that cell)",
    "kernel-unresponsive": "the kernel ignored the interrupt in cell '{cell}'; it was replaced",
    "kernel-died": "the kernel died in cell '{cell}' (os._exit, a signal or a crash)",
    "kernel-restarted": "a fresh kernel re-ran the cells before it and grading went on",
    "gave-up": "the kernel failed too often; the remaining cells were not run (0)",
    "output-truncated": "cell '{cell}' printed {characters} characters too many; its output was cut",
    "stderr-forgiven": "cell '{cell}' wrote to stderr (e.g. a warning); not counted as a failure",
    "roles-restored": "cell '{cell}' had its nbgrader role edited ({fields}); restored from the gradebook",
    "tampered": "REVIEW: cell '{cell}' scored 0: the submission changed what the test relies on ({problems})",
    "unfinished": "REVIEW: cell '{cell}' scored 0: it raised nothing but did not run to its end",
}


def _notes_from_events(events: list[dict]) -> list[str]:
    notes = []
    for ev in events:
        template = EVENT_NOTES.get(ev.get("event"))
        if template:
            note = template.format_map({k: ("?" if v is None else v) for k, v in ev.items()} | {
                "cell": ev.get("cell") or f"#{ev.get('index')}"})
            if note not in notes:
                notes.append(note)
    return notes


def _student_logs(log: str) -> dict[str, str]:
    """Split an autograde log into the part about each student."""
    parts: dict[str, str] = {}
    current = None
    for line in log.splitlines(keepends=True):
        m = re.search(r"Creating/updating student with ID '([^']+)'", line)
        if m:
            current = m.group(1)
        if current is not None:
            parts[current] = parts.get(current, "") + line
    return parts


def _failure_reason(text: str) -> str:
    """The last exception line of a student's part of the log."""
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    for line in reversed(lines):
        if re.match(r"^[\w.]+(Error|Exception|Exit)\b.*", line) and "GRADING-EVENT" not in line:
            return line[:200]
    for line in reversed(lines):
        if "ERROR" in line:
            return line[:200]
    return "nbgrader could not grade it"


@dataclass
class _Chunk:
    students: list[str]
    work: Path
    rc: int = 0
    log: str = ""
    killed: bool = False


def _grade_chunk(root: Path, lesson: str, students: list[str], settings: CourseSettings,
                 extra: list[str], watchdog: float, env_extra: dict[str, str] | None = None,
                 slots: "queue.Queue | None" = None, renames: dict[str, str] | None = None) -> _Chunk:
    """Autograde `students` in a private copy of the course folder (one nbgrader process)."""
    work = Path(tempfile.mkdtemp(prefix=f"grade-{lesson}-"))
    chunk = _Chunk(students, work)
    shutil.copy2(Path(root) / "nbgrader_config.py", work / "nbgrader_config.py")
    shutil.copytree(Path(root) / "source" / lesson, work / "source" / lesson,
                    ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
    nb_name = source_notebook(root, lesson).name
    for student in students:
        _copy_submission(Path(root) / "submitted" / student / lesson, work / "submitted" / student / lesson,
                         (renames or {}).get(student), nb_name)
    if settings.sqlite_path is not None:
        db = work / "gradebook.db"
        shutil.copy2(settings.sqlite_path, db)
        url = f"sqlite:///{db}"
    else:
        url = settings.db_url
    args = ["autograde", lesson, "--force", f"--CourseDirectory.root={work}",
            f"--CourseDirectory.db_url={url}", f"--CourseDirectory.course_id={settings.course_id}", *extra]
    cpus = slots.get() if slots is not None else None
    try:
        chunk.rc, chunk.log, chunk.killed = run_nbgrader(args, cwd=work, timeout=watchdog * len(students),
                                                         env_extra=env_extra, cpus=cpus)
    finally:
        if slots is not None:
            slots.put(cpus)
    return chunk


def _merge(src_url: str, dst_url: str, course_id: str, lesson: str, students: list[str]) -> None:
    """Copy the autograde results of `students` from a worker's gradebook into the course's."""
    from nbgrader.api import Gradebook, MissingEntry
    from utils.coursedir import alembic_on_path

    alembic_on_path()
    with _quiet_sqlalchemy(), Gradebook(src_url, course_id) as src, Gradebook(dst_url, course_id) as dst:
        for student in students:
            sub = src.find_submission(lesson, student)
            try:
                dst.find_student(student)
            except MissingEntry:
                s = sub.student
                dst.add_student(student, first_name=s.first_name, last_name=s.last_name, email=s.email,
                                lms_user_id=s.lms_user_id)
            dst.update_or_create_submission(lesson, student, timestamp=sub.timestamp)
            for nb in sub.notebooks:
                target = dst.find_submission_notebook(nb.name, lesson, student)
                target.flagged = nb.flagged
                target.late_submission_penalty = nb.late_submission_penalty
                for g in nb.grades:
                    mine = dst.find_grade(g.name, nb.name, lesson, student)
                    mine.auto_score = g.auto_score
                    mine.needs_manual_grade = g.needs_manual_grade
                for c in nb.comments:
                    mine = dst.find_comment(c.name, nb.name, lesson, student)
                    mine.auto_comment = c.auto_comment
            dst.db.commit()


@contextlib.contextmanager
def _quiet_sqlalchemy():
    """nbgrader's add_submission triggers SQLAlchemy's harmless autoflush SAWarning; hide it."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*not in session.*")
        yield


def record_zero(settings: CourseSettings, lesson: str, student: str) -> None:
    """Every graded cell of the submission scores 0 (replacing any earlier grade)."""
    from nbgrader.api import Gradebook
    from utils.coursedir import alembic_on_path

    alembic_on_path()
    with _quiet_sqlalchemy(), Gradebook(settings.db_url, settings.course_id) as gb:
        gb.update_or_create_student(student)
        sub = gb.update_or_create_submission(lesson, student)
        for nb in sub.notebooks:
            for g in nb.grades:
                g.auto_score = 0.0
                g.manual_score = None
                g.needs_manual_grade = False
        gb.db.commit()


@dataclass
class GradeRun:
    outcomes: list[Outcome] = field(default_factory=list)
    lessons: list[str] = field(default_factory=list)
    seconds: float = 0.0
    submissions: int = 0
    logs: dict[str, str] = field(default_factory=dict)
    lesson_seconds: dict[str, float] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)   # feedback or export that failed


@dataclass
class Grading:
    """Everything one grading run needs: the course, its settings and the options."""
    root: Path
    settings: CourseSettings
    workers: int
    extra: list[str]                 # nbgrader arguments for autograde (the cell timeout)
    watchdog: float
    show_hidden_tests: bool
    say: object
    run: GradeRun = field(default_factory=GradeRun)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def base(self) -> list[str]:
        return [f"--CourseDirectory.db_url={self.settings.db_url}"]


def grade_lessons(root: Path = REPO, names: list[str] | None = None, *, workers: int | None = None,
                  cell_timeout: float | None = None, show_hidden_tests: bool = False,
                  db_url: str | None = None, watchdog: float = DEFAULT_WATCHDOG,
                  feedback: bool = True, export: bool = True, quiet: bool = False) -> GradeRun:
    """Grade every submission of the named lessons (all when none); see the module doc."""
    root = Path(root).resolve()
    settings = course_settings(root, db_url)
    require_sandbox(settings)
    g = Grading(root, settings, max(1, workers or os.cpu_count() or 1),
                [f"--Execute.timeout={int(cell_timeout)}"] if cell_timeout else [], watchdog,
                show_hidden_tests, (lambda *a: None) if quiet else print)
    start = time.perf_counter()
    known = _lesson_ids(root)
    for lesson in resolve_lessons(names or [], root):
        students = submitted_students(root, lesson)
        if not students:
            g.say(f"{lesson}: no submissions")
            continue
        lesson_start = time.perf_counter()
        outcomes = _grade_lesson(g, lesson, students, known)
        if feedback:
            _feedback(g, lesson)
        _report(g, lesson, outcomes)
        g.run.lesson_seconds[lesson] = time.perf_counter() - lesson_start
        g.say(f"{lesson}: graded {len(students)} submission(s) in {time.perf_counter() - lesson_start:.1f} s "
              f"with {min(g.workers, len(students))} worker(s)")
    if g.run.lessons and export:
        _export(g)
    g.run.seconds = time.perf_counter() - start
    return g.run


def _grade_lesson(g: Grading, lesson: str, students: list[str], known) -> dict[str, Outcome]:
    """Autograde one lesson's submissions in parallel work folders; every student gets an outcome."""
    # The gradebook needs the lesson's cells and hidden tests; building records them
    # (and rewrites release/ with identical bytes).
    rc, log, _ = run_nbgrader(["generate_assignment", lesson, "--force", *g.base], cwd=g.root)
    if rc != 0:
        raise ToolError(f"nbgrader generate_assignment {lesson} failed:\n{log[-3000:]}")
    before = {s: _hash_tree(g.root / "submitted" / s / lesson) for s in students}
    outcomes = {s: preflight(g.root, lesson, s, known) for s in students}
    to_grade = [s for s in students if outcomes[s].status != "zero"]
    chunks = [to_grade[i::g.workers] for i in range(min(g.workers, len(to_grade)))]
    # Parallel kernels share the cores: each numeric library gets its share of threads (unless
    # the instructor set them), and each worker runs on its own cores (CPU affinity, which
    # kernels inherit and torch's thread count follows) when there are enough of them.
    share = str(max(1, (os.cpu_count() or 1) // max(1, len(chunks))))
    env_extra = {v: share for v in THREAD_VARS if v not in os.environ} if len(chunks) > 1 else {}
    slots = _cpu_slots(len(chunks))
    renames = {s: o.file for s, o in outcomes.items() if o.file}
    pending = [c for c in chunks if c]
    while pending:
        retry: list[list[str]] = []
        with ThreadPoolExecutor(max_workers=g.workers) as pool:
            futures = [pool.submit(_grade_chunk, g.root, lesson, c, g.settings, g.extra, g.watchdog, env_extra,
                                   slots, renames) for c in pending]
            for fut in as_completed(futures):
                _finish_chunk(g, lesson, fut.result(), outcomes, retry)
        pending = retry
    for s in students:
        if outcomes[s].status == "zero":
            record_zero(g.settings, lesson, s)
            shutil.rmtree(g.root / "autograded" / s / lesson, ignore_errors=True)
            shutil.rmtree(g.root / "feedback" / s / lesson, ignore_errors=True)
        if _hash_tree(g.root / "submitted" / s / lesson) != before[s]:
            outcomes[s].notes.append("WARNING: the files in submitted/ changed while grading")
    return outcomes


def _finish_chunk(g: Grading, lesson: str, chunk: _Chunk, outcomes: dict[str, Outcome],
                  retry: list[list[str]]) -> None:
    """Take what one work folder graded: notebooks to autograded/, grades to the gradebook."""
    per_student = _student_logs(chunk.log)
    abnormal = chunk.killed or chunk.rc not in (0, 1)
    graded = []
    for s in chunk.students:
        out, text = outcomes[s], per_student.get(s, "")
        done = chunk.work / "autograded" / s / lesson
        if done.is_dir() and any(done.glob("*.ipynb")) and not (abnormal and s == _last(per_student)):
            graded.append(s)
            out.status = "graded"
            out.notes += _notes_from_events([e for e in parse_events(text) if e.get("student") == s])
            dest = g.root / "autograded" / s / lesson
            shutil.rmtree(dest, ignore_errors=True)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copytree(done, dest)
        elif abnormal and len(chunk.students) > 1:
            retry.append([s])   # the grader died on someone else's code: try alone
        else:
            out.status = "zero"
            if chunk.killed:
                out.reason = f"grading stalled and was stopped after {g.watchdog:g} s"
            elif chunk.rc not in (0, 1):
                out.reason = (f"the grading process was killed (exit {chunk.rc}) while grading this "
                              f"submission; its code may have killed it")
            else:
                out.reason = f"nbgrader could not grade it: {_failure_reason(text)}"
            g.run.logs[f"{lesson}/{s}"] = text or chunk.log[-5000:]
    if graded and g.settings.sqlite_path is not None:
        with g.lock:
            _merge(f"sqlite:///{chunk.work / 'gradebook.db'}", g.settings.db_url, g.settings.course_id,
                   lesson, graded)
    shutil.rmtree(chunk.work, ignore_errors=True)


def _feedback(g: Grading, lesson: str) -> None:
    args = ["generate_feedback", lesson, "--force", *g.base]
    if g.show_hidden_tests:
        args.append("--HideHiddenTests.enabled=False")
    rc, log, _ = run_nbgrader(args, cwd=g.root)
    if rc != 0:
        g.run.logs[f"{lesson}/feedback"] = log
        g.run.failures.append(f"{lesson}: nbgrader generate_feedback failed (exit {rc}); "
                              f"see autograde.log:\n{log_tail(log)}")


def _report(g: Grading, lesson: str, outcomes: dict[str, Outcome]) -> None:
    """Each student's total from the gradebook, one line each."""
    from utils.coursedir import read_scores_url

    totals: dict[str, list[float]] = {}
    for r in read_scores_url(g.settings.db_url, g.settings.course_id, [lesson]):
        t = totals.setdefault(r.student, [0.0, 0.0])
        t[0] += r.score
        t[1] += r.max_score
    for s, out in outcomes.items():
        out.score, out.max_score = totals.get(s, (None, None))
        g.run.outcomes.append(out)
        g.say(out.line())
    g.run.submissions += len(outcomes)
    g.run.lessons.append(lesson)


def _export(g: Grading) -> None:
    csv = g.root / "grades.csv"
    if csv.is_file():
        csv.unlink()   # a stale file must not pass for this run's export
    rc, log, _ = run_nbgrader(["export", "--to", str(csv), *g.base], cwd=g.root)
    if rc == 0 and csv.exists():
        g.say(f"wrote {csv} and feedback/ (HTML per student and lesson)")
    else:
        g.run.logs["export"] = log
        g.run.failures.append(f"nbgrader export failed (exit {rc}), grades.csv not written:\n{log_tail(log)}")


def _cpu_slots(workers: int) -> "queue.Queue | None":
    """One disjoint set of cores per worker, or None when there are too few cores to split."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except AttributeError:
        return None
    if workers < 2 or len(cpus) < workers:
        return None
    share = len(cpus) // workers
    slots: queue.Queue = queue.Queue()
    for i in range(workers):
        slots.put(set(cpus[i * share:(i + 1) * share]))
    return slots



def _last(per_student: dict[str, str]) -> str | None:
    return list(per_student)[-1] if per_student else None


def grade(root: Path = REPO, names: list[str] | None = None, **options) -> tuple[str, list[str]]:
    """Grade; return (score table, list of problems naming lesson and student)."""
    run = grade_lessons(root, names, **options)
    problems = [f"{o.lesson}: submission of {o.student!r} scored 0: {o.reason}"
                for o in run.outcomes if o.status == "zero"]
    problems += [f"{o.lesson}: {o.student}: {n}" for o in run.outcomes for n in o.notes
                 if n.startswith(("WARNING", "REVIEW"))]
    problems += run.failures
    if run.logs:
        log = Path(root) / "autograde.log"
        log.write_text("\n\n".join(f"===== {k}\n{v}" for k, v in run.logs.items()))
    from utils.coursedir import read_scores_url

    settings = course_settings(root, options.get("db_url"))
    table = score_table(read_scores_url(settings.db_url, settings.course_id, run.lessons))
    return table, problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("lessons", nargs="*", help="lesson folders under source/ (default: all)")
    parser.add_argument("--workers", type=int, default=None, help="parallel graders (default: CPU cores)")
    parser.add_argument("--cell-timeout", type=float, default=None,
                        help="seconds a cell may run (default: Execute.timeout in nbgrader_config.py)")
    parser.add_argument("--show-hidden-tests", action="store_true", help="show hidden tests in the feedback")
    parser.add_argument("--db-url", default=None, help="gradebook URL (default: nbgrader_config.py or gradebook.db)")
    parser.add_argument("--course", type=Path, default=REPO, help="course directory (default: this repository)")
    args = parser.parse_args(argv)
    try:
        table, problems = grade(args.course, args.lessons, workers=args.workers, cell_timeout=args.cell_timeout,
                                show_hidden_tests=args.show_hidden_tests, db_url=args.db_url)
    except ToolError as err:
        print(f"grade failed: {err}", file=sys.stderr)
        return 1
    print(table)
    for p in problems:
        print(f"FAIL {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
