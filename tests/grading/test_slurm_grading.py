"""Grading on a real Slurm (utils/grading/dask/slurm.py, `python -m utils.grading --slurm`): a
one-node Slurm on this machine (tests/slurm_common.py: munged, slurmctld, slurmd as root, started
once for the module), where the command submits its Dask workers as Slurm jobs through
dask-jobqueue, grades on them and cancels them.

Lean on purpose: the small synthetic lesson (tests/conftest.py), never a real one.
  1. A class of three (the reference answer, the untouched release, a wrong square) graded with
     `--slurm 2`: the scores a local run gives, every submission recorded once, the time to the
     first worker said, and no job of the run left in the queue afterwards.
  2. Two submissions whose first cell waits a few seconds; one worker's job is cancelled with
     `scancel` while it grades one: that submission is graded again elsewhere, once, says so,
     and the summary names it; the ended job is replaced; every job is cancelled at the end.
"""

from __future__ import annotations

import contextlib
import csv
import io
import threading
import time
from pathlib import Path

import nbformat
import pytest

from conftest import SYNTH, make_course, synthetic_cells
from slurm_common import one_node_slurm, slurm_problem
from utils.notebooks import submission_from
from utils.scores import read_scores_url

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

SLOW_SQUARE = "import time\ntime.sleep(5)\n\ndef square(x):\n    return x * x"
SLOW_WRONG = "import time\ntime.sleep(5)\n\ndef square(x):\n    return x + x"
FULL = {"square_test": 2.0, "quiz_q1_test": 1.0}


@pytest.fixture(scope="module")
def slurm():
    pytest.importorskip("dask_jobqueue", reason="dask-jobqueue is not installed (requirements-instructor.txt)")
    from utils.sandbox.probe import unavailable

    problem = slurm_problem() or unavailable("bwrap")
    if problem:
        pytest.skip(f"no one-node Slurm here: {problem}")
    with one_node_slurm() as cluster:
        with pytest.MonkeyPatch.context() as env:
            env.setenv("SLURM_CONF", str(cluster.conf))   # what sbatch, squeue and scancel read
            yield cluster


def _course(dest: Path, answers: dict[str, dict[str, str]]) -> Path:
    course = make_course(dest, synthetic_cells())
    release = nbformat.read(str(course / "release" / SYNTH / "synthetic.ipynb"), as_version=4)
    source = nbformat.read(str(course / "source" / SYNTH / "synthetic.ipynb"), as_version=4)
    for student, overrides in answers.items():
        (course / "submitted" / student / SYNTH).mkdir(parents=True)
        nb = release if overrides is None else submission_from(release, source, overrides)
        nbformat.write(nb, str(course / "submitted" / student / SYNTH / "synthetic.ipynb"))
    return course


def _scores(course: Path) -> dict[tuple[str, str], float]:
    from utils.grading.settings import course_settings

    settings = course_settings(course)
    return {(r.student, r.cell): r.score for r in read_scores_url(settings.db_url, settings.course_id, [SYNTH])}


def _slurm_args(jobs: int) -> list[str]:
    return ["--slurm", str(jobs), "--slurm-memory", "1GB", "--slurm-walltime", "00:10:00",
            "--slurm-partition", "debug", "--slurm-host", "127.0.0.1", "--slurm-wait", "120"]


@pytest.fixture(scope="module")
def graded(slurm, tmp_path_factory):
    """One class graded with `python -m utils.grading --slurm 2`; the job of the first worker seen
    grading a submission for 3 s is cancelled with scancel meanwhile."""
    from utils.grading import cli
    from utils.grading.dask.slurm import SlurmRunner

    course = _course(tmp_path_factory.mktemp("slurm") / "course",
                     {"ann": {"square": SLOW_SQUARE}, "bo": None, "cy": {"square": SLOW_WRONG}})
    runners, cancelled = [], {}
    start_runner = SlurmRunner.start.__func__

    def keep(cls, *args, **kwargs):
        runner = start_runner(cls, *args, **kwargs)
        runners.append(runner)
        return runner

    def canceller():
        deadline = time.monotonic() + 300
        while not runners and time.monotonic() < deadline:
            time.sleep(0.2)
        runner, since = runners[0], {}
        while time.monotonic() < deadline:
            try:
                names = {a: w["name"] for a, w in runner.client.scheduler_info()["workers"].items()}
                busy = {a: [k for k in keys if str(k).startswith("grade-")]
                        for a, keys in runner.client.processing().items()}
            except Exception:  # noqa: BLE001 - the client is closing
                return
            for address, keys in busy.items():
                if keys and address in names:
                    since.setdefault(address, time.monotonic())
                    if time.monotonic() - since[address] > 3:
                        runner.jobs.track()
                        job = runner.jobs.ids[str(names[address])]
                        cancelled.update(job=job, key=str(keys[0]), worker=str(names[address]))
                        slurm.command("scancel", job)
                        return
            time.sleep(0.3)

    SlurmRunner.start = classmethod(keep)
    thread = threading.Thread(target=canceller, daemon=True)
    thread.start()
    out = io.StringIO()
    begin = time.perf_counter()
    try:
        with contextlib.redirect_stdout(out):
            rc = cli.main(["--course", str(course), *_slurm_args(2)])
    finally:
        SlurmRunner.start = classmethod(start_runner)
    seconds = time.perf_counter() - begin
    thread.join(timeout=30)
    print(out.getvalue(), f"\ngraded 3 submissions on Slurm, one job cancelled, in {seconds:.1f} s")
    return {"course": course, "rc": rc, "out": out.getvalue(), "runner": runners[0], "cancelled": cancelled}


def test_a_class_graded_through_the_slurm_option(slurm, graded):
    course, out, runner = graded["course"], graded["out"], graded["runner"]
    scores = _scores(course)
    assert scores == {**{("ann", c): v for c, v in FULL.items()}, ("bo", "square_test"): 0.0,
                      ("bo", "quiz_q1_test"): 0.0, ("cy", "square_test"): 0.0, ("cy", "quiz_q1_test"): 1.0}, out
    assert graded["rc"] == 0, out
    jobs = runner.jobs
    # every submission recorded once, in the gradebook and in grades.csv
    assert runner.recorded == {(SYNTH, s): 1 for s in ("ann", "bo", "cy")}, runner.recorded
    with open(course / "grades.csv", newline="") as f:
        assert sorted(row["student_id"] for row in csv.DictReader(f)) == ["ann", "bo", "cy"]
    assert "submitted 2 Slurm job(s) of 1 core(s), 1GB, at most 00:10:00 on partition debug" in out
    assert "first worker joined " in out and jobs.first_worker is not None
    # released: every job the run submitted (the replacement too) was cancelled, and is gone from the queue
    assert jobs.released and len(jobs.submitted) == 3, jobs.submitted
    assert f"cancelled this run's Slurm job(s): {', '.join(sorted(jobs.submitted, key=int))}" in out
    assert not jobs.submitted & set(slurm.jobs()), slurm.jobs()
    # scheduler and workers spoke TLS, and the run's keys are gone from the shared disk
    assert runner.address.startswith("tls://127.0.0.1:")
    assert not list((course / ".grading-cache" / "slurm").glob(".dask-jobqueue.worker.*"))


def test_a_worker_job_cancelled_mid_submission_is_graded_again_once(graded):
    out, runner, cancelled = graded["out"], graded["runner"], graded["cancelled"]
    assert "job" in cancelled, "no worker was seen grading a submission"
    victim = next(s for s in ("ann", "bo", "cy") if cancelled["key"].startswith(f"grade-{SYNTH}-{s}-"))
    # graded again elsewhere, once (the scores above are those of a run without the cancel)
    assert runner.retried == [f"{SYNTH}/{victim}"], (runner.retried, out)
    assert runner.recorded[(SYNTH, victim)] == 1
    line = next(i for i, text in enumerate(out.splitlines()) if text.startswith(f"{SYNTH}  {victim}:"))
    note = out.splitlines()[line + 1]
    assert "was lost" in note and "graded again on SLURMCluster-" in note, note
    assert f"graded again after their worker's Slurm job ended: '{SYNTH}/{victim}'" in out, out
    # the ended job was seen to end, and replaced by one new job
    assert f"Slurm job {cancelled['job']} ({cancelled['worker']}) ended while grading; a new job is submitted" in out
    assert runner.jobs.replaced == 1 and cancelled["job"] in runner.jobs.ended
