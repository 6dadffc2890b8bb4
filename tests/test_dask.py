"""Grading on a real Dask cluster (utils/cluster.py): a `dask scheduler` and two `dask worker`
processes on loopback (free ports, --nthreads 1, each its own scratch folder as TMPDIR, as on two
machines sharing the course folder), a real PostgreSQL gradebook (tests/test_postgres.py's server).

One class, cheap on purpose: the three sample students of each lesson (reference answers, the
untouched release, plausible mistakes). It is graded once on the cluster (fresh reference cache:
the reference runs there, once per lesson) and compared cell by cell with the same submissions
graded locally by utils.grade's workers: the test session's one grading of each lesson
(tests/grading_runs.py), which the lesson tests read too, so no class is graded twice locally.
The reference's observations on the cluster are compared value for value with the local run's
(the lessons' determinism check: two runs in two processes).
The second test grades the small synthetic lesson (tests/conftest.py) on a fresh gradebook: three
submissions whose first cell waits a few seconds (time to kill a worker mid-submission, with almost
no CPU spent), SIGKILLs a worker while it grades one, and checks every submission graded exactly
once, with full marks.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import threading
import time
from pathlib import Path

import nbformat
import pytest

from grading_runs import MISTAKEN, REFERENCE, RELEASE, graded as graded_locally, want
from test_postgres import postgres_url  # noqa: F401 - the module's PostgreSQL server (a fixture)
from utils.coursedir import REPO, lessons, read_scores_url, scratch_course
from utils.demo import place_samples
from utils.grade import CACHE, grade_lessons
from utils.grading.reference import Reference
from utils.samples_io import load_samples

pytestmark = pytest.mark.slow
COURSE_ID = "prefill-decode"
# A submission that takes seconds on a worker, waiting rather than computing: the reference answer
KILL_STUDENTS = ("ann", "bo", "cy")
SLOW_SQUARE = "import time\ntime.sleep(5)\n\ndef square(x):\n    return x * x"
SAMPLE_STUDENTS = (REFERENCE, RELEASE, MISTAKEN)
for _lesson in lessons(REPO):   # utils.demo's three samples, graded locally once for the whole session
    want(_lesson, {MISTAKEN: load_samples(_lesson)[0]})


def _need_cluster_tools():
    pytest.importorskip("distributed", reason="dask and distributed are not installed (requirements-instructor.txt)")
    from utils.sandbox import unavailable

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
def graded(postgres_url, tmp_path_factory):  # noqa: F811 - the imported fixture
    _need_cluster_tools()
    from utils.cluster import loopback_cluster

    base = tmp_path_factory.mktemp("dask")
    names = lessons(REPO)
    course = _class(base / "cluster-course", postgres_url, names)
    out = io.StringIO()
    start = time.perf_counter()
    with loopback_cluster(2, base / "cluster") as cluster, contextlib.redirect_stdout(out):
        run = grade_lessons(course, scheduler=cluster.address)
    cluster_seconds = time.perf_counter() - start
    print(f"\ncluster run {cluster_seconds:.0f} s ({len(run.outcomes)} submissions)\n" + out.getvalue())
    return {"course": course, "run": run, "out": out.getvalue(), "names": names, "postgres": postgres_url}


def _local_scores(names) -> dict[tuple[str, str, str], float]:
    """The same three samples of each lesson as graded locally (the session's shared grading)."""
    return {(lesson, student, cell): score for lesson in names for student in SAMPLE_STUDENTS
            for cell, (score, _) in graded_locally(lesson).scores(student).items()}


def test_cluster_grades_like_a_local_run(graded):
    course, run, out = graded["course"], graded["run"], graded["out"]
    cluster_scores = _scores(graded["postgres"])
    assert cluster_scores == _local_scores(graded["names"]) and len(cluster_scores) > 0
    students = {(o.lesson, o.student) for o in run.outcomes}
    assert len(students) == 9 and all(o.status == "graded" for o in run.outcomes), [o.line() for o in run.outcomes]
    # every submission recorded once, once in grades.csv, once in the gradebook
    assert set(run.cluster["recorded"]) == students and set(run.cluster["recorded"].values()) == {1}
    rows = _csv_rows(course)
    assert sorted(rows) == sorted(students)
    # the reference ran once per lesson, on the cluster, into the shared cache
    assert set(run.cluster["references"]) == set(graded["names"])
    assert all(info["ran"] for info in run.cluster["references"].values())
    assert len(list((course / CACHE).glob("*.json"))) == 3
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
    assert sum(run.cluster["workers"].values()) == 9
    assert "dashboard: http://127.0.0.1:" in out and "each worker's share: worker-1" in out
    assert list((course / "feedback" / "reference-solution").rglob("*.html"))


def test_a_worker_killed_mid_submission_costs_nothing(postgres_url, tmp_path):  # noqa: F811
    _need_cluster_tools()
    from distributed import Client

    from conftest import SYNTH, make_course, synthetic_cells
    from utils.cluster import loopback_cluster
    from utils.coursedir import submission_from

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

    with loopback_cluster(2, tmp_path / "cluster") as cluster:
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

    assert "key" in killed, "worker-1 was never seen grading a submission"
    victim = next(s for (_, s) in run.cluster["recorded"] if killed["key"].startswith(f"grade-{SYNTH}-{s}-"))
    students = {(o.lesson, o.student) for o in run.outcomes}
    assert students == {(SYNTH, s) for s in KILL_STUDENTS}
    assert all(o.status == "graded" for o in run.outcomes), [o.line() for o in run.outcomes]
    assert set(run.cluster["recorded"]) == students and set(run.cluster["recorded"].values()) == {1}
    assert sorted(_csv_rows(course)) == sorted(students)
    assert _scores(db) == {(SYNTH, s, cell): points for s in KILL_STUDENTS
                           for cell, points in (("square_test", 2.0), ("quiz_q1_test", 1.0))}
    # the killed worker's submission was graded again on the other one, and says so
    assert f"{SYNTH}/{victim}" in run.cluster["retried"]
    note = next(o for o in run.outcomes if o.student == victim).notes
    assert any("was lost (the worker died); graded again on worker-2" in n for n in note), note
    assert all(w.startswith("worker-2") for w in run.cluster["workers"]), run.cluster["workers"]


# --- without a cluster: the refusal line, a submission that kills its workers, the address ----------

def test_a_worker_with_other_course_files_refuses_in_one_line(synthetic_course, monkeypatch):
    from types import SimpleNamespace

    from conftest import SYNTH
    from utils.cluster import fingerprint, worker_problem

    monkeypatch.setattr("utils.sandbox.unavailable", lambda bwrap: None)
    worker = SimpleNamespace(name="w7", address="tcp://10.0.0.7:40000")
    expected = fingerprint(synthetic_course, SYNTH)
    assert any(k.startswith("course package: ") for k in expected)
    assert worker_problem(str(synthetic_course), SYNTH, expected, worker) is None
    (synthetic_course / "source" / SYNTH / "synthetic.ipynb").write_text("{}")
    line = worker_problem(str(synthetic_course), SYNTH, expected, worker)
    assert line.startswith("worker w7 (tcp://10.0.0.7:40000, host ") and "\n" not in line
    assert f"source/{SYNTH}/synthetic.ipynb" in line and "differ from the grader's" in line
    line = worker_problem(str(synthetic_course / "elsewhere"), SYNTH, expected, worker)
    assert "does not see the course directory" in line and "COURSE_CLUSTER_ROOT" in line


def test_a_submission_that_kills_every_worker_scores_zero_with_its_reason():
    from types import SimpleNamespace

    pytest.importorskip("distributed")
    from distributed.scheduler import KilledWorker

    from utils.cluster import Cluster
    from utils.coursedir import ToolError
    from utils.grade import GradeRun, Outcome, Plan

    class Failed:
        key, status = "grade-01_x-bo-1234", "error"

        def __init__(self, err):
            self.err = err

        def exception(self):
            return self.err

    cluster = Cluster("tcp://127.0.0.1:1", print)
    g = SimpleNamespace(run=GradeRun())
    p = Plan("01_x", ["bo"], {"bo": Outcome("01_x", "bo")}, {}, Path("."))
    killed = KilledWorker("grade-01_x-bo-1234", SimpleNamespace(address="tcp://10.0.0.9:1"), 1)
    assert cluster._finished(g, p, Failed(killed), "bo", set()).startswith("FAILED")
    out = p.outcomes["bo"]
    assert out.status == "zero" and "killed every worker it was sent to (2, the last tcp://10.0.0.9:1" in out.reason
    with pytest.raises(ToolError, match="grading on the cluster stopped: boom"):
        cluster._finished(g, p, Failed(RuntimeError("boom")), "bo", set())


def test_scheduler_address_from_option_or_environment(monkeypatch):
    from utils.cluster import scheduler_address

    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    assert scheduler_address(None) is None
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", "tcp://h:8786")
    assert scheduler_address(None) == "tcp://h:8786" and scheduler_address("tcp://o:1") == "tcp://o:1"
