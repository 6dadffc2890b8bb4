"""Grade on Slurm: the Dask workers are Slurm jobs that this command submits (dask-jobqueue's
SLURMCluster), grades on (DaskRunner, as for any Dask cluster), and cancels when it is done.

    python -m utils.grading --slurm 4 --slurm-cores 2 --slurm-memory 8GB --slurm-walltime 01:00:00 \\
                            --slurm-partition gpu --slurm-gres gpu:1

The scheduler runs inside the command, on the machine it runs on (a login node); each job runs
`python -m distributed.cli.dask_worker` with this checkout's Python and tools (a shared file
system, as on any cluster), one worker per job with one thread per core asked for. Scheduler and
workers speak TLS with keys made for this run (dask-jobqueue's temporary credentials, written
where only the instructor can read them: .grading-cache/slurm/ in the course folder, which must be
on the shared file system); nobody else on the cluster can send the scheduler work.

Every job this command submitted is cancelled (scancel, by its id) when grading ends, whatever
ends it: a return, an error, Ctrl-C, SIGTERM or SIGHUP (turned into an exit that runs the same
`finally`), and at interpreter exit. A job that Slurm ends before grading does (scancel, its
walltime, a node lost) loses what its worker was grading: Dask gives the submission to another
worker when the worker dies first, and where the job's SIGTERM reached the submission's nbgrader
first (its grading then returns killed), that result is set aside and the submission is graded
again; either way it is recorded once, with a note saying where it was lost, and the summary
lists them. A job that ended after its worker joined is replaced by a new one (SLURM_REPLACE at
most per job asked for); one whose worker never joined is not (its log is named instead)."""

from __future__ import annotations

import atexit
import contextlib
import shlex
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from utils.errors import ToolError
from utils.escaping import shown
from utils.grading.dask.address import one_line, quiet_dask
from utils.grading.dask.cluster_runner import WORKER_WAIT, DaskRunner
from utils.grading.lesson import Grading, LessonGrading
from utils.grading.settings import CACHE
from utils.grading.work import WorkDone
from utils.lessons import REPO

QUEUE_WAIT = 600.0      # seconds to wait for the first worker (its job may wait in the queue)
WATCH_EVERY = 3.0       # seconds between looks at the jobs (squeue)
LEAVE_WAIT = 20.0       # seconds for a worker whose grading returned killed to leave (its job ending)
SLURM_REPLACE = 3       # jobs submitted in place of ended ones, per job asked for
JOB_ENDED = (-signal.SIGTERM, -signal.SIGKILL, 128 + signal.SIGTERM, 128 + signal.SIGKILL)


@dataclass
class SlurmSpec:
    """The worker jobs: how many, and what each asks Slurm for."""
    jobs: int = 1
    cores: int = 1
    memory: str = "4GB"
    walltime: str = "01:00:00"
    partition: str | None = None
    account: str | None = None
    gres: str | None = None           # e.g. gpu:1 on a GPU partition
    host: str | None = None           # the scheduler's address as the compute nodes reach it
    extra: list[str] = field(default_factory=list)   # more #SBATCH lines, as given
    wait: float = QUEUE_WAIT

    def problem(self) -> str | None:
        if self.jobs < 1 or self.cores < 1:
            return f"--slurm needs at least one job of at least one core (given {self.jobs} job(s), {self.cores} core(s))"
        try:
            from dask.utils import parse_bytes
            parse_bytes(self.memory)
        except (ValueError, TypeError):
            return f"--slurm-memory {self.memory!r} is not an amount of memory (e.g. 4GB)"
        return None

    def directives(self) -> list[str]:
        extra = [f"--gres={self.gres}"] if self.gres else []
        return extra + list(self.extra)


def _scancel(ids: list[str]) -> None:
    if ids:
        try:
            subprocess.run(["scancel", *ids], capture_output=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            pass


def _squeue(ids: list[str]) -> dict[str, str] | None:
    """{job id: state} of those of `ids` Slurm still lists; None when squeue did not answer."""
    if not ids:
        return {}
    try:
        out = subprocess.run(["squeue", "-h", "-o", "%i %T", "-j", ",".join(ids)], capture_output=True,
                             text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0 and "Invalid job id" not in out.stderr:
        return None
    return dict(line.split(None, 1) for line in out.stdout.splitlines() if len(line.split()) == 2)


@dataclass
class SlurmJobs:
    """The SLURMCluster and every job id it submitted; `release` cancels them all (idempotent)."""
    cluster: object
    spec: SlurmSpec
    say: object
    logs: Path
    ids: dict[str, str] = field(default_factory=dict)        # worker name -> its job id now
    submitted: set = field(default_factory=set)              # every job id this run submitted
    joined: set = field(default_factory=set)                 # job ids whose worker joined
    ended: dict[str, str] = field(default_factory=dict)      # job id -> how it ended, as seen
    replaced: int = 0
    started: float = field(default_factory=time.monotonic)
    first_worker: float | None = None
    released: bool = False
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def track(self) -> None:
        """The job ids of the workers now known (a replacement may take an ended job's worker
        name), and which jobs' workers joined the scheduler."""
        with self._lock:
            for name, job in list(getattr(self.cluster, "workers", {}).items()):
                job_id = getattr(job, "job_id", None)
                if job_id:
                    self.ids[name] = str(job_id)
                    self.submitted.add(str(job_id))
            try:
                names = {w.get("name") for w in self.cluster.scheduler_info.get("workers", {}).values()}
            except Exception:  # noqa: BLE001 - a look only
                names = set()
            new = {self.ids[str(n)] for n in names if str(n) in self.ids} - self.joined
            if new and self.first_worker is None:
                self.first_worker = time.monotonic() - self.started
            self.joined |= new

    def watch(self) -> None:
        """Every WATCH_EVERY s: note the jobs, and replace those that ended after their worker joined."""
        while not self._stop.wait(WATCH_EVERY):
            try:
                self.track()
                self._replace_ended()
            except Exception:  # noqa: BLE001 - a watcher must not end the grading; the runner says what is wrong
                pass

    def _replace_ended(self) -> None:
        with self._lock:
            live = {n: i for n, i in self.ids.items() if i not in self.ended and n in self.cluster.worker_spec}
        states = _squeue(list(live.values()))
        if states is None:
            return
        gone = [(n, i) for n, i in live.items() if i not in states]
        for name, job_id in gone:
            self.ended[job_id] = "ended"
            if job_id not in self.joined:
                self.say(f"Slurm job {job_id} ended before its worker joined: see {self.logs}/*-{job_id}.err; "
                         f"not replaced")
                continue
            if self.replaced >= SLURM_REPLACE * self.spec.jobs or self.released:
                self.say(f"Slurm job {job_id} ({name}) ended; not replaced (already {self.replaced} replaced)")
                continue
            self.replaced += 1
            self.say(f"Slurm job {job_id} ({name}) ended while grading; a new job is submitted in its place")
            self.cluster.loop.add_callback(self._forget_and_scale, name)

    def _forget_and_scale(self, name: str) -> None:
        """On the cluster's event loop: drop the ended job, and ask for as many jobs as before."""
        self.cluster.worker_spec.pop(name, None)
        self.cluster.workers.pop(name, None)
        self.cluster.scale(jobs=self.spec.jobs)

    def start_watching(self) -> None:
        threading.Thread(target=self.watch, name="slurm-jobs", daemon=True).start()

    def release(self) -> None:
        """Cancel every job this run submitted, and close the scheduler (once)."""
        if self.released:
            return
        self.released = True
        self._stop.set()
        try:
            self.track()
        except Exception:  # noqa: BLE001 - the ids already known are cancelled below
            pass
        try:
            self.cluster.close(timeout=15)
        except Exception:  # noqa: BLE001 - scancel below whatever the cluster did
            pass
        _scancel(sorted(self.submitted, key=int))
        for name in ("_job_ca_file", "_job_cert", "_job_key"):   # the run's TLS keys, off the shared disk now
            with contextlib.suppress(OSError, AttributeError):
                getattr(self.cluster, name).close()


def _release_on_signals(jobs: SlurmJobs):
    """SIGTERM and SIGHUP end the command with SystemExit (its `finally` releases the jobs);
    atexit releases them too. Returns the handlers to put back."""
    atexit.register(jobs.release)
    old = {}
    if threading.current_thread() is threading.main_thread():
        def stop(signum, _frame):
            raise SystemExit(128 + signum)
        for sig in (signal.SIGTERM, signal.SIGHUP):
            old[sig] = signal.signal(sig, stop)
    return old


def _cluster(spec: SlurmSpec, secrets: Path):
    try:
        from dask_jobqueue import SLURMCluster
        from distributed.security import Security
    except ImportError as err:
        raise ToolError(f"grading on Slurm needs dask-jobqueue, which this environment lacks ({err}): "
                        f"pip install -r requirements-instructor.txt") from None
    import dask

    secrets.mkdir(parents=True, exist_ok=True)
    secrets.chmod(0o700)
    scheduler = {"dashboard_address": "127.0.0.1:0"}
    if spec.host:
        scheduler["host"] = spec.host
    with dask.config.set({"jobqueue.slurm.shared-temp-directory": str(secrets)}):
        return SLURMCluster(
            cores=spec.cores, processes=1, memory=spec.memory, walltime=spec.walltime, queue=spec.partition,
            account=spec.account, job_extra_directives=spec.directives(), python=sys.executable,
            job_name="course-grading", log_directory=str(secrets), local_directory='"${TMPDIR:-/tmp}"',
            job_script_prologue=[f"cd {_quoted(REPO)}", f"export PYTHONPATH={_quoted(REPO)}"],
            security=Security.temporary(), scheduler_options=scheduler)


def _quoted(path: Path) -> str:
    return shlex.quote(str(path))


class SlurmRunner(DaskRunner):
    """DaskRunner on workers that are this run's own Slurm jobs (SlurmJobs)."""
    jobs: SlurmJobs = None
    restore: dict = None
    lost_again: list = None

    @classmethod
    def start(cls, spec: SlurmSpec, root: Path, say=print) -> "SlurmRunner":
        problem = spec.problem()
        if problem:
            raise ToolError(problem)
        secrets = Path(root) / CACHE / "slurm"
        quiet_dask(True)
        try:
            cluster = _cluster(spec, secrets)
        except ToolError:
            quiet_dask(False)
            raise
        except Exception as err:  # noqa: BLE001 - a bad option dask-jobqueue refused, no scheduler port
            quiet_dask(False)
            raise ToolError(f"could not start the Dask scheduler for Slurm: {one_line(err)}") from None
        jobs = SlurmJobs(cluster, spec, say, secrets)
        restore = _release_on_signals(jobs)
        try:
            from distributed import Client

            cluster.scale(jobs=spec.jobs)
            jobs.start_watching()
            say(f"submitted {spec.jobs} Slurm job(s) of {spec.cores} core(s), {spec.memory}, at most {spec.walltime}"
                + (f" on partition {spec.partition}" if spec.partition else "")
                + (f" with --gres={spec.gres}" if spec.gres else "") + f"; their logs: {secrets}")
            client = Client(cluster, set_as_default=False, timeout="30s")
            runner = cls(cluster.scheduler_address, say, client, worker_wait=max(spec.wait, WORKER_WAIT))
            runner.jobs, runner.restore, runner.lost_again = jobs, restore, []
            runner._meet(spec.wait)
            jobs.track()
            if jobs.first_worker is not None:
                say(f"first worker joined {jobs.first_worker:.1f} s after the scheduler started")
            return runner
        except BaseException as err:
            jobs.release()
            _restore(restore)
            quiet_dask(False)
            if isinstance(err, ToolError) or not isinstance(err, Exception):
                raise
            raise ToolError(f"grading on Slurm could not start: {one_line(err)}") from None

    def run(self, lesson: LessonGrading, students: list[str]) -> Iterator[WorkDone]:
        """DaskRunner.run; a submission whose grading came back killed because its worker's job
        ended (its worker then leaves) is graded again, once more, and recorded from there."""
        again: list[str] = []
        lost_on: dict[str, str] = {}
        for done in super().run(lesson, students):
            student = done.students[0] if len(done.students) == 1 else None
            if student and not done.graded(student) and self._job_ended_under(done):
                again.append(student)
                lost_on[student] = done.worker
                self.say(f"  {lesson.name} {shown(student)}: its grading on {done.worker} was killed with its Slurm "
                         f"job; graded again")
                continue
            yield done
        if again:
            for done in super().run(lesson, again):
                student = done.students[0]
                if student in lost_on and student in done.results:
                    self.retried.append(f"{lesson.name}/{student}")
                    done.results[student].setdefault("notes", []).append(
                        f"its grading on {lost_on[student]} was lost (its Slurm job ended); graded again on {done.worker}")
                yield done

    def _job_ended_under(self, done: WorkDone) -> bool:
        """True when the grading was killed by a signal and its worker leaves within LEAVE_WAIT s."""
        if done.killed or done.rc not in JOB_ENDED or not done.address:
            return False
        deadline = time.monotonic() + LEAVE_WAIT
        while time.monotonic() < deadline:
            try:
                if done.address not in self.client.scheduler_info().get("workers", {}):
                    return True
            except Exception:  # noqa: BLE001 - the next look, or the runner, says what is wrong
                pass
            time.sleep(0.5)
        return False

    def close(self, grading: Grading, completed: bool) -> None:
        try:
            if self.retried:
                grading.say("graded again after their worker's Slurm job ended: " + ", ".join(map(shown, self.retried)))
            super().close(grading, completed)
            jobs = self.jobs
            jobs.track()
            grading.run.cluster["slurm"] = {"jobs": sorted(jobs.submitted, key=int), "ended": dict(jobs.ended),
                                            "replaced": jobs.replaced, "first_worker_seconds": jobs.first_worker}
        finally:
            self.jobs.release()
            _restore(self.restore or {})
            grading.say(f"cancelled this run's Slurm job(s): {', '.join(sorted(self.jobs.submitted, key=int)) or 'none'}")


def _restore(old: dict) -> None:
    for sig, handler in old.items():
        try:
            signal.signal(sig, handler)
        except (ValueError, TypeError):
            pass


def slurm_runner(spec: SlurmSpec, grading: Grading) -> SlurmRunner:
    return SlurmRunner.start(spec, grading.root, grading.say)

