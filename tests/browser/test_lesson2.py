"""Lesson 2 in JupyterLab: with every answer filled in, Run All runs every cell without an error,
the batch sweep and the roofline render as images, no cell shows a stray `Out[..]: True`, and a
screenshot of the roofline is kept (artifacts/browser/) to look at its labels.

The released lesson is served from its own JupyterLab; its solution cells are filled with the
reference answers from source/ (markers stripped) before it is opened.
"""

from __future__ import annotations

import shutil

import nbformat
import pytest

pytest.importorskip("playwright.sync_api", reason="playwright is not installed: pip install -r requirements-dev.txt")
from playwright.sync_api import expect

from .conftest import NB_PANEL, RUN_FINISHED_JS, Browsing, open_notebook, start_lab, stop_lab

pytestmark = pytest.mark.browser

LESSON = "02_arithmetic_intensity"
RUN_ALL_TIMEOUT_MS = 180_000  # the lesson runs in seconds; a loaded 2-core machine is slower


def fill_answers(release_nb, source_nb) -> dict[str, int]:
    """Put the reference answer in every solution cell of `release_nb`; return cell index by grade_id."""
    from utils.notebooks import nbgrader_meta, strip_markers

    reference = {nbgrader_meta(c)["grade_id"]: strip_markers(c.source)
                 for c in nbformat.read(str(source_nb), as_version=4).cells if nbgrader_meta(c).get("solution")}
    nb = nbformat.read(str(release_nb), as_version=4)
    index = {}
    for i, cell in enumerate(nb.cells):
        gid = nbgrader_meta(cell).get("grade_id")
        if gid:
            index[gid] = i
        if nbgrader_meta(cell).get("solution"):
            cell.source = reference[gid]
    nbformat.write(nb, str(release_nb))
    return index


@pytest.fixture(scope="module")
def lesson2_lab(course_copy, tmp_path_factory):
    """A student's JupyterLab whose home folder holds the released lesson 2."""
    course_root, _ = course_copy
    base = tmp_path_factory.mktemp("lesson2")
    (base / "exchange").mkdir()
    home = base / "work"
    shutil.copytree(course_root / "release" / LESSON, home / LESSON)
    server = start_lab(base, home, f"c.Exchange.root = {str(base / 'exchange')!r}\n")
    yield server
    stop_lab(server.proc)


def test_lesson_2_runs_and_draws_a_readable_roofline(chromium, lesson2_lab, page, request, course_copy):
    course_root, _ = course_copy
    student = Browsing(page, lesson2_lab, request.node.name)
    name = next((course_root / "source" / LESSON).glob("*.ipynb")).name
    nb_rel = f"{LESSON}/{name}"

    with student.step("fill every solution cell of the released lesson with the reference answer"):
        index = fill_answers(lesson2_lab.root / nb_rel, course_root / "source" / LESSON / name)

    with student.step(f"open {nb_rel} and wait for an idle kernel"):
        open_notebook(student, nb_rel)

    cells = page.locator(f"{NB_PANEL} .jp-Notebook .jp-Cell")
    with student.step("Run > Run All Cells"):
        page.locator(f"{NB_PANEL} .jp-Notebook").click()
        page.keyboard.press("Escape")
        student.menu("Run", "Run All Cells")
        page.wait_for_function(RUN_FINISHED_JS, arg=NB_PANEL, timeout=RUN_ALL_TIMEOUT_MS, polling=500)

    with student.step("every code cell ran without an error"):
        tracebacks = [t for t in page.locator(
            f"{NB_PANEL} .jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']").all_inner_texts()
            if "Traceback" in t]
        assert not tracebacks, f"first error:\n{tracebacks[0][-1500:]}"

    with student.step("no cell shows a stray Out[..]: True or False"):
        results = page.locator(f"{NB_PANEL} .jp-OutputArea-executeResult").all_inner_texts()
        stray = [r for r in results if r.strip() in ("True", "False")]
        assert not stray, f"{len(stray)} cells end in a bare comparison: {stray}"

    for gid in ("sweep", "roofline_demo"):
        with student.step(f"the {gid} figure is rendered as an image"):
            image = cells.nth(index[gid]).locator(".jp-OutputArea-output[data-mime-type='image/png'] img")
            expect(image).to_have_count(1)
            width, height = image.evaluate("(img) => [img.naturalWidth, img.naturalHeight]")
            assert width > 400 and height > 250, f"the {gid} image is {width}x{height} pixels"

    with student.step("keep a screenshot of the roofline"):
        image = cells.nth(index["roofline_demo"]).locator(".jp-OutputArea-output[data-mime-type='image/png'] img")
        image.evaluate("(img) => img.scrollIntoView({block: 'center'})")
        expect(image).to_be_in_viewport()
        student.screenshot(f"{student.test_name}-roofline")
