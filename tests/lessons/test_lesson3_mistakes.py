"""Every graded cell of lesson 3 run against the reference, the sample mistakes and the correct
variants, without nbgrader: which cells each submission loses, and what the first failing check
tells the student. (test_lessons.py grades the same samples through nbgrader, end to end.)"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import nbformat
import pytest

from utils.lessons import REPO

NOTEBOOK = REPO / "source" / "03_timing_prefill_decode" / "timing_prefill_decode.ipynb"
SAMPLES = importlib.import_module("utils.authoring.samples.03_timing_prefill_decode")


def _cells():
    return nbformat.read(str(NOTEBOOK), as_version=4).cells


def _imports() -> str:
    """The import statements of the setup cell: everything the graded cells use, nothing measured."""
    setup = next(c for c in _cells() if c.metadata.get("nbgrader", {}).get("grade_id") == "setup")
    code = "\n".join(line for line in setup.source.splitlines() if not line.startswith("%"))
    return "\n".join(ast.unparse(node) for node in ast.parse(code).body
                     if isinstance(node, (ast.Import, ast.ImportFrom)))


def grade(overrides: dict[str, str]) -> dict[str, str | None]:
    """{graded cell: None when it passes, else its error's text (numbers first, then the check's label
    and, for a mistimed clock, the likely cause)}."""
    ns: dict = {}
    exec(_imports(), ns)
    results = {}
    for cell in _cells():
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution"):
            exec(overrides.get(meta["grade_id"], cell.source), ns)
        elif meta.get("grade"):
            try:
                exec(cell.source, ns)
                results[meta["grade_id"]] = None
            except Exception as err:  # noqa: BLE001 - we report what failed
                results[meta["grade_id"]] = f"{type(err).__name__}: {err}"
    return results


def test_reference_passes_every_graded_cell():
    failed = {cell: why for cell, why in grade({}).items() if why}
    assert not failed, failed


@pytest.mark.parametrize("name", sorted(SAMPLES.TIMING_MISTAKES))
def test_timing_mistakes_lose_their_cell_and_are_named(name):
    overrides, lost = SAMPLES.TIMING_MISTAKES[name]
    results = grade(overrides)
    assert {cell for cell, why in results.items() if why} == lost, results
    for cell in lost:
        why = results[cell]
        # the check that names the mistake fails first, and says what to fix
        if name in ("start_before_new_cache",):
            assert "before new_cache()" in why and "then sync()" in why, why
        elif name != "tpot_over_all_tokens":
            assert "still queued" in why and "sync()" in why, why


def test_sample_mistakes_are_named_in_the_notebook():
    """Which cells the MISTAKES sample loses is judged by the observation verdicts
    (test_lesson3_observations.py); here, what its visible checks tell a student while working."""
    results = grade(SAMPLES.MISTAKES)
    assert "still queued" in results["generate_timing_tests"], results["generate_timing_tests"]
    assert "still queued" in results["time_fn_tests"], results["time_fn_tests"]
    assert results["quiz_q1"] is None, results  # a wrong letter is judged outside the kernel, never in it


@pytest.mark.parametrize("name", sorted(SAMPLES.MORE_MISTAKES))
def test_batch_mistakes_fail_the_visible_batch_check(name):
    gid, source = SAMPLES.MORE_MISTAKES[name]
    results = grade({gid: source})
    assert {cell for cell, why in results.items() if why} == {"predict_bounds_tests"}, results
    assert "batch 8" in results["predict_bounds_tests"], results["predict_bounds_tests"]


@pytest.mark.parametrize("name", sorted(SAMPLES.VARIANTS))
def test_variants_pass_every_graded_cell(name):
    failed = {cell: why for cell, why in grade(SAMPLES.VARIANTS[name]).items() if why}
    assert not failed, failed


def test_quiz_keys_spread():
    answers = next(c for c in _cells() if c.metadata.get("nbgrader", {}).get("grade_id") == "quiz_answers").source
    assert re.findall(r'q(\d) = "(\w)"', answers) == [("1", "d"), ("2", "b"), ("3", "c"), ("4", "b")]
    predictions = [re.search(r'(p\d) = "(\w)"', c.source).groups() for c in _cells()
                   if re.fullmatch(r"p\d", c.metadata.get("nbgrader", {}).get("grade_id", ""))]
    assert predictions == [("p1", "b"), ("p2", "c"), ("p3", "a")], predictions
