"""The student's path in JupyterLab: a new student's Lab from `make lab` (lesson 1 opens clean,
no instructor menu, runs, draws its chart, validates, and git status stays clean), the hub's
Assignments panel lists the lesson, and the checks speak in a few short lines.

What the lesson test does: in a fresh checkout of the course (tests/browser/conftest.py,
`make_lab`), `make lab` installs the student environment with torch's CPU index unreachable (a
closed loopback port), makes the working copy and starts JupyterLab. Its output must say in one
line that PyPI's torch is installed instead, with no pip retry and no line a student could read as
a failure, and the address it prints last must be lesson 1's. The working copy's lesson 1 must
equal release/ but for its kernel's language_info; every solution cell but the first exercise's is filled with the reference answer
(markers stripped), as a student works, so that Run All reaches every cell, the chart included.
In the browser the lesson must open unmarked (no unsaved change before any edit) with no Nbgrader
menu and no dialog; the first exercise's answer is typed over the `raise NotImplementedError()`
stub, all cells run, a chart is rendered as an image, no cell raised, nbgrader's Validate reports
that the notebook passes all the tests, and after saving `make validate` in a terminal says the same
with no warning, and `git status` of the checkout is empty.

The unsolved-lesson test runs the untouched release cell by cell (Run All would stop at the first
failing check) and reads what a student meets: every graded cell says in a few lines of at most
76 characters what is not written or answered yet, the figure cell the same and no empty chart,
no output anywhere is a traceback (an answer cell's own stub is one line), and Validate lists the
failing checks with no traceback to scroll past. The mistake test validates a notebook whose only
error is TPOT averaged over n tokens instead of n - 1 gaps: the dialog shows that check's
numbers first, expected, returned and their ratio, then its label, without scrolling.
"""

from __future__ import annotations

import json
import re
import subprocess

import nbformat
import pytest

pytest.importorskip("playwright.sync_api", reason="playwright is not installed: pip install -r requirements-dev.txt")
from playwright.sync_api import expect

from .conftest import COURSE_ID, MAKE_LAB_S, NB_PANEL, RUN_FINISHED_JS, open_notebook

pytestmark = pytest.mark.browser

STUB = "raise NotImplementedError()"
RUN_ALL_TIMEOUT_MS = 180_000  # lesson 1 on a loaded 2-core machine
VALIDATE_TIMEOUT_MS = 180_000  # nbgrader runs the whole notebook again on the server


def solution_sources(source_nb) -> dict[str, str]:
    from utils.notebooks import nbgrader_meta, strip_markers

    nb = nbformat.read(str(source_nb), as_version=4)
    return {nbgrader_meta(c)["grade_id"]: strip_markers(c.source)
            for c in nb.cells if nbgrader_meta(c).get("solution")}


def prepare_student_notebook(path, reference: dict[str, str]) -> tuple[int, str]:
    """Fill the solution cells of the notebook at `path` but the first exercise (a code stub).

    Returns that exercise's cell index and the answer to type there."""
    from utils.notebooks import nbgrader_meta

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


CHART = re.compile(r"\bdrawing\(|bar_chart|\.barh?\(")


def chart_cell(path) -> int:
    """Index of the lesson's chart drawn with a student's function: the first code cell that is
    neither an exercise nor a graded test and opens `with drawing(...)` (or draws bars)."""
    from utils.notebooks import nbgrader_meta

    nb = nbformat.read(str(path), as_version=4)
    found = [i for i, c in enumerate(nb.cells)
             if c.cell_type == "code" and CHART.search(c.source)
             and not nbgrader_meta(c).get("solution") and not nbgrader_meta(c).get("grade")]
    assert found, f"{path.name}: no code cell draws a chart (none matches {CHART.pattern!r})"
    return found[0]


def graded_cells(path) -> dict[int, str]:
    """{cell index: grade_id} of the graded test cells."""
    from utils.notebooks import nbgrader_meta

    nb = nbformat.read(str(path), as_version=4)
    return {i: nbgrader_meta(c)["grade_id"] for i, c in enumerate(nb.cells)
            if nbgrader_meta(c).get("grade") and not nbgrader_meta(c).get("solution")}


def test_lesson_1_runs_renders_chart_and_validates(new_student, make_lab, course_copy):
    """In a new student's Lab as `make lab` makes it from a fresh checkout, torch's CPU index
    unreachable: the install says so in one line and retries nothing; the address printed last
    opens the working copy's lesson 1, clean, with no instructor menu; it is answered, run,
    validated from the toolbar and from a terminal (`make validate`, no warning) and saved, and git
    status stays clean."""
    student = new_student
    checkout, server = make_lab
    _, lesson = course_copy
    page = student.page
    nb_rel = f"{lesson.name}/{lesson.release_nb.name}"
    nb_path = checkout.lessons / nb_rel

    with student.step(f"make lab's output, torch's CPU index unreachable (installed in {checkout.install_s:.0f} s)"):
        said = checkout.output
        unreachable = [line for line in said.splitlines() if line.startswith("torch's CPU index")]
        assert len(unreachable) == 1 and checkout.index in unreachable[0] and "from PyPI instead" in unreachable[0], \
            said[-3000:]
        assert "Retrying" not in said and "language_info" not in said, said[-3000:]
        assert "lessons/ holds your own copy of the lessons" in said, said[-3000:]
        assert checkout.install_s < MAKE_LAB_S, checkout.install_s

    with student.step("the address make lab prints last is lesson 1's"):
        printed = re.findall(r"^\s*(?:\[.*?\]\s*)?(http://\S+)\s*$", server.log_path.read_text(), flags=re.M)
        assert printed, server.log_path.read_text()[-3000:]
        last = printed[-1]
        assert last == f"{server.url}/lab/tree/{nb_rel}?token={server.token}", printed

    with student.step("the working copy's lesson (all answers but the first exercise's, as a student works)"):
        copied, released = (json.loads(p.read_text()) for p in (nb_path, checkout.root / "release" / nb_rel))
        assert copied["metadata"].pop("language_info")["version"]  # the student's kernel's, in full
        released["metadata"].pop("language_info")
        assert copied == released, "lessons/ is not release/ as committed"
        exercise, answer = prepare_student_notebook(nb_path, solution_sources(lesson.source_nb))

    with student.step(f"the address printed last opens lessons/{nb_rel}: Validate, no instructor menu"):
        open_notebook(student, nb_rel, nbgrader_menu=False, url=last)
        expect(page.locator(".lm-TabBar-tab.jp-mod-current .lm-TabBar-tabLabel").first).to_have_text(
            lesson.release_nb.name)
        page.wait_for_timeout(1500)  # what the Lab writes into a notebook once its kernel is up
        menus = page.locator("#jp-MainMenu .lm-MenuBar-itemLabel").all_inner_texts()
        assert "Run" in menus and "Nbgrader" not in menus, menus
        expect(page.locator(".jp-Dialog")).to_have_count(0)  # no "exchange directory does not exist"
        assert page.locator(".lm-TabBar-tab.jp-mod-dirty").count() == 0, "the lesson opened marked unsaved"

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

    with student.step("no code cell is cut at the right edge of a 1,400-pixel window (file browser open)"):
        wide = cells.evaluate_all("""(cells) => cells.map((cell, i) => {
            const editor = cell.querySelector('.jp-CodeCell .cm-scroller');
            return editor && editor.scrollWidth > editor.clientWidth + 1 ? i : null; }).filter(i => i !== null)""")
        assert page.viewport_size["width"] == 1400 and page.locator(".jp-FileBrowser").is_visible()
        assert not wide, f"code cells {wide} hold lines wider than the notebook: a student sees them cut off"
        table = next(i for i, c in enumerate(nbformat.read(str(nb_path), as_version=4).cells)
                     if "share of peak it implies" in c.source)
        cells.nth(table).evaluate("(cell) => cell.scrollIntoView({block: 'start'})")
        student.screenshot(f"{student.test_name}-table")

    with student.step("the chart is rendered as an image in its cell's output"):
        chart = cells.nth(chart_cell(nb_path))
        image = chart.locator(".jp-OutputArea-output[data-mime-type='image/png'] img")
        expect(image).to_have_count(1)
        size = image.evaluate("(img) => [img.naturalWidth, img.naturalHeight]")
        assert size[0] > 100 and size[1] > 100, f"the chart image is {size[0]}x{size[1]} pixels"
        chart.evaluate("(cell) => cell.scrollIntoView({block: 'start'})")  # code above, chart below
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

    with student.step("save the worked lesson"):
        # read the file once the server has answered this save: it writes the notebook in place (a
        # copy kept aside until done), so a read during the write can find it empty; the tab may
        # already be clean (an autosave), so its mark says nothing about this save
        with page.expect_response(lambda r: r.request.method == "PUT" and f"/api/contents/{nb_rel}" in r.url) as put:
            page.keyboard.press("Control+S")
        assert put.value.ok, f"saving answered HTTP {put.value.status}"
        expect(page.locator(".lm-TabBar-tab.jp-mod-dirty")).to_have_count(0)
        saved = json.loads(nb_path.read_text())
        assert any(c.get("outputs") for c in saved["cells"]), "the lesson was not saved with its outputs"

    with student.step(f"validate from a terminal as the README says: make validate LESSON={lesson.name}"):
        done = subprocess.run(["make", "--no-print-directory", "validate", f"LESSON={lesson.name}"], cwd=checkout.root,
                              env=server.env, capture_output=True, text=True, timeout=VALIDATE_TIMEOUT_MS / 1000)
        said = done.stdout + done.stderr
        assert done.returncode == 0 and "Success! Your notebook passes all the tests." in said, said
        assert "WARNING" not in said and "without encryption" not in said, said

    with student.step("git status of the checkout stays clean"):
        status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=checkout.root,
                                capture_output=True, text=True, check=True).stdout
        assert status == "", f"git status after a worked lesson:\n{status}"


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


# --- the checks, as a student meets them ---------------------------------------------------------

ERROR_OUTPUT = ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']"


def run_cell_by_cell(student, cells, count: int) -> None:
    """Shift+Enter through the first `count` cells, waiting for each code cell to finish, so that a
    failing cell does not stop the ones after it (Run All would)."""
    page = student.page
    cells.nth(0).locator(".jp-InputPrompt").click()
    page.keyboard.press("Escape")
    for i in range(count):
        cell = cells.nth(i)
        page.keyboard.press("Shift+Enter")
        if "jp-CodeCell" in (cell.get_attribute("class") or ""):
            expect(cell.locator(".jp-InputArea-prompt")).to_have_text(re.compile(r"^\[\d+\]:$"),
                                                                      timeout=RUN_ALL_TIMEOUT_MS)


def short_error(cell) -> str:
    """The text of a cell's error output: a few lines, none wider than an 80-column terminal
    shows under `nbgrader validate` (76), no traceback."""
    outputs = cell.locator(ERROR_OUTPUT)
    expect(outputs).to_have_count(1)
    text = outputs.inner_text().strip()
    lines = text.splitlines()
    assert len(lines) <= 4 and all(len(line) <= 76 for line in lines) and "Traceback" not in text \
        and "checks.py" not in text, f"not a few short lines:\n{text}"
    return text


def validate(student):
    page = student.page
    page.locator(f"{NB_PANEL} .validate-button").click()
    dialog = page.locator(".jp-Dialog")
    expect(dialog.locator(".jp-Dialog-header")).to_contain_text("Validation Results", timeout=VALIDATE_TIMEOUT_MS)
    return dialog, dialog.locator("#validation-message")


def test_unsolved_lesson_speaks_in_one_line(student, course_copy):
    _, lesson = course_copy
    page = student.page
    folder = student.server.root / lesson.name
    nb_rel = f"{lesson.name}/unsolved.ipynb"
    graded = graded_cells(lesson.release_nb)
    chart = chart_cell(lesson.release_nb)
    release_cells = nbformat.read(str(lesson.release_nb), as_version=4).cells
    n_cells = len(release_cells)
    # answer cells (the quiz's, a graded prediction's): nbgrader's bare stub at the top level
    answer_cells = sum(c.cell_type == "code" and c.source.strip().startswith("# YOUR CODE HERE")
                       and c.source.strip().endswith(STUB) and "def " not in c.source for c in release_cells)

    with student.step("copy the untouched release and open it"):
        (folder / "unsolved.ipynb").write_bytes(lesson.release_nb.read_bytes())
        open_notebook(student, nb_rel)

    cells = page.locator(f"{NB_PANEL} .jp-Notebook .jp-Cell")
    with student.step(f"run all {n_cells} cells one by one (Shift+Enter)"):
        run_cell_by_cell(student, cells, n_cells)

    with student.step("every graded cell says in one line what to do, with no traceback"):
        said = {grade_id: short_error(cells.nth(i)) for i, grade_id in graded.items()}
        for grade_id, text in said.items():
            assert text.startswith("CheckFailed: ") and ("not written yet" in text or "not answered yet" in text), \
                f"{grade_id}: {text}"
        quiz = [text for grade_id, text in said.items() if grade_id.startswith("quiz_")]
        assert quiz and all(re.search(r'write [pq]\d', text) and '(your letter, in quotes)' in text for text in quiz), quiz
        first = min(graded)
        cells.nth(first - 1).evaluate("(cell) => cell.scrollIntoView({block: 'start'})")
        expect(cells.nth(first).locator(ERROR_OUTPUT)).to_be_in_viewport()
        student.screenshot(f"{student.test_name}-exercise")
        quiz_cell = min(i for i, g in graded.items() if g.startswith("quiz_"))
        cells.nth(quiz_cell - 1).evaluate("(cell) => cell.scrollIntoView({block: 'start'})")
        student.screenshot(f"{student.test_name}-quiz")

    with student.step("the chart cell of an unwritten function: one line, no empty chart"):
        text = short_error(cells.nth(chart))
        assert "not written yet" in text, text
        expect(cells.nth(chart).locator(".jp-OutputArea-output[data-mime-type='image/png']")).to_have_count(0)
        cells.nth(chart).evaluate("(cell) => cell.scrollIntoView({block: 'start'})")
        student.screenshot(f"{student.test_name}-chart")

    with student.step("no traceback anywhere: an answer cell's own stub says so in one line"):
        # An answer cell (the quiz's, a graded prediction's) runs nbgrader's `raise
        # NotImplementedError()` stub at its top level: the notebook's NotImplementedError
        # (course.stubs.Stub, no IPython handler) shows it as one line.
        errors = page.locator(f"{NB_PANEL} {ERROR_OUTPUT}").all_inner_texts()
        tracebacks = [t for t in errors if "Traceback" in t or any(len(x) > 76 for x in t.splitlines())]
        assert not tracebacks, f"{len(tracebacks)} outputs are tracebacks or long lines; the first:\n{tracebacks[0]}"
        answers = [t.strip() for t in errors if t.startswith("NotImplementedError: ")]
        assert answer_cells >= 1 and len(answers) >= answer_cells, errors
        assert "NotImplementedError: this cell is not answered yet: write your answer here" in answers, answers

    with student.step("Validate lists the failing checks, the first one in sight, no traceback"):
        dialog, message = validate(student)
        expect(message).to_contain_text("not written yet")
        expect(message).to_contain_text("not answered yet")
        assert "Traceback" not in message.inner_text()
        expect(message.get_by_text("not written yet").first).to_be_in_viewport()
        student.screenshot(f"{student.test_name}-validate")
        dialog.locator(".jp-Dialog-button", has_text="Ok").click()
        expect(dialog).to_have_count(0)


def test_validate_shows_the_failing_check_without_scrolling(student, course_copy):
    """One misconception (TPOT over n tokens, not n - 1 gaps), everything else right."""
    from utils.notebooks import nbgrader_meta
    from utils.authoring.samples_io import load_samples

    _, lesson = course_copy
    folder = student.server.root / lesson.name
    nb_rel = f"{lesson.name}/mistake.ipynb"

    with student.step("write a notebook with the reference answers and one mistake"):
        mistakes, _ = load_samples(lesson.name)
        reference = solution_sources(lesson.source_nb)
        nb = nbformat.read(str(lesson.release_nb), as_version=4)
        for cell in nb.cells:
            grade_id = nbgrader_meta(cell).get("grade_id")
            if nbgrader_meta(cell).get("solution"):
                cell.source = mistakes[grade_id] if grade_id == "request_metrics" else reference[grade_id]
        nbformat.write(nb, str(folder / "mistake.ipynb"))
        open_notebook(student, nb_rel)

    with student.step("Validate shows the failing check, both numbers first, in sight"):
        dialog, message = validate(student)
        text = message.inner_text()
        assert "Traceback" not in text and "checks.py" not in text, text
        assert re.search(r"CheckFailed: expected 0\.03, returned 0\.153333 \(5\.11x the expected\)\n\s*check: TPOT", text), text
        line = message.get_by_text(re.compile(r"CheckFailed: expected 0\.03, returned 0\.153333"))
        expect(line).to_have_count(1)
        expect(line).to_be_in_viewport()
        student.screenshot(f"{student.test_name}-validate")
        dialog.locator(".jp-Dialog-button", has_text="Ok").click()
        expect(dialog).to_have_count(0)
