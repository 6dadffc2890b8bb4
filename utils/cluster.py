"""Grade on a Dask cluster: one task per submission and lesson, on workers the instructor runs.

    python -m utils.grade --scheduler tcp://HOST:8786        (or DASK_SCHEDULER_ADDRESS=... make grade)

`utils.grade` plans, records and reports as it does locally (utils/grade.py); only the run step
moves to the cluster. The workers share no disk with the grader (the machine running
utils.grade): every input travels with the tasks, every result comes back in them. Per lesson:

  - the scheduler runs nothing of the course's: every function sent to it, and every task's
    function, is pickled by value (a `dask scheduler` has Dask, not the course's tools);
  - the grader reads the submissions (preflight) and the lesson's nbgrader_config.py and source/
    folder, and hashes the code that grades: the `course` package and the course's tools
    (`utils/`). Every worker hashes its own and refuses, in one line, when they differ (before
    anything is graded: `Client.run` on every worker; again in every task, for workers that join
    later), or when the bubblewrap sandbox cannot run there;
  - one worker computes the reference's cache key (its libraries); the reference solution runs
    once as a task (unless the grader's .grading-cache/ holds it) and its observations come back
    to the grader's cache; every later task carries them, and refuses where its worker's key
    differs. The grader makes the lesson's SQLite gradebook template meanwhile; its bytes travel too;
  - one task per submission, carrying the submission's regular files (at most SUBMISSION_LIMIT
    bytes; a larger one scores zero with that reason), runs `utils.grade.run_worker` on a worker
    in a course folder made of what the task carries, in the worker's temporary folder: `nbgrader
    autograde` with every kernel in the bubblewrap sandbox, the verdicts judged there as locally,
    the kernels' numeric libraries given the worker's cores split between its threads. The task
    returns the graded notebook and its small gradebook; only the grader writes the course's
    gradebook (PostgreSQL for a cluster), once per submission, as results arrive. Never more tasks
    are out than the cluster has threads. A worker process that dies mid-submission never writes
    the course's gradebook: the scheduler sends the task to another worker, and after
    `distributed.scheduler.allowed-failures` (default 3) deaths the submission is marked failed
    with the reason and the rest are graded.

Each recorded submission is also written to a journal in .grading-cache/ (Journal). A run that
stops (scheduler lost, in one line; no workers left for WORKER_WAIT s) keeps it, and the next run
keeps those grades rather than grading them again; a run that grades every lesson removes it.
Progress (done, running, failed, on which worker) is printed as results arrive and every
STATUS_EVERY seconds, with the scheduler's dashboard link; the run ends with each worker's share.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

SCHEDULER_ENV = "DASK_SCHEDULER_ADDRESS"   # what Dask's own tools read
CONNECT_TIMEOUT = 20.0                     # seconds to reach the scheduler and hear it answer
WORKER_WAIT = 120.0                        # seconds to wait for a worker while the cluster has none
STATUS_EVERY = 30.0                        # seconds between progress lines while nothing finishes
KERNEL_THREADS_ENV = "COURSE_KERNEL_THREADS"   # a worker's kernels' library threads, instead of the split
POLL = 2.0                                 # seconds between looks at which worker runs what


def scheduler_address(option: str | None = None) -> str | None:
    """The scheduler to grade on: --scheduler, else DASK_SCHEDULER_ADDRESS; None grades locally."""
    return option or os.environ.get(SCHEDULER_ENV) or None


def _one_line(err: BaseException) -> str:
    text = (str(err).strip().splitlines() or [""])[0][:200]
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def _host_port(address: str) -> tuple[str, int]:
    rest = address.strip().split("://", 1)[-1].rstrip("/")
    host, _, port = rest.rpartition(":")
    if not host or not port.isdigit():
        host, port = rest, "8786"   # Dask's default port
    return host.strip("[]"), int(port)


def address_problem(address: str) -> str | None:
    """One line when `address` cannot be a scheduler's address (a web address, an unknown scheme)."""
    a = address.strip()
    scheme = a.split("://", 1)[0].lower() if "://" in a else "tcp"
    if scheme in ("http", "https"):
        return (f"{address} is a web address (the scheduler's dashboard?): give the scheduler's own address, "
                f"tcp://HOST:8786 by default (`dask scheduler` prints it: 'Scheduler at: tcp://...')")
    if scheme not in ("tcp", "tls", "ucx", "inproc", "ws", "wss"):
        return f"{address}: not a Dask scheduler address (tcp://HOST:PORT, or tls://, ucx://)"
    return None


def unreachable(address: str, timeout: float) -> str | None:
    """One line when nothing accepts a connection at a tcp:// or tls:// address (at once for a
    closed port, within `timeout` s for a host that does not answer)."""
    if address.split("://", 1)[0].lower() not in ("tcp", "tls") and "://" in address:
        return None
    host, port = _host_port(address)
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as err:
        why = err.strerror or _one_line(err)
        return (f"cannot reach the Dask scheduler at {address}: {why} (is `dask scheduler` running on "
                f"{host}, port {port}, and reachable from here?)")
    return None


_levels: dict[str, int] = {}


def _quiet_dask(quiet: bool) -> None:
    """While the grader is connected, Dask's own log lines (a lost connection, its reconnection
    attempts, their tracebacks) stay quiet: the command says in one line what happened. Dask
    gives some of its loggers levels of their own (distributed.client...), so each is set."""
    import logging

    if quiet:
        names = ["distributed", "tornado"] + [n for n in logging.root.manager.loggerDict
                                              if n.startswith(("distributed.", "tornado."))]
        for name in names:
            log = logging.getLogger(name)
            _levels.setdefault(name, log.level)
            log.setLevel(logging.CRITICAL + 1)
    else:
        for name, level in list(_levels.items()):
            logging.getLogger(name).setLevel(level)
            del _levels[name]


# --- what every worker must share with the grader ---------------------------------------------

def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def tools_files(tools: Path | None = None) -> list[tuple[str, Path]]:
    """(name, path) of every file of the course's tools that grade (`utils/`, where this Python
    imports them from, or under `tools`): the graders, the sandbox, the work folders."""
    import utils

    folder = Path(tools) / "utils" if tools is not None else Path(utils.__file__).resolve().parent
    return [(f"utils/{p.relative_to(folder).as_posix()}", p) for p in sorted(folder.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"]


def fingerprint(tools: Path | None = None) -> dict[str, str]:
    """{name: sha256} of the code that grades: the files of the `course` package this Python
    imports (the one the kernels get) and the course's tools (`utils/`, tools_files). The lesson's
    files, the reference and the submissions travel with the tasks, so they cannot differ."""
    from utils.grading.reference import _course_files

    files = {f"course package: {name}": _sha(path) for name, path in _course_files()}
    files.update((name, _sha(path)) for name, path in tools_files(tools))
    return files


def _worker_label(worker) -> str:
    name = str(worker.name)
    return f"{name} ({worker.address}, host {socket.gethostname()})" if name != worker.address \
        else f"{worker.address} (host {socket.gethostname()})"


def worker_problem(expected: dict[str, str], sandbox: tuple[bool, str], worker,
                   tools: Path | None = None) -> str | None:
    """None when this worker can grade with the grader's code, else one line saying why not."""
    from utils.sandbox import start_problem, unavailable

    me = _worker_label(worker)
    mine = fingerprint(tools)
    differ = sorted(k for k in set(mine) | set(expected) if mine.get(k) != expected.get(k))
    if differ:
        shown = ", ".join(differ[:3]) + (f" and {len(differ) - 3} more" if len(differ) > 3 else "")
        code = [k for k in differ if k.startswith("utils/")]
        fix = ("run the grader's version of the course's tools (a clone of the same commit on its "
               "PYTHONPATH)" if code else "install the grader's version of the course package")
        return (f"worker {me} refuses: its {'grading tools' if code else 'course package'} differ from the "
                f"grader's ({shown}); it must {fix}")
    enabled, bwrap = sandbox
    problem = (unavailable(bwrap) or start_problem(bwrap)) if enabled else None
    if problem:
        return f"worker {me} refuses: the autograding sandbox cannot run there: {problem}"
    return None


async def check_worker(expected: dict[str, str], sandbox: tuple[bool, str], dask_worker=None) -> str | None:
    """worker_problem on every worker at once (Client.run passes dask_worker), in a thread: the
    hashing and the sandbox probe take seconds the worker's event loop must not wait for."""
    import asyncio

    return await asyncio.to_thread(worker_problem, expected, tuple(sandbox), dask_worker)


# --- what travels with a task: the lesson, the reference, the submission --------------------------

SUBMISSION_LIMIT = 64 * 2**20   # bytes of one submission's files a task carries


def _tree(folder: Path) -> list[Path]:
    """The regular files under `folder`, as utils.grade copies a submission: symbolic links and
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


def _course_here(spec: dict, folder: Path) -> Path:
    """A course folder on this worker made of what the task carries."""
    from utils.grade import CACHE

    folder.mkdir(parents=True)
    (folder / "nbgrader_config.py").write_bytes(spec["config"])
    unpack(spec["source"], folder / "source" / spec["lesson"])
    if spec.get("reference") is not None:
        (folder / CACHE).mkdir()
        (folder / CACHE / f"{spec['key']}.json").write_bytes(spec["reference"])
    if spec.get("submission") is not None:
        unpack(spec["submission"], folder / "submitted" / spec["student"] / spec["lesson"])
    return folder


# --- what a run that stopped had recorded ----------------------------------------------------------

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
        from utils.grade import CACHE

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


def _resume(root: Path, out) -> None:
    """The outcome of a submission graded by an earlier run: its verdicts from autograded/."""
    import nbformat

    from utils.grading.base import read_notes
    from utils.grading.verdicts import read_verdicts

    nb = nbformat.read(str(next((root / "autograded" / out.student / out.lesson).glob("*.ipynb"))), as_version=4)
    out.status, out.verdicts = "graded", read_verdicts(nb)
    out.notes += [n["text"] for n in read_notes(nb) if isinstance(n.get("text"), str)]
    out.notes.append("graded and recorded by an earlier run on the cluster that stopped; kept, not graded again")


# --- the tasks, run on the workers ---------------------------------------------------------------

def kernel_threads(nthreads: int, environ=None) -> dict[str, str]:
    """The numeric libraries' threads (OpenMP, MKL, OpenBLAS, numexpr) of each kernel on a worker
    that grades `nthreads` submissions at once: its cores split between them, or
    COURSE_KERNEL_THREADS where the worker's environment sets it. Always given to the kernel
    explicitly: Dask's nanny sets OMP/MKL/OPENBLAS_NUM_THREADS to 1 in its worker's environment
    (distributed.nanny.pre-spawn-environ), which every kernel would otherwise inherit."""
    from utils.grade import THREAD_VARS

    environ = os.environ if environ is None else environ
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    chosen = environ.get(KERNEL_THREADS_ENV, "").strip()
    n = int(chosen) if chosen.isdigit() and int(chosen) > 0 else max(1, cores // max(1, nthreads))
    return {v: str(n) for v in THREAD_VARS}


def _worker():
    from distributed import get_worker

    return get_worker()


def _refused(spec: dict, worker) -> None:
    problem = worker_problem(spec["expected"], tuple(spec["sandbox"]), worker)
    if problem:
        raise RuntimeError(problem)


def _same_key(spec: dict, course: Path, worker) -> None:
    """Refuse (one line naming what differs) where this worker's reference key is not the one
    the lesson's tasks carry (that of the worker that told the grader its key)."""
    from collections import Counter

    from utils.coursedir import source_notebook
    from utils.grading.reference import _library_versions, cache_key

    if cache_key(source_notebook(course, spec["lesson"])) == spec["key"]:
        return
    mine, theirs = Counter(_library_versions().splitlines()), Counter(spec.get("libraries", "").splitlines())
    differ = sorted((mine - theirs) + (theirs - mine))
    shown = "; ".join(f"{'here' if mine[line] > theirs[line] else 'there'}: {line}"
                      + (f" ({max(mine[line], theirs[line])} times)" if min(mine[line], theirs[line]) else "")
                      for line in differ[:4]) + (f" and {len(differ) - 4} more" if len(differ) > 4 else "")
    raise RuntimeError(f"worker {_worker_label(worker)} refuses: its installed libraries differ from those of "
                       f"{spec.get('keyed_by', 'the worker that ran the reference')} ({shown or 'the same versions'}"
                       f"; the reference's cache key covers every distribution this Python finds, its path "
                       f"included: install the same pinned versions on every machine, with the same PYTHONPATH)")


def key_task(spec: dict) -> dict:
    """The reference's cache key of the lesson as a worker computes it (the libraries it finds),
    with what it is made of: the key every task of the lesson is then held to."""
    from utils.coursedir import source_notebook
    from utils.grading.reference import _library_versions, cache_key

    worker = _worker()
    _refused(spec, worker)
    scratch = Path(tempfile.mkdtemp(prefix=f"cluster-key-{spec['lesson']}-"))
    try:
        course = _course_here({**spec, "reference": None, "submission": None}, scratch / "course")
        return {"key": cache_key(source_notebook(course, spec["lesson"])), "libraries": _library_versions(),
                "keyed_by": f"worker {_worker_label(worker)}"}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def reference_task(spec: dict) -> dict:
    """The lesson's reference run, on a worker, from the source notebook the task carries; its
    observations go back to the grader, which keeps them in its .grading-cache/."""
    from utils.coursedir import source_notebook
    from utils.grade import CACHE
    from utils.grading.reference import reference_for

    worker = _worker()
    _refused(spec, worker)
    scratch = Path(tempfile.mkdtemp(prefix=f"cluster-reference-{spec['lesson']}-"))
    try:
        course = _course_here(spec, scratch / "course")
        _same_key(spec, course, worker)
        start = time.perf_counter()
        ref = reference_for(source_notebook(course, spec["lesson"]), course / CACHE)
        data = (course / CACHE / f"{spec['key']}.json").read_bytes()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return {"key": spec["key"], "json": data, "ran": not ref.cached, "kernel_seconds": ref.seconds,
            "seconds": time.perf_counter() - start, "worker": _worker_label(worker)}


def grade_task(spec: dict, ref: dict) -> dict:
    """Autograde one submission on this worker (utils.grade.run_worker: the same work folder,
    sandbox and verdicts as a local run), in a course folder made of what the task carries: the
    worker needs no access to the grader's files. Returns what the grader records."""
    from utils.coursedir import REPO
    from utils.grade import CACHE, CourseSettings, Grading, Outcome, Plan, run_worker

    worker = _worker()
    lesson, student = spec["lesson"], spec["student"]
    _refused(spec, worker)
    start = time.perf_counter()
    scratch = Path(tempfile.mkdtemp(prefix=f"cluster-{lesson}-"))
    try:
        course = _course_here(spec, scratch / "course")
        _same_key(spec, course, worker)
        template = scratch / "gradebook.db"
        template.write_bytes(spec["template"])
        enabled, bwrap = spec["sandbox"]
        settings = CourseSettings(spec["course_id"], f"sqlite:///{template}", enabled, bwrap)
        g = Grading(course, settings, 1, list(spec["extra"]), spec["watchdog"], False, lambda *a: None)
        p = Plan(lesson, [student], {student: Outcome(lesson, student, file=spec["file"])}, {},
                 course / CACHE / f"{spec['key']}.json")
        env = {**kernel_threads(getattr(worker.state, "nthreads", 1) or 1), "COURSE_TOOLS": str(REPO)}
        result = run_worker(g, p, [student], env, None)
        try:
            graded = {}
            if student in result.graded:
                graded = {nb.name: nb.read_bytes() for nb in result.graded[student].glob("*.ipynb")
                          if nb.is_file() and not nb.is_symlink()}
            gradebook = (result.work / "gradebook.db").read_bytes() if graded else b""
        finally:
            shutil.rmtree(result.work, ignore_errors=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return {"graded": graded, "gradebook": gradebook, "rc": result.rc, "log": result.log[-20000:],
            "killed": result.killed, "worker": _worker_label(worker), "address": worker.address,
            "seconds": time.perf_counter() - start}


# --- the grader's side -------------------------------------------------------------------------

def feedback_in_parallel(g, lesson: str, processes: int | None = None) -> int:
    """nbgrader generate_feedback for the lesson, in one nbgrader process per core of the grader at
    once, each leaving out the students of the others (CourseDirectory.student_id_exclude): the
    feedback of a large class is the grader's work alone (it reads the gradebook), one notebook
    after another in one process otherwise. Failures as utils.grade.write_feedback's."""
    from concurrent.futures import ThreadPoolExecutor

    from utils import grade
    from utils.coursedir import log_tail

    folder = g.root / "autograded"
    graded = sorted(p.name for p in folder.iterdir() if (p / lesson).is_dir()) if folder.is_dir() else []
    n = min(processes or os.cpu_count() or 1, len(graded))
    if n < 2 or any("," in s for s in graded):   # an id with a comma cannot be left out by name
        grade.write_feedback(g, lesson)
        return 1
    args = ["generate_feedback", lesson, "--force"] + (["--HideHiddenTests.enabled=False"] if g.show_hidden_tests else [])
    chunks = [graded[i::n] for i in range(n)]

    def one(chunk):
        others = ",".join(s for s in graded if s not in set(chunk))
        return g.nbgrader([*args, f"--CourseDirectory.student_id_exclude={others}"])

    with ThreadPoolExecutor(max_workers=n) as pool:
        runs = list(pool.map(one, chunks))
    for i, run in enumerate(runs):
        if run.rc != 0:
            g.run.logs[f"{lesson}/feedback-{i + 1}"] = run.log
            g.run.failures.append(f"{lesson}: nbgrader generate_feedback failed (exit {run.rc}) for "
                                  f"{len(chunks[i])} student(s) ({', '.join(chunks[i][:3])}...); see "
                                  f"autograde.log:\n{log_tail(run.log)}")
    return n


@dataclass
class Share:
    submissions: int = 0
    seconds: float = 0.0


@dataclass
class Cluster:
    """A connection to the instructor's Dask scheduler, used by utils.grade.grade_lesson."""
    address: str
    say: object
    client: object = None
    allowed_failures: int = 3
    shares: dict[str, Share] = field(default_factory=dict)
    references: dict[str, dict] = field(default_factory=dict)
    recorded: dict[tuple[str, str], int] = field(default_factory=dict)   # (lesson, student) -> times recorded
    retried: list[str] = field(default_factory=list)
    dashboard: str | None = None
    journal: "Journal | None" = None
    worker_wait: float = WORKER_WAIT
    progress: tuple[int, int] = (0, 0)                   # (recorded, to record) of the lesson now
    resumed: list[str] = field(default_factory=list)     # lesson/student kept from a run that stopped
    feedback_processes: dict[str, int] = field(default_factory=dict)   # lesson -> nbgrader processes at once

    @classmethod
    def connect(cls, address: str, say=print, *, timeout: float = CONNECT_TIMEOUT,
                wait: float = WORKER_WAIT, root: Path | None = None) -> "Cluster":
        """Connect, in one line when it cannot: a web address (the dashboard's), nothing listening,
        a service that is not a Dask scheduler (each within `timeout` s), or a scheduler that has
        had no worker for `wait` s."""
        from utils.coursedir import ToolError

        try:
            from distributed import Client
        except ImportError:
            raise ToolError("grading on a Dask cluster needs dask and distributed: "
                            "pip install -r requirements-instructor.txt") from None
        problem = address_problem(address) or unreachable(address, timeout)
        if problem:
            raise ToolError(problem)
        _quiet_dask(True)
        try:
            client = Client(address, timeout=f"{timeout:g}s", set_as_default=False)
        except Exception as err:  # noqa: BLE001 - garbage from another service, a timeout, a refusal
            _quiet_dask(False)
            raise ToolError(f"{address} does not answer as a Dask scheduler ({_one_line(err)}); give the "
                            f"address `dask scheduler` prints ('Scheduler at: tcp://HOST:8786'), not its "
                            f"dashboard's or another service's port") from None
        c = cls(address, say, client)
        try:
            c.allowed_failures = int(client.run_on_scheduler(_scheduler_call("allowed_failures")))
            try:
                c.dashboard = client.dashboard_link
            except (KeyError, AttributeError):   # the scheduler runs without its dashboard (no bokeh)
                c.dashboard = None
            if not client.nthreads():
                say(f"the Dask scheduler at {address} has no worker yet: waiting up to {wait:.0f} s for one")
                try:
                    client.wait_for_workers(1, timeout=wait)
                except Exception:  # noqa: BLE001 - a TimeoutError, whichever module it comes from
                    raise ToolError(f"the Dask scheduler at {address} has no workers (waited {wait:.0f} s): "
                                    f"start them (`dask worker {address}`, docs/instructors.md), then grade "
                                    f"again") from None
            workers = client.nthreads()
        except ToolError:
            c._shut()
            raise
        except Exception as err:  # noqa: BLE001 - the scheduler went away while we asked
            c._shut()
            raise ToolError(f"lost the Dask scheduler at {address} while connecting ({_one_line(err)})") from None
        c.worker_wait = wait
        if root is not None:
            c.journal = Journal(Path(root))
        say(f"grading on the Dask cluster at {address}: {len(workers)} worker(s) now; "
            + (f"dashboard: {c.dashboard}" if c.dashboard else "the scheduler serves no dashboard (bokeh not installed there)")
            + f"; a submission whose grading kills {c.allowed_failures + 1} workers is marked failed "
              f"(distributed.scheduler.allowed-failures = {c.allowed_failures})")
        return c

    def _shut(self) -> None:
        try:
            self.client.close(timeout=5)
        except Exception:  # noqa: BLE001 - closing a client whose scheduler is gone
            pass
        _quiet_dask(False)

    def close(self, g, completed: bool = False) -> None:
        """The shares, into the run; when every lesson was graded, the journal of this run is done."""
        total = sum(s.submissions for s in self.shares.values())
        if total:
            parts = [f"{w}: {s.submissions} ({100 * s.submissions / total:.0f} %, {s.seconds:.0f} s)"
                     for w, s in sorted(self.shares.items())]
            g.say("each worker's share: " + "; ".join(parts))
        g.run.cluster = {"workers": {w: s.submissions for w, s in self.shares.items()},
                         "seconds": {w: s.seconds for w, s in self.shares.items()},
                         "references": dict(self.references), "recorded": dict(self.recorded),
                         "retried": list(self.retried), "dashboard": self.dashboard,
                         "allowed_failures": self.allowed_failures, "resumed": list(self.resumed),
                         "feedback_processes": dict(self.feedback_processes)}
        if completed and self.journal is not None:
            self.journal.clear()
        self._shut()

    def lost(self, lesson: str, err: BaseException | None, done: int = 0, total: int = 0):
        """The one line (a ToolError) for a scheduler that went away mid-run."""
        from utils.coursedir import ToolError

        why = "its connection closed" if err is None or "Cancelled" in type(err).__name__ else _one_line(err)
        counts = f" after {done} of {total} submission(s) of {lesson} were recorded" if total else f" while grading {lesson}"
        return ToolError(f"lost the Dask scheduler at {self.address} ({why}){counts}: what was recorded is kept "
                         f"and the export was not written; grade again to grade only the rest")

    def connected(self) -> bool:
        return getattr(self.client, "status", "running") == "running"

    def feedback(self, g, lesson: str) -> None:
        """The lesson's feedback HTML, on the grader's cores at once (feedback_in_parallel)."""
        self.feedback_processes[lesson] = feedback_in_parallel(g, lesson)

    # -- one lesson ---------------------------------------------------------------------------

    def grade(self, g, lesson: str, students: list[str], known):
        """Plan, run on the cluster and record one lesson; the Plan, as utils.grade.plan + run_lesson.
        A scheduler lost on the way ends it with one line (ToolError); what was recorded stays."""
        from utils.coursedir import ToolError

        self.progress = (0, 0)
        try:
            return self._grade(g, lesson, students, known)
        except ToolError:
            raise
        except Exception as err:  # noqa: BLE001 - a closed connection, a cancelled future, a timeout
            if self.connected() and not isinstance(err, (OSError, TimeoutError)) \
                    and type(err).__name__ not in ("CancelledError", "FutureCancelledError"):
                raise
            raise self.lost(lesson, err, *self.progress) from None

    def _grade(self, g, lesson: str, students: list[str], known):
        from utils.coursedir import ToolError
        from utils.grade import CACHE, Plan, _hash_tree, _zero, safe_preflight

        outcomes = {s: safe_preflight(g.root, lesson, s, known) for s in students}
        before = {s: _hash_tree(g.root / "submitted" / s / lesson) for s in students}
        spec = lesson_spec(g.root, lesson, g.settings, g.extra, g.watchdog)
        g.workers = max(1, sum(self.client.nthreads().values()))   # for utils.grade's "with N worker(s)"
        refusals = [line for line in self.client.run(check_worker, spec["expected"], spec["sandbox"]).values() if line]
        if refusals:
            raise ToolError("\n".join(refusals) + "\nNothing was graded; stop those workers or give them "
                            "the grader's code, then grade again.")
        for s in students:
            size = tree_size(g.root / "submitted" / s / lesson) if outcomes[s].status != "zero" else 0
            if size > SUBMISSION_LIMIT:
                _zero(outcomes[s], f"its files hold {size / 2**20:.0f} MiB, more than the {SUBMISSION_LIMIT / 2**20:.0f} "
                                   f"MiB a grading task on the cluster carries (utils.cluster.SUBMISSION_LIMIT)")
        token = uuid.uuid4().hex[:8]
        # the key as a worker computes it (the grader's Python may find its libraries otherwise)
        try:
            spec.update(self.client.submit(_task("key_task"), spec, key=f"key-{lesson}-{token}").result())
        except Exception as err:  # noqa: BLE001 - a refusal (one line), or the scheduler lost
            if not self.connected() or type(err).__name__ in ("CancelledError", "FutureCancelledError"):
                raise
            raise ToolError(f"{lesson}: {err}") from None
        cached = g.root / CACHE / f"{spec['key']}.json"
        p = Plan(lesson, students, outcomes, before, cached)
        run_key = lesson_key(spec["expected"], spec["key"], g.extra)
        kept = self.journal.kept(lesson, run_key, {s: before[s] for s in p.to_grade}) if self.journal else []
        for s in kept:
            _resume(g.root, outcomes[s])
            self.resumed.append(f"{lesson}/{s}")
        if kept:
            self.say(f"{lesson}: {len(kept)} submission(s) recorded by an earlier run that stopped are kept "
                     f"(the gradebook holds them); not graded again")
        # the reference runs on a worker (unless the grader's cache has it) while the grader makes
        # the workers' gradebook template
        ref = None if cached.is_file() else \
            self.client.submit(_task("reference_task"), spec, key=f"reference-{lesson}-{token}")
        try:
            template = self._template(g, lesson)
            if ref is None:
                info = {"key": spec["key"], "ran": False, "kernel_seconds": 0.0, "seconds": 0.0,
                        "worker": "the grader's .grading-cache/"}
            else:
                try:
                    info = ref.result()
                except Exception as err:  # noqa: BLE001 - refused reference, mismatch, or its workers died
                    if not self.connected() or type(err).__name__ in ("CancelledError", "FutureCancelledError"):
                        raise
                    raise ToolError(f"{lesson}: the reference run on the cluster failed: {err}") from None
                cached.parent.mkdir(parents=True, exist_ok=True)
                tmp = cached.with_name(f"{cached.name}.{token}.tmp")
                tmp.write_bytes(info.pop("json"))
                tmp.replace(cached)
            self.references[lesson] = info
            todo = [s for s in p.to_grade if s not in kept]
            self.say(f"{lesson}: reference solution {'run' if info['ran'] else 'found in the cache'} on "
                     f"{info['worker']} ({info['seconds']:.1f} s); {len(todo)} submission(s) to grade")
            spec.update(reference=cached.read_bytes(), template=template)

            def submit(s):
                files = pack(g.root / "submitted" / s / lesson)   # read when sent: one lesson's tasks in flight at most
                return self.client.submit(_task("grade_task"), {**spec, "student": s, "file": outcomes[s].file,
                                                                "submission": files},
                                          info, key=f"grade-{lesson}-{s}-{token}")

            self._collect(g, p, todo, submit, run_key)
        finally:
            if ref is not None:
                try:
                    ref.release()
                except Exception:  # noqa: BLE001 - a client that lost its scheduler
                    pass
        return p

    def _template(self, g, lesson: str) -> bytes:
        """A SQLite gradebook holding the lesson (its cells, points and due date) for the workers'
        nbgrader runs; its bytes travel with every task."""
        from nbgrader.api import Gradebook, MissingEntry

        from utils.coursedir import alembic_on_path, nbgrader, scratch_course
        from utils.grade import _quiet_sqlalchemy

        tmp = scratch_course(g.root, [lesson])
        try:
            nbgrader(["generate_assignment", lesson, "--force"], cwd=tmp)
            alembic_on_path()
            with _quiet_sqlalchemy(), Gradebook(g.settings.db_url, g.settings.course_id) as gb:
                try:
                    due = gb.find_assignment(lesson).duedate
                except MissingEntry:
                    due = None
            if due is not None:
                with _quiet_sqlalchemy(), Gradebook(f"sqlite:///{tmp / 'gradebook.db'}", g.settings.course_id) as gb:
                    gb.update_or_create_assignment(lesson, duedate=due)
            return (tmp / "gradebook.db").read_bytes()
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def _collect(self, g, p, todo: list[str], submit, run_key: str = "") -> None:
        """Submit the lesson's grading tasks and record each as it finishes. Never more tasks are
        out than the cluster has threads (counted again as workers come and go): Dask hands a
        worker every task it is given at once, and counts a task held by a worker that dies as a
        try, so a task waits here until a thread can run it. A cluster left with no worker for
        WORKER_WAIT s, or a scheduler lost, stops it in one line (ToolError)."""
        from distributed import wait

        from utils.coursedir import ToolError, escaped, shown

        todo, futures, pending, failed, seen = list(todo), {}, set(), 0, {}
        total = len(todo)
        start = last = time.monotonic()
        no_worker_since = None
        while pending or todo:
            if not self.connected():
                self._cancel(futures)
                raise self.lost(p.lesson, None, total - len(pending) - len(todo), total)
            try:
                threads = sum(self.client.nthreads().values())
            except Exception:  # noqa: BLE001 - the next look says what is wrong
                threads = 1
            if threads == 0:
                no_worker_since = no_worker_since or time.monotonic()
                if time.monotonic() - no_worker_since > self.worker_wait:
                    self._cancel(futures)
                    raise ToolError(f"{p.lesson}: the Dask cluster at {self.address} has had no worker for "
                                    f"{self.worker_wait:.0f} s; {total - len(pending) - len(todo)} of {total} "
                                    f"submission(s) recorded, kept: start workers and grade again for the rest")
            else:
                no_worker_since = None
            while todo and len(pending) < max(1, threads):
                s = todo.pop(0)
                f = submit(s)
                futures[f] = s
                pending.add(f)
            try:
                with self.client.as_current():
                    finished, pending = wait(pending, timeout=POLL, return_when="FIRST_COMPLETED")
            except TimeoutError:
                finished = set()
            running = self._running(futures, seen)
            for f in finished:
                s = futures[f]
                try:
                    what = self._finished(g, p, f, s, seen.get(f.key, set()))
                except ToolError:
                    self._cancel(futures)
                    raise
                if self.journal is not None and p.outcomes[s].status == "graded":
                    self.journal.add(p.lesson, run_key, s, p.before[s])
                failed += p.outcomes[s].status == "zero"
                done = total - len(pending) - len(todo)
                self.progress = (done, total)
                self.say(f"  [{done}/{total} done, {len(pending)} running, {failed} failed] {p.lesson} {shown(s)}: "
                         f"{escaped(what)}")
                last = time.monotonic()
            if (pending or todo) and time.monotonic() - last >= STATUS_EVERY:
                on = "; ".join(f"{shown(s)} on {w}" for s, w in running) or "none (waiting for a worker)"
                self.say(f"  [{total - len(pending) - len(todo)}/{total} done after {time.monotonic() - start:.0f} s, "
                         f"{len(todo)} waiting] "
                         f"running: {on}" + (f"; dashboard: {self.dashboard}" if self.dashboard else ""))
                last = time.monotonic()

    def _finished(self, g, p, f, student: str, seen_on: set[str]) -> str:
        """Record one finished task (a Dask future); what happened, for the progress line. A
        submission that killed every worker it was sent to scores zero with the reason; any other
        error stops the grade (ToolError)."""
        from distributed.scheduler import KilledWorker

        from utils.coursedir import ToolError, shown
        from utils.grade import _zero

        if f.status == "finished":
            res = f.result()
            try:   # how many workers died while holding this task (the scheduler counts them)
                lost = int(self.client.run_on_scheduler(_scheduler_call("suspicious"), f.key))
            except Exception:  # noqa: BLE001 - a note only
                lost = 0
            self._record(g, p, student, res, seen_on, lost)
            return f"{p.outcomes[student].status} on {res['worker']} in {res['seconds']:.0f} s"
        err = f.exception() if f.status == "error" else None
        if isinstance(err, KilledWorker):
            _zero(p.outcomes[student], f"its grading killed every worker it was sent to ({err.allowed_failures + 1}, "
                                       f"the last {err.last_worker.address}; the scheduler's allowed-failures is "
                                       f"{err.allowed_failures}); its code may have killed them (memory?): see "
                                       f"those workers' logs")
            g.run.logs[f"{p.lesson}/{student}"] = str(err)
            return "FAILED: it killed its workers"
        if f.status == "cancelled" or not self.connected():   # the client cancels every task when it loses the scheduler
            raise self.lost(p.lesson, err, *self.progress)
        raise ToolError(f"{p.lesson} {shown(student)}: grading on the cluster stopped: "
                        f"{err if err is not None else f'the task was {f.status} (the scheduler went away?)'}. "
                        f"The submissions recorded so far are kept; grade again for the rest.")

    def _running(self, futures: dict, seen: dict) -> list[tuple[str, str]]:
        """(student, worker address) of each task the scheduler has given a worker; remembers, per
        task, every worker it was seen on (to tell a retried submission)."""
        by_key = {f.key: s for f, s in futures.items()}
        running = []
        try:
            processing = self.client.processing()
        except Exception:  # noqa: BLE001 - progress only
            return running
        for worker, keys in processing.items():
            for key in keys:
                if key in by_key:
                    seen.setdefault(key, set()).add(worker)
                    running.append((by_key[key], worker))
        return running

    def _record(self, g, p, student: str, res: dict, seen_on: set[str], lost: int = 0) -> None:
        """What a task returned, into autograded/ and the course's gradebook (the grader is its only
        writer); a submission is recorded once whatever the cluster did."""
        from utils.grade import WorkerResult, _fail, _merge, record

        key = (p.lesson, student)
        self.recorded[key] = self.recorded.get(key, 0) + 1
        if self.recorded[key] > 1:   # Dask delivers one result per task; never record twice
            return
        share = self.shares.setdefault(res["worker"], Share())
        share.submissions += 1
        share.seconds += res["seconds"]
        others = sorted(w for w in seen_on if w != res["address"])
        if others or lost:
            self.retried.append(f"{p.lesson}/{student}")
            where = f"on {', '.join(others)} " if others else ""
            p.outcomes[student].notes.append(f"its grading {where}was lost (the worker died"
                                             f"{f', {lost} time(s)' if lost > 1 else ''}); graded again on {res['worker']}")
        work = Path(tempfile.mkdtemp(prefix="cluster-result-"))
        try:
            result = WorkerResult([student], work, rc=res["rc"], log=res["log"], killed=res["killed"])
            if not res["graded"]:
                _fail(g, p, result, [student])
                return
            folder = work / "autograded" / student / p.lesson
            folder.mkdir(parents=True)
            for name, data in res["graded"].items():
                (folder / Path(name).name).write_bytes(data)
            (work / "gradebook.db").write_bytes(res["gradebook"])
            result.graded[student] = folder
            record(g, p, result, [student])   # merges into a SQLite course gradebook itself
            if g.settings.sqlite_path is None:
                with g.lock:
                    _merge(f"sqlite:///{work / 'gradebook.db'}", g.settings.db_url, g.settings.course_id,
                           p.lesson, [student])
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def _cancel(self, futures) -> None:
        try:
            self.client.cancel(list(futures))
        except Exception:  # noqa: BLE001 - best effort while failing
            pass


# What runs on the scheduler, and every task's function, is sent by value (cloudpickle pickles a
# function defined inside another one with its code): a scheduler started as `dask scheduler`
# has Dask but not the course's tools, and it unpickles what a client submits.

def _scheduler_call(what: str):
    """A function for Client.run_on_scheduler that needs nothing but Dask."""
    if what == "allowed_failures":
        def call(dask_scheduler=None):
            return dask_scheduler.allowed_failures
    else:
        def call(key, dask_scheduler=None):
            ts = dask_scheduler.tasks.get(key)
            return ts.suspicious if ts is not None else 0
    return call


def _task(name: str):
    """`name` of this module, as a function the scheduler can unpickle without the course's tools
    (it imports utils.cluster only where it runs: on a worker)."""
    def call(*args):
        import importlib

        return getattr(importlib.import_module("utils.cluster"), name)(*args)
    call.__name__ = call.__qualname__ = name
    return call


def _takes_n_workers(client) -> bool:
    import inspect

    return "n_workers" in inspect.signature(client.scheduler_info).parameters


# --- a cluster on this machine's loopback (tests, benchmarks, a rehearsal) ----------------------

@dataclass
class LoopbackCluster:
    address: str
    scheduler: object                 # subprocess.Popen
    workers: dict[str, object]        # name -> subprocess.Popen
    scratch: dict[str, Path]          # name -> its own temporary folder
    base: Path

    def kill_worker(self, name: str) -> None:
        """SIGKILL one worker process, as if its machine went away; the grading it had started
        (nbgrader and its sandboxed kernels, in their own session) dies with it."""
        import signal

        import psutil

        proc = self.workers[name]
        try:
            children = psutil.Process(proc.pid).children(recursive=True)
        except psutil.Error:
            children = []
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        for child in children:
            try:
                child.kill()
            except psutil.Error:
                pass


def course_clone(dest: Path) -> Path:
    """A copy of this checkout's files (git's tracked and untracked, not its ignored ones: no
    environment, no caches) at `dest`: a worker's own clone of the repository."""
    import subprocess

    from utils.coursedir import REPO

    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=REPO, capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        src = REPO / name
        if src.is_file() and not src.is_symlink():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


def loopback_cluster(workers: int, base: Path, *, allowed_failures: int | None = None,
                     timeout: float = 120.0, nanny: bool = True, hide: tuple[Path, ...] = ()):
    """A real `dask scheduler` and `workers` separate `dask worker` processes on 127.0.0.1 (free
    ports, --nthreads 1, each with its own scratch folder as TMPDIR), started as
    docs/instructors.md says: the scheduler in a folder of its own without the course's tools on
    its path, each worker with its nanny (unless `nanny` is False) and the course's tools on
    PYTHONPATH. With `hide`, every worker runs in a mount namespace of its own (bubblewrap) where
    those folders are empty, from its own clone of the repository at another path (as on a
    machine that shares no disk with the grader). A context manager that stops them all."""
    import contextlib
    import json
    import subprocess
    import sys

    from utils.coursedir import REPO, ToolError, kill_tree

    @contextlib.contextmanager
    def run():
        root = Path(base)
        root.mkdir(parents=True, exist_ok=True)
        dask = str(Path(sys.executable).parent / "dask")
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "COURSE_TOOLS")}
        if allowed_failures is not None:
            env["DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES"] = str(allowed_failures)
        tools = course_clone(root / "clone") if hide else REPO
        procs = []
        sched_file = root / "scheduler.json"
        (root / "scheduler").mkdir(exist_ok=True)
        with open(root / "scheduler.log", "w") as log:
            sched = subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", "0",
                                      "--dashboard-address", "127.0.0.1:0", "--scheduler-file", str(sched_file)],
                                     cwd=root / "scheduler", env=env, stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        procs.append(sched)
        cluster = None
        try:
            deadline = time.monotonic() + timeout
            while not sched_file.is_file() or not sched_file.read_text().strip():
                if sched.poll() is not None or time.monotonic() > deadline:
                    raise ToolError(f"dask scheduler did not start: {(root / 'scheduler.log').read_text()[-2000:]}")
                time.sleep(0.2)
            address = json.loads(sched_file.read_text())["address"]
            cluster = LoopbackCluster(address, sched, {}, {}, root)
            wenv = {**env, "PYTHONPATH": str(tools)}
            for i in range(workers):
                name = f"worker-{i + 1}"
                scratch = root / name
                scratch.mkdir(exist_ok=True)
                cmd = [dask, "worker", address, "--name", name, "--nthreads", "1", "--no-dashboard",
                       "--host", "127.0.0.1", "--local-directory", str(scratch)] + ([] if nanny else ["--no-nanny"])
                if hide:   # the same file system, less the hidden folders (and no way to mount them back)
                    hidden = [a for h in hide for a in ("--tmpfs", str(Path(h).resolve()))]
                    cmd = ["bwrap", "--dev-bind", "/", "/", *hidden, "--chdir", str(tools), "--die-with-parent",
                           "--", *cmd]
                with open(root / f"{name}.log", "w") as log:
                    proc = subprocess.Popen(cmd, cwd=tools if hide else scratch, env={**wenv, "TMPDIR": str(scratch)},
                                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
                procs.append(proc)
                cluster.workers[name], cluster.scratch[name] = proc, scratch
            from distributed import Client

            if workers:
                with Client(address, timeout="30s", set_as_default=False) as client:
                    client.wait_for_workers(workers, timeout=timeout)
            yield cluster
        finally:
            for proc in reversed(procs):
                if proc.poll() is None:
                    kill_tree(proc.pid)
                    proc.wait()

    return run()


# --- benchmark: python -m utils.cluster bench ---------------------------------------------------

def bench(workers: list[int], names: list[str] | None = None, say=print) -> list[dict]:
    """Grade the sample class (utils.demo's three students per lesson) on loopback clusters of each
    size in `workers`, each on a fresh copy of the course; the reference runs are made once first
    (a 1-worker cluster, fresh cache: their times) and copied into every later copy. One dict per
    run: workers, submissions, seconds, per minute, load average before and after."""
    from utils.coursedir import REPO, lessons, scratch_course
    from utils.demo import place_samples
    from utils.grade import CACHE, DEFAULT_WATCHDOG, course_settings, grade_lessons

    names = names or lessons(REPO)
    base = Path(tempfile.mkdtemp(prefix="cluster-bench-"))
    results = []
    try:
        def course(tag):
            c = scratch_course(REPO, names, base / tag, release=True)
            place_samples(c)
            return c

        first = course("reference")
        from distributed import Client

        refs = {}
        with loopback_cluster(1, base / "cluster-reference") as cl, \
                Client(cl.address, timeout="30s", set_as_default=False) as client:
            for lesson in names:   # only the reference task of each lesson: no submissions
                spec = lesson_spec(first, lesson, course_settings(first), [], DEFAULT_WATCHDOG)
                spec.update(client.submit(_task("key_task"), spec, pure=False).result())
                start = time.perf_counter()
                info = client.submit(_task("reference_task"), spec, pure=False).result()
                refs[lesson] = (time.perf_counter() - start, info["kernel_seconds"])
                (first / CACHE).mkdir(exist_ok=True)
                (first / CACHE / f"{info['key']}.json").write_bytes(info["json"])
        for lesson, (wall, kernel) in refs.items():
            say(f"reference run of {lesson}: {wall:.1f} s as a task ({kernel:.1f} s kernel time)")
        for n in workers:
            c = course(f"w{n}")
            shutil.copytree(first / CACHE, c / CACHE, ignore=shutil.ignore_patterns("*.lock"))
            with loopback_cluster(n, base / f"cluster-{n}") as cl:
                load0 = Path("/proc/loadavg").read_text().split()[:3]
                start = time.perf_counter()
                run = grade_lessons(c, names, scheduler=cl.address, quiet=True)
                seconds = time.perf_counter() - start
                load1 = Path("/proc/loadavg").read_text().split()[:3]
            r = {"workers": n, "submissions": len(run.outcomes), "seconds": seconds,
                 "per_minute": 60 * len(run.outcomes) / seconds, "load_before": load0, "load_after": load1,
                 "shares": run.cluster.get("workers", {})}
            say(f"{n} worker(s): {r['submissions']} submissions in {seconds:.0f} s = {r['per_minute']:.2f}/min; "
                f"load average {' '.join(load0)} -> {' '.join(load1)}; shares {r['shares']}")
            results.append(r)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return results


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description="Grading throughput on loopback Dask clusters (a benchmark).")
    parser.add_argument("command", choices=["bench"])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("lessons", nargs="*")
    args = parser.parse_args(argv)
    bench(args.workers, args.lessons or None)
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main())
