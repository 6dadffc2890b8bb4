"""Grade every submission in submitted/: per lesson, plan (submissions.py: a missing, unreadable,
linked or other lesson's notebook scores 0 with the reason) -> prepare (the reference solution's
observations, run once and cached) -> run (a runner: local work folders, or tasks on a Dask
cluster; each submission's `nbgrader autograde` with every kernel in the sandbox, the course's steps judging
each graded cell outside the student's kernel, then the feedback) -> record (lesson.py: the
gradebook, autograded/, feedback/) -> report (one line per student); then grades.csv.

Submissions are never modified (hashes compared before and after). One submission never costs
another its grade. A run that stops keeps what it recorded (journal.py); the next grades the rest.
"""

from __future__ import annotations

import os
import time
import traceback
from pathlib import Path

from utils.errors import ToolError
from utils.escaping import escaped, shown
from utils.lessons import REPO, resolve_lessons
from utils.processes import log_tail
from utils.scores import read_scores_url, score_table
from utils.grading.assignment import ensure_built
from utils.grading.dask.address import scheduler_address
from utils.grading.gradebook import quiet_sqlalchemy
from utils.grading.lesson import GradeRun, Grading, LessonGrading
from utils.grading.local_runner import LocalRunner
from utils.grading.runner_interface import Runner
from utils.grading.settings import DEFAULT_WATCHDOG, Options, course_settings, require_sandbox
from utils.grading.steps.verdicts import one_line
from utils.grading.submissions import lesson_ids, submitted_students


def grade_lesson(grading: Grading, runner: Runner, lesson: str, known) -> None:
    root = grading.root
    if not submitted_students(root, lesson):
        grading.say(f"{lesson}: no submissions")
        return
    start = time.perf_counter()
    # The gradebook needs the lesson's cells and hidden tests: built once per change of the source
    # (assignment.py), not by every grading run.
    ensure_built(root, lesson, grading.settings)
    this = LessonGrading.plan(grading, lesson, known)
    runner.prepare(this)
    this.make_template()
    kept = this.resume()
    if kept:
        grading.say(f"{lesson}: {len(kept)} submission(s) recorded by an earlier run that stopped are kept "
                    f"(the gradebook holds them); not graded again")
    try:
        for done in runner.run(this, this.to_grade):
            this.record(done)
    finally:
        this.close()
    this.finish()
    this.report()
    grading.run.lesson_seconds[lesson] = time.perf_counter() - start
    grading.say(f"{lesson}: graded {len(this.students)} submission(s) in {grading.run.lesson_seconds[lesson]:.1f} s "
                f"with {min(runner.workers, len(this.students))} worker(s)")


def write_export(grading: Grading) -> None:
    """grades.csv (grade_lessons removed any earlier one before grading began), written here by
    nbgrader's own exporter (CsvExportPlugin, what `nbgrader export` runs) from the gradebook."""
    from nbgrader.api import Gradebook
    from nbgrader.plugins import CsvExportPlugin

    csv, st = grading.root / "grades.csv", grading.settings
    try:
        with quiet_sqlalchemy(), Gradebook(st.db_url, st.course_id) as gb:
            CsvExportPlugin(to=str(csv)).export(gb)
    except Exception as err:  # noqa: BLE001 - the export's own error, reported as the run's failure
        log = traceback.format_exc()
        grading.run.logs["export"] = log
        grading.run.failures.append(f"nbgrader export failed ({type(err).__name__}: {escaped(one_line(err))}), "
                                    f"grades.csv not written:\n{log_tail(log)}")
        return
    if csv.exists():
        grading.say(f"wrote {csv} and feedback/ (HTML per student and lesson)")
    else:
        grading.run.failures.append("nbgrader export wrote nothing, grades.csv not written")


def _dask_runner(address: str, grading: Grading) -> Runner:
    """The runner on the cluster at `address`. Dask is imported only here: local grading runs in an
    environment without it (the class server's, requirements-classroom.txt)."""
    try:
        from utils.grading.dask.cluster_runner import DaskRunner
    except ImportError as err:
        raise ToolError(f"grading on the Dask scheduler {address} needs Dask, which this environment lacks ({err}): "
                        "pip install -r requirements-instructor.txt, or grade locally (no --scheduler, no "
                        "DASK_SCHEDULER_ADDRESS)") from err
    return DaskRunner.connect(address, grading.say)


def _slurm_runner(spec, grading: Grading) -> Runner:
    """The runner on Dask workers that are this run's own Slurm jobs (utils/grading/dask/slurm.py);
    `spec` a SlurmSpec or its fields."""
    try:
        from utils.grading.dask.slurm import SlurmSpec, slurm_runner
    except ImportError as err:
        raise ToolError(f"grading on Slurm needs Dask and dask-jobqueue, which this environment lacks ({err}): "
                        "pip install -r requirements-instructor.txt") from err
    return slurm_runner(spec if isinstance(spec, SlurmSpec) else SlurmSpec(**spec), grading)


def grade_lessons(root: Path = REPO, names: list[str] | None = None, *, workers: int | None = None,
                  cell_timeout: float | None = None, show_hidden_tests: bool = False,
                  db_url: str | None = None, watchdog: float = DEFAULT_WATCHDOG,
                  feedback: bool = True, export: bool = True, quiet: bool = False,
                  scheduler: str | None = None, slurm=None) -> GradeRun:
    """Grade every submission of the named lessons (all when none); see the module doc. `slurm`
    (a utils.grading.dask.slurm.SlurmSpec or its fields): grade on Dask workers submitted as Slurm jobs."""
    root = Path(root).resolve()
    settings = course_settings(root, db_url)
    address = None if slurm is not None else scheduler_address(scheduler)   # None: local workers
    if address is None and slurm is None:
        require_sandbox(settings)            # on a cluster each worker checks its own
    options = Options.of(cell_timeout, watchdog=watchdog, feedback=feedback, show_hidden_tests=show_hidden_tests)
    grading = Grading(root, settings, options, (lambda *a: None) if quiet else print)
    start = time.perf_counter()
    known = lesson_ids(root)
    names = resolve_lessons(names or [], root)
    runner = (_slurm_runner(slurm, grading) if slurm is not None else _dask_runner(address, grading)
              if address is not None else LocalRunner(workers or os.cpu_count() or 1))
    if export:   # an export left by an earlier run must not pass for this one's, should it stop early
        stale = root / "grades.csv"
        if stale.is_file() or stale.is_symlink():   # anything else there makes the export fail, and says so
            stale.unlink()
    completed = False
    try:
        for lesson in names:
            grade_lesson(grading, runner, lesson, known)
        completed = True
    finally:
        runner.close(grading, completed)
    if completed:
        grading.journal.clear()
    if grading.run.lessons and export:
        write_export(grading)
    grading.run.seconds = time.perf_counter() - start
    return grading.run


def grade(root: Path = REPO, names: list[str] | None = None, **options) -> tuple[str, list[str]]:
    """Grade; return (score table, list of problems naming lesson and student)."""
    run = grade_lessons(root, names, **options)
    problems = [f"{o.lesson}: submission of {shown(o.student)} scored 0: {escaped(o.reason)}"
                for o in run.outcomes if o.status == "zero"]
    problems += [f"{o.lesson}: {shown(o.student)}: {escaped(n)}" for o in run.outcomes for n in o.notes
                 if n.startswith("WARNING")]
    problems += run.failures
    if run.logs:
        (Path(root) / "autograde.log").write_text("\n\n".join(f"===== {escaped(k)}\n{escaped(v, keep_newlines=True)}"
                                                          for k, v in run.logs.items()))
    settings = course_settings(root, options.get("db_url"))
    return score_table(read_scores_url(settings.db_url, settings.course_id, run.lessons)), problems
