"""The grading command: autograde every submission in submitted/, write feedback HTML and
grades.csv, report each student.

    python -m utils.grading [LESSON ...] [--workers N] [--cell-timeout S] [--show-hidden-tests]
                            [--db-url URL] [--course DIR] [--scheduler tcp://HOST:8786]
                            [--slurm JOBS [--slurm-cores N] [--slurm-memory 4GB] [--slurm-walltime HH:MM:SS]
                             [--slurm-partition P] [--slurm-gres gpu:1] ...]

Exit 1 when a submission scored zero as unusable, a WARNING was printed, or feedback or the export
failed. Workers (default: the CPU cores) each run on their own cores. With --scheduler (or
DASK_SCHEDULER_ADDRESS) each submission is one task on a Dask cluster instead (utils/grading/dask/);
with --slurm the workers are Slurm jobs this command submits and cancels (docs/slurm.md).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from utils.errors import ToolError
from utils.escaping import escaped
from utils.lessons import REPO
from utils.grading.grade_course import grade
from utils.grading.nbgrader_worker import serve_forked, warm
from utils.nbgrader_client import fork_here


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m utils.grading", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("lessons", nargs="*", help="lesson folders under source/ (default: all)")
    p.add_argument("--workers", type=int, default=None, help="parallel graders (default: CPU cores)")
    p.add_argument("--cell-timeout", type=float, default=None,
                   help="seconds a cell may run (default: Execute.timeout in nbgrader_config.py)")
    p.add_argument("--show-hidden-tests", action="store_true", help="show hidden tests in the feedback")
    p.add_argument("--db-url", default=None, help="gradebook URL (default: nbgrader_config.py or gradebook.db)")
    p.add_argument("--course", type=Path, default=REPO, help="course directory (default: this repository)")
    p.add_argument("--scheduler", default=None, help="grade on this Dask scheduler, tcp://HOST:8786 "
                   "(default: DASK_SCHEDULER_ADDRESS; neither: local workers); see docs/instructors.md")
    slurm = p.add_argument_group("grading on Slurm (docs/slurm.md): Dask workers as Slurm jobs, cancelled at the end")
    slurm.add_argument("--slurm", type=int, metavar="JOBS", default=None, help="submit JOBS worker jobs and grade on them")
    slurm.add_argument("--slurm-cores", type=int, default=1, metavar="N", help="cores per job, one submission each (default 1)")
    slurm.add_argument("--slurm-memory", default="4GB", help="memory per job (default 4GB)")
    slurm.add_argument("--slurm-walltime", default="01:00:00", help="time limit per job (default 01:00:00)")
    slurm.add_argument("--slurm-partition", default=None, help="partition (default: the cluster's default)")
    slurm.add_argument("--slurm-account", default=None, help="account to charge")
    slurm.add_argument("--slurm-gres", default=None, help="generic resources per job, e.g. gpu:1")
    slurm.add_argument("--slurm-host", default=None,
                       help="the scheduler's address as the compute nodes reach this machine (default: Dask's choice)")
    slurm.add_argument("--slurm-directive", action="append", default=[], metavar="OPTION",
                       help="another sbatch option for each job, given with =: --slurm-directive=--constraint=avx2 (repeatable)")
    slurm.add_argument("--slurm-wait", type=float, default=600.0, metavar="S",
                       help="seconds to wait for the first worker, its job queued (default 600)")
    return p


def slurm_spec(args: argparse.Namespace) -> dict | None:
    """The --slurm options (utils.grading.dask.slurm.SlurmSpec's fields); None without --slurm."""
    if args.slurm is None:
        return None
    return dict(jobs=args.slurm, cores=args.slurm_cores, memory=args.slurm_memory, walltime=args.slurm_walltime,
                     partition=args.slurm_partition, account=args.slurm_account, gres=args.slurm_gres,
                     host=args.slurm_host, extra=list(args.slurm_directive), wait=args.slurm_wait)


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.slurm is not None and args.scheduler:
        print("grade failed: give --slurm or --scheduler, not both", file=sys.stderr)
        return 2
    try:
        table, problems = grade(args.course, args.lessons, workers=args.workers, cell_timeout=args.cell_timeout,
                                show_hidden_tests=args.show_hidden_tests, db_url=args.db_url,
                                scheduler=args.scheduler, slurm=slurm_spec(args))
    except ToolError as err:
        print(escaped(f"grade failed: {err}", keep_newlines=True), file=sys.stderr)
        return 1
    print(table)
    for p in problems:
        print(escaped(f"FAIL {p}"))
    return 1 if problems else 0


def command(argv: list[str] | None = None) -> int:
    """The grading command as a process of its own (`python -m utils.grading`, `prefill-decode
    grade`): its nbgrader workers are forked from it, and keep what it imports
    (utils/nbgrader_client.py); then `main`. Another caller (a test) calls `main`; one that calls
    this gets its own way back when it returns."""
    fork_here(serve_forked, warm)
    try:
        return main(argv)
    finally:
        fork_here(None)

