"""Prove that each lesson's grading is right.

For every lesson (or those named):
  (a) the source notebook, autograded as a submission, earns full marks;
  (b) the untouched release earns zero, and every graded test cell fails on it, cell by cell;
  (c) release/ equals a fresh build of source/;
  (d) no solution line, hidden test or quiz answer appears in release/ or course/.
Exits non-zero naming the lesson and cell of every problem.

    python -m utils.authoring.check [LESSON ...]
"""

from __future__ import annotations

import argparse
import filecmp
import json
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from utils.errors import ToolError
from utils.lessons import REPO, resolve_lessons, source_notebook
from utils.notebooks import BEGIN_HIDDEN, BEGIN_SOLUTION, END_HIDDEN, END_SOLUTION, graded_cells, nbgrader_meta
from utils.processes import nbgrader, log_tail
from utils.scores import read_scores
from utils.scratch import scratch_course
from utils.grading.reference_run import ReferenceRefused, reference_for
from utils.grading.grade_course import grade_lessons

REFERENCE, RELEASE = "reference-solution", "untouched-release"
MIN_SECRET_LEN = 12  # shorter lines ("return x", "q1 = 'b'") are too generic to search for


@dataclass
class LessonCheck:
    lesson: str
    problems: list[str] = field(default_factory=list)
    scores: dict[str, dict[str, tuple[float, float]]] = field(default_factory=dict)
    seconds: float = 0.0
    log: str = ""
    scratch: Path | None = None   # the scratch course, when kept (keep=True); the caller removes it

    def total(self, student: str) -> tuple[float, float]:
        cells = self.scores.get(student, {})
        return sum(s for s, _ in cells.values()), sum(m for _, m in cells.values())


def check_lesson(root: Path, lesson: str, extra: dict | None = None, keep: bool = False,
                 workers: int = 1) -> LessonCheck:
    """Build `lesson` afresh in a scratch course, grade the reference, the release and `extra`
    submissions ({student: notebook}), and return the scores with every problem found. With `keep`,
    the scratch course (autograded notebooks, gradebook, .grading-cache) is left in `result.scratch`
    for the caller to read and remove. One `nbgrader autograde` grades them all; with `workers` > 1,
    utils.grading's local runner does (each its own `nbgrader autograde` on its own cores; no
    feedback, no export)."""
    result = LessonCheck(lesson)
    start = time.perf_counter()
    src_nb_path = source_notebook(root, lesson)
    scratch = scratch_course(root, [lesson])
    result.scratch = scratch if keep else None
    try:
        nbgrader(["generate_assignment", lesson, "--force"], cwd=scratch)
        fresh = scratch / "release" / lesson
        result.problems += _compare_release(lesson, fresh, Path(root) / "release" / lesson)

        refused = _reference_problems(scratch, lesson)
        if refused:
            result.problems += refused + leaks(root, lesson)
            return result
        nb_name = src_nb_path.name
        submissions = {REFERENCE: nbformat.read(str(src_nb_path), as_version=4),
                       RELEASE: nbformat.read(str(fresh / nb_name), as_version=4)}
        submissions.update(extra or {})
        for student, nb in submissions.items():
            dest = scratch / "submitted" / student / lesson
            dest.mkdir(parents=True)
            nbformat.write(nb, str(dest / nb_name))
        result.log = _autograde(scratch, lesson, workers)

        graded = graded_cells(submissions[REFERENCE])
        for row in read_scores(scratch, [lesson]):
            result.scores.setdefault(row.student, {})[row.cell] = (row.score, row.max_score)
        for student in submissions:
            if student not in result.scores:
                result.problems.append(f"{lesson}: the {student} submission was not graded "
                                       f"(autograde failed):\n{log_tail(result.log, 15)}")
        for cell in graded:
            score, max_score = result.scores.get(REFERENCE, {}).get(cell, (0.0, None))
            if max_score is not None and score < max_score:
                result.problems.append(f"{lesson}: graded cell '{cell}' gives the reference solution "
                                       f"{score:g}/{max_score:g}, not full marks")
            score, max_score = result.scores.get(RELEASE, {}).get(cell, (0.0, None))
            if max_score is not None and score > 0:
                result.problems.append(f"{lesson}: graded cell '{cell}' passes on the untouched release "
                                       f"({score:g}/{max_score:g}); a test that cannot fail tests nothing")
        result.problems += leaks(root, lesson)
    finally:
        if not keep:
            shutil.rmtree(scratch, ignore_errors=True)
    result.seconds = time.perf_counter() - start
    return result



def _autograde(scratch: Path, lesson: str, workers: int) -> str:
    """Grade every submission of the scratch course: one plain `nbgrader autograde`, or with
    `workers` > 1 the local runner's work folders (no feedback, no export); the log."""
    if workers <= 1:
        return nbgrader(["autograde", lesson, "--force"], cwd=scratch, check=False).log
    run = grade_lessons(scratch, [lesson], workers=workers, feedback=False, export=False, quiet=True)
    return "\n".join([o.line() for o in run.outcomes] + [f"===== {k}\n{v}" for k, v in run.logs.items()])


def _reference_problems(scratch: Path, lesson: str) -> list[str]:
    """Run the reference solution's observations (cached in the scratch course for its autograde);
    the reasons it cannot be graded against, if any."""
    try:
        reference_for(source_notebook(scratch, lesson), scratch / ".grading-cache")
    except ReferenceRefused as err:
        return [f"{lesson}: {err}"]
    return []


def _only_python_version_differs(a: Path, b: Path) -> bool:
    if a.suffix != ".ipynb" or not (a.is_file() and b.is_file()):
        return False
    try:
        one, other = json.loads(a.read_text()), json.loads(b.read_text())
    except ValueError:
        return False
    for nb in (one, other):
        nb.get("metadata", {}).get("language_info", {}).pop("version", None)
    return one == other


def _compare_release(lesson: str, fresh: Path, committed: Path) -> list[str]:
    if not committed.is_dir():
        return [f"{lesson}: release/{lesson} is missing; run `make build` and commit it"]
    cmp = filecmp.dircmp(fresh, committed)
    differ = []

    def walk(c: filecmp.dircmp, prefix: str) -> None:
        differ.extend(prefix + n for n in c.left_only + c.right_only + c.diff_files + c.funny_files)
        for name, sub in c.subdirs.items():
            walk(sub, f"{prefix}{name}/")

    walk(cmp, "")
    # dircmp compares shallowly by stat; confirm byte equality for files it called equal.
    for name in cmp.same_files:
        if (fresh / name).read_bytes() != (committed / name).read_bytes():
            differ.append(name)
    # A release built where Python is another patch release (3.11.7 against 3.11.9) differs in its
    # notebooks' language_info version only (utils/grading/steps/language_info.py): not a stale release.
    differ = [name for name in differ if not _only_python_version_differs(fresh / name, committed / name)]
    if differ:
        return [f"{lesson}: release/{lesson} differs from a fresh build ({', '.join(sorted(set(differ)))}); "
                f"run `make build` and commit release/"]
    return []


# --- (d) nothing secret where students can read ---------------------------------------------

def _norm(line: str) -> str:
    return " ".join(line.split())


def secret_lines(nb) -> tuple[dict[str, str], set[str]]:
    """({normalised secret line: grade_id}, public lines) of a source notebook.

    Secret: inside solution regions (and whole markdown solution cells) and hidden-test regions.
    Public: every other line of the notebook, which students see anyway."""
    secret: dict[str, str] = {}
    public: set[str] = set()
    for cell in nb.cells:
        meta = nbgrader_meta(cell)
        gid = meta.get("grade_id", "?")
        whole_cell_secret = meta.get("solution") and cell.cell_type == "markdown"
        inside = False
        for line in cell.source.splitlines():
            marker = line.strip()
            if marker in (BEGIN_SOLUTION, BEGIN_HIDDEN):
                inside = True
                continue
            if marker in (END_SOLUTION, END_HIDDEN):
                inside = False
                continue
            norm = _norm(line)
            if inside or whole_cell_secret:
                # Block headers ("except ValueError as err:", "for i in range(n):") carry no
                # answer and turn up in any Python file; comments neither.
                if len(norm) >= MIN_SECRET_LEN and not norm.startswith("#") and not norm.endswith(":"):
                    secret.setdefault(norm, gid)
            else:
                public.add(norm)
    return {k: v for k, v in secret.items() if k not in public}, public


def _readable_files(root: Path) -> list[Path]:
    files = []
    for top in ("release", "course"):
        base = Path(root) / top
        if base.is_dir():
            files += [p for p in sorted(base.rglob("*")) if p.is_file() and "__pycache__" not in p.parts
                      and p.suffix in (".py", ".ipynb", ".md", ".txt", ".json", ".csv", ".yml", ".yaml", ".toml", "")]
    return files


def _lines_of(path: Path) -> list[str]:
    text = path.read_text(errors="replace")
    if path.suffix == ".ipynb":
        try:
            nb = nbformat.reads(text, as_version=4)
            return [l for c in nb.cells for l in c.source.splitlines()]
        except Exception:  # noqa: BLE001 - an unreadable notebook is searched as text
            pass
    return text.splitlines()


def leaks(root: Path, lesson: str) -> list[str]:
    nb = nbformat.read(str(source_notebook(root, lesson)), as_version=4)
    secret, _ = secret_lines(nb)
    problems = []
    for path in _readable_files(root):
        for number, line in enumerate(_lines_of(path), 1):
            gid = secret.get(_norm(line))
            if gid is not None:
                rel = path.relative_to(root).as_posix()
                problems.append(f"{lesson}: a secret line of cell '{gid}' appears in {rel} "
                                f"(line {number}): {_norm(line)!r}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("lessons", nargs="*", help="lesson folders under source/ (default: all)")
    args = parser.parse_args(argv)
    try:
        names = resolve_lessons(args.lessons, REPO)
    except ToolError as err:
        print(f"check failed: {err}", file=sys.stderr)
        return 2
    if not names:
        print("no lessons found under source/")
        return 1
    failed = 0
    for lesson in names:
        print(f"checking {lesson} ...", flush=True)
        try:
            result = check_lesson(REPO, lesson)
        except ToolError as err:
            print(f"  FAIL {err}")
            failed += 1
            continue
        ref, rel = result.total(REFERENCE), result.total(RELEASE)
        print(f"  reference solution {ref[0]:g}/{ref[1]:g}, untouched release {rel[0]:g}/{rel[1]:g}, "
              f"{len(result.scores.get(REFERENCE, {}))} graded cells, {result.seconds:.1f} s")
        for problem in result.problems:
            print(f"  FAIL {problem}")
        if result.problems:
            failed += 1
        else:
            print("  ok: full marks, zero on the stub in every cell, release up to date, nothing leaked")
    print(f"{len(names) - failed}/{len(names)} lessons pass the check")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
