"""ReferenceObservations: the lesson's reference run, cached, checked against the gradebook and put
into the resources the later steps read (tests/steps_common.py says how these tests are built)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import nbformat
import pytest
from traitlets.config import Config

from course.observe import MIME
from utils.authoring import nbauthor as author
from utils.grading import reference_run as reference_module
from utils.grading.reference_run import (GIVEN, RESOURCE_KEY, Reference, ReferenceRefused, _problems, cache_key,
    check_gradebook, reference_for)
from utils.grading.steps.observations import collect
from utils.grading.steps.reference_observations import ReferenceObservations
from steps_common import (LESSON, NOTEBOOK, SOURCE_A, SOURCE_B, display, error, lesson, lesson_reference,
    observed, submitted)


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


def test_a_work_folder_runs_no_reference_of_its_own(source, tmp_path, no_kernel):
    """A work folder holds the reference its grader gave it (work.py writes its name beside it). A
    process that keys the lesson otherwise (another library list, another course package) is
    refused, naming both keys, instead of running the reference again in every work folder."""
    folder = tmp_path / "work" / ".grading-cache"
    folder.mkdir(parents=True)
    (folder / "0123abcd.json").write_text(json.dumps(lesson_reference().to_json()))
    (folder / GIVEN).write_text("0123abcd.json")
    with pytest.raises(ReferenceRefused, match=rf"given the reference '0123abcd.json', but this process keys "
                                               rf"{NOTEBOOK}.ipynb as {cache_key(source)}.json"):
        reference_for(source, folder)
    cache(source, folder, lesson_reference())   # given under the key this process computes: read
    assert reference_for(source, folder).cached


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
