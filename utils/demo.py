"""The course end to end: build the release, submit three sample students, grade, print scores.

    python -m utils.demo

Students: the reference solution (full marks expected), the untouched release (zero expected) and
one with a plausible mistake in each exercise (in between). Everything is graded in a scratch
copy of the course with its own gradebook (its folder is printed: feedback/ and autograded/ are
there to look at); the course's submitted/, autograded/ and gradebook are never touched.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import nbformat

from utils.build import build
from utils.check import REFERENCE, RELEASE
from utils.coursedir import REPO, ToolError, lessons, read_scores, scratch_course, source_notebook
from utils.grade import grade
from utils.samples_io import load_samples, sample_submission

MISTAKEN = "plausible-mistakes"


def place_samples(root: Path) -> None:
    """The three sample students' submissions of every lesson, in root/submitted/."""
    for lesson in lessons(root):
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
        def total(student):
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


def run(root: Path = REPO, build_release: bool = True) -> tuple[Path, str, list[str]]:
    """(scratch course, score table, problems)."""
    if build_release:
        build(root)
    scratch = scratch_course(root, lessons(root), Path(tempfile.mkdtemp(prefix="course-demo-")), release=True)
    place_samples(scratch)
    table, problems = grade(scratch)
    return scratch, table, problems + problems_in(scratch)


def main() -> int:
    start = time.perf_counter()
    try:
        scratch, table, problems = run(REPO)
    except ToolError as err:
        print(f"demo failed: {err}", file=sys.stderr)
        return 1
    print()
    print(table)
    for p in problems:
        print(f"FAIL {p}")
    print(f"graded in the scratch course {scratch} (feedback/ and autograded/ are there)")
    print(f"demo finished in {time.perf_counter() - start:.0f} s: "
          f"{'all as expected' if not problems else f'{len(problems)} problem(s)'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
