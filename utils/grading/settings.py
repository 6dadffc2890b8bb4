"""The course directory's grading settings as nbgrader will see them (course id, gradebook URL,
sandbox), the options of one grading run, and the check that the sandbox can run before anything
is graded."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from traitlets.config.loader import PyFileConfigLoader

from utils.errors import ToolError
from utils.sandbox.limits import limits_not_enforced
from utils.nbgrader_client import start_problem as worker_start_problem
from utils.processes import nbgrader_env
from utils.sandbox.probe import OPT_OUT, unavailable

CACHE = ".grading-cache"   # the reference runs, the journal (and in a work folder its results): no kernel sees it
# Seconds one submission may take before its grading process is killed as stalled. Far above the
# sum of the per-cell limits a real lesson needs; only a grader stuck outside any cell reaches it.
DEFAULT_WATCHDOG = 1800


@dataclass
class CourseSettings:
    course_id: str
    db_url: str
    sandbox: bool = True        # SandboxKernelManager.enabled
    bwrap: str = "bwrap"        # SandboxKernelManager.bwrap


def course_settings(root: Path, db_url: str | None = None) -> CourseSettings:
    """course_id and db_url as nbgrader will see them in course directory `root`."""
    root = Path(root).resolve()
    cfg = PyFileConfigLoader("nbgrader_config.py", path=str(root)).load_config() \
        if (root / "nbgrader_config.py").exists() else None
    section = cfg.CourseDirectory if cfg is not None and "CourseDirectory" in cfg else {}
    course_id = section.get("course_id") or "default_course"
    url = db_url or section.get("db_url") or f"sqlite:///{root / 'gradebook.db'}"
    box = cfg.SandboxKernelManager if cfg is not None and "SandboxKernelManager" in cfg else {}
    return CourseSettings(str(course_id), str(url), bool(box.get("enabled", True)), str(box.get("bwrap", "bwrap")))


@dataclass
class Options:
    """How one grading run grades: the same on every machine that runs its submissions."""
    extra: list[str] = field(default_factory=list)   # nbgrader arguments for autograde (the cell timeout)
    watchdog: float = DEFAULT_WATCHDOG               # seconds one submission may take in all
    feedback: bool = True                            # feedback HTML made beside each graded notebook
    show_hidden_tests: bool = False                  # hidden tests left in that feedback

    @classmethod
    def of(cls, cell_timeout: float | None = None, **kwargs) -> "Options":
        return cls([f"--Execute.timeout={int(cell_timeout)}"] if cell_timeout else [], **kwargs)


def require_sandbox(settings: CourseSettings) -> None:
    """Stop before grading anything when the sandbox is on but cannot run here."""
    problem = unavailable(settings.bwrap) if settings.sandbox else None
    if problem:
        raise ToolError(f"the autograding sandbox cannot run: {problem}. Nothing was graded. Student code "
                        f"must not run with the grader's rights; to grade without the sandbox (only "
                        f"inside a container without network, secrets or the course folder) set "
                        f"`{OPT_OUT}` in nbgrader_config.py (see docs/instructors.md)")
    if settings.sandbox:   # the trial start made by a grading worker, which keeps it for its kernels
        problem = worker_start_problem(settings.bwrap, nbgrader_env())
        if problem:
            raise ToolError(problem)
        line = limits_not_enforced()
        if line:
            print(line, file=sys.stderr)
