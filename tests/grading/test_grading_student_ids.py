"""One rule for student ids (utils/grading/student_id.py), asked at every door an id comes through:
collect from the exchange, grading, the LMS zip import and the roster import each refuse an id that
is not plain, naming why, and take a plain one (the control). No nbgrader process, no kernel: each
door's own check on its own. The formgrader's second guard is tests/browser/test_formgrader_names.py;
a whole grading with such ids, test_bad_submissions.py."""

from __future__ import annotations

import pytest

from utils.classroom import roster as roster_module
from utils.classroom import workflow
from utils.errors import ToolError
from utils.grading.student_id import id_problem
from utils.grading.submissions import preflight

LESSON, NB, COURSE_ID = "01_tiny", "tiny.ipynb", "prefill-decode"
TS = "2026-12-01 10:00:00.000000 UTC"
HOSTILE = ['x"><img src=x onerror=alert(1)>', "<script>alert(1)</script>", "a b", "pattern*", "al[ic]e",
           "..", ".hidden", "-rf", "a+b", "caf\u00e9", "\u0430lice", "tab\there", "nl\nhere", "", "x" * 65]
PLAIN = ["alice", "Bob_2", "a.b@example.org", "_x", "s-123", "x" * 64]


@pytest.mark.parametrize("student", HOSTILE)
def test_an_id_that_is_not_plain_is_refused_with_a_reason(student):
    why = id_problem(student)
    assert why and "student id" in why and "\n" not in why, why


@pytest.mark.parametrize("student", PLAIN)
def test_a_plain_id_is_taken(student):
    assert id_problem(student) is None


def test_grading_refuses_the_id_before_reading_the_submission_and_records_nothing(tmp_path):
    known = {LESSON: (NB, {"add"})}
    for student in ('x"><img src=x onerror=alert(1)>', "pattern*"):
        (tmp_path / "submitted" / student / LESSON).mkdir(parents=True)
        out = preflight(tmp_path, LESSON, student, known)
        assert out.status == "zero" and out.refused_id, out
        assert "student id" in out.reason and "rename the folder under submitted/" in out.reason, out.reason
    (tmp_path / "submitted" / "alice" / LESSON).mkdir(parents=True)   # the control: a plain id is read
    out = preflight(tmp_path, LESSON, "alice", known)
    assert not out.refused_id and "student id" not in out.reason, out


def _collector(root):
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config import Config

    cfg = Config()
    cfg.OwnerCheckedCollect.check_owner = False
    coursedir = CourseDirectory(root=str(root), course_id=COURSE_ID, assignment_id=LESSON, config=cfg)
    return workflow.OwnerCheckedCollect(coursedir=coursedir, config=cfg)


def test_collect_refuses_a_submission_named_for_an_id_that_is_not_plain(tmp_path):
    c = _collector(tmp_path)
    for student in ('x"><img src=x onerror=alert(1)>', "\u0430lice"):   # markup; a Cyrillic look-alike
        assert c._record(str(tmp_path / f"{student}+{LESSON}+{TS}+abcdefghijkl")) is None
    notes = (tmp_path / "refused" / f"{LESSON}.txt").read_text().splitlines()
    assert len(notes) == 2 and all("student id" in n and "not collected" in n for n in notes), notes
    assert c._record(str(tmp_path / f"alice+{LESSON}+{TS}+abcdefghijkl"))["username"] == "alice"


def test_the_zip_import_skips_a_file_whose_id_is_not_plain():
    collector = workflow.IdCheckedCollector(named_regexp=workflow.LMS_REGEXP)
    assert collector.collect('/d/x"><img src=x onerror=alert(1)>_1001_5001_tiny.ipynb') is None
    assert collector.collect("/d/carol_1001_5001_tiny.ipynb")["student_id"] == "carol"


def test_the_roster_is_refused_whole_naming_each_id_that_is_not_plain(tmp_path, monkeypatch):
    ran = []
    monkeypatch.setattr(roster_module, "in_course", lambda args, root, exchange=None: ran.append(args))
    roster = tmp_path / "students.csv"
    roster.write_text('id,first_name,last_name,email\nalice,A,A,a@x.org\n"x""><img src=x onerror=alert(1)>",B,B,\n'
                      "pattern*,C,C,\n")
    with pytest.raises(ToolError) as err:
        roster_module.import_roster(tmp_path, roster)
    assert "nothing imported" in str(err.value) and "line 3:" in str(err.value) and "line 4:" in str(err.value)
    assert ran == []
    roster.write_text("id,first_name,last_name,email\nalice,A,A,a@x.org\n")   # the control
    roster_module.import_roster(tmp_path, roster)
    assert ran and ran[0][:3] == ["db", "student", "import"]
