"""The result file of a graded notebook (utils/grading/result_file.py): written by the last autograde
step (WriteResult) from the verdicts, the notes and the score nbgrader saved, or with the reason by
the step that failed (recording_failure); read back by the runners as plain data (WorkDone), and
the gradebook template each grading run starts from, copied faithfully from the course's."""

from __future__ import annotations

import json
import pickle

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook
from nbgrader.api import Gradebook
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets.config import Config

from utils.lessons import REPO
from utils.processes import nbgrader
from utils.scratch import scratch_course
from utils.grading.gradebook import lesson_template
from utils.grading.pipeline import stamp_gradebooks_in_process
from utils.grading.result_file import graded, read_result, result_path, verdicts
from utils.grading.settings import CourseSettings
from utils.grading.steps.base import add_note
from utils.grading.steps.execute import BUDGET_KEY
from utils.grading.steps.write_result import WriteResult, recording_failure
from utils.grading.steps.verdicts import VERDICTS_KEY
from utils.grading.work import WorkDone


def _course(tmp_path):
    """A course folder whose gradebook holds lesson 'L' (notebook 'nb': two graded cells, 2 + 1
    points) and a submission of 'ann' with 2 of them."""
    stamp_gradebooks_in_process()   # no `alembic` subprocess
    root = tmp_path / "course"
    root.mkdir()
    url = f"sqlite:///{root / 'gradebook.db'}"
    with Gradebook(url, "c") as gb:
        gb.add_assignment("L")
        gb.add_notebook("nb", "L")
        gb.add_grade_cell("a_test", "nb", "L", max_score=2, cell_type="code")
        gb.add_grade_cell("b_test", "nb", "L", max_score=1, cell_type="code")
        gb.add_student("ann")
        gb.add_submission("L", "ann")
        gb.find_grade("a_test", "nb", "L", "ann").auto_score = 2
        gb.find_grade("b_test", "nb", "L", "ann").auto_score = 0
        gb.db.commit()
    config = Config()
    config.CourseDirectory.root = str(root)
    resources = {"nbgrader": {"assignment": "L", "student": "ann", "notebook": "nb", "db_url": url}}
    return root, config, resources


def test_the_last_step_writes_verdicts_notes_and_the_saved_score(tmp_path):
    root, config, resources = _course(tmp_path)
    nb = new_notebook(cells=[new_code_cell("x = 1")])
    add_note(nb, "restored", "a_test", "test cell 'a_test' was deleted; restored from the source and graded")
    resources[VERDICTS_KEY] = {"a_test": (True, "all 2 checks match"), "b_test": (False, "CheckFailed: expected 3")}
    budget = {"budget_s": 92, "used_s": 4.1, "reference_s": 3.2, "floor_s": 60, "multiple": 10.0, "limit_s": 1200}
    resources[BUDGET_KEY] = budget   # what SafeExecute left: the notebook's time budget and its use
    WriteResult(config=config).preprocess(nb, resources)
    result = read_result(result_path(root, "L", "ann", "nb"))
    assert result == {"lesson": "L", "student": "ann", "notebook": "nb",
                      "verdicts": {"a_test": [True, "all 2 checks match"], "b_test": [False, "CheckFailed: expected 3"]},
                      "notes": ["test cell 'a_test' was deleted; restored from the source and graded"],
                      "score": 2.0, "max_score": 3.0, "late_penalty": 0.0, "time_budget": budget, "reason": ""}
    assert graded(result) and verdicts(result)["b_test"] == (False, "CheckFailed: expected 3")
    # plain JSON all the way: what a Dask task returns and the journal keeps
    assert json.loads(json.dumps(result)) == result


class Breaks(NbGraderPreprocessor):
    """A step that fails on a notebook."""

    def preprocess(self, nb, resources):
        raise ValueError("the kernel's reply was not JSON\nline two of a long traceback")


def test_a_failing_step_writes_its_reason_and_still_fails(tmp_path):
    root, config, resources = _course(tmp_path)
    guarded = recording_failure(Breaks)
    assert guarded.__name__ == "Breaks" and issubclass(guarded, Breaks)   # its config section is unchanged
    with pytest.raises(ValueError):   # nbgrader still sees the error, and drops that notebook
        guarded(config=config).preprocess(new_notebook(), resources)
    result = read_result(result_path(root, "L", "ann", "nb"))
    assert result["reason"] == "Breaks: ValueError: the kernel's reply was not JSON" and not graded(result)
    # a step that works is unchanged by it
    resources[VERDICTS_KEY] = {}
    recording_failure(WriteResult)(config=config).preprocess(new_notebook(), resources)
    assert graded(read_result(result_path(root, "L", "ann", "nb")))


def test_the_config_of_a_guarded_step_still_applies():
    from utils.grading.steps.execute import SafeExecute

    config = Config()
    config.SafeExecute.notebook_timeout = 7
    assert recording_failure(SafeExecute)(config=config).notebook_timeout == 7


def test_what_a_run_returns_says_why_a_student_was_not_graded():
    done = WorkDone("L", ["ann", "bo", "cy"], results={"ann": {"verdicts": {}, "reason": ""},
                                                       "bo": {"reason": "SafeExecute: OSError: no kernel"}},
                    notebooks={"ann": {"nb.ipynb": b"{}"}}, rc=1)
    assert done.graded("ann") and not done.graded("bo") and not done.graded("cy")
    assert done.reason("bo", 60) == "nbgrader could not grade it: SafeExecute: OSError: no kernel"
    assert done.reason("cy", 60) == "nbgrader stopped before grading it (exit 1); see autograde.log"
    assert done.without(["bo", "cy"]).students == ["ann"] and set(done.without(["ann"]).results) == {"bo"}
    killed = WorkDone("L", ["cy"], rc=-9)
    assert "was killed (exit -9)" in killed.reason("cy", 60)
    assert WorkDone("L", ["cy"], killed=True).reason("cy", 60) == "grading stalled and was stopped after 60 s"
    assert WorkDone("L", ["cy"], failed={"cy": "it killed its workers"}).reason("cy", 60) == "it killed its workers"
    assert pickle.loads(pickle.dumps(done)) == done


@pytest.mark.slow
def test_the_template_holds_the_lesson_as_the_course_gradebook_defines_it(tmp_path):
    """Built in-process from the course's gradebook (SQLite or a server): the same cells, points,
    checksums and due date as `nbgrader generate_assignment` recorded, and no student."""
    lesson = "01_two_phases"
    course = scratch_course(REPO, [lesson], tmp_path / "course")
    nbgrader(["generate_assignment", lesson, "--force"], cwd=course)
    url = f"sqlite:///{course / 'gradebook.db'}"
    with Gradebook(url, "prefill-decode") as gb:
        gb.update_or_create_assignment(lesson, duedate="2026-12-01 17:00:00")
    dest = tmp_path / "template.db"
    max_score = lesson_template(CourseSettings("prefill-decode", url), lesson, dest)

    def described(db):
        with Gradebook(db, "prefill-decode") as gb:
            a = gb.find_assignment(lesson)
            return (a.duedate, a.max_score, len(gb.students),
                    sorted((nb.name, c.name, c.max_score, c.cell_type) for nb in a.notebooks for c in nb.grade_cells),
                    sorted((nb.name, c.name) for nb in a.notebooks for c in nb.solution_cells),
                    sorted((nb.name, c.name, c.cell_type, c.locked, c.source, c.checksum)
                           for nb in a.notebooks for c in nb.source_cells))

    ours, theirs = described(f"sqlite:///{dest}"), described(url)
    assert ours == theirs and max_score == theirs[1] > 0 and ours[2] == 0
    assert nbformat.read(str(course / "release" / lesson / "two_phases.ipynb"), as_version=4).cells


def test_a_work_folder_that_cannot_be_made_costs_only_its_submissions(tmp_path, monkeypatch):
    """A submission whose files cannot be copied into a work folder (an unreadable file, say)
    fails alone, with the reason; the others of its work folder are graded again without it."""
    from types import SimpleNamespace

    from utils.grading import local_runner as local

    def grade_in_folder(files, submissions, **options):
        if "bad" in submissions:
            raise OSError(13, "Permission denied")
        return WorkDone("L", sorted(submissions), results={s: {"verdicts": {}, "reason": ""} for s in submissions},
                        notebooks={s: {"nb.ipynb": b"{}"} for s in submissions})

    monkeypatch.setattr(local, "grade_in_folder", grade_in_folder)
    lesson = SimpleNamespace(name="L", files=lambda: {}, submission=lambda s: (tmp_path / s, None),
                             grading=SimpleNamespace(root=tmp_path))
    runs = list(local.LocalRunner(1).run(lesson, ["ann", "bad", "cy"]))
    graded_students = sorted(s for done in runs for s in done.students if done.graded(s))
    failed = [done for done in runs if "bad" in done.students]
    assert graded_students == ["ann", "cy"] and len(failed) == 1 and failed[0].students == ["bad"]
    assert failed[0].reason("bad", 60) == "its work folder could not be made (PermissionError: [Errno 13] Permission denied)"


def test_a_submission_the_grader_cannot_read_scores_zero_and_the_rest_are_planned(tmp_path, monkeypatch):
    from utils.grading import lesson as lesson_module
    from utils.grading.lesson import Grading, LessonGrading
    from utils.grading.settings import Options

    course = scratch_course(REPO, ["01_two_phases"], tmp_path / "course")
    for student in ("ann", "bo"):
        folder = course / "submitted" / student / "01_two_phases"
        folder.mkdir(parents=True)
        (folder / "two_phases.ipynb").write_bytes((course / "source" / "01_two_phases" / "two_phases.ipynb").read_bytes())
    hash_tree = lesson_module.hash_tree

    def unreadable(folder):
        if "bo" in folder.parts:
            raise PermissionError(13, "Permission denied")
        return hash_tree(folder)

    monkeypatch.setattr(lesson_module, "hash_tree", unreadable)
    planned = LessonGrading.plan(Grading(course, CourseSettings("c", "sqlite://"), Options()), "01_two_phases",
                                 None)
    assert planned.to_grade == ["ann"] and planned.outcomes["bo"].reason == "its files could not be read (Permission denied)"
