"""Each of the course's grading steps on its own, as nbgrader tests its preprocessors: a notebook of a
few cells built in memory, the step instantiated, `step.preprocess(nb, resources)`, assertions on
what it left. Hostile inputs (wrong types in metadata, forged outputs and notes, huge outputs) where
the step's job is to survive them. No kernel runs but in SafeExecute's last two tests (without the
sandbox, set off through the config: what they test is the grader's own handling); the reference is
built in memory or cached. The full gradings stay in test_bad_submissions.py, test_cheats.py,
test_sandbox.py and tests/grading_runs.py.

Steps, in pipeline order (utils/grading/__init__.py): WellFormed, SafeOverwriteCells,
ReferenceObservations, SafeExecute, Verdicts, KernelFields, LimitOutputSize, HideHiddenTests, the
HTML cleaner, KernelLanguageInfo."""

from __future__ import annotations

import copy
import json
import math
import time
from pathlib import Path

import nbformat
import pytest
from ipykernel.ipkernel import IPythonKernel
from nbconvert.exporters import HTMLExporter
from nbformat.notebooknode import from_dict
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook
from nbgrader.api import Gradebook
from nbgrader.preprocessors import ComputeChecksums, DeduplicateIds, OverwriteCells, SaveCells
from nbgrader.utils import determine_grade
from traitlets.config import Config

from course.observe import MIME
from utils.authoring import nbauthor as author
from utils.authoring.language_info import KernelLanguageInfo, kernel_language_info, stamp
from utils.grading import reference as reference_module
from utils.grading.pipeline import stamp_gradebooks_in_process
from utils.grading.reference import (RESOURCE_KEY, Reference, ReferenceRefused, _problems, cache_key, check_gradebook,
                                     reference_for)
from utils.grading.steps.base import NOTES_KEY, read_notes
from utils.grading.steps.execute import SafeExecute
from utils.sandbox.channels import well_formed_message
from utils.grading.steps.hide_hidden import LEFT_OUT, HideHiddenTests
from utils.grading.steps.kernel_fields import LANGUAGE_INFO, KernelFields
from utils.grading.steps.limit_output import LimitOutputSize
from utils.grading.steps.observations import Observation, collect
from utils.grading.steps.overwrite import SafeOverwriteCells
from utils.grading.steps.reference import ReferenceObservations
from utils.grading.steps.safe_html import SafeMarkdown, configure_html, safe_html
from utils.grading.steps.verdicts import GRADER_ERRORS, Verdicts
from utils.grading.steps.well_formed import MAX_TEXT, WellFormed

# --- fixture notebooks -------------------------------------------------------------------------

SOURCE_A = "check_close('a(1)', a(1), 1.0)\n### BEGIN HIDDEN TESTS\nobserve('a(2)', a(2))\n### END HIDDEN TESTS"
SOURCE_B = "check_close('b(1)', b(1), 2.0)\n### BEGIN HIDDEN TESTS\nobserve('b(2)', b(2))\n### END HIDDEN TESTS"


def lesson() -> nbformat.NotebookNode:
    """A lesson of two exercises, as the source notebook holds it (solutions and hidden tests)."""
    return new_notebook(cells=[
        author.md("# Two exercises", "intro"),
        author.readonly("setup", "from course.checks import check_close\nfrom course.observe import observe"),
        author.solution("sol_a", "def a(x):\n    ### BEGIN SOLUTION\n    return x\n    ### END SOLUTION"),
        author.tests("test_a", 2, SOURCE_A),
        author.solution("sol_b", "def b(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION"),
        author.tests("test_b", 3, SOURCE_B),
    ])


def stream(text, name="stdout"):
    return from_dict({"output_type": "stream", "name": name, "text": text})


def display(data, **extra):
    return from_dict({"output_type": "display_data", "metadata": {}, "data": data, **extra})


def error(ename, evalue="", traceback=()):
    return from_dict({"output_type": "error", "ename": ename, "evalue": evalue, "traceback": list(traceback)})


def observed(label, value, rule="close"):
    """An observation as the kernel sends it (course.observe)."""
    return display({MIME: {"label": label, "rule": rule, "rel": 1e-6, "abs": 0.0, "value": value}})


def notebook(cells=(), metadata=None) -> nbformat.NotebookNode:
    """A notebook of these cells, unvalidated (nbformat's new_notebook refuses the hostile ones)."""
    return from_dict({"nbformat": 4, "nbformat_minor": 5, "metadata": {} if metadata is None else metadata,
                      "cells": list(cells)})


def gids(nb) -> list:
    return [c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells]


# === WellFormed ==================================================================================

def well_formed(cells, minor=5, metadata=None):
    """A notebook of raw (possibly hostile) cells through WellFormed."""
    nb = from_dict({"nbformat": 4, "nbformat_minor": minor, "metadata": metadata or {}, "cells": cells})
    nb, _ = WellFormed().preprocess(nb, {})
    return nb


def test_well_formed_drops_what_is_not_a_cell_and_keeps_cells_in_order():
    cells = [{"cell_type": "markdown", "source": "first", "metadata": {}}, "a string", 42, None, [],
             {"cell_type": "heading", "source": "x"}, {"cell_type": ["code"], "source": "y"},
             {"source": "no type"}, {"cell_type": "code", "source": "last", "metadata": {}}]
    nb = well_formed(cells)
    assert [(c.cell_type, c.source) for c in nb.cells] == [("markdown", "first"), ("code", "last")]


@pytest.mark.parametrize("source, kept", [
    (["a = 1\n", "b = 2"], "a = 1\nb = 2"), ("plain", "plain"),
    (["a", 3], ""), ({"text": "x"}, ""), (None, ""), (12, ""),
])
def test_well_formed_makes_every_source_text(source, kept):
    assert well_formed([{"cell_type": "code", "source": source}]).cells[0].source == kept


def test_well_formed_cuts_a_huge_source():
    nb = well_formed([{"cell_type": "markdown", "source": "x" * (MAX_TEXT + 10)}])
    assert len(nb.cells[0].source) == MAX_TEXT


def test_well_formed_keeps_of_the_metadata_only_what_nbgrader_and_jupyter_read():
    given = {"editable": False, "deletable": "no", "tags": ["a", "b"], "execution": {"x": 1},
             "collapsed": True, "leak": "hidden"}
    nb = well_formed([{"cell_type": "code", "source": "", "metadata": given},
                      {"cell_type": "code", "source": "", "metadata": ["not", "a", "dict"]},
                      {"cell_type": "code", "source": "", "metadata": {"tags": ["ok", 3]}},
                      {"cell_type": "code", "source": "", "metadata": {"tags": [f"t{i}" for i in range(80)]}}])
    assert [c.metadata for c in nb.cells[:3]] == [{"editable": False, "tags": ["a", "b"]}, {}, {}]
    assert len(nb.cells[3].metadata.tags) == 50


ROLE = {"grade": True, "solution": False, "locked": True, "task": False, "grade_id": "t", "points": 2,
        "schema_version": 3, "checksum": "abc", "cell_type": "code"}


@pytest.mark.parametrize("given, kept", [
    (ROLE, ROLE),                                                       # every key of its type: kept
    (dict(ROLE, grade="yes", locked=1), {k: v for k, v in ROLE.items() if k not in ("grade", "locked")}),
    (dict(ROLE, points=True), {k: v for k, v in ROLE.items() if k != "points"}),      # bool is no number
    (dict(ROLE, schema_version=3.0), {k: v for k, v in ROLE.items() if k != "schema_version"}),
    (dict(ROLE, points=float("inf")), {k: v for k, v in ROLE.items() if k != "points"}),
    (dict(ROLE, points=-1), {k: v for k, v in ROLE.items() if k != "points"}),
    (dict(ROLE, points=1e12), {k: v for k, v in ROLE.items() if k != "points"}),
    (dict(ROLE, checksum="c" * 500), {k: v for k, v in ROLE.items() if k != "checksum"}),
    (dict(ROLE, extra={"x": 1}), ROLE),                                 # unknown keys dropped
    (dict(ROLE, grade_id=7), None),              # a role without a name nbgrader can check: a plain cell
    (dict(ROLE, grade_id="x" * 300), None),
    ("grade", None), ([ROLE], None),
    ({"grade": False, "solution": False, "locked": False, "task": False}, {"grade": False, "solution": False,
                                                                           "locked": False, "task": False}),
])
def test_well_formed_keeps_each_nbgrader_key_only_with_a_value_of_its_type(given, kept):
    cell = well_formed([{"cell_type": "code", "source": "", "metadata": {"nbgrader": given}}]).cells[0]
    assert cell.metadata.get("nbgrader") == kept


def test_well_formed_drops_outputs_and_counts_a_kernel_or_student_left():
    forged = {"cell_type": "code", "source": "x", "execution_count": 99, "attachments": {"a.png": {}},
              "outputs": [{"output_type": "execute_result", "data": {"text/plain": "5"}}]}
    md_cell = {"cell_type": "markdown", "source": "y", "outputs": [{"output_type": "stream"}], "execution_count": 3}
    code, text = well_formed([forged, md_cell]).cells
    assert code.outputs == [] and code.execution_count is None and "attachments" not in code
    assert "outputs" not in text and "execution_count" not in text


def test_well_formed_cell_ids_are_unique_and_valid_from_nbformat_4_5():
    cells = [{"cell_type": "code", "source": "", "id": "same"}, {"cell_type": "code", "source": "", "id": "same"},
             {"cell_type": "code", "source": ""}, {"cell_type": "code", "source": "", "id": "i" * 65},
             {"cell_type": "code", "source": "", "id": 12}, {"cell_type": "code", "source": "", "id": "kept"}]
    ids = [c.id for c in well_formed(cells).cells]
    assert ids[0] == "same" and ids[5] == "kept" and len(set(ids)) == 6
    assert all(isinstance(i, str) and 0 < len(i) <= 64 for i in ids)
    assert all("id" not in c for c in well_formed([{"cell_type": "code", "source": ""}], minor=4).cells)


def test_a_hostile_notebook_comes_out_valid_nbformat():
    cells = [{"cell_type": "code", "source": ["a", None], "metadata": {"nbgrader": {"grade": "x", "points": []}},
              "outputs": "no", "execution_count": "1"},
             {"cell_type": "raw", "source": 5, "metadata": 5}, "junk",
             {"cell_type": "markdown", "source": "ok", "metadata": {"nbgrader": ROLE, "tags": "t"}, "id": None}]
    nb = well_formed(cells)
    nbformat.validate(nb)
    assert [c.cell_type for c in nb.cells] == ["code", "raw", "markdown"]


def test_well_formed_survives_cells_and_metadata_that_are_not_containers():
    nb = from_dict({"nbformat": 4, "nbformat_minor": 5, "metadata": "x", "cells": {"0": {"cell_type": "code"}}})
    nb, _ = WellFormed().preprocess(nb, {})
    assert nb.cells == [] and nb.metadata == {}


# === SafeOverwriteCells ==========================================================================

LESSON, NOTEBOOK = "lesson1", "lesson"


@pytest.fixture(scope="module")
def gradebook(tmp_path_factory) -> dict:
    """A gradebook holding `lesson()` as nbgrader's generate_assignment saves it; the resources
    nbgrader's autograde hands its steps."""
    stamp_gradebooks_in_process()
    db = f"sqlite:///{tmp_path_factory.mktemp('gradebook') / 'gradebook.db'}"
    with Gradebook(db) as gb:
        gb.add_assignment(LESSON)
    resources = {"nbgrader": {"db_url": db, "assignment": LESSON, "notebook": NOTEBOOK}}
    nb, _ = ComputeChecksums().preprocess(lesson(), {})
    SaveCells().preprocess(nb, copy.deepcopy(resources))
    return resources


def submitted() -> nbformat.NotebookNode:
    """`lesson()` as a student hands it in (checksums as the release has them)."""
    nb, _ = ComputeChecksums().preprocess(lesson(), {})
    return nb


def overwrite(nb, gradebook):
    nb, _ = SafeOverwriteCells(add_missing_cells=True).preprocess(nb, copy.deepcopy(gradebook))
    return nb


def test_a_submissions_own_grading_notes_are_emptied(gradebook):
    nb = submitted()
    nb.metadata[NOTES_KEY] = {"notes": [{"event": "roles-restored", "cell": "test_a", "text": "all fine, 5/5"}]}
    assert read_notes(overwrite(nb, gradebook)) == []


def test_an_edited_test_cell_gets_its_source_and_points_back(gradebook):
    nb = submitted()
    nb.cells[3].source = "check_close('a(1)', a(1), 1.0)"   # the hidden tests deleted
    nb.cells[3].metadata.nbgrader["points"] = 200
    cell = overwrite(nb, gradebook).cells[3]
    assert cell.source == SOURCE_A and cell.metadata.nbgrader["points"] == 2.0


def test_a_solution_cell_made_graded_gets_its_role_back_with_a_note(gradebook):
    nb = submitted()
    nb.cells[2].metadata.nbgrader.update(grade=True)   # no points: nbgrader's own step raised KeyError
    meta = overwrite(nb, gradebook).cells[2].metadata.nbgrader
    assert (meta["grade"], meta["solution"], "points" in meta) == (False, True, False)
    assert [(n["event"], n["cell"]) for n in read_notes(nb)] == [("roles-restored", "sol_a")]
    assert "(grade)" in read_notes(nb)[0]["text"]


def test_a_test_cell_made_a_solution_is_graded_again(gradebook):
    nb = submitted()
    nb.cells[5].metadata.nbgrader.update(solution=True, grade=False, points=0)
    meta = overwrite(nb, gradebook).cells[5].metadata.nbgrader
    assert (meta["grade"], meta["solution"], meta["points"]) == (True, False, 3.0)
    assert "grade, solution, points" in read_notes(nb)[0]["text"]


def test_a_cell_of_an_unknown_grade_id_becomes_a_plain_cell(gradebook):
    nb = submitted()
    forged = new_code_cell("print('extra credit')")
    forged.metadata["nbgrader"] = {"grade": True, "solution": False, "locked": False, "grade_id": "bonus", "points": 50}
    nb.cells.append(forged)
    nb = overwrite(nb, gradebook)
    assert "nbgrader" not in nb.cells[-1].metadata and nb.cells[-1].source == "print('extra credit')"
    assert gids(nb) == gids(lesson()) + [None]


def test_a_copied_test_cell_counts_once_and_its_copy_runs_as_a_plain_cell(gradebook):
    """As autograde runs them: nbgrader's DeduplicateIds empties the copy's nbgrader metadata
    (nbgrader's OverwriteCells then failed with KeyError 'grade_id' when adding missing cells)."""
    nb = submitted()
    nb.cells.insert(3, copy.deepcopy(nb.cells[5]))    # test_b pasted before test_a
    nb, _ = DeduplicateIds().preprocess(nb, {})
    nb = overwrite(nb, gradebook)
    assert gids(nb) == ["intro", "setup", "sol_a", None, "test_a", "sol_b", "test_b"]
    assert "nbgrader" not in nb.cells[3].metadata


@pytest.mark.parametrize("deleted, order", [
    ({"test_a"}, ["intro", "setup", "sol_a", "test_a", "sol_b", "test_b"]),
    ({"sol_b", "test_b"}, ["intro", "setup", "sol_a", "test_a", "test_b"]),     # the cell before it gone too
    ({"sol_a", "test_a", "sol_b"}, ["intro", "setup", "test_a", "test_b"]),
    ({"intro", "setup", "sol_a", "test_a"}, ["test_a", "sol_b", "test_b"]),      # nothing earlier left
])
def test_a_deleted_test_cell_comes_back_after_the_nearest_earlier_cell_left(gradebook, deleted, order):
    nb = submitted()
    nb.cells = [c for c in nb.cells if c.metadata.nbgrader["grade_id"] not in deleted]
    nb = overwrite(nb, gradebook)
    assert gids(nb) == order
    back = {c.metadata["nbgrader"]["grade_id"]: c for c in nb.cells if c.metadata["nbgrader"].get("grade")}
    assert back["test_a"].metadata["nbgrader"]["points"] == 2 and SOURCE_A in back["test_a"].source
    assert back["test_b"].metadata["nbgrader"]["points"] == 3


def test_nbgraders_own_step_loses_a_submission_missing_two_cells_in_a_row(gradebook):
    """The control for the test above."""
    nb = submitted()
    nb.cells = nb.cells[:4]
    with pytest.raises(KeyError):
        OverwriteCells(add_missing_cells=True).preprocess(nb, copy.deepcopy(gradebook))


# === ReferenceObservations =======================================================================

def obs(label, value, rule="close") -> Observation:
    return Observation(label, rule, 1e-6, 0.0, value)


def lesson_reference() -> Reference:
    return Reference({"test_a": SOURCE_A, "test_b": SOURCE_B},
                     {"test_a": [obs("a(1)", 1.0), obs("a(2)", 2.0)], "test_b": [obs("b(1)", 2.0), obs("b(2)", 4.0)]},
                     1.5, False)


@pytest.fixture
def source(tmp_path) -> Path:
    """`lesson()` as a course folder's source/ holds it (the course root: source.parents[2])."""
    path = tmp_path / "course" / "source" / LESSON / f"{NOTEBOOK}.ipynb"
    path.parent.mkdir(parents=True)
    nbformat.write(lesson(), str(path))
    return path


def cache(source: Path, folder: Path, ref: Reference) -> Path:
    """`ref` left in `folder` as the reference run of `source` would leave it."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{cache_key(source)}.json").write_text(json.dumps(ref.to_json()))
    return folder


@pytest.fixture
def no_kernel(monkeypatch):
    """The reference is never run: a run would be a failure of the cache."""
    def refuse(*args, **kwargs):
        raise AssertionError("the reference solution was run")
    monkeypatch.setattr(reference_module, "run_reference", refuse)
    monkeypatch.setattr(reference_module, "_memo", {})


def test_a_reference_survives_its_json_round_trip():
    ref = lesson_reference()
    back = Reference.from_json(json.loads(json.dumps(ref.to_json())))
    assert (back.sources, back.observations, back.seconds, back.cached) == (ref.sources, ref.observations, 1.5, True)


def test_the_cached_reference_is_read_without_running_a_kernel(source, tmp_path, no_kernel):
    ref = reference_for(source, cache(source, tmp_path / "cache", lesson_reference()))
    assert ref.cached and ref.observations == lesson_reference().observations


def test_the_cache_key_changes_with_the_source_notebook(source):
    before = cache_key(source)
    nb = nbformat.read(str(source), as_version=4)
    nb.cells[5].source = SOURCE_B.replace("b(2)", "b(3)")
    nbformat.write(nb, str(source))
    assert cache_key(source) != before and len(before) == 64


def test_a_reference_is_run_once_then_read_from_the_cache(source, tmp_path, monkeypatch):
    runs = []

    def run(path, timeout):
        runs.append(path)
        return lesson_reference()

    monkeypatch.setattr(reference_module, "run_reference", run)
    monkeypatch.setattr(reference_module, "_memo", {})
    first = reference_for(source, tmp_path / "cache")
    again = reference_for(source, tmp_path / "cache")
    other = reference_for(source, tmp_path / "elsewhere")   # another course folder of this process
    assert len(runs) == 1 and not first.cached and again.cached and other.cached
    assert list((tmp_path / "elsewhere").glob("*.json")) and again.observations == first.observations


def _ran(gid, source, outputs):
    cell = author.tests(gid, 1, source)
    cell.outputs = outputs
    return cell


@pytest.mark.parametrize("outputs, source, problem", [
    ([observed("a(1)", 1.0), error("ValueError", "bad\nsecond line")], SOURCE_A, "raised ValueError: bad"),
    ([observed("a(1)", 1.0), observed("a(2)", 2.0), observed("a(2)", 2.0)], SOURCE_A, "repeats the label(s) 'a(2)'"),
    ([observed("a(1)", 1.0)], "check_close('a(1)', a(1), 1.0)", "observes nothing hidden"),
    ([], SOURCE_A, "observes nothing hidden"),
])
def test_a_reference_cell_that_cannot_be_graded_against_is_refused(outputs, source, problem):
    found = _problems(_ran("test_a", source, outputs), collect(outputs))
    assert len(found) == 1 and problem in found[0] and "'test_a'" in found[0]


def test_a_visible_quiz_answer_or_a_hidden_observation_is_enough():
    quiz = [display({MIME: {"label": "q1", "rule": "choice", "value": "c"}})]
    assert _problems(_ran("q", "check_choice('q1', q1, 'abcd')", quiz), collect(quiz)) == []
    outputs = [observed("a(1)", 1.0), observed("a(2)", 2.0)]
    assert _problems(_ran("test_a", SOURCE_A, outputs), collect(outputs)) == []


def test_a_reference_that_differs_from_the_gradebook_is_refused(gradebook):
    db = gradebook["nbgrader"]["db_url"]
    check_gradebook(lesson_reference(), db, LESSON, NOTEBOOK, "default_course")   # the same cells: accepted
    ref = lesson_reference()
    ref.sources["unknown_test"] = "anything"                            # a cell the gradebook lacks: accepted
    check_gradebook(ref, db, LESSON, NOTEBOOK, "default_course")
    ref.sources["test_b"] = SOURCE_B + "\nobserve('b(3)', b(3))"
    with pytest.raises(ReferenceRefused, match=r"graded cell\(s\) test_b of the source differ"):
        check_gradebook(ref, db, LESSON, NOTEBOOK, "default_course")


def reference_step(source: Path, cache_dir: Path | None = None) -> ReferenceObservations:
    c = Config()
    c.CourseDirectory.root = str(source.parents[2])
    if cache_dir is not None:
        c.ReferenceObservations.cache_dir = str(cache_dir)
    return ReferenceObservations(config=c)


def test_the_step_puts_the_cached_reference_into_resources(source, tmp_path, gradebook, no_kernel):
    step = reference_step(source, cache(source, tmp_path / "cache", lesson_reference()))
    nb = submitted()
    before = copy.deepcopy(nb)
    nb, resources = step.preprocess(nb, copy.deepcopy(gradebook))
    assert resources[RESOURCE_KEY].observations == lesson_reference().observations and nb == before


def test_without_a_cache_dir_the_cache_is_the_course_roots_own(source, gradebook, no_kernel):
    cache(source, source.parents[2] / ".grading-cache", lesson_reference())
    _, resources = reference_step(source).preprocess(submitted(), copy.deepcopy(gradebook))
    assert resources[RESOURCE_KEY].cached


def test_the_step_refuses_a_reference_the_gradebook_was_not_built_with(source, tmp_path, gradebook, no_kernel):
    stale = lesson_reference()
    stale.sources["test_a"] = SOURCE_A.replace("a(2)", "a(3)")
    resources = copy.deepcopy(gradebook)
    with pytest.raises(ReferenceRefused, match="test_a"):
        reference_step(source, cache(source, tmp_path / "cache", stale)).preprocess(submitted(), resources)
    assert RESOURCE_KEY not in resources


# === SafeExecute =================================================================================

def executor(**traits) -> SafeExecute:
    """A SafeExecute as it stands in the middle of a notebook, for messages fed by hand."""
    ex = SafeExecute(**traits)
    ex.nb = new_notebook(cells=[new_code_cell("x")])
    ex._arrived, ex._dropped = 0, 0
    ex.reset_execution_trackers()
    ex.clear_before_next_output = False
    return ex


def msg(msg_type, content) -> dict:
    return {"msg_type": msg_type, "content": content, "parent_header": {"msg_id": "p"},
            "header": {"msg_type": msg_type, "date": "x"}, "metadata": {}}


@pytest.mark.parametrize("message", [
    msg("comm_open", {"comm_id": "c", "target_name": "jupyter.widget", "data": {"state": {"value": 1}}}),
    msg("comm_msg", {"comm_id": "c", "data": {"method": "update", "state": {"value": 2}}}),
    msg("update_display_data", {"data": {"text/plain": "new"}, "metadata": {}, "transient": {"display_id": "d"}}),
    msg("unknown_type", {"data": {"text/plain": "x"}}),
    msg("display_data", "not a dict"), msg("display_data", None), msg("stream", ["text"]),
    msg("status", {"execution_state": 1}), msg("status", {}),
    "not a message", None, {"content": {}},
    {"msg_type": ["stream"], "content": {}},           # the kernel writes its header's JSON: any type there
])
def test_a_message_the_notebook_does_not_need_is_dropped_before_nbclient_sees_it(message):
    ex = executor()
    cell = ex.nb.cells[0]
    assert ex.process_message(message, cell, 0) is None
    assert cell.outputs == [] and not ex.widget_state and not ex.comm_objects and not ex._display_id_map


def test_a_display_keeps_no_display_id_and_the_kernels_count_is_not_kept():
    ex = executor()
    cell = ex.nb.cells[0]
    ex.process_message(msg("execute_input", {"code": "x", "execution_count": 10 ** 30}), cell, 0)
    ex.process_message(msg("execute_result", {"data": {"text/plain": "1"}, "metadata": {}, "execution_count": 77,
                                              "transient": {"display_id": "secret"}}), cell, 0)
    ex.process_message(msg("display_data", {"data": {"text/plain": "2"}, "metadata": {},
                                            "transient": {"display_id": "other"}}), cell, 0)
    assert cell.execution_count == 0 and [o.get("execution_count") for o in cell.outputs] == [0, None]
    assert not ex._display_id_map and all("transient" not in o for o in cell.outputs)


def test_outputs_past_the_notebooks_bytes_are_dropped_as_they_arrive():
    ex = executor(max_output_bytes=10_000)
    cell = ex.nb.cells[0]
    one = {"data": {"text/plain": "y" * 1000}, "metadata": {}}
    size = len(json.dumps(one))
    for _ in range(30):
        ex.process_message(msg("display_data", copy.deepcopy(one)), cell, 0)
    assert len(cell.outputs) == 10_000 // size and ex._dropped == 30 - 10_000 // size
    assert ex._arrived <= 10_000


def test_one_huge_stream_is_dropped_but_later_small_ones_still_fit():
    ex = executor(max_output_bytes=1000)
    cell = ex.nb.cells[0]
    ex.process_message(msg("stream", {"name": "stdout", "text": "z" * 50_000}), cell, 0)
    ex.process_message(msg("stream", {"name": "stdout", "text": "small\n"}), cell, 0)
    assert [o.text for o in cell.outputs] == ["small\n"] and ex._dropped == 1


def test_outputs_past_a_cells_count_are_dropped_as_they_arrive():
    ex = executor(max_outputs_arrived=3)
    cell = ex.nb.cells[0]
    for i in range(10):
        ex.process_message(msg("display_data", {"data": {"text/plain": str(i)}, "metadata": {}}), cell, 0)
    assert [o.data["text/plain"] for o in cell.outputs] == ["0", "1", "2"] and ex._dropped == 7


def test_content_the_grader_cannot_measure_is_dropped():
    ex = executor()
    cell = ex.nb.cells[0]
    loop = {"metadata": {}}
    loop["data"] = {"text/plain": "x", "self": loop}       # circular: json cannot size it
    assert ex.process_message(msg("display_data", loop), cell, 0) is None and cell.outputs == []


def test_no_cell_may_run_past_the_notebooks_total():
    ex = executor(timeout=300)
    ex._deadline = time.monotonic() + 5
    assert ex._get_timeout(ex.nb.cells[0]) <= 5
    ex._deadline = time.monotonic() - 100                  # spent: one second to say so, never 0 or less
    assert ex._get_timeout(ex.nb.cells[0]) == 1
    ex._deadline = math.inf
    assert ex._get_timeout(ex.nb.cells[0]) == 300


def _unsandboxed(**traits) -> SafeExecute:
    """A SafeExecute whose kernel runs without bubblewrap (set through the traitlets config, as
    an instructor would): what is tested here is the grader's own handling."""
    c = Config()
    c.SandboxKernelManager.enabled = False
    for name, value in traits.items():
        setattr(c.SafeExecute, name, value)
    return SafeExecute(config=c)


@pytest.mark.slow
def test_a_dead_kernel_costs_its_cell_and_a_hung_one_its_cell(tmp_path):
    """One notebook, one kernel start and one restart: a flood of displays, a cell that kills the
    kernel, a cell after it that needs the state of the cells before (re-run in the fresh kernel),
    and a cell that times out (the kernel answers after the interrupt, so it is kept)."""
    nb = new_notebook(cells=[
        new_code_cell("x = 41"),
        new_code_cell("from IPython.display import display\nfor i in range(50):\n    display(i)"),
        new_markdown_cell("between"),
        new_code_cell("import os\nos._exit(1)"),
        new_code_cell("print(x + 1)"),
        new_code_cell("import time\ntime.sleep(60)"),
        new_code_cell("print(x)"),
    ])
    ex = _unsandboxed(timeout=3, max_outputs_arrived=5, probe_timeout=10)
    nb, _ = ex.preprocess(nb, {"metadata": {"path": str(tmp_path)}})
    flood, died, after, timed_out, last = (nb.cells[i].outputs for i in (1, 3, 4, 5, 6))
    assert [o.data["text/plain"] for o in flood] == ["0", "1", "2", "3", "4"]
    assert [o.ename for o in died] == ["DeadKernelError"]
    assert [o.get("text") for o in after] == ["42\n"]
    assert [o.get("ename") for o in timed_out if o.output_type == "error"][-1:] == ["CellTimeoutError"]
    assert [o.get("text") for o in last] == ["41\n"]
    events = [n["event"] for n in read_notes(nb)]
    assert events == ["kernel-died", "kernel-restarted", "timeout", "output-dropped"]


@pytest.mark.slow
def test_a_kernel_that_dies_too_often_leaves_the_rest_not_run(tmp_path):
    nb = new_notebook(cells=[new_code_cell("import os\nos._exit(1)"), new_code_cell("print(1)"),
                             author.tests("test_a", 2, SOURCE_A)])
    nb, _ = _unsandboxed(max_restarts=0).preprocess(nb, {"metadata": {"path": str(tmp_path)}})
    assert [[o.get("ename") for o in c.outputs] for c in nb.cells] == [["DeadKernelError"], ["NotRun"], ["NotRun"]]
    assert [n["event"] for n in read_notes(nb)] == ["kernel-died", "gave-up"]


@pytest.mark.parametrize("message", [
    msg("stream", {"name": "stdout"}), msg("stream", {"text": "no name\n"}),
    msg("stream", {"name": "stdout", "text": ["x", 3]}),
    msg("display_data", {"metadata": {}}), msg("display_data", {"data": ["text/plain"], "metadata": {}}),
    msg("execute_result", {"data": {"text/plain": 1}, "metadata": {}}),
    msg("error", {"evalue": "no name", "traceback": []}), msg("error", {"ename": "E", "evalue": "x", "traceback": "tb"}),
])
def test_an_output_nbformat_would_refuse_is_dropped_and_counted(message):
    ex = executor()
    cell = ex.nb.cells[0]
    assert ex.process_message(message, cell, 0) is None
    assert cell.outputs == [] and ex._dropped == 1 and ex._arrived == 0


@pytest.mark.parametrize("message, kept", [
    (msg("stream", {"name": "stdout", "text": "x"}), True),
    ({**msg("stream", {"name": "stdout", "text": "x"}), "parent_header": [1, 2]}, False),
    ({**msg("stream", {"name": "stdout", "text": "x"}), "header": "h"}, False),
    ({**msg("stream", {"name": "stdout", "text": "x"}), "metadata": None}, False),
    ({**msg("stream", {"name": "stdout", "text": "x"}), "msg_type": 7}, False),
    ({**msg("stream", {"name": "stdout", "text": "x"}), "header": {"msg_type": ["stream"]}}, False),
    ("not a message", False), (None, False),
])
def test_the_sandboxed_client_takes_only_messages_whose_parts_nbclient_can_read(message, kept):
    assert well_formed_message(message) is kept


MALFORMED = """k = get_ipython().kernel
for change in ({'parent_header': [1, 2]}, {'header': 'not a header'}, {'content': b'["no", "content"]'}):
    m = k.session.msg('stream', {'name': 'stdout', 'text': 'forged\\n'}, parent=k.get_parent())
    m.update(change)
    k.iopub_socket.send_multipart(k.session.serialize(m))
k.session.send(k.iopub_socket, 'stream', {'name': 'stdout'}, parent=k.get_parent())
k.session.send(k.iopub_socket, 'display_data', {'data': ['x'], 'metadata': {}}, parent=k.get_parent())
k.iopub_socket.send_multipart([b'<IDS|MSG>', b'not signed', b'{', b'', b'', b''])
print('after the forged messages')"""


@pytest.mark.slow
def test_malformed_messages_from_a_kernel_cost_nothing_but_themselves(tmp_path):
    """A kernel sends messages with parts nbclient cannot read, outputs nbformat refuses and
    frames that are no message at all: each is dropped, the cell's own output is kept, and the
    cells after it run (before, one such message ended the notebook's grading)."""
    nb = new_notebook(cells=[new_code_cell(MALFORMED), new_code_cell("print(6 * 7)")])
    ex = _unsandboxed(timeout=20)
    nb, _ = ex.preprocess(nb, {"metadata": {"path": str(tmp_path)}})
    assert [o.get("text") for o in nb.cells[0].outputs] == ["after the forged messages\n"]
    assert [o.get("text") for o in nb.cells[1].outputs] == ["42\n"]
    assert ex._dropped == 2   # the two outputs nbformat refuses; the rest never reached SafeExecute


# === Verdicts ====================================================================================

def judged(outputs_a, outputs_b=(), reference=lesson_reference, extra=()):
    """`lesson()` as executed, with the given outputs in its two test cells, through Verdicts."""
    nb = lesson()
    nb.cells[3].outputs, nb.cells[5].outputs = list(outputs_a), list(outputs_b)
    nb.cells.extend(extra)
    resources = {RESOURCE_KEY: reference()} if reference else {}
    nb, _ = Verdicts().preprocess(nb, resources)
    return nb


def test_a_matching_test_cell_gets_the_pass_line_and_full_points():
    nb = judged([stream("noise", "stderr"), observed("a(1)", 1.0), observed("a(2)", 2.0)])
    assert [o.text for o in nb.cells[3].outputs] == [
        "✔ all 2 checks match the reference solution (1 visible, 1 hidden)\n"]
    assert determine_grade(nb.cells[3]) == (2, 2) and determine_grade(nb.cells[5]) == (0, 3)


def test_without_a_reference_every_test_cell_fails():
    nb = judged([observed("a(1)", 1.0), observed("a(2)", 2.0)], reference=None)
    assert all(c.outputs[0].ename == "CheckFailed" and "has no graded cell" in c.outputs[0].evalue
               for c in (nb.cells[3], nb.cells[5]))


def test_an_observation_the_grader_cannot_read_fails_its_cell_only():
    unreadable = display({MIME: "{" * 100_000})                        # nested deeper than json parses
    nb = judged([observed("a(1)", 1.0), unreadable, observed("a(2)", 2.0)],
                [observed("b(1)", 2.0), observed("b(2)", 4.0)])
    assert "cannot read" in nb.cells[3].outputs[0].evalue and determine_grade(nb.cells[3]) == (0, 2)
    assert determine_grade(nb.cells[5]) == (3, 3)


@pytest.mark.parametrize("forged, said", [
    (from_dict({"output_type": "display_data", "metadata": {}, "data": 5}), "could not be read (TypeError)"),
    (display({MIME: {"label": "a(1)", "rule": "close", "value": 1.0, "rel": 10 ** 400}}), "cannot read"),
    (display({MIME: {"label": "a(1)", "rule": "close", "value": 1.0, "abs": float("nan")}}), "cannot read"),
])
def test_outputs_of_the_wrong_shape_fail_the_cell_and_nothing_else(forged, said):
    nb = judged([observed("a(1)", 1.0), forged, observed("a(2)", 2.0)], [observed("b(1)", 2.0), observed("b(2)", 4.0)])
    out = nb.cells[3].outputs[0]
    assert out.ename == "CheckFailed" and said in out.evalue and determine_grade(nb.cells[3]) == (0, 2)
    assert determine_grade(nb.cells[5]) == (3, 3)


@pytest.mark.parametrize("ename", sorted(GRADER_ERRORS))
def test_the_graders_own_errors_keep_their_name_and_the_graders_sentence(ename):
    nb = judged([error(ename, "the kernel wrote this: observe('a(2)', a(2))")])
    out = nb.cells[3].outputs[0]
    assert (out.ename, out.evalue, out.traceback) == (ename, GRADER_ERRORS[ename], [f"{ename}: {GRADER_ERRORS[ename]}"])


def test_cells_that_are_not_graded_tests_keep_their_outputs():
    printed = new_code_cell("print(1)")
    printed.outputs = [stream("1\n")]
    answer = author.solution("sol_md", "An answer")
    answer.cell_type, answer.outputs = "code", [stream("mine\n")]
    answer.metadata.nbgrader.update(grade=True, points=1)              # a graded answer, judged by hand
    odd = new_code_cell("x")
    odd.metadata["nbgrader"] = "grade"                                  # not a dict: not a test cell
    odd.outputs = [stream("odd\n")]
    nb = judged([], extra=[printed, answer, odd])
    assert [c.outputs for c in nb.cells[-3:]] == [[stream("1\n")], [stream("mine\n")], [stream("odd\n")]]


# === KernelFields ================================================================================

def fields(*cells, metadata=None):
    nb, _ = KernelFields().preprocess(notebook(cells, metadata), {})
    return nb


def ran(source="x", outputs=(), count=None):
    cell = new_code_cell(source)
    cell.outputs, cell.execution_count = list(outputs), count
    return cell


def test_execution_counts_are_the_graders_count_of_the_cells_that_ran():
    nb = fields(ran(count=0), author.md("text"), ran(), ran(outputs=[stream("a")]), ran(count=10 ** 40),
                ran(outputs=[from_dict({"output_type": "execute_result", "execution_count": 5, "metadata": {},
                                        "data": {"text/plain": "5"}})], count=-3))
    assert [c.get("execution_count") for c in nb.cells] == [1, None, None, 2, 3, 4]
    assert nb.cells[5].outputs[0].execution_count == 4


@pytest.mark.parametrize("given, rebuilt", [
    (stream(["a", "b"], "stderr"), stream("ab", "stderr")),
    (stream(7, "stdin"), stream("", "stdout")),
    (display({"text/plain": ["1", "2"], "text/html": "<b>", MIME: {"label": "x"}}),
     display({"text/plain": "12", "text/html": "<b>", MIME: {"label": "x"}})),
    (display({"not a mime": "x", "text/plain": {"a": 1}, "image/" + "p" * 200: "x", "text/html<script>": "y"}),
     display({})),
    (display({"text/plain": "x"}, transient={"display_id": "d"}, metadata={"leak": 1}), display({"text/plain": "x"})),
    (error("Evil Name\n", "first\nsecond", ["tb"]), error("Error", "first", ["Error: first"])),
    (error("ValueError", "x" * 5000), error("ValueError", "x" * 297 + "...", ["ValueError: " + "x" * 297 + "..."])),
])
def test_every_output_is_rebuilt_from_its_well_typed_parts(given, rebuilt):
    assert fields(ran(outputs=[given])).cells[0].outputs == [rebuilt]


def test_what_is_not_an_output_is_dropped():
    cell = ran(outputs=[stream("kept"), "text", 5, None, from_dict({"output_type": "secret", "text": "x"})])
    assert fields(cell).cells[0].outputs == [stream("kept")]
    cell = ran(count=1)
    cell.outputs = {"output_type": "stream"}                            # not a list
    assert fields(cell).cells[0].outputs == []


def test_cell_metadata_keeps_only_nbgraders_and_jupyters_keys():
    cell = author.tests("test_a", 2, SOURCE_A)
    cell.metadata.update(execution={"iopub.status.busy": "t"}, tags=["t"], editable=False, leak="x")
    text = author.md("x")
    text.metadata["leak"] = "x"
    odd = ran()
    odd["metadata"] = "not a dict"
    nb = fields(cell, text, odd)
    assert set(nb.cells[0].metadata) == {"nbgrader", "tags", "editable"}
    assert nb.cells[1].metadata == {} and nb.cells[2].metadata == {}


def test_the_notebooks_language_info_is_the_graders_and_widget_state_is_dropped():
    nb = fields(ran(), metadata={"language_info": {"name": "python", "version": "observe('a(2)')"},
                                 "widgets": {"state": {}}, "kernelspec": {"name": "python3"}})
    assert nb.metadata == {"language_info": LANGUAGE_INFO, "kernelspec": {"name": "python3"}}
    assert fields(ran(), metadata="not a dict").metadata == "not a dict"   # survived, left as it was


def test_kernel_fields_twice_is_kernel_fields_once():
    cells = [ran(outputs=[stream(["a"]), error("E x", "1\n2"), display({"text/plain": ["a"]})], count=9),
             author.md("y")]
    once = fields(*copy.deepcopy(cells))
    assert fields(*copy.deepcopy(once.cells)).cells == once.cells


# === LimitOutputSize =============================================================================

def limited(*cells, **traits):
    nb, _ = LimitOutputSize(**traits).preprocess(notebook(cells), {})
    return nb


def test_a_cells_stream_text_is_cut_at_its_budget_with_a_note():
    nb = limited(ran(outputs=[stream("a" * 15_000), stream(["b" * 7_000, "b" * 8_000], "stderr")]), max_chars=20_000)
    first, second = nb.cells[0].outputs
    assert first.text == "a" * 15_000 and second.text.startswith("b" * 5_000 + "\n... output truncated")
    assert "(10000 characters cut)" in second.text and second.name == "stderr"
    assert [(n["event"], n["text"]) for n in read_notes(nb)] == [
        ("output-truncated", "cell '#0' printed 10000 characters too many; its output was cut")]


def test_a_rich_output_too_large_is_removed_and_its_text_kept():
    big = display({"image/png": "i" * 5000, "text/html": "<p>" + "h" * 5000, "text/plain": "fig"})
    plain = display({"text/plain": "p" * 5000})
    gone = display({"image/png": "i" * 5000})
    nb = limited(ran(outputs=[big, plain, gone]), max_data_chars=1000)
    assert [o.data for o in nb.cells[0].outputs] == [
        {"text/plain": "fig"}, {"text/plain": "[text/plain output of 5000 characters removed by the grader]"},
        {"text/plain": "[output removed by the grader: too large]"}]


def test_an_output_whose_data_is_not_a_bundle_is_replaced():
    forged = from_dict({"output_type": "execute_result", "execution_count": 1, "metadata": {}, "data": "x" * 100})
    assert limited(ran(outputs=[forged])).cells[0].outputs[0].data == {
        "text/plain": "[output removed by the grader: not an output]"}


def test_a_flood_of_outputs_keeps_the_first_ones_and_says_how_many_went():
    nb = limited(ran(outputs=[display({"text/plain": str(i)}) for i in range(150)]), max_outputs=100)
    outs = nb.cells[0].outputs
    assert [o.data["text/plain"] for o in outs[:100]] == [str(i) for i in range(100)] and len(outs) == 101
    assert outs[-1].output_type == "stream" and "50 output(s)" in outs[-1].text


def test_the_notebooks_budget_is_shared_by_its_cells_in_order():
    cells = [ran(outputs=[display({"text/plain": "x" * 900})]) for _ in range(3)]
    nb = limited(*cells, max_notebook_chars=2500)
    assert [len(c.outputs) for c in nb.cells] == [1, 1, 1]
    assert [c.outputs[0].output_type for c in nb.cells] == ["display_data", "display_data", "stream"]
    assert [n["text"].split(" printed")[0] for n in read_notes(nb)] == ["cell '#2'"]


def test_a_cells_total_size_is_bounded():
    nb = limited(ran(outputs=[display({"text/plain": "x" * 900}) for _ in range(5)]), max_cell_chars=3000)
    assert [o.output_type for o in nb.cells[0].outputs] == ["display_data"] * 3 + ["stream"]


def test_graded_test_cells_and_markdown_are_never_cut():
    cell = author.tests("test_a", 2, SOURCE_A)
    cell.outputs = [stream("✔ " + "v" * 50_000)]
    text = author.md("m" * 50_000)
    nb = limited(cell, text, max_chars=10, max_cell_chars=10, max_notebook_chars=10)
    assert nb.cells[0].outputs == [stream("✔ " + "v" * 50_000)] and nb.cells[1].source == "m" * 50_000
    assert read_notes(nb) == []


def test_minus_one_leaves_every_output():
    outputs = [stream("s" * 50_000), display({"image/png": "i" * 50_000})] + [display({"text/plain": "x"})] * 200
    nb = limited(ran(outputs=copy.deepcopy(outputs)), max_chars=-1, max_data_chars=-1, max_outputs=-1,
                 max_cell_chars=-1, max_notebook_chars=-1)
    assert nb.cells[0].outputs == outputs


def test_what_it_leaves_is_valid_nbformat():
    outputs = [stream(["a" * 30_000]), display({"image/png": "i" * 5000}), display({"text/plain": "y"})] * 60
    nb = limited(ran(outputs=outputs, count=1), max_data_chars=1000)
    nbformat.validate(nb)


# === HideHiddenTests =============================================================================

def hidden(*cells, config=None, call=False):
    nb = notebook(cells)
    step = HideHiddenTests(config=config) if config is not None else HideHiddenTests()
    nb, _ = step(nb, {}) if call else step.preprocess(nb, {})
    return nb


def test_hidden_tests_are_cut_from_the_source_with_their_indentation():
    cell = author.tests("test_a", 2, "check('v', 1)\nfor i in range(2):\n    ### BEGIN HIDDEN TESTS\n"
                                     "    observe('h', i)\n    ### END HIDDEN TESTS\nafter()\n"
                                     "### BEGIN HIDDEN TESTS\nobserve('h2', 2)\n### END HIDDEN TESTS")
    assert hidden(cell).cells[0].source == ("check('v', 1)\nfor i in range(2):\n    # (hidden tests are not shown)\n"
                                            "after()\n# (hidden tests are not shown)")


def test_a_region_left_open_hides_everything_after_it():
    cell = author.tests("test_a", 2, "check('v', 1)\n### BEGIN HIDDEN TESTS\nobserve('h', 2)\nobserve('h3', 3)")
    assert hidden(cell).cells[0].source == "check('v', 1)\n# (hidden tests are not shown)"


def test_with_hidden_tests_only_the_verdicts_of_graded_cells_stay():
    verdict = [stream("✔ all 2 checks match the reference solution (1 visible, 1 hidden)\n")]
    graded = author.tests("test_a", 2, SOURCE_A)
    graded.outputs = copy.deepcopy(verdict)
    printer = ran("print(In)", [stream("observe('a(2)', a(2))"), display({"text/plain": "x"})])
    quiet = ran("y = 1")
    nb = hidden(author.md("text"), printer, graded, quiet)
    assert nb.cells[1].outputs == [stream(LEFT_OUT)] and nb.cells[2].outputs == verdict and nb.cells[3].outputs == []


def test_without_hidden_tests_the_notebook_is_left_as_it_is():
    cells = [ran("print(1)", [stream("1\n")]), author.tests("test_a", 2, "check('v', 1)")]
    assert hidden(*copy.deepcopy(cells)).cells == cells


def test_nbgraders_configured_delimiters_are_the_ones_cut():
    c = Config()
    c.ClearHiddenTests.begin_test_delimeter = "HIDE FROM HERE"
    c.ClearHiddenTests.end_test_delimeter = "HIDE TO HERE"
    cell = author.tests("test_a", 2, "v()\n# HIDE FROM HERE\nh()\n# HIDE TO HERE\nw()")
    nb = hidden(cell, ran("print(1)", [stream("1")]), config=c)
    assert nb.cells[0].source == "v()\n# (hidden tests are not shown)\nw()"
    assert nb.cells[1].outputs == [stream(LEFT_OUT)]
    assert hidden(author.tests("test_a", 2, SOURCE_A), config=c).cells[0].source == SOURCE_A


def test_released_hidden_tests_leave_the_notebook_as_graded():
    c = Config()
    c.HideHiddenTests.enabled = False
    cells = [author.tests("test_a", 2, SOURCE_A), ran("print(1)", [stream("1")])]
    assert hidden(*copy.deepcopy(cells), config=c, call=True).cells == cells
    assert hidden(*copy.deepcopy(cells), call=True).cells[0].source != SOURCE_A


# === the HTML cleaner ============================================================================

@pytest.mark.parametrize("hostile, shown", [
    ("<script>alert(1)</script>", "&lt;script&gt;alert(1)&lt;/script&gt;"),
    ("<style>body{display:none}</style>", "&lt;style&gt;body{display:none}&lt;/style&gt;"),
    ("<img src=x onerror=\"alert(1)\">", "<img>"),
    ("<img src=\"https://x.org/a.png\" onload=\"y()\">", "<img src=\"https://x.org/a.png\">"),
    ("<p onclick=\"alert(1)\" style=\"position:fixed\">x</p>", "<p>x</p>"),
    ("<a href=\"javascript:alert(1)\">x</a>", "<a>x</a>"),
    ("<a href=\" JaVaScRiPt:alert(1)\">x</a>", "<a>x</a>"),
    ("<a href=\"java&#x09;script:alert(1)\">x</a>", "<a>x</a>"),
    ("<a href=\"data:text/html,<script>\">x</a>", "<a>x</a>"),
    ("<img src=\"data:image/svg+xml;base64,PHN2Zz4=\">", "<img>"),
    ("<iframe src=\"https://example.org\"></iframe>", "&lt;iframe src=\"https://example.org\"&gt;&lt;/iframe&gt;"),
    ("<svg onload=\"alert(1)\"></svg>", "&lt;svg onload=\"alert(1)\"&gt;&lt;/svg&gt;"),
    ("<form action=\"https://example.org\"><input></form>",
     "&lt;form action=\"https://example.org\"&gt;&lt;input&gt;&lt;/form&gt;"),
    ("<!-- <script>x</script> -->", ""),
    (b"<script>x</script>", "&lt;script&gt;x&lt;/script&gt;"),
])
def test_safe_html_leaves_nothing_that_runs_and_shows_the_rest_as_text(hostile, shown):
    assert safe_html(hostile) == shown


@pytest.mark.parametrize("kept", [
    "<h1 id=\"t\">Title</h1>", "<p class=\"note\" title=\"t\"><strong>b</strong> <em>i</em> <code>c</code></p>",
    "<a href=\"https://example.org/x\">l</a>", "<a href=\"mailto:a@b.org\">m</a>", "<a href=\"#section\">s</a>",
    "<img alt=\"fig\" src=\"data:image/png;base64,iVBORw0KGgo=\">",
    "<table><tbody><tr><td align=\"right\" colspan=\"2\">1</td></tr></tbody></table>",
    "<details><summary>more</summary>text</details>",
])
def test_safe_html_keeps_text_tables_links_and_images(kept):
    assert safe_html(kept) == kept


def test_the_markdown_filter_renders_then_cleans():
    html = SafeMarkdown(HTMLExporter())({}, "# Title\n\n**bold** <script>alert(1)</script> [x](javascript:alert(1))")
    assert "<strong>bold</strong>" in html and "<h1" in html
    assert "<script" not in html and "javascript:" not in html


def test_configure_html_sanitises_and_replaces_both_filters():
    c = Config()
    configure_html(c)
    assert c.HTMLExporter.sanitize_html is True
    assert c.HTMLExporter.filters == {"markdown2html": "utils.grading.steps.safe_html.SafeMarkdown2HTML",
                                      "clean_html": "utils.grading.steps.safe_html.safe_html"}


# === KernelLanguageInfo ==========================================================================

def test_a_generated_notebook_gets_the_kernels_full_language_info():
    nb = notebook(metadata={"language_info": {"name": "python"}, "kernelspec": {"name": "python3"}})
    nb, _ = KernelLanguageInfo()(nb, {})
    assert nb.metadata.language_info == IPythonKernel.language_info and set(nb.metadata.language_info) > {
        "name", "version", "mimetype", "codemirror_mode", "pygments_lexer", "file_extension"}
    assert nb.metadata.kernelspec == {"name": "python3"}


def test_a_forged_language_info_is_replaced_by_the_kernels():
    nb = notebook(metadata={"language_info": "<script>"})
    nb, _ = KernelLanguageInfo().preprocess(nb, {})
    assert nb.metadata.language_info == IPythonKernel.language_info


def test_each_notebook_gets_a_copy_of_the_kernels_language_info():
    info = kernel_language_info()
    info["codemirror_mode"]["version"] = 99                             # one notebook's edit
    assert kernel_language_info() == IPythonKernel.language_info
    assert IPythonKernel.language_info["codemirror_mode"]["version"] != 99


def test_stamp_leaves_checkpoints_alone(tmp_path):
    (tmp_path / ".ipynb_checkpoints").mkdir()
    for path in (tmp_path / "a.ipynb", tmp_path / ".ipynb_checkpoints" / "a-checkpoint.ipynb"):
        nbformat.write(new_notebook(), str(path))
    assert stamp(tmp_path) == [tmp_path / "a.ipynb"]
    checkpoint = json.loads((tmp_path / ".ipynb_checkpoints" / "a-checkpoint.ipynb").read_text())
    assert "language_info" not in checkpoint["metadata"]
