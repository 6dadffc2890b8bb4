"""Regenerate release/ from source/ with nbgrader, for every lesson or those named.

    python -m utils.authoring.build [LESSON ...]

nbgrader builds in a scratch copy of the course with its own gradebook, and release/<lesson> is
replaced by the result: building never writes to the instructor's gradebook (grading records
the lessons there when it needs them).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

from utils.errors import ToolError
from utils.lessons import REPO, resolve_lessons
from utils.processes import nbgrader
from utils.scratch import scratch_course


def build(root: Path = REPO, names: list[str] | None = None) -> list[str]:
    built = []
    for lesson in resolve_lessons(names or [], root):
        start = time.perf_counter()
        scratch = scratch_course(root, [lesson])
        try:
            nbgrader(["generate_assignment", lesson, "--force"], cwd=scratch)
            target = Path(root) / "release" / lesson
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(scratch / "release" / lesson, target)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        files = sorted(p.relative_to(root).as_posix() for p in (Path(root) / "release" / lesson).rglob("*") if p.is_file())
        print(f"built {lesson}: {', '.join(files)} ({time.perf_counter() - start:.1f} s)")
        built.append(lesson)
    return built


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("lessons", nargs="*", help="lesson folders under source/ (default: all)")
    args = parser.parse_args(argv)
    try:
        if not build(REPO, args.lessons):
            print("no lessons found under source/")
    except ToolError as err:
        print(f"build failed: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
