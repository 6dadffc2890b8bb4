"""Grading on a real Slurm (utils/grading/dask/slurm.py, `python -m utils.grading --slurm`): a
one-node Slurm on this machine (tests/slurm_common.py: munged, slurmctld, slurmd as root, started
once for the module), where the command submits its Dask workers as Slurm jobs through
dask-jobqueue, grades on them and cancels them.

Lean on purpose: the small synthetic lesson (tests/conftest.py), never a real one.
  1. A class of three (the reference answer, the untouched release, a wrong square) graded with
     `--slurm 2`: the scores a local run gives, every submission recorded once, the time to the
     first worker said, and no job of the run left in the queue afterwards.
  2. Three submissions whose first cell waits a few seconds; one worker's job is cancelled with
     `scancel` while it grades one: that submission is graded again elsewhere, once, says so,
     and the summary names it; the ended job is replaced; every job is cancelled at the end.
"""

from __future__ import annotations

import contextlib
import csv
import io
import os
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

SLOW_SQUARE = "import time\ntime.sleep(6)\n\ndef square(x):\n    return x * x"
FULL = {"square_test": 2.0, "quiz_q1_test": 1.0}


@pytest.fixture(scope="module")
def slurm():
    pytest.importorskip("dask_jobqueue", reason="dask-jobqueue is not installed (requirements-instructor.txt)")
    from utils.sandbox.probe import unavailable

    problem = slurm_problem() or unavailable("bwrap")
    if problem:
        pytest.skip(f"no one-node Slurm here: {problem}")
    with one_node_slurm() as cluster:
        before = os.environ.get("SLURM_CONF")
        os.environ["SLURM_CONF"] = str(cluster.conf)   # what sbatch, squeue and scancel read
        try:
            yield cluster
        finally:
            if before is None:
                os.environ.pop("SLURM_CONF", None)
            else:
                os.environ["SLURM_CONF"] = before


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


@pytest.fixture
def runners(monkeypatch):
    """Every SlurmRunner the command starts, as it starts it."""
    from utils.grading.dask.slurm import SlurmRunner

    started = []
    start = SlurmRunner.start.__func__

    def keep(cls, *args, **kwargs):
        runner = start(cls, *args, **kwargs)
        started.append(runner)
        return runner

    monkeypatch.setattr(SlurmRunner, "start", classmethod(keep))
    return started


def test_a_class_graded_through_the_slurm_option(slurm, tmp_path, runners, capsys):
    from utils.grading import cli

    course = _course(tmp_path / "course", {"ann": {}, "bo": None, "cy": {"square": "def square(x):\n    return x + x"}})
    start = time.perf_counter()
    rc = cli.main(["--course", str(course), *_slurm_args(2)])
    seconds = time.perf_counter() - start
    out = capsys.readouterr().out
    print(out, f"\ngraded 3 submissions on Slurm in {seconds:.1f} s")
    scores = _scores(course)
    assert scores == {**{("ann", c): v for c, v in FULL.items()}, ("bo", "square_test"): 0.0,
                      ("bo", "quiz_q1_test"): 0.0, ("cy", "square_test"): 0.0, ("cy", "quiz_q1_test"): 1.0}, out
    assert rc == 0, out
    (runner,) = runners
    jobs = runner.jobs
    assert jobs.released and len(set(jobs.ids.values())) == 2, jobs.ids
    assert set(runner.recorded.values()) == {1} and len(runner.recorded) == 3
    with open(course / "grades.csv", newline="") as f:
        assert sorted(row["student_id"] for row in csv.DictReader(f)) == ["ann", "bo", "cy"]
    assert "submitted 2 Slurm job(s) of 1 core(s), 1GB, at most 00:10:00 on partition debug" in out
    assert "first worker joined " in out and jobs.first_worker is not None
    assert f"cancelled this run's Slurm job(s): {', '.join(sorted(set(jobs.ids.values())))}" in out
    # released: none of the run's jobs is pending or running any more, and the workers spoke TLS
    assert not set(jobs.ids.values()) & set(slurm.jobs()), slurm.jobs()
    assert runner.address.startswith("tls://127.0.0.1:")
    assert "graded again" not in out


def test_a_worker_job_cancelled_mid_submission_is_graded_again_once(slurm, tmp_path, runners, capsys):
    from utils.grading.grade_course import grade_lessons
    from utils.grading.dask.slurm import SlurmSpec

    students = ("dee", "eve", "fay")
    course = _course(tmp_path / "course", {s: {"square": SLOW_SQUARE} for s in students})
    cancelled: dict[str, str] = {}

    def canceller():
        """scancel the job of the first worker seen grading a submission for 3 s."""
        deadline = time.monotonic() + 300
        while not runners and time.monotonic() < deadline:
            time.sleep(0.2)
        runner = runners[0]
        since: dict[str, float] = {}
        while time.monotonic() < deadline:
            try:
                names = {a: w["name"] for a, w in runner.client.scheduler_info()["workers"].items()}
                busy = {a: [k for k in keys if str(k).startswith("grade-")]
                        for a, keys in runner.client.processing().items()}
            except Exception:  # noqa: BLE001 - the client is closing
                return
            for address, keys in busy.items():
                if keys:
                    since.setdefault(address, time.monotonic())
                    if time.monotonic() - since[address] > 3:
                        runner.jobs.track()
                        job = runner.jobs.ids[str(names[address])]
                        cancelled.update(job=job, key=str(keys[0]), worker=str(names[address]))
                        slurm.command("scancel", job)
                        return
            time.sleep(0.3)

    thread = threading.Thread(target=canceller, daemon=True)
    thread.start()
    out = io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stdout(out):
        run = grade_lessons(course, [SYNTH], slurm=SlurmSpec(jobs=2, memory="1GB", walltime="00:10:00",
                                                             host="127.0.0.1", wait=120))
    seconds = time.perf_counter() - start
    thread.join(timeout=30)
    text = out.getvalue()
    print(text, f"\ngraded 3 slow submissions with one job cancelled in {seconds:.1f} s")

    assert "job" in cancelled, "no worker was seen grading a submission"
    victim = next(s for s in students if cancelled["key"].startswith(f"grade-{SYNTH}-{s}-"))
    (runner,) = runners
    # every submission graded with full marks, recorded once
    assert all(o.status == "graded" for o in run.outcomes), [o.line() for o in run.outcomes]
    assert _scores(course) == {(s, c): v for s in students for c, v in FULL.items()}
    assert sorted(run.cluster["recorded"]) == [(SYNTH, s) for s in students]
    assert set(run.cluster["recorded"].values()) == {1}, run.cluster["recorded"]
    # the cancelled job's submission was graded again, says so, and the summary names it
    assert run.cluster["retried"] == [f"{SYNTH}/{victim}"], (run.cluster["retried"], text)
    note = next(o for o in run.outcomes if o.student == victim).notes
    assert any(cancelled["worker"] in n and "graded again on" in n for n in note), note
    assert f"graded again after their worker's Slurm job ended: '{SYNTH}/{victim}'" in text or \
        f"graded again after their worker's Slurm job ended: {SYNTH}/{victim}" in text, text
    # the ended job was replaced, and every job of the run is gone from the queue
    slurm_info = run.cluster["slurm"]
    assert cancelled["job"] in slurm_info["ended"] and slurm_info["replaced"] == 1, slurm_info
    assert len(set(slurm_info["jobs"].values())) == 3, slurm_info
    assert not set(slurm_info["jobs"].values()) & set(slurm.jobs()), slurm.jobs()
