"""Autograde every submission in submitted/, write feedback HTML and grades.csv, report each student.

    python -m utils.grading.run [LESSON ...] [--workers N] [--cell-timeout S] [--show-hidden-tests] [--course DIR]
                          [--scheduler tcp://HOST:8786]

Per lesson, like an nbgrader app: plan (read the submissions: a missing, unreadable, linked or
other lesson's notebook scores 0 with the reason; what nbgrader will repair; the reference
solution's observations, run once and cached, utils/grading/reference.py) -> run (parallel
workers, each one `nbgrader autograde` in a private work folder holding copies of the submissions,
every kernel in the sandbox; the course's steps in utils/grading/ judge each graded cell outside
the student's kernel; a worker's result is read from its graded notebooks: verdicts and notes)
-> record (the gradebook: a worker's SQLite copy merged one at a time, or a database server
written directly; zeros for unusable submissions) -> report (one line per student, feedback HTML
without hidden tests unless --show-hidden-tests, grades.csv).

Submissions are never modified (hashes compared before and after). One submission never costs
another its grade: a worker that fails on several is retried on each alone. Exit 1 when a
submission scored zero as unusable, a WARNING was printed, or feedback or the export failed.
Workers (default: the CPU cores) each run on their own cores (see the benchmark in docs).
With --scheduler (or DASK_SCHEDULER_ADDRESS) the run step is one task per submission on a Dask
cluster instead (utils/grading/dask/); plan, record and report stay here.
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
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from utils.grading.dask.address import scheduler_address
from utils.coursedir import (REPO, ToolError, escaped, lessons, log_tail, nbgrader, nbgrader_meta, read_scores_url,
                             resolve_lessons, score_table, shown, source_notebook)
from utils.grading.steps.well_formed import well_formed
from utils.sandbox.limits import limits_not_enforced
from utils.sandbox.probe import OPT_OUT, start_problem, unavailable

# Seconds one submission may take before its grading process is killed as stalled. Far above the
# sum of the per-cell limits a real lesson needs; only a grader stuck outside any cell reaches it.
DEFAULT_WATCHDOG = 1800
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS")
CACHE = ".grading-cache"


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
    problem = unavailable(settings.bwrap) if settings.sandbox else None
    if problem:
        raise ToolError(f"the autograding sandbox cannot run: {problem}. Nothing was graded. Student code "
                        f"must not run with the grader's rights; to grade without the sandbox (only "
                        f"inside a container without network, secrets or the course folder) set "
                        f"`{OPT_OUT}` in nbgrader_config.py (see docs/instructors.md)")
    if settings.sandbox:
        problem = start_problem(settings.bwrap)
        if problem:
            raise ToolError(problem)

        line = limits_not_enforced()
        if line:
            print(line, file=sys.stderr)


# --- plan: read the files -------------------------------------------------------------------

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


def _find_notebook(out: Outcome, folder: Path, nb_name: str, known, refused: dict[str, str]) -> Path | None:
    """The notebook to grade in a submission folder, or None (and `out` says why)."""
    others = sorted(p.name for p in folder.glob("*.ipynb") if p.name != nb_name and p.name not in refused)
    if nb_name in refused:
        _zero(out, f"{shown(nb_name)} is {refused[nb_name]}; only regular files are graded (submit the notebook itself)")
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
                _zero(out, f"submitted {shown(other)}, the notebook of lesson {name}, instead of {nb_name}")
                return None
    if len(others) == 1:
        out.file = others[0]
        out.notes.append(f"graded {shown(others[0])}, the only notebook in the folder, as {nb_name}")
        return folder / others[0]
    found = ", ".join(sorted(shown(p.name) for p in folder.iterdir() if p.name != "timestamp.txt")) or "nothing"
    _zero(out, f"no {nb_name} in the submission (found: {found})")
    return None


def preflight(root: Path, lesson: str, student: str, known=None) -> Outcome:
    """Look at a submission before grading: is the notebook there, a regular file, readable, of this
    lesson? Also notes deleted, edited or duplicated cells (nbgrader repairs those while grading)."""
    known = known or _lesson_ids(root)
    out = Outcome(lesson, student)
    folder = Path(root) / "submitted" / student / lesson
    nb_name, ids = known[lesson]
    path = _find_notebook(out, folder, nb_name, known, _irregular(folder))
    if path is None:
        return out
    try:
        nb = well_formed(nbformat.read(str(path), as_version=4))   # any type in any field: typed
    except Exception as err:  # noqa: BLE001 - any unreadable file is reported the same way
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        return _zero(out, f"{shown(path.name)} is not a readable notebook ({escaped(first[:160])})")
    sub_ids = set(_ids(nb))
    if not sub_ids & ids:
        for name, (other_nb, other_ids) in known.items():
            if name != lesson and other_ids and sub_ids & other_ids:
                return _zero(out, f"{shown(path.name)} holds the notebook of lesson {name} ({other_nb}), not of {lesson}")
        if out.file:
            return _zero(out, f"no {nb_name} in the submission; {shown(out.file)} holds none of its graded cells")
    release = Path(root) / "release" / lesson / nb_name
    release_nb = nbformat.read(str(release), as_version=4) if release.exists() else None
    out.notes += _repairs(release_nb, nb)
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


def _hash_tree(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and not p.is_symlink()}


def reference(root: Path, lesson: str) -> Path:
    """Run (or find in the cache) the lesson's reference observations; the cache file's path."""
    from utils.grading.reference import ReferenceRefused, cache_key, reference_for

    src = source_notebook(root, lesson)
    try:
        reference_for(src, Path(root) / CACHE)
    except ReferenceRefused as err:
        raise ToolError(str(err)) from None
    return Path(root) / CACHE / f"{cache_key(src)}.json"


@dataclass
class Plan:
    lesson: str
    students: list[str]
    outcomes: dict[str, Outcome]
    before: dict[str, dict[str, str]]      # student -> hashes of the submitted files
    reference: Path                        # the reference observations (cache file)

    @property
    def to_grade(self) -> list[str]:
        return [s for s in self.students if self.outcomes[s].status != "zero"]


def safe_preflight(root: Path, lesson: str, student: str, known) -> Outcome:
    """preflight, where a submission that still breaks it scores 0 with a one-line reason and
    every other submission is graded."""
    try:
        return preflight(root, lesson, student, known)
    except Exception as err:  # noqa: BLE001 - the submission is hostile data
        line = (str(err).strip().splitlines() or [type(err).__name__])[0][:160]
        return _zero(Outcome(lesson, student), f"the submission could not be read for grading ({line})")


def plan(root: Path, lesson: str, students: list[str], known) -> Plan:
    return Plan(lesson, students, {s: safe_preflight(root, lesson, s, known) for s in students},
                {s: _hash_tree(Path(root) / "submitted" / s / lesson) for s in students}, reference(root, lesson))


# --- run: workers, each one nbgrader autograde in a private work folder -----------------------

@dataclass
class WorkerResult:
    """What one `nbgrader autograde` in a work folder produced."""
    students: list[str]
    work: Path
    graded: dict[str, Path] = field(default_factory=dict)   # student -> graded notebook folder
    rc: int = 0
    log: str = ""
    killed: bool = False


def _copy_submission(src: Path, dest: Path, rename: str | None, nb_name: str) -> None:
    """Copy regular files and folders only (symbolic links and devices are never followed)."""
    def ignore(folder, names):
        return [n for n in names if os.path.islink(os.path.join(folder, n))
                or not (os.path.isfile(os.path.join(folder, n)) or os.path.isdir(os.path.join(folder, n)))]

    shutil.copytree(src, dest, ignore=ignore)
    if rename:
        (dest / rename).rename(dest / nb_name)


def _work_folder(g: "Grading", p: Plan, students: list[str]) -> tuple[Path, str]:
    """A private course folder for one worker: config, source, reference cache, submissions, gradebook."""
    work = Path(tempfile.mkdtemp(prefix=f"grade-{p.lesson}-"))
    shutil.copy2(g.root / "nbgrader_config.py", work / "nbgrader_config.py")
    shutil.copytree(g.root / "source" / p.lesson, work / "source" / p.lesson,
                    ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
    (work / CACHE).mkdir()
    shutil.copy2(p.reference, work / CACHE / p.reference.name)   # hidden from the kernels with `work`
    nb_name = source_notebook(g.root, p.lesson).name
    for s in students:
        _copy_submission(g.root / "submitted" / s / p.lesson, work / "submitted" / s / p.lesson,
                         p.outcomes[s].file, nb_name)
    if g.settings.sqlite_path is None:
        return work, g.settings.db_url
    shutil.copy2(g.settings.sqlite_path, work / "gradebook.db")
    return work, f"sqlite:///{work / 'gradebook.db'}"


def run_worker(g: "Grading", p: Plan, students: list[str], env_extra: dict[str, str], slots) -> WorkerResult:
    """Autograde `students` in a private copy of the course folder (one nbgrader process)."""
    work, url = _work_folder(g, p, students)
    args = ["autograde", p.lesson, "--force", f"--CourseDirectory.root={work}", f"--CourseDirectory.db_url={url}",
            f"--CourseDirectory.course_id={g.settings.course_id}", *g.extra]
    cpus = slots.get() if slots is not None else None
    try:
        # the course root the worker was copied from is hidden from its kernels too (utils/sandbox/)
        run = nbgrader(args, cwd=work, check=False, timeout=g.watchdog * len(students),
                       env_extra={**env_extra, "COURSE_GRADING_ROOT": str(g.root)}, cpus=cpus)
    finally:
        if slots is not None:
            slots.put(cpus)
    result = WorkerResult(students, work, rc=run.rc, log=run.log, killed=run.killed)
    for s in students:
        if _finished(work / "autograded" / s / p.lesson):
            result.graded[s] = work / "autograded" / s / p.lesson
    return result


def _finished(folder: Path) -> bool:
    """Did nbgrader finish this notebook? Its sanitizing step writes it before anything runs, with
    no outputs; only the end of autograding writes it with a verdict in every graded cell."""
    from utils.grading.steps.verdicts import read_verdicts

    notebooks = [p for p in folder.glob("*.ipynb") if p.is_file() and not p.is_symlink()] if folder.is_dir() else []
    try:
        verdicts = read_verdicts(nbformat.read(str(notebooks[0]), as_version=4)) if notebooks else {}
    except Exception:  # noqa: BLE001 - half written
        return False
    return bool(verdicts) and all(v is not None for v in verdicts.values())


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


def run_lesson(g: "Grading", p: Plan) -> None:
    """Grade the plan's submissions in parallel work folders; a worker that failed on several
    submissions is retried on each alone, so one submission's code never costs another's grade."""
    chunks = [c for c in (p.to_grade[i::g.workers] for i in range(min(g.workers, len(p.to_grade)))) if c]
    # Parallel kernels share the cores: each numeric library gets its share of threads (unless the
    # instructor set them), and each worker runs on its own cores when there are enough of them.
    share = str(max(1, (os.cpu_count() or 1) // max(1, len(chunks))))
    env_extra = {v: share for v in THREAD_VARS if v not in os.environ} if len(chunks) > 1 else {}
    slots = _cpu_slots(len(chunks))
    while chunks:
        with ThreadPoolExecutor(max_workers=g.workers) as pool:
            results = list(pool.map(lambda c: run_worker(g, p, c, env_extra, slots), chunks))
        chunks = []
        for result in results:
            missing = [s for s in result.students if s not in result.graded]
            if missing and len(result.students) > 1:
                chunks += [[s] for s in missing]   # graded alone, the log is theirs
            else:
                _fail(g, p, result, missing)
            record(g, p, result, [s for s in result.students if s in result.graded])
            shutil.rmtree(result.work, ignore_errors=True)


def _fail(g: "Grading", p: Plan, result: WorkerResult, students: list[str]) -> None:
    for s in students:
        if result.killed:
            reason = f"grading stalled and was stopped after {g.watchdog:g} s"
        elif result.rc not in (0, 1):
            reason = f"the grading process was killed (exit {result.rc}) while grading this submission; its code may have killed it"
        else:
            reason = f"nbgrader could not grade it: {_failure_reason(result.log)}"
        _zero(p.outcomes[s], reason)
        g.run.logs[f"{p.lesson}/{s}"] = result.log[-20000:]


def _failure_reason(log: str) -> str:
    """The last exception line of a one-submission autograde log."""
    lines = [l.strip() for l in log.splitlines() if l.strip()]
    for line in reversed(lines):
        if re.match(r"^[\w.]+(Error|Exception|Exit|Refused)\b", line):
            return line[:200]
    return next((l[:200] for l in reversed(lines) if "ERROR" in l), "see autograde.log")


# --- record: the gradebook --------------------------------------------------------------------

def record(g: "Grading", p: Plan, result: WorkerResult, students: list[str]) -> None:
    """Take what a worker graded: its notebooks to autograded/, verdicts and notes to the outcome,
    its grades into the course's gradebook."""
    from utils.grading.steps.base import read_notes
    from utils.grading.steps.verdicts import read_verdicts

    for s in students:
        out, done = p.outcomes[s], result.graded[s]
        nb = nbformat.read(str(next(done.glob("*.ipynb"))), as_version=4)
        out.status, out.verdicts = "graded", read_verdicts(nb)
        out.notes += [n["text"] for n in read_notes(nb) if isinstance(n.get("text"), str)]
        dest = g.root / "autograded" / s / p.lesson
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir(parents=True)
        for path in done.glob("*.ipynb"):   # the graded notebook, nothing else a kernel left there
            if path.is_file() and not path.is_symlink():
                shutil.copyfile(path, dest / path.name)
        for name in ("timestamp.txt", "submission_secret.txt"):   # nbgrader's feedback needs them: the originals
            kept = g.root / "submitted" / s / p.lesson / name
            if kept.is_file() and not kept.is_symlink():
                shutil.copyfile(kept, dest / name)
    if students and g.settings.sqlite_path is not None:
        with g.lock:
            _merge(f"sqlite:///{result.work / 'gradebook.db'}", g.settings.db_url, g.settings.course_id,
                   p.lesson, students)


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
                for grade in nb.grades:
                    mine = dst.find_grade(grade.name, nb.name, lesson, student)
                    mine.auto_score = grade.auto_score
                    mine.needs_manual_grade = grade.needs_manual_grade
                for c in nb.comments:
                    dst.find_comment(c.name, nb.name, lesson, student).auto_comment = c.auto_comment
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
            for grade in nb.grades:
                grade.auto_score = 0.0
                grade.manual_score = None
                grade.needs_manual_grade = False
        gb.db.commit()


def record_lesson(g: "Grading", p: Plan) -> None:
    """Zeros for the unusable submissions; a warning where a submitted file changed."""
    for s in p.students:
        if p.outcomes[s].status == "zero":
            record_zero(g.settings, p.lesson, s)
            shutil.rmtree(g.root / "autograded" / s / p.lesson, ignore_errors=True)
            shutil.rmtree(g.root / "feedback" / s / p.lesson, ignore_errors=True)
        if _hash_tree(g.root / "submitted" / s / p.lesson) != p.before[s]:
            p.outcomes[s].notes.append("WARNING: the files in submitted/ changed while grading")


# --- report -----------------------------------------------------------------------------------

@dataclass
class GradeRun:
    outcomes: list[Outcome] = field(default_factory=list)
    lessons: list[str] = field(default_factory=list)
    seconds: float = 0.0
    submissions: int = 0
    logs: dict[str, str] = field(default_factory=dict)
    lesson_seconds: dict[str, float] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)   # feedback or export that failed
    cluster: dict = field(default_factory=dict)          # on a Dask cluster: each worker's share (utils/grading/dask/)


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
    cluster: object = None           # a utils.grading.dask.runner.Cluster: the run step on Dask workers

    def nbgrader(self, args: list[str]):
        return nbgrader([*args, f"--CourseDirectory.db_url={self.settings.db_url}"], cwd=self.root, check=False)


def report(g: Grading, p: Plan) -> None:
    """Each student's total from the gradebook, one line each."""
    totals: dict[str, list[float]] = {}
    for r in read_scores_url(g.settings.db_url, g.settings.course_id, [p.lesson]):
        t = totals.setdefault(r.student, [0.0, 0.0])
        t[0] += r.score
        t[1] += r.max_score
    for s, out in p.outcomes.items():
        out.score, out.max_score = totals.get(s, (None, None))
        g.run.outcomes.append(out)
        g.say(out.line())
    g.run.submissions += len(p.outcomes)
    g.run.lessons.append(p.lesson)


def write_feedback(g: Grading, lesson: str) -> None:
    run = g.nbgrader(["generate_feedback", lesson, "--force"]
                     + (["--HideHiddenTests.enabled=False"] if g.show_hidden_tests else []))
    if run.rc != 0:
        g.run.logs[f"{lesson}/feedback"] = run.log
        g.run.failures.append(f"{lesson}: nbgrader generate_feedback failed (exit {run.rc}); "
                              f"see autograde.log:\n{log_tail(run.log)}")


def write_export(g: Grading) -> None:
    csv = g.root / "grades.csv"
    if csv.is_file():
        csv.unlink()   # a stale file must not pass for this run's export
    run = g.nbgrader(["export", "--to", str(csv)])
    if run.rc == 0 and csv.exists():
        g.say(f"wrote {csv} and feedback/ (HTML per student and lesson)")
    else:
        g.run.logs["export"] = run.log
        g.run.failures.append(f"nbgrader export failed (exit {run.rc}), grades.csv not written:\n{log_tail(run.log)}")


# --- the command --------------------------------------------------------------------------------

def grade_lesson(g: Grading, lesson: str, known, with_feedback: bool = True) -> None:
    students = submitted_students(g.root, lesson)
    if not students:
        g.say(f"{lesson}: no submissions")
        return
    start = time.perf_counter()
    # The gradebook needs the lesson's cells and hidden tests; building records them
    # (and rewrites release/ with identical bytes).
    built = g.nbgrader(["generate_assignment", lesson, "--force"])
    if built.rc != 0:
        raise ToolError(f"nbgrader generate_assignment {lesson} failed:\n{built.log[-3000:]}")
    if g.cluster is not None:   # --scheduler: one Dask task per submission (utils/grading/dask/)
        p = g.cluster.grade(g, lesson, students, known)
    else:
        p = plan(g.root, lesson, students, known)
        run_lesson(g, p)
    record_lesson(g, p)
    if with_feedback:   # on a cluster, in parallel on the grader's cores (utils/grading/dask/)
        (g.cluster.feedback if g.cluster is not None else write_feedback)(g, lesson)
    report(g, p)
    g.run.lesson_seconds[lesson] = time.perf_counter() - start
    g.say(f"{lesson}: graded {len(students)} submission(s) in {g.run.lesson_seconds[lesson]:.1f} s "
          f"with {min(g.workers, len(students))} worker(s)")


def grade_lessons(root: Path = REPO, names: list[str] | None = None, *, workers: int | None = None,
                  cell_timeout: float | None = None, show_hidden_tests: bool = False,
                  db_url: str | None = None, watchdog: float = DEFAULT_WATCHDOG,
                  feedback: bool = True, export: bool = True, quiet: bool = False,
                  scheduler: str | None = None) -> GradeRun:
    """Grade every submission of the named lessons (all when none); see the module doc."""
    root = Path(root).resolve()
    settings = course_settings(root, db_url)
    address = scheduler_address(scheduler)   # None: local workers, as always
    if address is None:
        require_sandbox(settings)            # on a cluster each worker checks its own
    g = Grading(root, settings, max(1, workers or os.cpu_count() or 1),
                [f"--Execute.timeout={int(cell_timeout)}"] if cell_timeout else [], watchdog,
                show_hidden_tests, (lambda *a: None) if quiet else print)
    start = time.perf_counter()
    known = _lesson_ids(root)
    names = resolve_lessons(names or [], root)
    if address is not None:
        # here, not at the top: the runner imports this module's planning and recording
        from utils.grading.dask.runner import Cluster

        g.cluster = Cluster.connect(address, g.say, root=root)
    if export:   # an export left by an earlier run must not pass for this one's, should it stop early
        stale = root / "grades.csv"
        if stale.is_file() or stale.is_symlink():   # anything else there makes the export fail, and says so
            stale.unlink()
    completed = False
    try:
        for lesson in names:
            grade_lesson(g, lesson, known, feedback)
        completed = True
    finally:
        if g.cluster is not None:
            g.cluster.close(g, completed)
    if g.run.lessons and export:
        write_export(g)
    g.run.seconds = time.perf_counter() - start
    return g.run


def grade(root: Path = REPO, names: list[str] | None = None, **options) -> tuple[str, list[str]]:
    """Grade; return (score table, list of problems naming lesson and student)."""
    run = grade_lessons(root, names, **options)
    problems = [f"{o.lesson}: submission of {shown(o.student)} scored 0: {escaped(o.reason)}"
                for o in run.outcomes if o.status == "zero"]
    problems += [f"{o.lesson}: {shown(o.student)}: {escaped(n)}" for o in run.outcomes for n in o.notes
                 if n.startswith("WARNING")]
    problems += run.failures
    if run.logs:
        (Path(root) / "autograde.log").write_text("\n\n".join(f"===== {k}\n{v}" for k, v in run.logs.items()))
    settings = course_settings(root, options.get("db_url"))
    return score_table(read_scores_url(settings.db_url, settings.course_id, run.lessons)), problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("lessons", nargs="*", help="lesson folders under source/ (default: all)")
    parser.add_argument("--workers", type=int, default=None, help="parallel graders (default: CPU cores)")
    parser.add_argument("--cell-timeout", type=float, default=None,
                        help="seconds a cell may run (default: Execute.timeout in nbgrader_config.py)")
    parser.add_argument("--show-hidden-tests", action="store_true", help="show hidden tests in the feedback")
    parser.add_argument("--db-url", default=None, help="gradebook URL (default: nbgrader_config.py or gradebook.db)")
    parser.add_argument("--course", type=Path, default=REPO, help="course directory (default: this repository)")
    parser.add_argument("--scheduler", default=None, help="grade on this Dask scheduler, tcp://HOST:8786 "
                        "(default: DASK_SCHEDULER_ADDRESS; neither: local workers); see docs/instructors.md")
    args = parser.parse_args(argv)
    try:
        table, problems = grade(args.course, args.lessons, workers=args.workers, cell_timeout=args.cell_timeout,
                                show_hidden_tests=args.show_hidden_tests, db_url=args.db_url,
                                scheduler=args.scheduler)
    except ToolError as err:
        print(f"grade failed: {err}", file=sys.stderr)
        return 1
    print(table)
    for p in problems:
        print(f"FAIL {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
