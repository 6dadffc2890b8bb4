"""A visible check never accepts what the lesson calls a mistake.

For every lesson, each plausible mistake in utils/authoring/samples/<lesson>.py (MISTAKES, one per
solution cell, and MORE_MISTAKES) is put in its solution cell alone; the other solution cells keep
the reference. The graded cells that follow that solution cell then run WITHOUT their hidden tests,
as the student's release runs them: at least one must fail, so a student who makes the mistake is
told before submitting. HIDDEN_ONLY names the mistakes only the hidden tests or the grader judge,
each with why. Every line those checks print, or a failure shows, fits the page (120 characters). No kernel and no nbgrader: solution and visible test cells are executed in order in
one namespace, each given cell contributing only its imports, definitions and call-free assignments
(nothing measured or drawn).
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import io

import matplotlib
import nbformat
import pytest

from course.formatting import PAGE_WIDTH
from utils.lessons import REPO, lessons, source_notebook
from utils.notebooks import BEGIN_HIDDEN, END_HIDDEN, nbgrader_meta, strip_markers

matplotlib.use("Agg")

# (lesson, solution cell) -> why its mistakes are judged only outside the kernel
HIDDEN_ONLY = {
    # A quiz or prediction letter is judged by the grader, never in the kernel: a visible check that
    # rejected a wrong letter would give the answer away.
    ("01_two_phases", "prediction"): "a predicted letter is judged by the grader only",
    ("01_two_phases", "quiz_answers"): "quiz letters are judged by the grader only",
    ("02_arithmetic_intensity", "p1"): "a predicted letter is judged by the grader only",
    ("02_arithmetic_intensity", "quiz_answers"): "quiz letters are judged by the grader only",
    ("03_timing_prefill_decode", "p1"): "a predicted letter is judged by the grader only",
    ("03_timing_prefill_decode", "p2"): "a predicted letter is judged by the grader only",
    ("03_timing_prefill_decode", "p3"): "a predicted letter is judged by the grader only",
    ("03_timing_prefill_decode", "quiz_answers"): "quiz letters are judged by the grader only",
}


def visible(source: str) -> str:
    """A graded cell as the release shows it: the hidden tests left out."""
    out, hidden = [], False
    for line in source.splitlines():
        if line.strip() == BEGIN_HIDDEN:
            hidden = True
        elif line.strip() == END_HIDDEN:
            hidden = False
        elif not hidden:
            out.append(line)
    return "\n".join(out)


def _cells(lesson):
    return nbformat.read(str(source_notebook(REPO, lesson)), as_version=4).cells


def _definitions(source: str) -> list[str]:
    """A given cell's imports, functions, classes and assignments without a call: what later cells use."""
    code = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith("%"))
    keep = []
    for node in ast.parse(code).body:
        if isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef)):
            keep.append(node)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None and \
                not any(isinstance(n, ast.Call) for n in ast.walk(node.value)):
            keep.append(node)
    return [ast.unparse(node) for node in keep]


def graded_after(cells, solution_id: str) -> list[str]:
    """The graded cells between a solution cell and the next one: the checks of what it defines."""
    ids, inside = [], False
    for cell in cells:
        meta = nbgrader_meta(cell)
        if meta.get("solution"):
            if inside:
                break
            inside = meta.get("grade_id") == solution_id
        elif inside and meta.get("grade"):
            ids.append(meta["grade_id"])
    return ids


def visible_failures(lesson: str, overrides: dict[str, str]) -> dict[str, str | None]:
    """{graded cell: None if its visible checks pass, else the error as the student sees it} with
    `overrides` put in."""
    import matplotlib.pyplot as plt

    cells = _cells(lesson)
    ns: dict = {}
    results = {}
    try:
        for cell in cells:
            meta = nbgrader_meta(cell)
            if cell.cell_type != "code":
                continue
            if meta.get("solution"):
                exec(overrides.get(meta["grade_id"], strip_markers(cell.source)), ns)
            elif meta.get("grade"):
                try:
                    exec(visible(cell.source), ns)
                    results[meta["grade_id"]] = None
                except Exception as err:  # noqa: BLE001 - we report what failed
                    # as IPython shows it: a check's own short lines, else the exception's line
                    render = getattr(err, "_render_traceback_", None)
                    results[meta["grade_id"]] = "\n".join(render()) if render else f"{type(err).__name__}: {err}"
            else:
                for statement in _definitions(cell.source):
                    try:
                        exec(statement, ns)
                    except NameError:  # built from a measured or drawn name: no check reads it
                        pass
    finally:
        plt.close("all")
    return results


def printed_within_the_page(lesson: str, overrides: dict[str, str]) -> dict[str, str | None]:
    """visible_failures, and every line the checks printed or a failure showed fits the page
    (course.formatting.PAGE_WIDTH: what JupyterLab shows at 1,400 pixels, file browser open)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        results = visible_failures(lesson, overrides)
    lines = out.getvalue().splitlines() + [line for why in results.values() if why for line in why.splitlines()]
    wide = [(len(line), line) for line in lines if len(line) > PAGE_WIDTH]
    assert not wide, (sorted(overrides), wide)
    return results


def _mistakes():
    cases = []
    for lesson in lessons(REPO):
        try:
            module = importlib.import_module(f"utils.authoring.samples.{lesson}")
        except ModuleNotFoundError:
            continue
        for gid, source in getattr(module, "MISTAKES", {}).items():
            cases.append(pytest.param(lesson, gid, source, id=f"{lesson}-{gid}"))
        for name, (gid, source) in getattr(module, "MORE_MISTAKES", {}).items():
            cases.append(pytest.param(lesson, gid, source, id=f"{lesson}-{name}"))
    return cases


@pytest.mark.parametrize("lesson, solution_id, source", _mistakes())
def test_visible_checks_reject_each_named_mistake(lesson, solution_id, source):
    if (lesson, solution_id) in HIDDEN_ONLY:
        pytest.skip(HIDDEN_ONLY[(lesson, solution_id)])
    checks = graded_after(_cells(lesson), solution_id)
    assert checks, f"{lesson}: no graded cell follows {solution_id}"
    results = printed_within_the_page(lesson, {solution_id: source})
    assert any(results[gid] for gid in checks), (
        f"{lesson}: the mistake in {solution_id} passes every visible check of {checks}")


@pytest.mark.parametrize("lesson", [l for l in lessons(REPO)
                                    if (REPO / "utils" / "authoring" / "samples" / f"{l}.py").exists()])
def test_reference_passes_every_visible_check(lesson):
    failed = {gid: why for gid, why in printed_within_the_page(lesson, {}).items() if why}
    assert not failed, failed


def test_hidden_only_names_real_solution_cells():
    for lesson, gid in HIDDEN_ONLY:
        assert graded_after(_cells(lesson), gid), (lesson, gid)
