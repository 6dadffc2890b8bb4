"""The instructor's path in JupyterLab: the formgrader lists the course's lessons, and the Create
Assignment panel shows the nbgrader cell types of a source notebook."""

from __future__ import annotations

import nbformat
import pytest

pytest.importorskip("playwright.sync_api", reason="playwright is not installed: pip install -r requirements-dev.txt")
from playwright.sync_api import expect

pytestmark = pytest.mark.browser

# The choices the Create Assignment panel offers for a code cell (nbgrader 0.9), in its order.
CODE_CELL_TYPES = ["-", "Manually graded answer", "Manually graded task", "Autograded answer",
                   "Autograded tests", "Read-only"]
PANEL = "#nbgrader-create_assignemnt"  # sic: nbgrader's own id


def test_formgrader_lists_the_lessons(instructor, course_lessons):
    page = instructor.page
    with instructor.step("open JupyterLab in the course directory"):
        instructor.open_lab()
    with instructor.step("Nbgrader > Formgrader"):
        instructor.menu("Nbgrader", "Formgrader")
        frame = page.frame_locator("#formgrader iframe")
        expect(frame.locator("h1", has_text="Manage Assignments")).to_be_visible()
    with instructor.step(f"the Manage Assignments table lists the lessons {', '.join(course_lessons)}"):
        names = frame.locator("#main-table tr td.name")
        expect(names).to_have_count(len(course_lessons))
        assert sorted(names.all_inner_texts()) == course_lessons
        # the exchange is configured, so the formgrader shows no warning about it
        expect(frame.locator("body")).not_to_contain_text("exchange directory")
        instructor.screenshot()


def test_create_assignment_panel_shows_cell_types(instructor, course_copy):
    _, lesson = course_copy
    page = instructor.page
    nb_rel = lesson.source_nb.relative_to(instructor.server.root).as_posix()
    nb = nbformat.read(str(lesson.source_nb), as_version=4)
    meta = [c.metadata.get("nbgrader", {}) for c in nb.cells]
    solution = next(i for i, m in enumerate(meta) if m.get("solution") and nb.cells[i].cell_type == "code")
    test_cell = next(i for i, m in enumerate(meta) if i > solution and m.get("grade") and not m.get("solution"))
    total = sum(m.get("points", 0) for m in meta if m.get("grade"))

    with instructor.step(f"open the source notebook {nb_rel}"):
        instructor.open_lab(nb_rel)
        page.locator(".jp-NotebookPanel .jp-Cell").first.wait_for()
    with instructor.step("Nbgrader > Create assignment opens the panel with a widget per cell"):
        instructor.menu("Nbgrader", "Create assignment")
        widgets = page.locator(f"{PANEL} .nbgrader-CellWidget")
        expect(widgets).to_have_count(len(nb.cells))
        expect(page.locator(f"{PANEL} .nbgrader-TotalPointsInput")).to_have_value(f"{total:g}")
    with instructor.step(f"the first exercise (cell {solution}) is an Autograded answer, "
                         f"its test (cell {test_cell}) Autograded tests"):
        options = widgets.nth(solution).locator(".nbgrader-CellType select option").all_inner_texts()
        assert [o.strip() for o in options] == CODE_CELL_TYPES, f"the cell type choices are {options}"
        expect(widgets.nth(solution).locator(".nbgrader-CellType select")).to_have_value("solution")
        expect(widgets.nth(solution).locator(".nbgrader-CellId input")).to_have_value(meta[solution]["grade_id"])
        expect(widgets.nth(test_cell).locator(".nbgrader-CellType select")).to_have_value("tests")
        expect(widgets.nth(test_cell).locator(".nbgrader-CellId input")).to_have_value(meta[test_cell]["grade_id"])
        expect(widgets.nth(test_cell).locator(".nbgrader-CellPoints input")).to_have_value(
            f"{meta[test_cell]['points']:g}")
    with instructor.step("show the exercise beside its panel entries"):
        page.locator(".jp-NotebookPanel .jp-Cell").nth(solution).evaluate(
            "(cell) => cell.scrollIntoView({block: 'start'})")
        widgets.nth(solution).evaluate("(w) => w.scrollIntoView({block: 'start'})")
        expect(widgets.nth(solution)).to_be_in_viewport()
        instructor.screenshot()
