"""The class report: per lesson and graded cell, mean score and share of full marks, hardest first,
as a table, a CSV and a PNG, read from a real nbgrader gradebook."""

from __future__ import annotations

from pathlib import Path

import pytest

from utils.scores import CellScore
from utils.scores import read_scores_url
from utils.grading.report import class_stats, report, stats_table

COURSE_ID = "prefill-decode"
# student -> {cell: score}; q_easy max 1, q_mid max 2, q_hard max 4 (lesson 01), q_other max 1 (02)
SCORES = {
    "ann": {"q_easy": 1, "q_mid": 2, "q_hard": 0, "q_other": 1},
    "ben": {"q_easy": 1, "q_mid": 1, "q_hard": 4, "q_other": 1},
    "cat": {"q_easy": 1, "q_mid": 2, "q_hard": 0, "q_other": 0},
    "dan": {"q_easy": 0, "q_mid": 0, "q_hard": 1, "q_other": 0},
}
MAX = {"q_easy": 1, "q_mid": 2, "q_hard": 4, "q_other": 1}
LESSON_OF = {"q_easy": "01_a", "q_mid": "01_a", "q_hard": "01_a", "q_other": "02_b"}


@pytest.fixture
def gradebook_course(tmp_path: Path) -> Path:
    """A course folder whose gradebook.db holds four graded students (made with nbgrader's API)."""
    from nbgrader.api import Gradebook
    from utils.scores import alembic_on_path

    alembic_on_path()
    (tmp_path / "nbgrader_config.py").write_text(
        f"c = get_config()\nc.CourseDirectory.course_id = {COURSE_ID!r}\n")
    with Gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}", COURSE_ID) as gb:
        for lesson in ("01_a", "02_b"):
            gb.add_assignment(lesson)
            gb.add_notebook("nb", lesson)
        for cell, lesson in LESSON_OF.items():
            gb.add_grade_cell(cell, "nb", lesson, max_score=MAX[cell], cell_type="code")
        for student, scores in SCORES.items():
            gb.add_student(student)
            for lesson in ("01_a", "02_b"):
                gb.add_submission(lesson, student)
            for cell, score in scores.items():
                gb.find_grade(cell, "nb", LESSON_OF[cell], student).auto_score = score
        gb.db.commit()
    return tmp_path


def test_stats_hardest_first_with_mean_and_full_marks():
    rows = [CellScore(LESSON_OF[c], s, c, float(v), float(MAX[c])) for s, cells in SCORES.items()
            for c, v in cells.items()]
    stats = class_stats(rows)
    assert [s.cell for s in stats] == ["q_hard", "q_other", "q_mid", "q_easy"]
    hard = stats[0]
    assert hard.lesson == "01_a" and hard.submissions == 4
    assert hard.mean_score == pytest.approx(5 / 4) and hard.mean_share == pytest.approx(5 / 16)
    assert hard.full_marks == pytest.approx(1 / 4)
    mid = stats[2]
    assert mid.mean_share == pytest.approx(5 / 8) and mid.full_marks == pytest.approx(2 / 4)
    table = stats_table(stats)
    assert table.splitlines()[1].startswith("01_a/q_hard")
    assert "31%" in table.splitlines()[1] and "25%" in table.splitlines()[1]


def test_report_from_a_gradebook_writes_table_csv_and_png(gradebook_course: Path):
    rows = read_scores_url(f"sqlite:///{gradebook_course / 'gradebook.db'}", COURSE_ID)
    assert len(rows) == 16
    table, stats, image = report(gradebook_course, out=gradebook_course / "out" / "class.png")
    assert [s.cell for s in stats][0] == "q_hard"
    assert image.exists() and image.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and image.stat().st_size > 5000
    csv_text = image.with_suffix(".csv").read_text().splitlines()
    assert csv_text[0].startswith("lesson,cell,submissions")
    assert csv_text[1].startswith("01_a,q_hard,4,4.0,1.25,0.3125,0.25")
    assert "02_b/q_other" in table


def test_report_of_one_lesson_and_of_an_empty_gradebook(gradebook_course: Path, tmp_path_factory):
    _, stats, _ = report(gradebook_course, ["02_b"], out=gradebook_course / "b.png")
    assert [s.cell for s in stats] == ["q_other"] and stats[0].full_marks == pytest.approx(0.5)
    empty = tmp_path_factory.mktemp("empty")
    table, stats, image = report(empty)
    assert stats == [] and image is None and "no graded submissions" in table
