"""The course end to end: build the release, submit three sample students, grade, print scores.

    python -m utils.authoring.demo [LESSON ...]      (default: every lesson)

Students: the reference solution (full marks expected), the untouched release (zero expected) and
one with a plausible mistake in each exercise (in between). Everything is graded in a scratch
copy of the course with its own gradebook (its folder is printed: feedback/ and autograded/ are
there to look at); the course's submitted/, autograded/ and gradebook are never touched.

Every autograding kernel runs in the bubblewrap sandbox (utils/sandbox/) where it can. Where it
cannot (no bubblewrap, no user namespaces, not Linux), the demo still grades its three samples,
which are this course's own code, with the sandbox turned off in the scratch course's config only,
and says so at the top and in the summary. Grading real students (`make grade`, `nbgrader
autograde`) still refuses to run there.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import nbformat

from utils.authoring.build import build
from utils.authoring.check import REFERENCE, RELEASE
from utils.errors import ToolError
from utils.lessons import REPO, lessons, resolve_lessons, source_notebook
from utils.scores import read_scores
from utils.scratch import scratch_course
from utils.grading.grade_course import grade
from utils.authoring.samples_io import load_samples, sample_submission
from utils.sandbox.probe import OPT_OUT, start_problem, unavailable

MISTAKEN = "plausible-mistakes"
# Written into the scratch course's nbgrader_config.py only, never into the course's own.
DEMO_OPT_OUT = ("\n# --- the demo grades only this course's own sample submissions; bubblewrap cannot run "
                "here ---\n" + OPT_OUT + "\n")


def sandbox_problem(root: Path = REPO) -> str | None:
    """None when the demo's grading will run in the sandbox, else why it cannot."""
    from traitlets.config.loader import PyFileConfigLoader

    box = {}
    if (Path(root) / "nbgrader_config.py").exists():
        cfg = PyFileConfigLoader("nbgrader_config.py", path=str(root)).load_config()
        box = cfg.SandboxKernelManager if "SandboxKernelManager" in cfg else {}
    if not box.get("enabled", True):
        return TURNED_OFF
    return unavailable(str(box.get("bwrap", "bwrap")))


TURNED_OFF = "the course's nbgrader_config.py turns it off"


def without_sandbox_line(problem: str) -> str:
    """The one line that says the demo graded without the sandbox, and what real grading needs."""
    if problem == TURNED_OFF:
        return (f"WITHOUT SANDBOX: {problem} (`{OPT_OUT}`), so the samples and `make grade` run student "
                f"code with the grader's rights; grade real students that way only inside a Linux container "
                f"or VM without network, secrets or the course folder.")
    return (f"WITHOUT SANDBOX: the three sample submissions (this course's own code) are graded without "
            f"the bubblewrap sandbox, because {problem}. Grading real students needs it: Linux with user "
            f"namespaces (elsewhere, a Linux container or VM); `make grade` refuses to grade without it.")


def place_samples(root: Path, names: list[str] | None = None) -> None:
    """The three sample students' submissions of every lesson (or those named), in root/submitted/."""
    for lesson in names or lessons(root):
        src = source_notebook(root, lesson)
        mistakes, _ = load_samples(lesson)
        notebooks = {
            # the release with the reference answers typed in, as a student would submit it
            REFERENCE: sample_submission(root, lesson, {}),
            RELEASE: nbformat.read(str(root / "release" / lesson / src.name), as_version=4),
        }
        if mistakes:
            notebooks[MISTAKEN] = sample_submission(root, lesson, mistakes)
        for student, nb in notebooks.items():
            dest = root / "submitted" / student / lesson
            dest.mkdir(parents=True, exist_ok=True)
            nbformat.write(nb, str(dest / src.name))


def problems_in(root: Path) -> list[str]:
    rows = read_scores(root)
    problems = []
    for lesson in lessons(root):
        def total(student, lesson=lesson):
            mine = [r for r in rows if r.lesson == lesson and r.student == student]
            return sum(r.score for r in mine), sum(r.max_score for r in mine), bool(mine)

        ref, rel, mis = total(REFERENCE), total(RELEASE), total(MISTAKEN)
        if not ref[2] or ref[0] != ref[1]:
            problems.append(f"{lesson}: the reference solution did not get full marks")
        if not rel[2] or rel[0] != 0:
            problems.append(f"{lesson}: the untouched release did not score zero")
        if mis[2] and not 0 < mis[0] < mis[1]:
            problems.append(f"{lesson}: the mistaken submission scored {mis[0]:g}/{mis[1]:g}, not in between")
    return problems


def run(root: Path = REPO, build_release: bool = True, sandbox: bool | None = None,
        names: list[str] | None = None) -> tuple[Path, str, list[str]]:
    """(scratch course, score table, problems) for every lesson, or those in `names`. The samples
    are graded in the sandbox unless `sandbox` is False (None: wherever it can run, sandbox_problem)."""
    if sandbox is None:
        sandbox = sandbox_problem(root) is None
    names = resolve_lessons(names or [], root)
    if build_release:
        build(root, names)
    scratch = scratch_course(root, names, Path(tempfile.mkdtemp(prefix="course-demo-")), release=True,
                             extra_config="" if sandbox else DEMO_OPT_OUT)
    place_samples(scratch)
    table, problems = grade(scratch)
    return scratch, table, problems + problems_in(scratch)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m utils.authoring.demo", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("lessons", nargs="*", help="lesson folders under source/ (default: all)")
    return p


def main(argv: list[str] | None = None) -> int:
    names = parser().parse_args(argv).lessons
    start = time.perf_counter()
    problem = sandbox_problem(REPO)
    if problem:
        print(without_sandbox_line(problem), flush=True)
    elif (broken := start_problem()):   # bubblewrap runs but cannot start a kernel: grading would only give 0s
        print(f"demo stopped: {broken}", file=sys.stderr)
        return 2
    try:
        scratch, table, problems = run(REPO, sandbox=problem is None, names=names)
    except ToolError as err:
        print(f"demo failed: {err}", file=sys.stderr)
        return 1
    print()
    print(table)
    for p in problems:
        print(f"FAIL {p}")
    print(f"graded in the scratch course {scratch} (feedback/ and autograded/ are there)")
    if problem:
        print(without_sandbox_line(problem))
    print(f"demo finished in {time.perf_counter() - start:.0f} s: "
          f"{'all as expected' if not problems else f'{len(problems)} problem(s)'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
