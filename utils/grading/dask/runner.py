"""The grader's side of grading on a Dask cluster (Cluster): connect, check the workers, plan
each lesson, send its tasks (utils.grading.dask.tasks) as threads free up, record what comes back, and
the lesson's feedback on the grader's cores at once."""

from __future__ import annotations

import importlib
import os
import shutil
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from nbgrader.api import Gradebook, MissingEntry

from utils.grading import run as grade
from utils.grading.dask.address import CONNECT_TIMEOUT, address_problem, one_line, quiet_dask, unreachable
from utils.grading.dask.journal import Journal, lesson_key, resume
from utils.grading.dask.payload import SUBMISSION_LIMIT, lesson_spec, pack, tree_size
from utils.grading.dask.worker_check import check_worker
from utils.coursedir import ToolError, alembic_on_path, escaped, log_tail, nbgrader, scratch_course, shown
from utils.grading.run import (CACHE, Plan, WorkerResult, _fail, _hash_tree, _merge, _quiet_sqlalchemy, _zero, record,
                         safe_preflight)

try:   # only a cluster run needs them (requirements-instructor.txt); Cluster.connect says so in one line
    from distributed import Client, wait
    from distributed.scheduler import KilledWorker
except ImportError:
    Client = wait = KilledWorker = None

WORKER_WAIT = 120.0    # seconds to wait for a worker while the cluster has none
STATUS_EVERY = 30.0    # seconds between progress lines while nothing finishes
POLL = 2.0             # seconds between looks at which worker runs what
KEY_WAIT = 300.0       # seconds for a worker to compute the reference's cache key (seconds when idle)


def feedback_in_parallel(g, lesson: str, processes: int | None = None) -> int:
    """nbgrader generate_feedback for the lesson, in one nbgrader process per core of the grader at
    once, each leaving out the students of the others (CourseDirectory.student_id_exclude): the
    feedback of a large class is the grader's work alone (it reads the gradebook), one notebook
    after another in one process otherwise. Failures as utils.grading.run.write_feedback's."""
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
    """A connection to the instructor's Dask scheduler, used by utils.grading.run.grade_lesson."""
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
        if Client is None:
            raise ToolError("grading on a Dask cluster needs dask and distributed: "
                            "pip install -r requirements-instructor.txt")
        problem = address_problem(address) or unreachable(address, timeout)
        if problem:
            raise ToolError(problem)
        quiet_dask(True)
        try:
            client = Client(address, timeout=f"{timeout:g}s", set_as_default=False)
        except Exception as err:  # noqa: BLE001 - garbage from another service, a timeout, a refusal
            quiet_dask(False)
            raise ToolError(f"{address} does not answer as a Dask scheduler ({one_line(err)}); give the "
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
            raise ToolError(f"lost the Dask scheduler at {address} while connecting ({one_line(err)})") from None
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
        quiet_dask(False)

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
        why = "its connection closed" if err is None or "Cancelled" in type(err).__name__ else one_line(err)
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
        """Plan, run on the cluster and record one lesson; the Plan, as utils.grading.run.plan + run_lesson.
        A scheduler lost on the way ends it with one line (ToolError); what was recorded stays."""
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
        p, spec, token = self._plan(g, lesson, students, known)
        run_key = lesson_key(spec["expected"], spec["key"], g.extra)
        kept = self._kept(g, p, run_key)
        # the reference runs on a worker (unless the grader's cache has it) while the grader makes
        # the workers' gradebook template
        ref = None if p.reference.is_file() else \
            self.client.submit(task("reference_task"), spec, key=f"reference-{lesson}-{token}")
        try:
            template = self._template(g, lesson)
            info = self._reference(lesson, spec, p.reference, ref, token)
            todo = [s for s in p.to_grade if s not in kept]
            self.say(f"{lesson}: reference solution {'run' if info['ran'] else 'found in the cache'} on "
                     f"{info['worker']} ({info['seconds']:.1f} s); {len(todo)} submission(s) to grade")
            spec.update(reference=p.reference.read_bytes(), template=template)

            def submit(s):
                files = pack(g.root / "submitted" / s / lesson)   # read when sent: one lesson's tasks in flight at most
                return self.client.submit(task("grade_task"), {**spec, "student": s, "file": p.outcomes[s].file,
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

    def _plan(self, g, lesson: str, students: list[str], known):
        """The lesson's Plan (as utils.grading.run.plan: a submission that breaks planning scores 0 with
        its reason), once every worker accepted; the spec its tasks carry, the run's token."""
        outcomes = {s: safe_preflight(g.root, lesson, s, known) for s in students}
        before = {s: _hash_tree(g.root / "submitted" / s / lesson) for s in students}
        spec = lesson_spec(g.root, lesson, g.settings, g.extra, g.watchdog)
        g.workers = max(1, sum(self.client.nthreads().values()))   # for utils.grading.run's "with N worker(s)"
        refusals = [line for line in self.client.run(check_worker, spec["expected"], spec["sandbox"]).values() if line]
        if refusals:
            raise ToolError("\n".join(refusals) + "\nNothing was graded; stop those workers or give them "
                            "the grader's code, then grade again.")
        for s in students:
            size = tree_size(g.root / "submitted" / s / lesson) if outcomes[s].status != "zero" else 0
            if size > SUBMISSION_LIMIT:
                _zero(outcomes[s], f"its files hold {size / 2**20:.0f} MiB, more than the {SUBMISSION_LIMIT / 2**20:.0f} "
                                   f"MiB a grading task on the cluster carries (utils.grading.dask.payload.SUBMISSION_LIMIT)")
        token = uuid.uuid4().hex[:8]
        # the key as a worker computes it (the grader's Python may find its libraries otherwise)
        key = self.client.submit(task("key_task"), spec, key=f"key-{lesson}-{token}")
        try:
            spec.update(key.result(timeout=KEY_WAIT))
        except Exception as err:  # noqa: BLE001 - a refusal (one line), a timeout, or the scheduler lost
            if not self.connected() or type(err).__name__ in ("CancelledError", "FutureCancelledError"):
                raise
            if isinstance(err, TimeoutError) or type(err).__name__ == "TimeoutError":
                raise ToolError(f"{lesson}: no worker computed the reference's cache key within {KEY_WAIT:.0f} s "
                                f"(a task that reads the lesson and lists the installed libraries, seconds on an idle "
                                f"worker): are the workers busy with another client's work, or stuck? See the "
                                f"dashboard{f' ({self.dashboard})' if self.dashboard else ''}") from None
            raise ToolError(f"{lesson}: {err}") from None
        return Plan(lesson, students, outcomes, before, g.root / CACHE / f"{spec['key']}.json"), spec, token

    def _kept(self, g, p, run_key: str) -> list[str]:
        """The submissions an earlier run that stopped recorded (the journal), kept as they are."""
        kept = self.journal.kept(p.lesson, run_key, {s: p.before[s] for s in p.to_grade}) if self.journal else []
        for s in kept:
            resume(g.root, p.outcomes[s])
            self.resumed.append(f"{p.lesson}/{s}")
        if kept:
            self.say(f"{p.lesson}: {len(kept)} submission(s) recorded by an earlier run that stopped are kept "
                     f"(the gradebook holds them); not graded again")
        return kept

    def _reference(self, lesson: str, spec: dict, cached: Path, ref, token: str) -> dict:
        """The reference run's task (`ref`, None when the grader's cache holds it): its observations
        into the grader's cache; what the run says of it."""
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
        return info

    def _template(self, g, lesson: str) -> bytes:
        """A SQLite gradebook holding the lesson (its cells, points and due date) for the workers'
        nbgrader runs; its bytes travel with every task."""
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

def task(name: str):
    """The task `name` of utils.grading.dask.tasks, as a function the scheduler can unpickle without the
    course's tools (cloudpickle sends a function made here by value; it imports that module only
    where it runs: on a worker)."""
    def call(*args):
        return getattr(importlib.import_module("utils.grading.dask.tasks"), name)(*args)
    call.__name__ = call.__qualname__ = name
    return call
