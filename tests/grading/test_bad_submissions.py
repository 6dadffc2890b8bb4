"""Bad submissions: each gets a fair grade, the others are graded normally, nothing in submitted/
changes, and the grade command says what happened.

One scratch course (utils.classroom.rehearsal.rehearsal_course: lessons 01_tiny and 02_other) holds every fabricated
submission; it is graded once (two workers, 8 s per cell) and each test reads its student.
Lesson 01_tiny: add_test 2 points, mul_test 3, sub_test 1 (6 in all).
"""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import nbformat
import pytest

from helpers import digest
from steps_common import JPEG, PNG, SVG
from utils.notebooks import nbgrader_meta, submission_from
from utils.grading.grade_course import grade, grade_lessons
from utils.grading.submissions import preflight
from utils.classroom.rehearsal import rehearsal_course

pytestmark = pytest.mark.slow
LESSON, NB = "01_tiny", "tiny.ipynb"
# Per-cell limit while grading: far above what the correct cells need even on a loaded machine
# (the gigantic-output cell included), short enough to keep the endless loops cheap.
CELL_TIMEOUT = 8

LOOP = "def mul(a, b):\n    while True:\n        pass"
# ignores the interrupt: the kernel must be replaced
LOOP_NO_INTERRUPT = ("import signal\ndef mul(a, b):\n    signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                     "    while True:\n        pass")
WARNS = "import warnings\ndef mul(a, b):\n    warnings.warn('this API is deprecated', DeprecationWarning)\n" \
        "    warnings.warn('precision may be lost')\n    return a * b"
WARNS_WRONG = "import warnings\ndef mul(a, b):\n    warnings.warn('precision may be lost')\n    return a + b"
HOSTILE_ID = 'x"><img src=x onerror=alert(1)>'   # markup in the formgrader's page, before the id rule
GIGANTIC = "print('x' * 20_000_000)\nfor i in range(3000):\n    print(i)\ndef add(a, b):\n    return a + b"


def _cells_by_id(nb) -> dict:
    return {nbgrader_meta(c).get("grade_id"): c for c in nb.cells if nbgrader_meta(c).get("grade_id")}


MIME = "application/vnd.course.observation+json"
# 25 MB of HTML in its own cell; its functions are right
OUTPUT_FLOOD = ("from IPython.display import HTML, display\nfor i in range(400):\n"
                "    display(HTML('<b>' + 'x' * 64000 + '</b>'))\ndef add(a, b):\n    return a + b")
# while add_test runs: an observation nested deeper than any parser goes, and one beyond any float
OBSERVATION_BOMB = ("from IPython.display import display\ndef add(a, b):\n"
                    f"    display({{{MIME!r}: '{{\"label\": \"x\", \"rule\": \"exact\", \"value\": ' + '[' * 200000 + ']' * 200000 + '}}'}}, raw=True)\n"
                    f"    display({{{MIME!r}: {{'label': 'add(1, 2)', 'rule': 'exact', 'value': 10 ** 400}}}}, raw=True)\n"
                    "    return a + b")
# an ungraded cell, after the graded ones ran, prints every input the kernel saw (hidden tests too)
HIDDEN_PRINTER = "def sub(a, b):\n    return a - b\nprint('\\n'.join(In))\nprint(_ih[-2])"


def hostile(sub) -> dict[str, object]:
    """Submissions that attack the grader's reading of the notebook, not the kernel."""
    subs: dict[str, object] = {"output_flood": sub(add=OUTPUT_FLOOD), "observation_bomb": sub(add=OBSERVATION_BOMB),
                               "hidden_printer": sub(sub=HIDDEN_PRINTER)}
    nb = json.loads(nbformat.writes(sub()))   # what nbformat reads without complaint
    cells = {c["metadata"].get("nbgrader", {}).get("grade_id"): c for c in nb["cells"]}
    cells["add"]["metadata"]["nbgrader"] = ["not", "a", "dict"]
    cells["add_test"]["metadata"]["nbgrader"] = "a string"
    cells["sub"]["metadata"]["nbgrader"]["points"] = "Infinity"
    cells["intro"]["source"] = 42
    nb["cells"].append({"cell_type": "code", "metadata": {"nbgrader": {"grade": True, "grade_id": {"a": 1},
                        "points": 1e308}}, "source": "print('extra')", "outputs": [], "execution_count": None})
    subs["metadata_not_dict"] = json.dumps(nb).encode()
    nb = json.loads(nbformat.writes(sub()))   # what nbformat cannot read
    nb["metadata"] = ["not", "a", "dict"]
    nb["cells"] += [7, {"cell_type": "bogus", "source": "x"}]
    subs["cells_not_cells"] = json.dumps(nb).encode()
    return subs


def _submissions(course: Path) -> dict[str, object]:
    """{student: notebook node, or raw bytes, or a callable(folder) that writes the folder}."""
    release = nbformat.read(str(course / "release" / LESSON / NB), as_version=4)
    source = nbformat.read(str(course / "source" / LESSON / NB), as_version=4)

    def sub(**overrides):
        return submission_from(release, source, overrides)

    subs: dict[str, object] = {
        "good_a": sub(), "good_b": sub(),
        "loop": sub(mul=LOOP),
        "loop_ignores_interrupt": sub(mul=LOOP_NO_INTERRUPT),
        "os_exit": sub(mul="import os\nos._exit(1)"),
        "sys_exit": sub(mul="import sys\nsys.exit(1)"),
        "warns": sub(mul=WARNS),
        "warns_wrong": sub(mul=WARNS_WRONG),
        "gigantic": sub(add=GIGANTIC),
    }
    nb = sub()
    nb.cells = [c for c in nb.cells if nbgrader_meta(c).get("grade_id") != "add_test"]
    subs["deleted_test"] = nb

    nb = sub(mul="def mul(a, b):\n    return a + b")
    _cells_by_id(nb)["mul_test"].source = "pass  # tests are for other people"
    _cells_by_id(nb)["mul_test"].metadata["nbgrader"]["points"] = 30
    subs["edited_test"] = nb

    nb = sub(add="def add(a, b):\n    return a - b")
    copied = copy.deepcopy(_cells_by_id(nb)["add"])
    copied.source = "def add(a, b):\n    return a + b"
    index = nb.cells.index(_cells_by_id(nb)["add_test"])
    nb.cells.insert(index, copied)                      # a copy of the solution cell, same grade id
    test_copy = copy.deepcopy(_cells_by_id(nb)["sub_test"])
    nb.cells.insert(1, test_copy)                       # and a copied test cell, run before sub exists
    subs["duplicate_ids"] = nb

    subs.update(hostile(sub))

    nb = sub()   # images pasted into a Markdown cell (JupyterLab saves them as the cell's attachments)
    nb.cells.insert(1, nbformat.from_dict({
        "cell_type": "markdown", "id": "pasted", "metadata": {},
        "source": "My sketch: ![png](attachment:image.png) ![jpeg](attachment:photo.jpg) ![svg](attachment:drawing.svg)",
        "attachments": {"image.png": {"image/png": PNG}, "photo.jpg": {"image/jpeg": JPEG},
                        "drawing.svg": {"image/svg+xml": SVG}}}))
    subs["pasted_images"] = nb

    good_text = nbformat.writes(sub())
    subs["corrupt"] = good_text[: len(good_text) // 2].encode()
    subs["missing"] = lambda folder: (folder / "notes.txt").write_text("I could not finish, sorry")
    other_release = (course / "release" / "02_other" / "other.ipynb").read_bytes()
    subs["other_lesson"] = lambda folder: (folder / "other.ipynb").write_bytes(other_release)
    subs["other_lesson_renamed"] = other_release
    return subs


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    course = rehearsal_course(tmp_path_factory.mktemp("bad") / "course",
                     extra_config="\nc.SafeExecute.probe_timeout = 5\n")
    for student, what in _submissions(course).items():
        folder = course / "submitted" / student / LESSON
        folder.mkdir(parents=True)
        (folder / "timestamp.txt").write_text("2030-01-01 10:00:00.000000 UTC")
        if callable(what):
            what(folder)
        elif isinstance(what, bytes):
            (folder / NB).write_bytes(what)
        else:
            nbformat.write(what, str(folder / NB))
    # a page of the student's own beside the notebook: never taken for the feedback
    (course / "submitted" / "good_b" / LESSON / "feedback.html").write_text("<script>alert('forged')</script>")
    # folders that are links: to another student's submission, a whole student's folder
    (course / "submitted" / "linked").mkdir()
    (course / "submitted" / "linked" / LESSON).symlink_to(course / "submitted" / "good_a" / LESSON)
    (course / "submitted" / "linked_student").symlink_to(course / "submitted" / "good_b")
    # a student id nbgrader would read as a pattern (matching every other student), and one of markup
    shutil.copytree(course / "submitted" / "good_a", course / "submitted" / "pattern*")
    shutil.copytree(course / "submitted" / "good_a", course / "submitted" / HOSTILE_ID)
    before = digest(course / "submitted")
    run = grade_lessons(course, [LESSON], workers=2, cell_timeout=CELL_TIMEOUT)
    outcomes = {o.student: o for o in run.outcomes}
    return course, run, outcomes, before


def _cells(course: Path, student: str) -> dict[str, float]:
    from utils.scores import read_scores_url
    from utils.grading.settings import course_settings

    s = course_settings(course)
    return {r.cell: r.score for r in read_scores_url(s.db_url, s.course_id, [LESSON]) if r.student == student}


def _notes(outcome) -> str:
    return " | ".join(outcome.notes)


def test_submitted_files_are_byte_identical_after_grading(graded):
    course, _, _, before = graded
    assert digest(course / "submitted") == before


def test_every_submission_has_an_outcome_and_good_ones_get_full_marks(graded):
    course, run, outcomes, _ = graded
    assert set(outcomes) == {p.name for p in (course / "submitted").iterdir()}
    for student in ("good_a", "good_b"):
        assert outcomes[student].status == "graded"
        assert (outcomes[student].score, outcomes[student].max_score) == (6, 6), outcomes[student].line()
        assert outcomes[student].notes == []
        assert [p.name for p in (course / "feedback" / student / LESSON).glob("*.html")] == ["tiny.html"]


WRONG_MUL = {"add_test": 2, "mul_test": 0, "sub_test": 1}
FULL = {"add_test": 2, "mul_test": 3, "sub_test": 1}


@pytest.mark.parametrize("student, cells, notes", [
    ("loop", WRONG_MUL, [f"ran past the {CELL_TIMEOUT} s limit"]),
    ("loop_ignores_interrupt", WRONG_MUL, ["ignored the interrupt", "fresh kernel"]),
    ("os_exit", WRONG_MUL, ["kernel died in cell 'mul'"]),   # the kernel dies, the other cells keep their points
    ("sys_exit", WRONG_MUL, []),                             # an error in that cell only
    ("deleted_test", FULL, ["test cell 'add_test' was deleted"]),   # restored and graded
    ("edited_test", WRONG_MUL, ["locked cell 'mul_test' was edited"]),   # restored with its points
    # the last copy of 'add' (correct) is the graded one; the copied test cell counts nothing
    ("duplicate_ids", FULL, ["'add' appears 2 times", "'sub_test' appears 2 times"]),
    ("warns", FULL, []),             # warnings on stderr cost a correct answer nothing
    ("warns_wrong", WRONG_MUL, []),  # and do not rescue a wrong one
    ("gigantic", FULL, ["output was cut"]),
])
def test_a_bad_submission_loses_only_its_own_cells_and_says_why(graded, student, cells, notes):
    course, _, outcomes, _ = graded
    o = outcomes[student]
    assert _cells(course, student) == cells, o.line()
    assert o.status == "graded" and (o.score, o.max_score) == (sum(cells.values()), 6), o.line()
    for note in notes:
        assert note in _notes(o), o.line()


def test_images_pasted_into_markdown_give_a_whole_feedback_page_with_no_script(graded):
    course, _, outcomes, _ = graded
    o = outcomes["pasted_images"]
    assert o.status == "graded" and (o.score, o.max_score) == (6, 6), o.line()
    html = (course / "feedback" / "pasted_images" / LESSON / "tiny.html").read_text()
    assert f"data:image/png;base64,{PNG}" in html and f"data:image/jpeg;base64,{JPEG}" in html
    assert SVG not in html and "alert(" not in html and 'alt="svg"' in html


def test_warnings_leave_only_the_graders_verdict_in_the_graded_cell(graded):
    course, _, _, _ = graded
    # the graded cell keeps only the grader's verdict (nbgrader zeroes a cell with stderr output)
    autograded = nbformat.read(str(course / "autograded" / "warns" / LESSON / NB), as_version=4)
    outputs = _cells_by_id(autograded)["mul_test"].outputs
    assert [(o.output_type, o.get("name")) for o in outputs] == [("stream", "stdout")]
    assert outputs[0].text.startswith("✔ all 2 checks match the reference solution")


def test_gigantic_output_is_cut_in_autograded_and_feedback(graded):
    course, _, _, _ = graded
    assert (course / "autograded" / "gigantic" / LESSON / NB).stat().st_size < 1_000_000
    html = next((course / "feedback" / "gigantic" / LESSON).glob("*.html"))
    assert html.stat().st_size < 2_000_000


@pytest.mark.parametrize("student, reason", [
    ("corrupt", "is not a readable notebook"),
    ("missing", "no tiny.ipynb in the submission (found: notes.txt)"),
    ("other_lesson", "submitted other.ipynb, the notebook of lesson 02_other"),
    ("other_lesson_renamed", "holds the notebook of lesson 02_other"),
    ("linked", "submitted/linked/01_tiny is a symbolic link; only regular folders are graded"),
    ("linked_student", "submitted/linked_student is a symbolic link"),
])
def test_unusable_notebook_scores_zero_with_the_reason(graded, student, reason):
    course, _, outcomes, _ = graded
    o = outcomes[student]
    assert o.status == "zero" and reason in o.reason, o.line()
    assert _cells(course, student) == {"add_test": 0, "mul_test": 0, "sub_test": 0}
    assert not (course / "autograded" / student / LESSON).exists()


@pytest.mark.parametrize("student, reason", [
    ("pattern*", "holds a character nbgrader reads as a pattern (*)"),
    (HOSTILE_ID, "holds ' ' '\"' '(' ')' '<' '=' '>'"),
])
def test_an_id_the_course_does_not_take_in_scores_zero_and_is_never_recorded(graded, student, reason):
    """utils/grading/student_id.py: nothing is graded or written under that name (the gradebook,
    autograded/, feedback/); the instructor's report says why and what to do."""
    course, _, outcomes, _ = graded
    o = outcomes[student]
    assert o.status == "zero" and reason in o.reason and "rename the folder under submitted/" in o.reason, o.line()
    assert _cells(course, student) == {}
    assert not (course / "autograded" / student).exists() and not (course / "feedback" / student).exists()


def test_grade_command_reports_each_problem_and_a_failed_export(graded, capsys):
    """grade() is what utils.authoring.demo and the CLI call: (table, problems); grading again is idempotent.
    The course's grades.csv is a folder this time, which nbgrader export cannot write: the command
    names that failure among its problems (one grading run for both)."""
    course, run, outcomes, _ = graded
    shutil.rmtree(course / "submitted" / "loop_ignores_interrupt")
    for s in [p.name for p in (course / "submitted").iterdir()]:
        if s not in ("good_a", "corrupt", "missing"):
            folder = course / "submitted" / s
            folder.unlink() if folder.is_symlink() else shutil.rmtree(folder)
    (course / "grades.csv").unlink(missing_ok=True)
    (course / "grades.csv").mkdir()          # nbgrader export cannot write it
    table, problems = grade(course, [LESSON], workers=1, cell_timeout=CELL_TIMEOUT)
    printed = capsys.readouterr().out
    assert "good_a: 6/6" in printed and "corrupt: 0/6  ZERO" in printed
    scored_zero = [p for p in problems if "scored 0" in p]
    assert len(scored_zero) == 2, problems
    assert [p for p in problems if p not in scored_zero and "export failed" in p], problems
    assert len(problems) == 3, problems
    assert "01_tiny/add_test" in table and "good_a" in table


def test_preflight_needs_no_grading(graded):
    course, *_ = graded
    assert preflight(course, LESSON, "good_a").status == "pending"


# --- a notebook is hostile data: every step that reads it survives it ------------------------------

def test_metadata_of_any_type_costs_at_most_its_own_cells(graded):
    course, _, outcomes, _ = graded
    o = outcomes["metadata_not_dict"]
    assert o.status == "graded", o.line()
    # its `add` cell lost its role, so the restored add_test runs before it: that cell only scores 0
    assert _cells(course, "metadata_not_dict") == {"add_test": 0, "mul_test": 3, "sub_test": 1}, o.line()
    o = outcomes["cells_not_cells"]
    assert o.status == "zero" and "is not a readable notebook" in o.reason and "\n" not in o.reason, o.line()
    for student in ("good_a", "good_b"):
        assert _cells(course, student) == {"add_test": 2, "mul_test": 3, "sub_test": 1}


def test_a_flood_of_outputs_is_bounded_in_autograded_and_feedback(graded):
    course, _, outcomes, _ = graded
    o = outcomes["output_flood"]
    assert _cells(course, "output_flood") == {"add_test": 2, "mul_test": 3, "sub_test": 1}, o.line()
    assert "output was cut" in _notes(o)
    assert (course / "autograded" / "output_flood" / LESSON / NB).stat().st_size < 5_000_000
    html = next((course / "feedback" / "output_flood" / LESSON).glob("*.html"))
    assert html.stat().st_size < 1_000_000


def test_an_unreadable_observation_fails_its_cell_only(graded):
    course, _, outcomes, _ = graded
    o = outcomes["observation_bomb"]
    assert _cells(course, "observation_bomb") == {"add_test": 0, "mul_test": 3, "sub_test": 1}, o.line()
    assert "cannot read" in o.verdicts["add_test"][1], o.verdicts


def test_hidden_tests_printed_by_any_cell_never_reach_the_feedback(graded):
    course, _, outcomes, _ = graded
    assert _cells(course, "hidden_printer") == {"add_test": 2, "mul_test": 3, "sub_test": 1}
    nb = nbformat.read(str(course / "autograded" / "hidden_printer" / LESSON / NB), as_version=4)
    printed = json.dumps(_cells_by_id(nb)["sub"].outputs)
    assert "HIDDEN-CHECK-ADD" in printed   # the attack worked in the kernel: the instructor sees it
    for student in ("hidden_printer", "good_a"):
        html = next((course / "feedback" / student / LESSON).glob("*.html")).read_text()
        assert "HIDDEN-CHECK" not in html and "add(-5, 7)" not in html and "mul(4, 5)" not in html
