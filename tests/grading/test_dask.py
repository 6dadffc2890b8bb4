"""Grading on a real Dask cluster (utils/grading/dask/): a `dask scheduler` and two `dask worker`
processes on loopback (free ports, --nthreads 1, each its own scratch folder as TMPDIR), started
once for the module: both workers share no disk with the grader (each in a mount namespace of its
own where the course folder is empty, from its own clone of the repository at another path), a
real PostgreSQL gradebook (tests/grading/conftest.py's server).

One class, cheap on purpose: lesson 1's three sample students (reference answers, the untouched
release, plausible mistakes), graded once on the cluster (fresh reference cache: the reference runs
there) and compared cell by cell with the same submissions graded locally by utils.grading.grade_course's
workers: the test session's one grading of the lesson (tests/grading_runs.py), which the lesson
tests read too, so nothing is graded twice locally. The reference's observations on a worker are
compared value for value with the local run's (lesson 1 runs the toy model in torch, whose results
depend on the kernel's library threads, which differ there). One lesson proves what the cluster
adds; every lesson's reference graded as a student in a second kernel gets full marks in
test_lessons.py.
Then, on the same cluster, the small synthetic lesson (tests/conftest.py) on a fresh gradebook: three
submissions whose first cell waits a few seconds (time to kill a worker mid-submission, with almost
no CPU spent); a worker is SIGKILLed while it grades one, and every submission is graded exactly
once, with full marks; a rerun after a run that stopped grades only what was not recorded (and a
submission whose planning crashes scores 0 with its reason); last, the scheduler is lost mid-run
(one line, no stale export). That test ends the module's cluster, so it comes last of those that
use it.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import shutil
import threading
import time
from pathlib import Path

import nbformat
import pytest

from grading_runs import MISTAKEN, REFERENCE, RELEASE, graded as graded_locally, want
from helpers import free_port
from utils.lessons import REPO
from utils.scores import read_scores_url
from utils.scratch import scratch_course
from utils.authoring.demo import place_samples
from utils.grading.grade_course import grade_lessons
from utils.grading.settings import CACHE
from utils.grading.reference_run import Reference
from utils.authoring.samples_io import load_samples

# the module's fixture grades lesson 1 on a loopback cluster (79 s in make test, docs/benchmarks.md)
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]
COURSE_ID = "prefill-decode"
# A submission that takes seconds on a worker, waiting rather than computing: the reference answer
KILL_STUDENTS = ("ann", "bo", "cy")
CRASH = "dee"   # a submission whose planning crashes (in the rerun)
# (its kernel also prints the thread counts its numeric libraries were given)
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
SLOW_SQUARE = ("import os, time\nprint('threads:', ' '.join(os.environ.get(v, '-') for v in %r))\n"
               "time.sleep(5)\n\ndef square(x):\n    return x * x" % (THREAD_VARS,))
SAMPLE_STUDENTS = (REFERENCE, RELEASE, MISTAKEN)
LESSON = "01_two_phases"   # the lesson graded on the cluster (the cheapest of the three to run)
want(LESSON, {MISTAKEN: load_samples(LESSON)[0]})   # utils.authoring.demo's three samples, graded locally once per session


def _need_cluster_tools():
    pytest.importorskip("distributed", reason="dask and distributed are not installed (requirements-instructor.txt)")
    from utils.sandbox.probe import unavailable

    problem = unavailable("bwrap")
    if problem:
        pytest.skip(f"the workers grade in the bubblewrap sandbox, which cannot run here: {problem}")


def _database(url: str, name: str) -> str:
    """A new empty database on the same server; its URL."""
    import psycopg2

    host_port = url.split("@", 1)[1].split("/", 1)[0]
    host, port = host_port.split(":")
    conn = psycopg2.connect(host=host, port=int(port), user="postgres", dbname="postgres")
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE {name}")
    conn.close()
    return url.rsplit("/", 1)[0] + f"/{name}"


def _class(dest: Path, db_url: str | None, names: list[str]) -> Path:
    extra = f"\nc.CourseDirectory.db_url = {db_url!r}\n" if db_url else ""
    course = scratch_course(REPO, names, dest, release=True, extra_config=extra)
    place_samples(course)
    return course


def _scores(db_url: str, names=None) -> dict[tuple[str, str, str], float]:
    return {(r.lesson, r.student, r.cell): r.score for r in read_scores_url(db_url, COURSE_ID, names)}


def _csv_rows(course: Path) -> list[tuple[str, str]]:
    with open(course / "grades.csv", newline="") as f:
        return [(row["assignment"], row["student_id"]) for row in csv.DictReader(f)]


@pytest.fixture(scope="module")
def loopback(postgres_url, tmp_path_factory):
    """The module's cluster (two workers that cannot see the class's course folder) and that
    course (lesson 1's samples, the PostgreSQL gradebook). The last test that uses it kills it."""
    _need_cluster_tools()
    from utils.grading.dask.loopback import loopback_cluster

    base = tmp_path_factory.mktemp("dask")
    course = _class(base / "cluster-course", postgres_url, [LESSON])
    with loopback_cluster(2, base / "cluster", hide=(course,)) as cluster:
        yield {"cluster": cluster, "course": course, "clone": base / "cluster" / "clone"}


@pytest.fixture(scope="module")
def graded(loopback, postgres_url):
    from distributed import Client

    cluster, course = loopback["cluster"], loopback["course"]
    out = io.StringIO()
    start = time.perf_counter()
    with Client(cluster.address, set_as_default=False) as client:
        seen = client.run(lambda: [os.path.exists(course / "submitted"), os.path.exists(course / "nbgrader_config.py"),
                                   __import__("utils").__file__])
    with contextlib.redirect_stdout(out):
        run = grade_lessons(course, scheduler=cluster.address)
    cluster_seconds = time.perf_counter() - start
    print(f"\ncluster run {cluster_seconds:.0f} s ({len(run.outcomes)} submissions)\n" + out.getvalue())
    return {"course": course, "run": run, "out": out.getvalue(), "names": [LESSON], "postgres": postgres_url,
            "seen": list(seen.values()), "clone": loopback["clone"]}


def _local_scores(names) -> dict[tuple[str, str, str], float]:
    """The same three samples of each lesson as graded locally (the session's shared grading)."""
    return {(lesson, student, cell): score for lesson in names for student in SAMPLE_STUDENTS
            for cell, (score, _) in graded_locally(lesson).scores(student).items()}


def test_cluster_grades_like_a_local_run(graded):
    course, run, out = graded["course"], graded["run"], graded["out"]
    # the workers saw none of the course folder, and ran the tools of their own clone
    assert len(graded["seen"]) == 2 and all(seen[:2] == [False, False] for seen in graded["seen"]), graded["seen"]
    assert all(seen[2].startswith(str(graded["clone"])) for seen in graded["seen"]), graded["seen"]
    cluster_scores = _scores(graded["postgres"])
    assert cluster_scores == _local_scores(graded["names"]) and len(cluster_scores) > 0
    students = {(o.lesson, o.student) for o in run.outcomes}
    assert len(students) == 3 and all(o.status == "graded" for o in run.outcomes), [o.line() for o in run.outcomes]
    # every submission recorded once, once in grades.csv, once in the gradebook
    assert set(run.cluster["recorded"]) == students and set(run.cluster["recorded"].values()) == {1}
    rows = _csv_rows(course)
    assert sorted(rows) == sorted(students)
    # the reference ran once per lesson, on the cluster, into the shared cache
    assert set(run.cluster["references"]) == set(graded["names"])
    assert all(info["ran"] for info in run.cluster["references"].values())
    assert len(list((course / CACHE).glob("*.json"))) == 1
    # and observed what the local run observed: the reference is deterministic across processes
    # and machines (the lesson tests check unique labels, and the reference graded as a student)
    for lesson in graded["names"]:
        ran_here = graded_locally(lesson).reference
        cached = course / CACHE / f"{run.cluster['references'][lesson]['key']}.json"   # the worker's key
        ran_there = Reference.from_json(json.loads(cached.read_text()))
        assert ran_here is not None and set(ran_there.observations) == set(ran_here.observations), lesson
        for gid, seen in ran_there.observations.items():
            # repr: every value exactly, and a NaN equal to a NaN
            assert list(map(repr, seen)) == list(map(repr, ran_here.observations[gid])), \
                f"{lesson} {gid}: the reference observed otherwise on a worker"
    assert not list((course / CACHE).glob("cluster-gradebook-*"))
    # both workers took a share; progress and the dashboard were shown
    assert sorted(w.split()[0] for w in run.cluster["workers"]) == ["worker-1", "worker-2"]
    assert sum(run.cluster["workers"].values()) == 3
    assert "dashboard: http://127.0.0.1:" in out and "each worker's share: worker-1" in out
    assert list((course / "feedback" / "reference-solution").rglob("*.html"))


def test_a_scheduler_started_as_the_docs_say_runs_the_course_tasks(loopback):
    """The module's scheduler was started as docs/instructors.md says: Dask alone, none of the
    course's tools (before the test that kills it)."""
    from utils.grading.dask.cluster_runner import DaskRunner, task
    from utils.grading.dask.worker_check import PLUGIN, WorkerCheck, refusal
    from utils.grading.fingerprint import fingerprint

    c = DaskRunner.connect(loopback["cluster"].address, lambda *a: None)
    try:
        # the scheduler cannot import the course's tools (its folder and path hold none)...
        assert c.client.run_on_scheduler(lambda: __import__("importlib.util").util.find_spec("utils")) is None
        # ...yet it answered the grader (allowed-failures) and runs the course's tasks on a worker
        assert c.allowed_failures == 3
        threads = c.client.submit(task("kernel_threads"), 3, {"COURSE_KERNEL_THREADS": "5"}, pure=False)
        assert threads.result(timeout=120)["OMP_NUM_THREADS"] == "5"
        # the workers' check is a worker plugin: a worker whose tools differ from what the grader
        # expects refuses in one line, and so does every course task sent to it
        expected = fingerprint()
        expected["utils/grading/grade_course.py"] = "0" * 64
        c.client.register_plugin(WorkerCheck(expected, (False, "bwrap")), name=PLUGIN)
        lines = list(c.client.run(refusal).values())
        assert len(lines) == 2 and all("refuses: its grading tools differ from the grader's (utils/grading/grade_course.py)"
                                       in line and "\n" not in line for line in lines), lines
        refused = c.client.submit(task("key_task"), {"lesson": "01_x"}, pure=False)
        with pytest.raises(RuntimeError, match="refuses: its grading tools differ"):
            refused.result(timeout=120)
        c.client.register_plugin(WorkerCheck(fingerprint(), (False, "bwrap")), name=PLUGIN)
        assert list(c.client.run(refusal).values()) == [None, None]
    finally:
        c.client.unregister_worker_plugin(PLUGIN)
        c.client.close()


def test_a_worker_killed_mid_submission_costs_nothing(loopback, graded, postgres_url, tmp_path, monkeypatch,
                                                     capfd):
    """On the module's cluster, after the class was graded there (`graded`: this test kills a worker
    and then the scheduler, so it runs last of the tests that use the cluster)."""
    from distributed import Client

    from conftest import SYNTH, make_course, synthetic_cells
    from utils.notebooks import submission_from

    db = _database(postgres_url, "gradebook_kill")
    course = make_course(tmp_path / "course", synthetic_cells())
    with open(course / "nbgrader_config.py", "a") as f:
        f.write(f"\nc.CourseDirectory.db_url = {db!r}\n")
    release = nbformat.read(str(course / "release" / SYNTH / "synthetic.ipynb"), as_version=4)
    source = nbformat.read(str(course / "source" / SYNTH / "synthetic.ipynb"), as_version=4)
    for student in KILL_STUDENTS:
        (course / "submitted" / student / SYNTH).mkdir(parents=True)
        nbformat.write(submission_from(release, source, {"square": SLOW_SQUARE}),
                       str(course / "submitted" / student / SYNTH / "synthetic.ipynb"))
    killed: dict[str, str] = {}

    cluster = loopback["cluster"]
    def killer():
        """SIGKILL worker-1 once its nbgrader has been grading a submission for 3 seconds."""
        victim = cluster.workers["worker-1"]
        with Client(cluster.address, set_as_default=False) as client:
            address = next(a for a, w in client.scheduler_info()["workers"].items() if w["name"] == "worker-1")
            since = None
            deadline = time.monotonic() + 600
            while time.monotonic() < deadline and victim.poll() is None:
                keys = [k for k in client.processing().get(address, ()) if str(k).startswith("grade-")]
                started = list(cluster.scratch["worker-1"].glob(f"grade-{SYNTH}-*"))
                if keys and started:
                    since = since or time.monotonic()
                    if time.monotonic() - since > 3:
                        killed["key"] = str(keys[0])
                        cluster.kill_worker("worker-1")
                        return
                time.sleep(0.3)

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        run = grade_lessons(course, [SYNTH], scheduler=cluster.address)
    thread.join(timeout=60)
    print(out.getvalue())
    rows = sorted(_csv_rows(course))
    # the feedback, made on the workers beside each graded notebook
    feedback = sorted(f.parts[-3] for f in (course / "feedback").rglob("*.html"))
    # A rerun after a run that stopped with two of the three recorded (its journal, as that run
    # would have left it): only the third is graded again, the two keep their grades.
    from utils.grading import submissions
    from utils.grading.fingerprint import fingerprint
    from utils.grading.journal import JOURNAL, Journal, lesson_key

    assert not (course / CACHE / JOURNAL).exists()   # a run that graded everything leaves none
    journal, kept = Journal(course), list(KILL_STUDENTS[:2])
    from utils.grading.lesson import Grading
    from utils.grading.settings import Options, course_settings

    decided = Grading(course, course_settings(course), Options()).decided_by()   # the options the rerun is given
    key = lesson_key(fingerprint(), run.cluster["references"][SYNTH]["key"], decided)   # the workers' key
    for o in run.outcomes:
        if o.student in kept:
            result = {"verdicts": {g: list(v) for g, v in o.verdicts.items()}, "notes": [], "score": o.score,
                      "max_score": o.max_score, "reason": ""}
            journal.add(SYNTH, key, o.student, submissions.hash_tree(course / "submitted" / o.student / SYNTH), result)
    # A fourth submission, new since, whose planning crashes (utils.grading.submissions.preflight raises on it,
    # as on a hostile file it cannot handle): it scores 0 with the reason, the rest is graded.
    from utils.grading import cli

    shutil.copytree(course / "submitted" / KILL_STUDENTS[0], course / "submitted" / CRASH)
    preflight = submissions.preflight

    def crashing(root, lesson, student, known=None):
        if student == CRASH:
            raise RuntimeError("the planner choked on it\nand a traceback nobody should read")
        return preflight(root, lesson, student, known)

    monkeypatch.setattr(submissions, "preflight", crashing)
    with contextlib.redirect_stdout(io.StringIO()) as out2:
        rerun = grade_lessons(course, [SYNTH], scheduler=cluster.address)
    print(out2.getvalue())
    monkeypatch.undo()
    rerun_rows = sorted(_csv_rows(course))
    shutil.rmtree(course / "submitted" / CRASH)
    # Then the scheduler is lost (SIGKILL) while the grader makes the lesson's gradebook template
    # (the workers have been checked, the reference is in the cache): one line on stderr, exit 1,
    # and no grades.csv left over from the runs before to pass for this one's.
    from utils.processes import kill_tree
    from utils.grading.lesson import LessonGrading

    template = LessonGrading.make_template

    def and_lose_the_scheduler(self):
        kill_tree(cluster.scheduler.pid)
        cluster.scheduler.wait()
        return template(self)

    monkeypatch.setattr(LessonGrading, "make_template", and_lose_the_scheduler)
    assert (course / "grades.csv").is_file()
    capfd.readouterr()
    rc = cli.main(["--course", str(course), "--scheduler", cluster.address])
    lost_out, lost_err = capfd.readouterr()
    print(lost_out, lost_err)

    assert "key" in killed, "worker-1 was never seen grading a submission"
    victim = next(s for (_, s) in run.cluster["recorded"] if killed["key"].startswith(f"grade-{SYNTH}-{s}-"))
    students = {(o.lesson, o.student) for o in run.outcomes}
    assert students == {(SYNTH, s) for s in KILL_STUDENTS}
    assert all(o.status == "graded" for o in run.outcomes), [o.line() for o in run.outcomes]
    assert set(run.cluster["recorded"]) == students and set(run.cluster["recorded"].values()) == {1}
    assert rows == sorted(students)
    assert feedback == sorted(KILL_STUDENTS), feedback
    assert {k: v for k, v in _scores(db).items() if k[1] != CRASH} == {
        (SYNTH, s, cell): points for s in KILL_STUDENTS for cell, points in (("square_test", 2.0), ("quiz_q1_test", 1.0))}
    # the killed worker's submission was graded again on the other one, and says so
    assert f"{SYNTH}/{victim}" in run.cluster["retried"]
    note = next(o for o in run.outcomes if o.student == victim).notes
    assert any("was lost (the worker died); graded again on worker-2" in n for n in note), note
    assert all(w.startswith("worker-2") for w in run.cluster["workers"]), run.cluster["workers"]
    resumed = sorted(o.student for o in rerun.outcomes if any("recorded by an earlier run that stopped" in n for n in o.notes))
    assert resumed == sorted(KILL_STUDENTS[:2]), [o.line() for o in rerun.outcomes]
    assert set(rerun.cluster["recorded"]) == {(SYNTH, KILL_STUDENTS[2])}
    crashed = next(o for o in rerun.outcomes if o.student == CRASH)
    assert crashed.status == "zero" and crashed.reason == \
        "the submission could not be read for grading (the planner choked on it)", crashed.line()
    assert all(o.status == "graded" for o in rerun.outcomes if o.student != CRASH)
    assert rerun_rows == sorted(students | {(SYNTH, CRASH)})
    assert {cell: v for (_, s, cell), v in _scores(db).items() if s == CRASH} == {"square_test": 0.0, "quiz_q1_test": 0.0}
    assert {k: v for k, v in _scores(db).items() if k[1] != CRASH} == {
        (SYNTH, s, cell): points for s in KILL_STUDENTS for cell, points in (("square_test", 2.0), ("quiz_q1_test", 1.0))}
    assert "2 submission(s) recorded by an earlier run that stopped are kept" in out2.getvalue()
    assert not (course / CACHE / JOURNAL).exists()
    lines = [line for line in lost_err.splitlines() if line.strip()]
    assert rc == 1 and len(lines) == 1, lost_err
    assert lines[0].startswith(f"grade failed: lost the Dask scheduler at {cluster.address} (its connection "
                               f"closed) after 0 of 3 submission(s) of {SYNTH} were recorded: what was recorded "
                               f"is kept"), lines[0]
    assert not (course / "grades.csv").exists()
    # under the nanny (which sets those variables to 1 for its worker), each kernel got the worker's
    # cores split between its threads (--nthreads 1: all of them), as the docs say
    from utils.grading.dask.tasks import kernel_threads

    share = kernel_threads(1, {})["OMP_NUM_THREADS"]
    for s in KILL_STUDENTS:
        nb = nbformat.read(str(course / "autograded" / s / SYNTH / "synthetic.ipynb"), as_version=4)
        printed = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
        assert f"threads: {share} {share} {share}" in printed, printed


# --- without a cluster: the refusal line, a submission that kills its workers, the address ----------

def test_a_worker_with_another_course_package_refuses_in_one_line(monkeypatch):
    from types import SimpleNamespace

    from utils.grading.dask.worker_check import fingerprint, worker_problem

    monkeypatch.setattr("utils.grading.dask.worker_check.unavailable", lambda bwrap: None)
    monkeypatch.setattr("utils.grading.dask.worker_check.start_problem", lambda bwrap: None)
    worker = SimpleNamespace(name="w7", address="tcp://10.0.0.7:40000")
    expected = fingerprint()
    package = sorted(k for k in expected if k.startswith("course package: "))
    assert package and worker_problem(expected, (True, "bwrap"), worker) is None
    line = worker_problem({**expected, package[0]: "0" * 64}, (True, "bwrap"), worker)
    assert line.startswith("worker w7 (tcp://10.0.0.7:40000, host ") and "\n" not in line
    assert f"its course package differ from the grader's ({package[0]})" in line
    monkeypatch.setattr("utils.grading.dask.worker_check.unavailable", lambda bwrap: "bwrap is not installed")
    line = worker_problem(expected, (True, "bwrap"), worker)
    assert line.endswith("the autograding sandbox cannot run there: bwrap is not installed")


def test_a_worker_with_other_grading_tools_refuses_in_one_line(tmp_path, monkeypatch):
    import shutil
    from types import SimpleNamespace

    from utils.grading.dask.worker_check import fingerprint, worker_problem

    monkeypatch.setattr("utils.grading.dask.worker_check.unavailable", lambda bwrap: None)
    monkeypatch.setattr("utils.grading.dask.worker_check.start_problem", lambda bwrap: None)
    worker = SimpleNamespace(name="w8", address="tcp://10.0.0.8:40000")
    expected = fingerprint()
    assert "utils/grading/reference_run.py" in expected and "utils/grading/grade_course.py" in expected
    theirs = tmp_path / "their-clone"   # the worker's clone: the same tools, then one grader changed
    shutil.copytree(REPO / "utils", theirs / "utils", ignore=shutil.ignore_patterns("__pycache__"))
    assert worker_problem(expected, (True, "bwrap"), worker, tools=theirs) is None
    with open(theirs / "utils" / "grading" / "reference_run.py", "a") as f:
        f.write("\n# another version\n")
    line = worker_problem(expected, (True, "bwrap"), worker, tools=theirs)
    assert line.startswith("worker w8 (tcp://10.0.0.8:40000, host ") and "\n" not in line
    assert "its grading tools differ from the grader's (utils/grading/reference_run.py)" in line


def test_a_submission_that_kills_every_worker_scores_zero_with_its_reason(tmp_path):
    from types import SimpleNamespace

    pytest.importorskip("distributed")
    from distributed.scheduler import KilledWorker

    from utils.errors import ToolError
    from utils.grading.dask.cluster_runner import DaskRunner
    from utils.grading.lesson import GradeRun, Grading, LessonGrading
    from utils.grading.settings import CourseSettings, Options
    from utils.grading.submissions import Outcome

    class Failed:
        key, status = "grade-01_x-bo-1234", "error"

        def __init__(self, err):
            self.err = err

        def exception(self):
            return self.err

    runner = DaskRunner("tcp://127.0.0.1:1", lambda *a: None)
    grading = Grading(tmp_path, CourseSettings("c", f"sqlite:///{tmp_path / 'gb.db'}"), Options(), lambda *a: None, GradeRun())
    lesson = LessonGrading(grading, "01_x", "x.ipynb", ["bo"], {"bo": Outcome("01_x", "bo")}, {"bo": {}})
    killed = KilledWorker("grade-01_x-bo-1234", SimpleNamespace(address="tcp://10.0.0.9:1"), 1)
    flight = SimpleNamespace(futures={}, seen={}, returned=0, failed=0, total=1, cancel=lambda: None)
    failed = Failed(killed)
    flight.futures[failed] = "bo"
    done = runner._finished(lesson, flight, failed)
    assert done.students == ["bo"] and not done.graded("bo") and flight.failed == 1
    assert "killed every worker it was sent to (2, the last tcp://10.0.0.9:1" in done.reason("bo", 1.0)
    lesson.record(done)   # the grader's one place that writes grades: a zero with that reason
    out = lesson.outcomes["bo"]
    assert out.status == "zero" and "killed every worker it was sent to (2" in out.reason
    other = Failed(RuntimeError("boom"))
    flight.futures[other] = "bo"
    runner.client = SimpleNamespace(status="running")
    with pytest.raises(ToolError, match="grading on the cluster stopped: boom"):
        runner._finished(lesson, flight, other)


def test_scheduler_address_from_option_or_environment(monkeypatch):
    from utils.grading.dask.address import scheduler_address

    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    assert scheduler_address(None) is None
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", "tcp://h:8786")
    assert scheduler_address(None) == "tcp://h:8786" and scheduler_address("tcp://o:1") == "tcp://o:1"


def test_a_key_task_that_no_worker_finishes_stops_in_one_line():
    """The reference's cache key, which one worker computes before anything is graded, is waited
    for KEY_WAIT s at most, then one line (workers busy with other work, or stuck)."""
    from types import SimpleNamespace

    from utils.errors import ToolError
    from utils.grading.dask import cluster_runner as runner

    waited = []

    class NeverDone:
        def result(self, timeout=None):
            waited.append(timeout)
            raise TimeoutError()

    client = SimpleNamespace(submit=lambda *a, **k: NeverDone(), status="running")
    dask_runner = runner.DaskRunner("tcp://h:1", print, client, dashboard="http://h:8787/status")
    with pytest.raises(ToolError) as err:
        dask_runner._key("01_x", {"lesson": "01_x"}, "token")
    assert waited == [runner.KEY_WAIT] and "\n" not in str(err.value)
    assert str(err.value).startswith(f"01_x: no worker computed the reference's cache key within {runner.KEY_WAIT:.0f} s")
    assert "(http://h:8787/status)" in str(err.value)


def test_the_benchmark_command_line(capsys):
    """python -m utils.bench.cluster: its command line (the benchmark itself grades for minutes)."""
    pytest.importorskip("distributed", reason="dask and distributed are not installed (requirements-instructor.txt)")
    from utils.bench.cluster import main

    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: python -m utils.bench.cluster") and "--workers" in out
    with pytest.raises(SystemExit) as wrong:
        main(["--workers", "two"])
    assert wrong.value.code == 2 and "invalid int value: 'two'" in capsys.readouterr().err


# --- addresses that are not a scheduler, a cluster without workers, a scheduler lost --------------

def _one_line_refusal(address: str, match: str, **options) -> str:
    from utils.errors import ToolError
    from utils.grading.dask.cluster_runner import DaskRunner

    start = time.monotonic()
    with pytest.raises(ToolError) as err:
        DaskRunner.connect(address, lambda *a: None, **options)
    line = str(err.value)
    assert "\n" not in line and match in line, line
    return line, time.monotonic() - start


def test_a_dashboard_url_a_closed_port_and_another_service_each_give_one_line():
    import socketserver

    pytest.importorskip("distributed", reason="dask and distributed are not installed (requirements-instructor.txt)")
    line, _ = _one_line_refusal("http://127.0.0.1:8787/status", "is a web address (the scheduler's dashboard?)")
    assert "tcp://HOST:8786" in line
    port = free_port()   # a port nothing listens on
    _, seconds = _one_line_refusal(f"tcp://127.0.0.1:{port}", f"cannot reach the Dask scheduler at tcp://127.0.0.1:{port}")
    assert seconds < 5

    class NotDask(socketserver.BaseRequestHandler):   # a web server's answer to anything
        def handle(self):
            self.request.recv(4096)
            self.request.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 11\r\n\r\nBad Request" * 50)

    with socketserver.ThreadingTCPServer(("127.0.0.1", 0), NotDask) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        address = f"tcp://127.0.0.1:{server.server_address[1]}"
        try:
            _, seconds = _one_line_refusal(address, f"{address} does not answer as a Dask scheduler", timeout=3)
        finally:
            server.shutdown()
    assert seconds < 30


def test_a_cluster_without_workers_gives_one_line_after_a_bounded_wait(tmp_path):
    pytest.importorskip("distributed", reason="dask and distributed are not installed (requirements-instructor.txt)")
    from utils.grading.dask.loopback import loopback_cluster

    with loopback_cluster(0, tmp_path / "cluster") as cluster:
        line, seconds = _one_line_refusal(cluster.address, "has no workers (waited 2 s)", wait=2)
    assert f"dask worker {cluster.address}" in line and seconds < 20
