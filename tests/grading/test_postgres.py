"""The gradebook on a real PostgreSQL server through nbgrader's db_url, for several graders.

The test starts its own server (Debian's postgresql package: initdb and pg_ctl in a temporary data
folder, on a free loopback port, as the postgres user when run as root) and stops it afterwards.
It skips, saying why, where the server binaries or psycopg2 are missing; `make test` installs the
package (utils/system-packages.txt) and psycopg2-binary (requirements-dev.txt).
"""

from __future__ import annotations

import threading
from pathlib import Path

import nbformat
import pytest

from utils.notebooks import submission_from
from utils.processes import nbgrader
from utils.grading.grade_course import grade_lessons
from utils.scores import read_scores_url
from utils.grading.report import report
from utils.classroom.rehearsal import rehearsal_course

pytestmark = pytest.mark.slow
COURSE_ID = "prefill-decode"


def _submit(course: Path, lesson: str, nb_name: str, plans: dict[str, dict]) -> None:
    release = nbformat.read(str(course / "release" / lesson / nb_name), as_version=4)
    source = nbformat.read(str(course / "source" / lesson / nb_name), as_version=4)
    for student, overrides in plans.items():
        folder = course / "submitted" / student / lesson
        folder.mkdir(parents=True, exist_ok=True)
        nbformat.write(submission_from(release, source, overrides), str(folder / nb_name))


def test_gradebook_on_postgres_with_parallel_workers_and_two_graders(postgres_url, tmp_path):
    # The course's nbgrader_config.py names the server; no gradebook.db is written.
    course = rehearsal_course(tmp_path / "course", extra_config=f"\nc.CourseDirectory.db_url = {postgres_url!r}\n")
    assert not (course / "gradebook.db").exists()
    _submit(course, "01_tiny", "tiny.ipynb", {
        "ada": {}, "bo": {"mul": "def mul(a, b):\n    return a + b"},
        "cy": {"add": "import os\nos._exit(3)"}, "di": {}})
    _submit(course, "02_other", "other.ipynb", {"ada": {}, "bo": {"half": "def half(x):\n    return x // 2"}})

    # the schema is created once, before several graders share the server
    run = nbgrader(["db", "upgrade"], cwd=course, check=False)
    rc, log = run.rc, run.log
    assert rc == 0, log[-2000:]

    # two graders at the same time (one lesson each), each with two parallel workers
    runs, errors = {}, []

    def grader(lesson):
        try:
            runs[lesson] = grade_lessons(course, [lesson], workers=2, export=False, quiet=True)
        except Exception as err:  # noqa: BLE001 - reported below
            errors.append(err)

    threads = [threading.Thread(target=grader, args=(lesson,)) for lesson in ("01_tiny", "02_other")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert not (course / "gradebook.db").exists()

    totals: dict[tuple[str, str], float] = {}
    for r in read_scores_url(postgres_url, COURSE_ID):
        totals[(r.lesson, r.student)] = totals.get((r.lesson, r.student), 0.0) + r.score
    assert totals == {("01_tiny", "ada"): 6, ("01_tiny", "bo"): 3, ("01_tiny", "cy"): 4, ("01_tiny", "di"): 6,
                      ("02_other", "ada"): 1, ("02_other", "bo"): 0}
    assert {o.student: o.status for o in runs["01_tiny"].outcomes} == dict.fromkeys(["ada", "bo", "cy", "di"], "graded")
    assert list((course / "feedback" / "bo" / "02_other").glob("*.html"))

    # the class report and the grades export read the same server
    table, stats, image = report(course, out=tmp_path / "report.png")
    assert stats[0].cell == "half_test" and image.exists()
    run = nbgrader(["export", "--to", str(tmp_path / "grades.csv")], cwd=course, check=False)
    rc, log = run.rc, run.log
    assert rc == 0 and "ada" in (tmp_path / "grades.csv").read_text()
