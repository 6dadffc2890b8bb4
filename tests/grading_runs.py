"""One nbgrader grading per lesson per test session, shared by every test that reads a verdict.

Test modules declare at import (collection) time the submissions they need graded, each a dict of
solution cells replaced in the release (utils.authoring.samples_io.sample_submission):

    want(LESSON, {"plausible-mistakes": MISTAKES, "variant-loops": VARIANTS["loops"]})

The first test that calls `graded(LESSON)` grades, in one `utils.authoring.check.check_lesson` run (a fresh
build in a scratch course, then one `nbgrader autograde` with the sandbox), the reference solution,
the untouched release and every submission declared for that lesson by any collected module; later
calls get the same result. The submissions are graded by utils.grading's local runner (one per
core, at most four), as `make grade` grades a class. The same overrides declared under two names are graded once. Asking for
a submission after the lesson was graded is an error, never a second grading.

Under pytest-xdist (`make test` runs two test processes) every process collects the same modules,
so declares the same submissions; the first process to need a lesson grades it under a file lock
in the session's shared temporary folder and leaves the result there, and the others read it: one
grading per lesson per session still.

What a test reads (LessonRun): the check's scores per student and cell, problems and log; each
graded cell's verdict line in the autograded notebook; the reference solution's observations as
grading ran them.
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import pickle
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from filelock import FileLock

from utils.authoring.check import REFERENCE, RELEASE, LessonCheck, check_lesson
from utils.lessons import REPO, source_notebook
from utils.authoring.samples_io import load_samples, sample_submission

__all__ = ["REFERENCE", "RELEASE", "MISTAKEN", "LessonRun", "graded", "judged_in_one_kernel", "want", "want_samples",
           "samples_module"]

MISTAKEN = "plausible-mistakes"
WORKERS = max(1, min(4, os.cpu_count() or 1))

_wanted: dict[str, dict[str, dict[str, str]]] = {}    # lesson -> {name: overrides}
_alias: dict[str, dict[str, str]] = {}               # lesson -> {name: name graded under}
_graded: set[str] = set()
SHARED: Path | None = None   # set by conftest.py under pytest-xdist: a folder every test process sees


def samples_module(lesson: str):
    """utils/authoring/samples/<lesson>.py (MISTAKES, VARIANTS and any further sets a lesson defines)."""
    return importlib.import_module(f"utils.authoring.samples.{lesson}")


def want(lesson: str, submissions: dict[str, dict[str, str]]) -> None:
    """Declare submissions (name -> {solution cell: source}) to grade with `lesson`."""
    if lesson in _graded:
        new = [n for n in submissions if n not in _alias.get(lesson, {})]
        if new:
            raise RuntimeError(f"{lesson} was already graded this session; declare {new} at import time")
        return
    wanted, alias = _wanted.setdefault(lesson, {}), _alias.setdefault(lesson, {})
    by_content = {json.dumps(o, sort_keys=True): n for n, o in wanted.items()}
    for name, overrides in submissions.items():
        key = json.dumps(dict(overrides), sort_keys=True)
        if name in alias and alias[name] != by_content.get(key):
            raise ValueError(f"{lesson}: submission {name!r} declared twice with different cells")
        if key in by_content:
            alias[name] = by_content[key]
        else:
            wanted[name] = dict(overrides)
            by_content[key] = alias[name] = name


def want_samples(lesson: str) -> None:
    """The lesson's plausible-mistakes sample (all MISTAKES at once) and every VARIANT."""
    mistakes, variants = load_samples(lesson)
    want(lesson, ({MISTAKEN: mistakes} if mistakes else {})
         | {f"variant-{name}": cells for name, cells in variants.items()})


@dataclass
class LessonRun:
    check: LessonCheck
    verdicts: dict[str, dict[str, tuple[bool, str] | None]]   # student -> grade_id -> (passed, line)
    reference: object                                         # utils.grading.reference_run.Reference
    aliases: dict[str, str] = field(default_factory=dict)
    kernel_fields: dict[str, list[str]] = field(default_factory=dict)   # student -> what the kernel set
    errors: dict[str, list[str]] = field(default_factory=dict)          # student -> cells that raised, as graded
    printed: dict[str, list[str]] = field(default_factory=dict)         # student -> the lines its cells printed

    def _name(self, student: str) -> str:
        return self.aliases.get(student, student)

    def scores(self, student: str) -> dict[str, tuple[float, float]]:
        return self.check.scores.get(self._name(student), {})

    def verdicts_of(self, student: str) -> dict[str, tuple[bool, str] | None]:
        got = self.verdicts.get(self._name(student))
        assert got, f"{self.check.lesson}: {student!r} was not graded\n{self.check.log[-3000:]}"
        return got

    def failed(self, student: str) -> set[str]:
        """The graded cells whose verdict failed (or that got none); checked against the scores:
        a failed verdict is a cell with less than full marks, and only that."""
        verdicts = self.verdicts_of(student)
        failed = {gid for gid, v in verdicts.items() if v is None or not v[0]}
        scores = self.scores(student)
        assert set(scores) == set(verdicts), f"{student}: scores for {sorted(scores)}, verdicts for {sorted(verdicts)}"
        lost = {gid for gid, (s, m) in scores.items() if s < m}
        assert lost == failed, f"{student}: cells below full marks {sorted(lost)}, failed verdicts {sorted(failed)}"
        return failed

    def messages(self, student: str) -> dict[str, str]:
        """grade_id -> the verdict line of each graded cell that failed (for assertion messages)."""
        return {gid: (v[1] if v else "(no verdict)") for gid, v in self.verdicts_of(student).items()
                if v is None or not v[0]}


@functools.lru_cache(maxsize=None)
def graded(lesson: str) -> LessonRun:
    """Grade `lesson` once: reference, release and every submission declared so far (once per
    session: under pytest-xdist, the first process to ask grades and the others read its result)."""
    _graded.add(lesson)
    if SHARED is None:
        return _grade(lesson)
    done = SHARED / f"graded-{lesson}.pickle"
    with FileLock(SHARED / f"graded-{lesson}.lock"):   # another process may be grading it: wait for it
        if done.is_file():
            return pickle.loads(done.read_bytes())
        run = _grade(lesson)
        part = done.with_suffix(".part")
        part.write_bytes(pickle.dumps(run))
        part.replace(done)
        return run


def _grade(lesson: str) -> LessonRun:
    from utils.grading.reference_run import ReferenceRefused, reference_for
    from utils.grading.steps.verdicts import read_verdicts

    extra = {name: sample_submission(REPO, lesson, overrides) for name, overrides in _wanted.get(lesson, {}).items()}
    check = check_lesson(REPO, lesson, extra, keep=True, workers=WORKERS)
    scratch = check.scratch
    try:
        nb_name = source_notebook(REPO, lesson).name
        verdicts, kernel_fields, errors, printed = {}, {}, {}, {}
        hidden = hidden_lines(source_notebook(REPO, lesson))
        for student in (REFERENCE, RELEASE, *extra):
            path = scratch / "autograded" / student / lesson / nb_name
            if path.is_file():
                nb = nbformat.read(str(path), as_version=4)
                verdicts[student] = read_verdicts(nb)
                kernel_fields[student] = kernel_set_fields(nb, hidden)
                errors[student] = [f"cell {i}: {out.get('ename')}: {str(out.get('evalue'))[:200]}"
                                   for i, cell in enumerate(nb.cells) for out in cell.get("outputs", [])
                                   if out.get("output_type") == "error"]
                printed[student] = [line for cell in nb.cells for out in cell.get("outputs", [])
                                    if out.get("output_type") == "stream" for line in str(out.get("text", "")).splitlines()]
        try:
            reference = reference_for(source_notebook(scratch, lesson), scratch / ".grading-cache")
        except ReferenceRefused:      # check.problems says why
            reference = None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return LessonRun(check, verdicts, reference, dict(_alias.get(lesson, {})), kernel_fields, errors, printed)


def hidden_lines(source: Path) -> list[str]:
    """The lines of the hidden tests of a source notebook (those long enough to mean something)."""
    found, inside = [], False
    for cell in nbformat.read(str(source), as_version=4).cells:
        for line in cell.source.splitlines() if cell.cell_type == "code" else []:
            if "BEGIN HIDDEN TESTS" in line:
                inside = True
            elif "END HIDDEN TESTS" in line:
                inside = False
            elif inside and len(line.strip()) > 12:
                found.append(line.strip())
    return found


def kernel_set_fields(nb, hidden: list[str]) -> list[str]:
    """What of a graded notebook is not the grader's own: execution counts other than its count of
    the cells that ran, cell metadata beyond nbgrader's, output metadata or transient fields, and
    any hidden-test line anywhere but in a cell's source."""
    problems, count = [], 0
    for i, cell in enumerate(nb.cells):
        extra = set(cell.get("metadata", {})) - {"nbgrader", "tags", "editable", "deletable"}
        if extra:
            problems.append(f"cell {i}: metadata {sorted(extra)}")
        if cell.cell_type != "code":
            continue
        if cell.get("execution_count") is not None:
            count += 1
            if cell.execution_count != count:
                problems.append(f"cell {i}: execution_count {cell.execution_count}")
        for out in cell.get("outputs", []):
            if out.get("metadata") or "transient" in out:
                problems.append(f"cell {i}: output metadata or transient")
    import json

    text = json.dumps({"metadata": nb.metadata, "cells": [{k: v for k, v in c.items() if k != "source"} for c in nb.cells]})
    problems += [f"hidden test line in a field of the kernel's: {line!r}" for line in hidden if line in text]
    return problems


def judged_in_one_kernel(lesson: str, submissions: dict[str, dict[str, str]], reference,
                         timeout: int = 600) -> dict[str, dict[str, tuple[bool, str]]]:
    """Trusted samples only, never a student's notebook: each submission (the release with the
    reference solution in every cell but its overrides, the locked cells restored as nbgrader's
    autograde restores them) run top to bottom as autograding runs it (NBGRADER_EXECUTION=autograde),
    one after the other in ONE kernel, and each graded cell judged by the grader's own judge_cell
    against `reference` (the session's reference run of the lesson).

    The kernel's variables and figures are cleared before each submission; the modules it imported
    stay loaded, so each run after the first costs seconds less (lesson 2: about 2 s instead of 9).
    For the one-mistake-at-a-time samples, whose question is which cells a misconception loses;
    grading through nbgrader and the sandbox is graded()'s. Returns name -> grade_id -> (passed, line)."""
    from nbclient import NotebookClient
    from nbformat.v4 import new_code_cell

    from utils.grading.steps.base import grade_id, is_test_cell
    from utils.grading.steps.observations import as_autograding, restore_locked_cells
    from utils.grading.steps.verdicts import judge_cell

    source = source_notebook(REPO, lesson)
    notebooks = {name: restore_locked_cells(sample_submission(REPO, lesson, overrides), source)
                 for name, overrides in submissions.items()}
    clear = new_code_cell("get_ipython().run_line_magic('reset', '-f')\n"
                          "import matplotlib.pyplot as _plt\n_plt.close('all')\ndel _plt")
    judged = {}
    client = NotebookClient(nbformat.v4.new_notebook(), timeout=timeout, kernel_name="python3",
                            allow_errors=True, resources={"metadata": {"path": str(source.parent)}})
    with as_autograding(), client.setup_kernel():
        for name, nb in notebooks.items():
            client.nb = nb
            client.execute_cell(clear, 0)
            for index, cell in enumerate(nb.cells):
                if cell.cell_type == "code":
                    client.execute_cell(cell, index)
            judged[name] = {}
            for cell in nb.cells:
                if is_test_cell(cell):
                    verdict, _ = judge_cell(cell, reference)
                    judged[name][grade_id(cell)] = (verdict.passed, verdict.message)
    return judged


def failed(lesson: str, student: str, every: set[str] | None = None) -> set[str]:
    """The graded cells `student`'s submission of `lesson` failed (LessonRun.failed); with `every`,
    first that each of those cells, and no other, got a verdict."""
    run = graded(lesson)
    if every is not None:
        verdicts = run.verdicts_of(student)
        assert set(verdicts) == set(every), f"{student}: verdicts for {sorted(verdicts)}"
    return run.failed(student)
