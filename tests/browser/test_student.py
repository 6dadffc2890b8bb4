"""The student's path in JupyterLab: lesson 1 runs and draws its chart, Validate answers, the
Assignments panel lists the lesson.

What the lesson test does: before opening the released lesson it fills every solution cell but the
first exercise with the reference answer (markers stripped), so that Run All reaches every cell,
the chart included, whatever student functions the chart needs. In the browser it then types the
first exercise's answer over the `raise NotImplementedError()` stub, runs all cells, checks that a
chart is rendered as an image and that no cell raised, and presses nbgrader's Validate, which must
report that the notebook passes all the tests.
"""

from __future__ import annotations

import re

import nbformat
import pytest

pytest.importorskip("playwright.sync_api", reason="playwright is not installed: pip install -r requirements-dev.txt")
from playwright.sync_api import expect  # noqa: E402

from .conftest import COURSE_ID  # noqa: E402

pytestmark = pytest.mark.browser

NB_PANEL = ".jp-NotebookPanel:not(.lm-mod-hidden)"
STUB = "raise NotImplementedError()"
RUN_ALL_TIMEOUT_MS = 180_000  # lesson 1 on a loaded 2-core machine
VALIDATE_TIMEOUT_MS = 180_000  # nbgrader runs the whole notebook again on the server


def solution_sources(source_nb) -> dict[str, str]:
    from utils.coursedir import nbgrader_meta, strip_markers

    nb = nbformat.read(str(source_nb), as_version=4)
    return {nbgrader_meta(c)["grade_id"]: strip_markers(c.source)
            for c in nb.cells if nbgrader_meta(c).get("solution")}


def prepare_student_notebook(path, reference: dict[str, str]) -> tuple[int, str]:
    """Fill the solution cells of the notebook at `path` but the first exercise (a code stub).

    Returns that exercise's cell index and the answer to type there."""
    from utils.coursedir import nbgrader_meta

    nb = nbformat.read(str(path), as_version=4)
    first = None
    for i, cell in enumerate(nb.cells):
        meta = nbgrader_meta(cell)
        if not meta.get("solution") or cell.cell_type != "code":
            continue
        if first is None and STUB in cell.source:
            first = i
        else:
            cell.source = reference[meta["grade_id"]]
    assert first is not None, f"{path.name} has no solution cell with a {STUB!r} stub"
    nbformat.write(nb, str(path))
    return first, reference[nbgrader_meta(nb.cells[first])["grade_id"]]


BAR_CHART = re.compile(r"bar_chart|\.barh?\(")


def bar_chart_cell(path) -> int:
    """Index of the lesson's bar chart: the first code cell that is neither an exercise nor a graded
    test and calls .bar( / .barh( or a *bar_chart helper."""
    from utils.coursedir import nbgrader_meta

    nb = nbformat.read(str(path), as_version=4)
    found = [i for i, c in enumerate(nb.cells)
             if c.cell_type == "code" and BAR_CHART.search(c.source)
             and not nbgrader_meta(c).get("solution") and not nbgrader_meta(c).get("grade")]
    assert found, f"{path.name}: no code cell draws a bar chart (none matches {BAR_CHART.pattern!r})"
    return found[0]


# Every code cell shows an execution count, or the run stopped; and none is still queued/running.
RUN_FINISHED_JS = """(panel) => {
  const prompts = [...document.querySelectorAll(panel + ' .jp-CodeCell .jp-InputArea-prompt')]
      .map(e => e.textContent.trim());
  if (prompts.some(p => p.includes('*'))) return false;
  const errors = document.querySelectorAll(panel + ' .jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]');
  const allDone = prompts.length > 0 && prompts.every(p => /^\\[\\d+\\]:$/.test(p));
  return allDone || [...errors].some(e => e.textContent.includes('Traceback'));
}"""


def test_lesson_1_runs_renders_chart_and_validates(student, course_copy):
    _, lesson = course_copy
    page = student.page
    nb_rel = f"{lesson.name}/{lesson.release_nb.name}"
    nb_path = student.server.root / nb_rel

    with student.step("prepare the released notebook (all answers but the first exercise's)"):
        exercise, answer = prepare_student_notebook(nb_path, solution_sources(lesson.source_nb))

    with student.step(f"open {nb_rel} in JupyterLab with the nbgrader extension"):
        student.open_lab(nb_rel)
        page.wait_for_function(
            """(panel) => {
                 const name = document.querySelector(panel + ' .jp-KernelName');
                 const state = document.querySelector(panel + ' .jp-Notebook-ExecutionIndicator');
                 return name && name.textContent.includes('Python 3') && state && state.dataset.status === 'idle';
               }""", arg=NB_PANEL)
        expect(page.locator(f"{NB_PANEL} .validate-button")).to_be_visible()

    cells = page.locator(f"{NB_PANEL} .jp-Notebook .jp-Cell")
    with student.step(f"type the first exercise's answer into cell {exercise}"):
        editor = cells.nth(exercise).locator(".cm-content")
        expect(editor).to_contain_text(STUB)
        editor.click()
        page.keyboard.press("Control+A")
        page.keyboard.insert_text(answer)
        expect(editor).not_to_contain_text("NotImplementedError")
        typed = editor.evaluate("(el) => el.cmView ? el.cmView.view.state.doc.toString() : el.innerText")
        assert typed.strip() == answer.strip(), f"the editor holds {typed!r}, not the answer typed"

    with student.step("Run > Run All Cells"):
        page.keyboard.press("Escape")
        student.menu("Run", "Run All Cells")
        page.wait_for_function(RUN_FINISHED_JS, arg=NB_PANEL, timeout=RUN_ALL_TIMEOUT_MS, polling=500)

    with student.step("every code cell ran without an error"):
        prompts = [p.strip() for p in cells.locator(".jp-InputArea-prompt").all_text_contents()]
        code_prompts = [p for p in prompts if p]
        unrun = [i for i, p in enumerate(code_prompts) if not re.fullmatch(r"\[\d+\]:", p)]
        tracebacks = [t for t in page.locator(
            f"{NB_PANEL} .jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']").all_inner_texts()
            if "Traceback" in t]
        assert not tracebacks and not unrun, (
            f"code cells {unrun} did not run; first error:\n{tracebacks[0][-1500:] if tracebacks else '-'}")

    with student.step("the bar chart is rendered as an image in its cell's output"):
        chart_cell = cells.nth(bar_chart_cell(nb_path))
        image = chart_cell.locator(".jp-OutputArea-output[data-mime-type='image/png'] img")
        expect(image).to_have_count(1)
        size = image.evaluate("(img) => [img.naturalWidth, img.naturalHeight]")
        assert size[0] > 100 and size[1] > 100, f"the chart image is {size[0]}x{size[1]} pixels"
        chart_cell.evaluate("(cell) => cell.scrollIntoView({block: 'start'})")  # code above, chart below
        expect(image).to_be_in_viewport()
        student.screenshot(f"{student.test_name}-chart")

    with student.step("press Validate in the notebook toolbar and read its result"):
        page.locator(f"{NB_PANEL} .validate-button").click()
        dialog = page.locator(".jp-Dialog")
        expect(dialog.locator(".jp-Dialog-header")).to_contain_text("Validation Results",
                                                                    timeout=VALIDATE_TIMEOUT_MS)
        message = dialog.locator("#validation-message")
        student.screenshot(f"{student.test_name}-validate")
        expect(message).to_contain_text("Success! Your notebook passes all the tests.")
        dialog.locator(".jp-Dialog-button", has_text="Ok").click()
        expect(dialog).to_have_count(0)


def test_assignments_panel_lists_the_released_lesson(student, course_copy):
    _, lesson = course_copy
    page = student.page
    with student.step("open JupyterLab"):
        student.open_lab()
    with student.step("Nbgrader > Assignment List"):
        student.menu("Nbgrader", "Assignment List")
        panel = page.locator("#nbgrader-assignment-list")
        expect(panel).to_be_visible()
    with student.step(f"the panel lists {lesson.name} as downloaded from the course's exchange"):
        # released to the exchange and already in the student's folder: nbgrader calls that "fetched"
        expect(panel).to_contain_text("Released assignments")
        expect(panel.locator("#fetched_assignments_list")).to_contain_text(lesson.name)
        expect(panel.locator("#fetched_assignments_list")).to_contain_text(COURSE_ID)
        student.screenshot()
