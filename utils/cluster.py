"""Grade on a Dask cluster: one task per submission and lesson, on workers the instructor runs.

    python -m utils.grade --scheduler tcp://HOST:8786        (or DASK_SCHEDULER_ADDRESS=... make grade)

`utils.grade` plans, records and reports as it does locally (utils/grade.py); only the run step
moves to the cluster. Per lesson:

  - the grader (the machine running utils.grade) reads the submissions (preflight) and hashes the
    lesson's source/ and release/ folders, nbgrader_config.py and the `course` package; every
    worker hashes its own copies and refuses, in one line, when they differ (before anything is
    graded: `Client.run` on every worker; again in every task, for workers that join later);
  - the reference solution's run is a task of its own, made once for the whole cluster into the
    course's `.grading-cache/` on the shared storage (under the file lock of
    utils/grading/reference.py); the lesson's grading tasks are sent once it is there, never
    more at a time than the cluster has worker threads (a task a dying worker held counts as a try);
  - one task per submission runs `utils.grade.run_worker` on a worker: a private work folder in the
    worker's temporary folder, `nbgrader autograde` with every kernel in the bubblewrap sandbox, the
    verdicts judged there as locally. Its gradebook is a copy of a per-lesson SQLite template
    (made once by the grader in `.grading-cache/`); the task returns the graded notebook and that
    small gradebook, and only the grader writes the course's gradebook (PostgreSQL for a cluster),
    once per submission, as results arrive. A worker process that dies mid-submission, or an
    orphan it leaves behind, never writes the course's gradebook: the scheduler sends the task to
    another worker (Dask's resilience), and after `distributed.scheduler.allowed-failures`
    (default 3) deaths the submission is marked failed with the reason and the rest are graded.

Progress (done, running, failed, on which worker) is printed as results arrive and every
STATUS_EVERY seconds, with the scheduler's dashboard link; the run ends with each worker's share.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

SCHEDULER_ENV = "DASK_SCHEDULER_ADDRESS"   # what Dask's own tools read
ROOT_ENV = "COURSE_CLUSTER_ROOT"           # where a worker mounts the course, when not at the grader's path
STATUS_EVERY = 30.0                        # seconds between progress lines while nothing finishes
POLL = 2.0                                 # seconds between looks at which worker runs what


class CourseMismatch(RuntimeError):
    """A worker's course files, libraries or sandbox differ from what the grader expects (one line)."""


def scheduler_address(option: str | None = None) -> str | None:
    """The scheduler to grade on: --scheduler, else DASK_SCHEDULER_ADDRESS; None grades locally."""
    return option or os.environ.get(SCHEDULER_ENV) or None


# --- what every worker must share with the grader ---------------------------------------------

def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def fingerprint(root: Path, lesson: str) -> dict[str, str]:
    """{name: sha256} of the lesson's source/ and release/ files, nbgrader_config.py and the files
    of the `course` package this Python imports (the one the kernels get)."""
    from utils.grading.reference import _course_files

    root = Path(root)
    files = {}
    for top in ("source", "release"):
        folder = root / top / lesson
        for p in sorted(folder.rglob("*")) if folder.is_dir() else []:
            if p.is_file() and not {".ipynb_checkpoints", "__pycache__"} & set(p.parts):
                files[f"{top}/{lesson}/{p.relative_to(folder).as_posix()}"] = _sha(p)
    if (root / "nbgrader_config.py").is_file():
        files["nbgrader_config.py"] = _sha(root / "nbgrader_config.py")
    for name, path in _course_files():
        files[f"course package: {name}"] = _sha(path)
    return files


def _worker_label(worker) -> str:
    name = str(worker.name)
    return f"{name} ({worker.address}, host {socket.gethostname()})" if name != worker.address \
        else f"{worker.address} (host {socket.gethostname()})"


def _worker_root(root: str) -> Path:
    return Path(os.environ.get(ROOT_ENV) or root)


def worker_problem(root: str, lesson: str, expected: dict[str, str], worker) -> str | None:
    """None when this worker can grade `lesson` of the course at `root`, else one line saying why not."""
    from utils.grade import course_settings
    from utils.sandbox import start_problem, unavailable

    me = _worker_label(worker)
    course = _worker_root(root)
    if not (course / "source" / lesson).is_dir():
        return (f"worker {me} refuses: it does not see the course directory at {course} (mount the "
                f"shared course folder there, or set {ROOT_ENV} to where it is mounted)")
    mine = fingerprint(course, lesson)
    differ = sorted(k for k in set(mine) | set(expected) if mine.get(k) != expected.get(k))
    if differ:
        shown = ", ".join(differ[:3]) + (f" and {len(differ) - 3} more" if len(differ) > 3 else "")
        return (f"worker {me} refuses: its course files differ from the grader's ({shown}); it must "
                f"mount the same course directory and install the same course package")
    settings = course_settings(course)
    problem = (unavailable(settings.bwrap) or start_problem(settings.bwrap)) if settings.sandbox else None
    if problem:
        return f"worker {me} refuses: the autograding sandbox cannot run there: {problem}"
    return None


async def check_worker(root: str, lesson: str, expected: dict[str, str], dask_worker=None) -> str | None:
    """worker_problem on every worker at once (Client.run passes dask_worker), in a thread: the
    hashing and the sandbox probe take seconds the worker's event loop must not wait for."""
    import asyncio

    return await asyncio.to_thread(worker_problem, root, lesson, expected, dask_worker)


# --- the tasks, run on the workers ---------------------------------------------------------------

def _worker():
    from distributed import get_worker

    return get_worker()


def reference_task(root: str, lesson: str, expected: dict[str, str]) -> dict:
    """The lesson's reference run, made once for the cluster into the shared .grading-cache/."""
    from utils.coursedir import source_notebook
    from utils.grade import CACHE
    from utils.grading.reference import cache_key, reference_for

    worker = _worker()
    problem = worker_problem(root, lesson, expected, worker)
    if problem:
        raise CourseMismatch(problem)
    course = _worker_root(root)
    src = source_notebook(course, lesson)
    start = time.perf_counter()
    ref = reference_for(src, course / CACHE)
    return {"key": cache_key(src), "ran": not ref.cached, "kernel_seconds": ref.seconds,
            "seconds": time.perf_counter() - start, "worker": _worker_label(worker)}


def grade_task(spec: dict, ref: dict) -> dict:
    """Autograde one submission on this worker (utils.grade.run_worker: the same work folder,
    sandbox and verdicts as a local run); return what the grader records."""
    from utils.coursedir import source_notebook
    from utils.grade import CACHE, THREAD_VARS, CourseSettings, Grading, Outcome, Plan, run_worker
    from utils.grading.reference import cache_key

    worker = _worker()
    lesson, student = spec["lesson"], spec["student"]
    problem = worker_problem(spec["root"], lesson, spec["expected"], worker)
    if problem:
        raise CourseMismatch(problem)
    course = _worker_root(spec["root"])
    if cache_key(source_notebook(course, lesson)) != ref["key"]:
        raise CourseMismatch(f"worker {_worker_label(worker)} refuses: its installed libraries differ from "
                             f"those of worker {ref['worker']}, which ran the reference solution (install the "
                             f"same pinned versions on every worker)")
    start = time.perf_counter()
    scratch = Path(tempfile.mkdtemp(prefix=f"cluster-{lesson}-"))
    try:
        template = scratch / "gradebook.db"
        shutil.copyfile(course / CACHE / spec["template"], template)
        settings = CourseSettings(spec["course_id"], f"sqlite:///{template}")
        g = Grading(course, settings, 1, list(spec["extra"]), spec["watchdog"], False, lambda *a: None)
        p = Plan(lesson, [student], {student: Outcome(lesson, student, file=spec["file"])}, {},
                 course / CACHE / f"{ref['key']}.json")
        threads = getattr(worker.state, "nthreads", 1) or 1
        share = str(max(1, (os.cpu_count() or 1) // threads))
        env_extra = {v: share for v in THREAD_VARS if v not in os.environ} if threads > 1 else {}
        result = run_worker(g, p, [student], env_extra, None)
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

    @classmethod
    def connect(cls, address: str, say=print) -> "Cluster":
        from utils.coursedir import ToolError

        try:
            from distributed import Client
        except ImportError:
            raise ToolError("grading on a Dask cluster needs dask and distributed: "
                            "pip install -r requirements-instructor.txt") from None
        try:
            client = Client(address, timeout="30s", set_as_default=False)
        except (OSError, TimeoutError) as err:
            raise ToolError(f"cannot reach the Dask scheduler at {address}: {err}") from None
        c = cls(address, say, client)
        c.allowed_failures = int(client.run_on_scheduler(_allowed_failures))
        try:
            c.dashboard = client.dashboard_link
        except (KeyError, AttributeError):   # the scheduler runs without its dashboard (no bokeh)
            c.dashboard = None
        workers = client.scheduler_info(n_workers=-1)["workers"] if _takes_n_workers(client) \
            else client.scheduler_info()["workers"]
        say(f"grading on the Dask cluster at {address}: {len(workers)} worker(s) now; "
            + (f"dashboard: {c.dashboard}" if c.dashboard else "the scheduler serves no dashboard (bokeh not installed there)")
            + f"; a submission whose grading kills {c.allowed_failures + 1} workers is marked failed "
              f"(distributed.scheduler.allowed-failures = {c.allowed_failures})")
        return c

    def close(self, g) -> None:
        total = sum(s.submissions for s in self.shares.values())
        if total:
            parts = [f"{w}: {s.submissions} ({100 * s.submissions / total:.0f} %, {s.seconds:.0f} s)"
                     for w, s in sorted(self.shares.items())]
            g.say("each worker's share: " + "; ".join(parts))
        g.run.cluster = {"workers": {w: s.submissions for w, s in self.shares.items()},
                         "seconds": {w: s.seconds for w, s in self.shares.items()},
                         "references": dict(self.references), "recorded": dict(self.recorded),
                         "retried": list(self.retried), "dashboard": self.dashboard,
                         "allowed_failures": self.allowed_failures}
        self.client.close()

    # -- one lesson ---------------------------------------------------------------------------

    def grade(self, g, lesson: str, students: list[str], known):
        """Plan, run on the cluster and record one lesson; the Plan, as utils.grade.plan + run_lesson."""
        from utils.coursedir import ToolError
        from utils.grade import CACHE, Plan, _hash_tree, preflight

        outcomes = {s: preflight(g.root, lesson, s, known) for s in students}
        before = {s: _hash_tree(g.root / "submitted" / s / lesson) for s in students}
        expected = fingerprint(g.root, lesson)
        g.workers = max(1, sum(self.client.nthreads().values()))   # for utils.grade's "with N worker(s)"
        refusals = [line for line in self.client.run(check_worker, str(g.root), lesson, expected).values() if line]
        if refusals:
            raise ToolError("\n".join(refusals) + "\nNothing was graded; stop those workers or give them "
                            "the course's files, then grade again.")
        token = uuid.uuid4().hex[:8]
        p = Plan(lesson, students, outcomes, before, g.root / CACHE)
        # the reference runs on a worker while the grader makes the workers' gradebook template
        ref = self.client.submit(reference_task, str(g.root), lesson, expected, key=f"reference-{lesson}-{token}")
        template = None
        try:
            template = self._template(g, lesson)
            try:
                info = ref.result()
            except Exception as err:  # noqa: BLE001 - refused reference, mismatch, or its workers died
                raise ToolError(f"{lesson}: the reference run on the cluster failed: {err}") from None
            self.references[lesson] = info
            p.reference = g.root / CACHE / f"{info['key']}.json"
            self.say(f"{lesson}: reference solution {'run' if info['ran'] else 'found in the cache'} on "
                     f"{info['worker']} ({info['seconds']:.1f} s); {len(p.to_grade)} submission(s) to grade")
            spec = {"root": str(g.root), "lesson": lesson, "expected": expected, "template": template.name,
                    "course_id": g.settings.course_id, "extra": list(g.extra), "watchdog": g.watchdog}

            def submit(s):
                return self.client.submit(grade_task, {**spec, "student": s, "file": outcomes[s].file}, info,
                                          key=f"grade-{lesson}-{s}-{token}")

            self._collect(g, p, submit)
        finally:
            ref.release()
            if template is not None:
                template.unlink(missing_ok=True)
        return p

    def _template(self, g, lesson: str) -> Path:
        """A SQLite gradebook holding the lesson (its cells, points and due date) for the workers'
        nbgrader runs, in the shared .grading-cache/ (no kernel sees it)."""
        from nbgrader.api import Gradebook, MissingEntry

        from utils.coursedir import alembic_on_path, nbgrader, scratch_course
        from utils.grade import CACHE, _quiet_sqlalchemy

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
            dest = g.root / CACHE / f"cluster-gradebook-{lesson}-{uuid.uuid4().hex[:8]}.db"
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(tmp / "gradebook.db", dest)
            return dest
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def _collect(self, g, p, submit) -> None:
        """Submit the lesson's grading tasks and record each as it finishes. Never more tasks are
        out than the cluster has threads (counted again as workers come and go): Dask hands a
        worker every task it is given at once, and counts a task held by a worker that dies as a
        try, so a task waits here until a thread can run it."""
        from distributed import wait

        from utils.coursedir import ToolError, escaped, shown

        todo, futures, pending, total, failed, seen = list(p.to_grade), {}, set(), len(p.to_grade), 0, {}
        start = last = time.monotonic()
        while pending or todo:
            try:
                slots = max(1, sum(self.client.nthreads().values()))
            except Exception:  # noqa: BLE001 - the next wait says what is wrong
                slots = 1
            while todo and len(pending) < slots:
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
                failed += p.outcomes[s].status == "zero"
                done = total - len(pending) - len(todo)
                self.say(f"  [{done}/{total} done, {len(pending)} running, {failed} failed] {p.lesson} {shown(s)}: "
                         f"{escaped(what)}")
                last = time.monotonic()
            if (pending or todo) and time.monotonic() - last >= STATUS_EVERY:
                on = "; ".join(f"{s} on {w}" for s, w in running) or "none (waiting for a worker)"
                self.say(f"  [{total - len(pending) - len(todo)}/{total} done after {time.monotonic() - start:.0f} s, "
                         f"{len(todo)} waiting] "
                         f"running: {on}" + (f"; dashboard: {self.dashboard}" if self.dashboard else ""))
                last = time.monotonic()

    def _finished(self, g, p, f, student: str, seen_on: set[str]) -> str:
        """Record one finished task (a Dask future); what happened, for the progress line. A
        submission that killed every worker it was sent to scores zero with the reason; any other
        error stops the grade (ToolError)."""
        from distributed.scheduler import KilledWorker

        from utils.coursedir import ToolError
        from utils.grade import _zero

        if f.status == "finished":
            res = f.result()
            try:   # how many workers died while holding this task (the scheduler counts them)
                lost = int(self.client.run_on_scheduler(_suspicious, f.key))
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
        raise ToolError(f"{p.lesson} {student}: grading on the cluster stopped: "
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


def _suspicious(key, dask_scheduler=None) -> int:
    ts = dask_scheduler.tasks.get(key)
    return ts.suspicious if ts is not None else 0


def _allowed_failures(dask_scheduler=None) -> int:
    return dask_scheduler.allowed_failures


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


def loopback_cluster(workers: int, base: Path, *, allowed_failures: int | None = None,
                     timeout: float = 120.0):
    """A real `dask scheduler` and `workers` separate `dask worker` processes on 127.0.0.1 (free
    ports, --nthreads 1, no nanny, each with its own scratch folder as TMPDIR), as on separate
    machines sharing the course folder; a context manager that stops them all."""
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
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
        if allowed_failures is not None:
            env["DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES"] = str(allowed_failures)
        procs = []
        sched_file = root / "scheduler.json"
        with open(root / "scheduler.log", "w") as log:
            sched = subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", "0",
                                      "--dashboard-address", "127.0.0.1:0", "--scheduler-file", str(sched_file)],
                                     cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
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
            for i in range(workers):
                name = f"worker-{i + 1}"
                scratch = root / name
                scratch.mkdir(exist_ok=True)
                with open(root / f"{name}.log", "w") as log:
                    proc = subprocess.Popen([dask, "worker", address, "--name", name, "--nthreads", "1",
                                             "--no-nanny", "--no-dashboard", "--host", "127.0.0.1",
                                             "--local-directory", str(scratch)],
                                            cwd=scratch, env={**env, "TMPDIR": str(scratch)}, stdout=log,
                                            stderr=subprocess.STDOUT, start_new_session=True)
                procs.append(proc)
                cluster.workers[name], cluster.scratch[name] = proc, scratch
            from distributed import Client

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
    from utils.grade import CACHE, grade_lessons

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
                expected = fingerprint(first, lesson)
                start = time.perf_counter()
                info = client.submit(reference_task, str(first), lesson, expected, pure=False).result()
                refs[lesson] = (time.perf_counter() - start, info["kernel_seconds"])
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
