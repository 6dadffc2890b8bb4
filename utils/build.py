"""Regenerate release/ from source/ with nbgrader, for every lesson or those named.

    python -m utils.build [LESSON ...]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from utils.coursedir import REPO, ToolError, nbgrader, resolve_lessons


def build(root: Path = REPO, names: list[str] | None = None) -> list[str]:
    built = []
    for lesson in resolve_lessons(names or [], root):
        start = time.perf_counter()
        nbgrader(["generate_assignment", lesson, "--force"], cwd=root)
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
