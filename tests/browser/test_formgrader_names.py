"""A student id that carries HTML runs no script in the instructor's formgrader, even where it
reached the gradebook past the course's doors (they refuse it: tests/grading/test_grading_student_ids.py).

nbgrader's formgrade template prints the student id, the student's names and the notebook's path
(also inside a `data-link` attribute) as they are; the course's HTML configuration escapes them
first (utils/grading/steps/safe_html.py, EscapedNames). Here a scratch course's gradebook gets a
student with a hostile id and hostile names directly (as a hand-made gradebook or plain nbgrader
would), her autograded notebook is the release's, and the formgrader's page of that submission is
opened in headless Chromium: no script of hers runs, her names show as text and her id stays
in the link to her notebook."""

from __future__ import annotations

import shutil

import pytest

pytest.importorskip("playwright.sync_api", reason="playwright is not installed: pip install -r requirements-dev.txt")

from browser.conftest import Browsing, start_lab, stop_lab

pytestmark = pytest.mark.browser

LESSON, NB = "01_tiny", "tiny.ipynb"
# no '/' (it names a folder); each part would set a flag of its own if it ran
HOSTILE_ID = 'x"><img src=x onerror=window.ranId=1>'
FIRST = "<img src=x onerror=window.ranFirst=1>"
LAST = "<script>window.ranLast=1</script>"


@pytest.fixture(scope="module")
def formgrader(tmp_path_factory):
    """An instructor's server on a rehearsal course holding the hostile student's submission; the
    submission's id in the gradebook."""
    from nbgrader.api import Gradebook

    from utils.classroom.rehearsal import rehearsal_course
    from utils.grading.settings import course_settings

    base = tmp_path_factory.mktemp("hostile-names")
    root = rehearsal_course(base / "course")
    settings = course_settings(root)
    with Gradebook(settings.db_url, settings.course_id) as gb:
        gb.add_student(HOSTILE_ID, first_name=FIRST, last_name=LAST)
        gb.add_submission(LESSON, HOSTILE_ID)
        submission_id = gb.find_submission_notebook(NB[:-6], LESSON, HOSTILE_ID).id
    folder = root / "autograded" / HOSTILE_ID / LESSON
    folder.mkdir(parents=True)
    shutil.copy(root / "release" / LESSON / NB, folder / NB)
    (base / "exchange").mkdir()
    server = start_lab(base, root, f"c.Exchange.root = {str(base / 'exchange')!r}\n")
    yield server, submission_id
    stop_lab(server.proc)


def test_a_hostile_student_id_runs_no_script_in_the_formgraders_page(formgrader, page, request):
    server, submission_id = formgrader
    walk = Browsing(page, server, request.node.name)
    with walk.step("open the formgrader's page of the hostile student's submission"):
        page.goto(f"{server.url}/formgrader/submissions/{submission_id}/?token={server.token}",
                  wait_until="load")
        page.wait_for_selector("#notebook-container, .cell, body", state="attached")
        page.wait_for_timeout(1000)   # an image error handler runs once the broken image fails to load
    with walk.step("no script of the student's ran"):
        ran = page.evaluate("[window.ranId, window.ranFirst, window.ranLast]")
        assert ran == [None, None, None], f"the student's script ran in the formgrader: {ran}"
    with walk.step("her id and names are text of the page (shown when the instructor shows names)"):
        shown = page.locator("a.name-shown")
        assert shown.text_content().strip() == f"{LAST}, {FIRST}", shown.text_content()
        assert HOSTILE_ID in (shown.get_attribute("href") or ""), shown.get_attribute("href")
        assert page.locator("img[onerror]").count() == 0
        walk.screenshot()
