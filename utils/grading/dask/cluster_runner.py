"""DaskRunner: the runner (utils/grading/runner_interface.py) on the instructor's Dask scheduler. It checks
the workers (worker_check.WorkerCheck, a WorkerPlugin), runs the reference's key and the reference
on workers, then sends one task per submission as threads free up, and yields what each returns;
the grader records it (utils/grading/lesson.py) as for a local run."""

from __future__ import annotations

import importlib
import time
import uuid
from dataclasses import dataclass, field
from typing import Iterator

from utils.errors import ToolError
from utils.escaping import escaped, shown
from utils.grading.dask.address import CONNECT_TIMEOUT, address_problem, one_line, quiet_dask, unreachable
from utils.grading.dask.payload import SUBMISSION_LIMIT, lesson_spec, tree_size
from utils.grading.dask.worker_check import PLUGIN, WorkerCheck, refusal
from utils.grading.fingerprint import fingerprint
from utils.grading.lesson import Grading, LessonGrading
from utils.grading.work import WorkDone, pack

try:   # only a cluster run needs them (requirements-instructor.txt); connect says so in one line
    from distributed import Client, as_completed
    from distributed.scheduler import KilledWorker
except ImportError:
    Client = as_completed = KilledWorker = None

WORKER_WAIT = 120.0    # seconds to wait for a worker while the cluster has none
STATUS_EVERY = 30.0    # seconds between progress lines while nothing finishes
POLL = 2.0             # seconds between looks at which worker runs what
KEY_WAIT = 300.0       # seconds for a worker to compute the reference's cache key (seconds when idle)
CANCELLED = ("CancelledError", "FutureCancelledError")


@dataclass
class Share:
    submissions: int = 0
    seconds: float = 0.0


@dataclass
class DaskRunner:
    """A connection to the instructor's Dask scheduler (connect), grading lesson after lesson."""
    address: str
    say: object
    client: object = None
    allowed_failures: int = 3
    dashboard: str | None = None
    worker_wait: float = WORKER_WAIT
    shares: dict[str, Share] = field(default_factory=dict)
    references: dict[str, dict] = field(default_factory=dict)
    recorded: dict[tuple[str, str], int] = field(default_factory=dict)   # (lesson, student) -> results delivered
    retried: list[str] = field(default_factory=list)
    checked: bool = False                                                # the workers' check registered
    keys: dict[str, dict] = field(default_factory=dict)                  # lesson -> the reference's key as a worker made it
    progress: tuple[int, int] = (0, 0)                                   # (returned, to return) of the lesson now

    @classmethod
    def connect(cls, address: str, say=print, *, timeout: float = CONNECT_TIMEOUT,
                wait: float = WORKER_WAIT) -> "DaskRunner":
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
        runner = cls(address, say, client, worker_wait=wait)
        try:
            runner._meet(wait)
        except ToolError:
            runner._shut()
            raise
        except Exception as err:  # noqa: BLE001 - the scheduler went away while we asked
            runner._shut()
            raise ToolError(f"lost the Dask scheduler at {address} while connecting ({one_line(err)})") from None
        return runner

    def _meet(self, wait: float) -> None:
        client = self.client
        self.allowed_failures = int(client.run_on_scheduler(_scheduler_call("allowed_failures")))
        try:
            self.dashboard = client.dashboard_link
        except (KeyError, AttributeError):   # the scheduler runs without its dashboard (no bokeh)
            self.dashboard = None
        if not client.nthreads():
            self.say(f"the Dask scheduler at {self.address} has no worker yet: waiting up to {wait:.0f} s for one")
            try:
                client.wait_for_workers(1, timeout=wait)
            except Exception:  # noqa: BLE001 - a TimeoutError, whichever module it comes from
                raise ToolError(f"the Dask scheduler at {self.address} has no workers (waited {wait:.0f} s): "
                                f"start them (`dask worker {self.address}`, docs/instructors.md), then grade "
                                f"again") from None
        self.say(f"grading on the Dask cluster at {self.address}: {len(client.nthreads())} worker(s) now; "
                 + (f"dashboard: {self.dashboard}" if self.dashboard else
                    "the scheduler serves no dashboard (bokeh not installed there)")
                 + f"; a submission whose grading kills {self.allowed_failures + 1} workers is marked failed "
                   f"(distributed.scheduler.allowed-failures = {self.allowed_failures})")

    @property
    def workers(self) -> int:
        try:
            return max(1, sum(self.client.nthreads().values()))
        except Exception:  # noqa: BLE001 - a summary line only
            return 1

    def _shut(self) -> None:
        try:
            self.client.close(timeout=5)
        except Exception:  # noqa: BLE001 - closing a client whose scheduler is gone
            pass
        quiet_dask(False)

    def connected(self) -> bool:
        return getattr(self.client, "status", "running") == "running"

    def lost(self, lesson: str, err: BaseException | None) -> ToolError:
        """The one line for a scheduler that went away mid-run."""
        done, total = self.progress
        why = "its connection closed" if err is None or type(err).__name__ in CANCELLED else one_line(err)
        counts = f" after {done} of {total} submission(s) of {lesson} were recorded" if total else f" while grading {lesson}"
        return ToolError(f"lost the Dask scheduler at {self.address} ({why}){counts}: what was recorded is kept "
                         f"and the export was not written; grade again to grade only the rest")

    def _guarded(self, lesson: str, call, *args):
        """call(*args), where a scheduler lost on the way ends the grading in one line."""
        try:
            return call(*args)
        except ToolError:
            raise
        except Exception as err:
            if self.connected() and not isinstance(err, (OSError, TimeoutError)) and type(err).__name__ not in CANCELLED:
                raise
            raise self.lost(lesson, err) from None

    def close(self, grading: Grading, completed: bool) -> None:
        """Each worker's share, into the run and said; the workers' check removed."""
        total = sum(s.submissions for s in self.shares.values())
        if total:
            parts = [f"{w}: {s.submissions} ({100 * s.submissions / total:.0f} %, {s.seconds:.0f} s)"
                     for w, s in sorted(self.shares.items())]
            grading.say("each worker's share: " + "; ".join(parts))
        grading.run.cluster = {"workers": {w: s.submissions for w, s in self.shares.items()},
                               "seconds": {w: s.seconds for w, s in self.shares.items()},
                               "references": dict(self.references), "recorded": dict(self.recorded),
                               "retried": list(self.retried), "dashboard": self.dashboard,
                               "allowed_failures": self.allowed_failures}
        if self.checked and self.connected():
            try:
                self.client.unregister_worker_plugin(PLUGIN)
            except Exception:  # noqa: BLE001 - tidying only
                pass
        self._shut()

    # -- prepare: the workers' check, the reference's key and run ------------------------------

    def prepare(self, lesson: LessonGrading) -> None:
        self._guarded(lesson.name, self._prepare, lesson)

    def _prepare(self, lesson: LessonGrading) -> None:
        g, self.progress = lesson.grading, (0, 0)
        self._check_workers(g)
        for s in lesson.to_grade:
            size = tree_size(lesson.submission(s)[0])
            if size > SUBMISSION_LIMIT:
                lesson.outcomes[s].zero(f"its files hold {size / 2**20:.0f} MiB, more than the "
                                        f"{SUBMISSION_LIMIT / 2**20:.0f} MiB a grading task on the cluster carries "
                                        f"(utils.grading.dask.payload.SUBMISSION_LIMIT)")
        spec, token = lesson_spec(g.root, lesson.name), uuid.uuid4().hex[:8]
        spec.update(self._key(lesson.name, spec, token))   # the key as a worker computes it (its libraries)
        self.keys[lesson.name] = {k: spec[k] for k in ("key", "libraries", "keyed_by")}
        lesson.use_reference(spec["key"])
        info = self._reference(lesson, spec, token)
        self.say(f"{lesson.name}: reference solution {'run' if info['ran'] else 'found in the cache'} on "
                 f"{info['worker']} ({info['seconds']:.1f} s)")

    def _check_workers(self, g: Grading) -> None:
        """The workers' check (WorkerCheck) on every worker, now and as they join; refused workers
        stop the grading before anything is graded, in one line each."""
        if not self.checked:
            self.client.register_plugin(WorkerCheck(fingerprint(), (g.settings.sandbox, g.settings.bwrap)), name=PLUGIN)
            self.checked = True
        refusals = [line for line in self.client.run(refusal).values() if line]
        if refusals:
            raise ToolError("\n".join(refusals) + "\nNothing was graded; stop those workers or give them "
                            "the grader's code, then grade again.")

    def _key(self, lesson: str, spec: dict, token: str) -> dict:
        future = self.client.submit(task("key_task"), spec, key=f"key-{lesson}-{token}")
        try:
            return future.result(timeout=KEY_WAIT)
        except Exception as err:
            if not self.connected() or type(err).__name__ in CANCELLED:
                raise
            if isinstance(err, TimeoutError) or type(err).__name__ == "TimeoutError":
                raise ToolError(f"{lesson}: no worker computed the reference's cache key within {KEY_WAIT:.0f} s "
                                f"(a task that reads the lesson and lists the installed libraries, seconds on an idle "
                                f"worker): are the workers busy with another client's work, or stuck? See the "
                                f"dashboard{f' ({self.dashboard})' if self.dashboard else ''}") from None
            raise ToolError(f"{lesson}: {err}") from None

    def _reference(self, lesson: LessonGrading, spec: dict, token: str) -> dict:
        """The reference's observations into the grader's cache: run on a worker unless the cache
        holds them."""
        cached = lesson.reference
        if cached.is_file():
            info = {"key": spec["key"], "ran": False, "kernel_seconds": 0.0, "seconds": 0.0,
                    "worker": "the grader's .grading-cache/"}
        else:
            future = self.client.submit(task("reference_task"), spec, key=f"reference-{lesson.name}-{token}")
            try:
                info = future.result()
            except Exception as err:
                if not self.connected() or type(err).__name__ in CANCELLED:
                    raise
                raise ToolError(f"{lesson.name}: the reference run on the cluster failed: {err}") from None
            finally:
                future.release()
            cached.parent.mkdir(parents=True, exist_ok=True)
            tmp = cached.with_name(f"{cached.name}.{token}.tmp")
            tmp.write_bytes(info.pop("json"))
            tmp.replace(cached)
        self.references[lesson.name] = info
        return info

    # -- run: one task per submission, never more out than the cluster has threads ------------

    def run(self, lesson: LessonGrading, students: list[str]) -> Iterator[WorkDone]:
        """Submit the lesson's tasks and yield each WorkDone as it finishes. Never more tasks are out
        than the cluster has threads (counted again as workers come and go): Dask hands a worker
        every task it is given at once, and counts a task held by a worker that dies as a try, so a
        task waits here until a thread can run it. A cluster left with no worker for WORKER_WAIT s,
        or a scheduler lost, stops it in one line (ToolError)."""
        files, key, token = lesson.files(), self.keys[lesson.name], uuid.uuid4().hex[:8]
        self.progress = (0, len(students))
        self.say(f"{lesson.name}: {len(students)} submission(s) to grade")

        def submit(student: str):
            folder, rename = lesson.submission(student)   # read when sent: one lesson's tasks in flight at most
            try:
                files_of_student = pack(folder)
            except OSError as err:   # a file the grader may not read: this submission's problem only
                return WorkDone(lesson.name, [student], failed={student: (
                    f"its files could not be read to send ({err.strerror or type(err).__name__})")})
            return self.client.submit(task("grade_task"), files, key, student, files_of_student, rename,
                                      key=f"grade-{lesson.name}-{student}-{token}")

        flight = _Flight(self, lesson.name, list(students), submit)
        while flight.todo or flight.futures or flight.unsent:
            for f in self._guarded(lesson.name, flight.step):
                yield self._guarded(lesson.name, self._finished, lesson, flight, f)
            while flight.unsent:
                yield self._unsent(lesson, flight, flight.unsent.pop(0))

    def _finished(self, lesson: LessonGrading, flight: "_Flight", f) -> WorkDone:
        """What one finished task (a Dask future) returned, and the progress line. A submission
        that killed every worker it was sent to fails with the reason; any other error stops the
        grading (ToolError)."""
        student = flight.futures.pop(f)
        if f.status == "finished":
            done = WorkDone(**f.result())
            self._count(lesson.name, student, done, flight.seen.get(f.key, set()), self._suspicious(f.key))
            what = f"{'graded' if done.graded(student) else 'FAILED'} on {done.worker} in {done.seconds:.0f} s"
        else:
            err = f.exception() if f.status == "error" else None
            if not isinstance(err, KilledWorker):
                if f.status == "cancelled" or not self.connected():   # the client cancels all when it loses the scheduler
                    raise self.lost(lesson.name, err)
                flight.cancel()
                raise ToolError(f"{lesson.name} {shown(student)}: grading on the cluster stopped: "
                                f"{err if err is not None else f'the task was {f.status} (the scheduler went away?)'}. "
                                f"The submissions recorded so far are kept; grade again for the rest.")
            done = WorkDone(lesson.name, [student], log=str(err), failed={student: (
                f"its grading killed every worker it was sent to ({err.allowed_failures + 1}, the last "
                f"{err.last_worker.address}; the scheduler's allowed-failures is {err.allowed_failures}); its code "
                f"may have killed them (memory?): see those workers' logs")})
            what = "FAILED: it killed its workers"
        flight.returned += 1
        flight.failed += not done.graded(student)
        self.progress = (flight.returned, flight.total)
        self.say(f"  [{flight.returned}/{flight.total} done, {len(flight.futures)} running, {flight.failed} failed] "
                 f"{lesson.name} {shown(student)}: {escaped(what)}")
        return done

    def _unsent(self, lesson: LessonGrading, flight: "_Flight", done: WorkDone) -> WorkDone:
        """A submission that never left the grader (its files unreadable), and its progress line."""
        flight.returned += 1
        flight.failed += 1
        self.progress = (flight.returned, flight.total)
        self.say(f"  [{flight.returned}/{flight.total} done, {len(flight.futures)} running, {flight.failed} failed] "
                 f"{lesson.name} {shown(done.students[0])}: FAILED: {escaped(done.reason(done.students[0], 0))}")
        return done

    def _suspicious(self, key: str) -> int:
        """How many workers died while holding this task (the scheduler counts them)."""
        try:
            return int(self.client.run_on_scheduler(_scheduler_call("suspicious"), key))
        except Exception:  # noqa: BLE001 - a note only
            return 0

    def _count(self, lesson: str, student: str, done: WorkDone, seen_on: set[str], lost: int) -> None:
        """The worker's share, and a note where the submission's grading was lost and done again."""
        self.recorded[(lesson, student)] = self.recorded.get((lesson, student), 0) + 1
        share = self.shares.setdefault(done.worker, Share())
        share.submissions += 1
        share.seconds += done.seconds
        others = sorted(w for w in seen_on if w != done.address)
        if (others or lost) and student in done.results:
            self.retried.append(f"{lesson}/{student}")
            where = f"on {', '.join(others)} " if others else ""
            done.results[student].setdefault("notes", []).append(
                f"its grading {where}was lost (the worker died{f', {lost} time(s)' if lost > 1 else ''}); "
                f"graded again on {done.worker}")


@dataclass
class _Flight:
    """One lesson's tasks in flight (distributed.as_completed), and what has come back."""
    runner: DaskRunner
    lesson: str
    todo: list[str]
    submit: object
    futures: dict = field(default_factory=dict)          # future -> student
    unsent: list = field(default_factory=list)           # WorkDone of submissions that could not be sent
    seen: dict = field(default_factory=dict)             # task key -> workers it was seen on
    returned: int = 0
    failed: int = 0
    total: int = 0
    started: float = field(default_factory=time.monotonic)
    last: float = field(default_factory=time.monotonic)
    no_worker_since: float | None = None
    arrivals: object = None                              # distributed.as_completed

    def __post_init__(self):
        self.total = len(self.todo)
        self.arrivals = as_completed(loop=self.runner.client.loop)

    def step(self) -> list:
        """Send what free threads can take; the futures finished within POLL s (maybe none)."""
        runner = self.runner
        if not runner.connected():
            self.cancel()
            raise runner.lost(self.lesson, None)
        threads = self._threads()
        while self.todo and len(self.futures) < max(1, threads):
            student = self.todo.pop(0)
            f = self.submit(student)
            if isinstance(f, WorkDone):
                self.unsent.append(f)
                continue
            self.futures[f] = student
            self.arrivals.add(f)
        deadline = time.monotonic() + POLL
        while self.futures and not self.arrivals.has_ready() and time.monotonic() < deadline:
            time.sleep(0.05)
        finished = self.arrivals.next_batch(block=False)
        self._watch(finished)
        return finished

    def _threads(self) -> int:
        try:
            threads = sum(self.runner.client.nthreads().values())
        except Exception:  # noqa: BLE001 - the next look says what is wrong
            return 1
        if threads:
            self.no_worker_since = None
            return threads
        self.no_worker_since = self.no_worker_since or time.monotonic()
        if time.monotonic() - self.no_worker_since > self.runner.worker_wait:
            self.cancel()
            raise ToolError(f"{self.lesson}: the Dask cluster at {self.runner.address} has had no worker for "
                            f"{self.runner.worker_wait:.0f} s; {self.returned} of {self.total} submission(s) "
                            f"recorded, kept: start workers and grade again for the rest")
        return 0

    def _watch(self, finished: list) -> None:
        """Which worker runs what (to tell a retried submission); a progress line every
        STATUS_EVERY s while nothing finishes."""
        by_key = {f.key: s for f, s in self.futures.items()}
        running = []
        try:
            processing = self.runner.client.processing()
        except Exception:  # noqa: BLE001 - progress only
            processing = {}
        for worker, keys in processing.items():
            for key in keys:
                if key in by_key:
                    self.seen.setdefault(key, set()).add(worker)
                    running.append((by_key[key], worker))
        now = time.monotonic()
        if finished:
            self.last = now
        elif (self.futures or self.todo) and now - self.last >= STATUS_EVERY:
            on = "; ".join(f"{shown(s)} on {w}" for s, w in running) or "none (waiting for a worker)"
            dash = self.runner.dashboard
            self.runner.say(f"  [{self.returned}/{self.total} done after {now - self.started:.0f} s, "
                            f"{len(self.todo)} waiting] running: {on}" + (f"; dashboard: {dash}" if dash else ""))
            self.last = now

    def cancel(self) -> None:
        try:
            self.runner.client.cancel(list(self.futures))
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
