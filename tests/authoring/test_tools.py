"""The instructor tools on a small fabricated lesson: the check must catch what it promises."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from conftest import SYNTH, make_course, synthetic_cells
from utils.authoring import nbauthor as nb
from utils.authoring.check import REFERENCE, RELEASE, check_lesson, leaks, secret_lines
from utils.errors import ToolError
from utils.lessons import resolve_lessons
from utils.notebooks import strip_markers, submission_from
from utils.scores import score_table, CellScore

pytestmark = pytest.mark.slow


UNREACHABLE_POSTGRES = "postgresql+psycopg2://grader:secret@127.0.0.1:9/never"


def with_unreachable_postgres(root: Path) -> Path:
    """The course's nbgrader_config.py names a PostgreSQL gradebook that any use would fail on."""
    (root / "gradebook.db").unlink()
    with open(root / "nbgrader_config.py", "a") as f:
        f.write(f"\nc.CourseDirectory.db_url = {UNREACHABLE_POSTGRES!r}\n")
    return root


def test_check_passes_a_sound_lesson(synthetic_course):
    """In a scratch course with its own SQLite gradebook: with an unreachable PostgreSQL db_url in
    the course's config the check still succeeds and writes no gradebook.db beside it."""
    with_unreachable_postgres(synthetic_course)
    result = check_lesson(synthetic_course, SYNTH)
    assert result.problems == []
    assert result.total(REFERENCE) == (3, 3)
    assert result.total(RELEASE) == (0, 3)
    assert not (synthetic_course / "gradebook.db").exists()


def test_check_names_each_broken_cell(tmp_path):
    root = make_course(tmp_path / "c", synthetic_cells())
    # After the release was built, make the square test one that cannot fail (it observes a
    # constant, so the untouched release passes it): release/ is now stale too.
    cells = synthetic_cells(test_body="### BEGIN HIDDEN TESTS\nfrom course.observe import observe\n"
                                      "observe('one', 1)\n### END HIDDEN TESTS")
    nb.write(root / "source" / SYNTH / "synthetic.ipynb", cells)
    problems = "\n".join(check_lesson(root, SYNTH).problems)
    assert "'square_test' passes on the untouched release" in problems
    assert f"release/{SYNTH} differs from a fresh build" in problems


def test_check_refuses_a_reference_that_cannot_be_graded_against(tmp_path):
    root = make_course(tmp_path / "c", synthetic_cells())
    cells = synthetic_cells(
        # a test that observes only what the student already sees (its visible literal)...
        test_body="check_close('square(3)', square(3), 9.0)",
        # ...and a quiz test that raises even on the reference
        quiz_hidden="\n### BEGIN HIDDEN TESTS\nassert q1 == 'a'\n### END HIDDEN TESTS",
    )
    nb.write(root / "source" / SYNTH / "synthetic.ipynb", cells)
    problems = "\n".join(check_lesson(root, SYNTH).problems)
    assert "graded cell 'square_test' observes nothing hidden" in problems
    assert "graded cell 'quiz_q1_test' raised AssertionError" in problems


def test_leak_scan_finds_solution_and_hidden_lines(synthetic_course):
    assert leaks(synthetic_course, SYNTH) == []
    (synthetic_course / "course" / "answers.py").write_text(
        "def square(x):\n    return x * x\n\nobserve('square(1.5)', square(1.5))\n")
    found = "\n".join(leaks(synthetic_course, SYNTH))
    assert "course/answers.py (line 4)" in found and "'square_test'" in found
    # a 12-character line like 'return x * x' counts; shorter ones are too generic to search for
    assert "(line 2)" in found


def test_secret_lines_skip_what_students_see_anyway():
    cells = synthetic_cells()
    cells.insert(1, nb.md("In the text we show `if x != x:` on purpose."))
    cells.insert(1, nb.code("if x != x:"))
    secret, public = secret_lines(nb.notebook(cells))
    assert "if x != x:" not in secret
    assert "raise ValueError('x is NaN')" in secret


def test_submission_from_fills_reference_and_rejects_unknown_cells(synthetic_course):
    src = nbformat.read(str(synthetic_course / "source" / SYNTH / "synthetic.ipynb"), as_version=4)
    rel = nbformat.read(str(synthetic_course / "release" / SYNTH / "synthetic.ipynb"), as_version=4)
    sub = submission_from(rel, src, {"quiz_q1": "q1 = 'a'"})
    sources = {c.metadata["nbgrader"]["grade_id"]: c.source for c in sub.cells if "nbgrader" in c.metadata}
    assert sources["quiz_q1"] == "q1 = 'a'"
    assert "BEGIN SOLUTION" not in sources["square"] and "return x * x" in sources["square"]
    with pytest.raises(ToolError, match="no solution cell named sqaure"):
        submission_from(rel, src, {"sqaure": "pass"})


def test_strip_markers():
    assert strip_markers("a\n    ### BEGIN SOLUTION\nb\n### END SOLUTION") == "a\nb"


def test_unknown_lesson_is_named(synthetic_course):
    with pytest.raises(ToolError, match="99_nope"):
        resolve_lessons(["99_nope"], synthetic_course)


def test_score_table_has_cells_down_and_students_across():
    rows = [CellScore("L", "ann", "c1", 1, 2), CellScore("L", "bob", "c1", 2, 2)]
    table = score_table(rows)
    assert "ann" in table.splitlines()[0] and "L/c1" in table and "L TOTAL" in table and "2/2" in table


def test_a_postgresql_gradebook_named_by_the_course_is_never_touched(tmp_path):
    """build and demo work in scratch courses with their own SQLite gradebook (the check's is
    test_check_passes_a_sound_lesson): with an unreachable PostgreSQL db_url in the course's
    nbgrader_config.py they still succeed (any attempt to use it would fail) and write no
    gradebook.db beside it either."""
    from utils.authoring.build import build
    from utils.authoring.demo import REFERENCE as DEMO_REFERENCE, run as demo

    root = with_unreachable_postgres(make_course(tmp_path / "c", synthetic_cells()))
    assert build(root, [SYNTH]) == [SYNTH]
    scratch, table, problems = demo(root, build_release=False)
    assert problems == [] and DEMO_REFERENCE in table
    assert not (root / "gradebook.db").exists() and not (root / "submitted").exists()
