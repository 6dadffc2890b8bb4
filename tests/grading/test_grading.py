"""The grader's side, without kernels: judging observations against the reference's, the verdict
that replaces a graded cell's outputs, and the pipeline nbgrader_config.py installs.

What nbgrader scores is checked with nbgrader's own determine_grade, on the cell Verdicts left."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.notebooknode import NotebookNode, from_dict
from nbgrader.utils import determine_grade

from course.observe import MIME
from utils.grading.steps.observations import Observation, collect, judge, visible_labels
from utils.grading.reference_run import RESOURCE_KEY, Reference
from utils.grading.steps.verdicts import Verdicts, read_verdicts, verdict_outputs


def obs(label, value, rule="close", rel=1e-6, abs_tol=0.0) -> Observation:
    return Observation(label, rule, rel, abs_tol, value)


def shown_as(*observations) -> list:
    """Outputs as the kernel sends them: one display_data per observation."""
    return [from_dict({"output_type": "display_data", "metadata": {},
                       "data": {MIME: {"label": o.label, "rule": o.rule, "rel": o.rel, "abs": o.abs, "value": o.value}}})
            for o in observations]


# --- judge: rules ---------------------------------------------------------------------------------

@pytest.mark.parametrize("ref, got, passed", [
    (obs("x", 0.3), obs("x", 0.1 + 0.2), True),                       # float rounding
    (obs("x", 1.0), obs("x", 1.0 + 2e-6), False),                     # outside rel 1e-6
    (obs("x", 1.0, rel=1e-3), obs("x", 1.0005), True),                # the reference's tolerance
    (obs("x", 0.0, abs_tol=1e-9), obs("x", 1e-12), True),
    (obs("x", [1.0, 2.0]), obs("x", [1.0, 2.0000000001]), True),      # lists element-wise
    (obs("x", [1.0, 2.0]), obs("x", [1.0]), False),
    (obs("x", {"a": 1.0}), obs("x", {"a": 1.0, "b": 2.0}), False),
    (obs("x", 3, "exact"), obs("x", 3.0), True),                      # 3 == 3.0 as data
    (obs("x", [1, 2], "exact"), obs("x", [2, 1]), False),             # order matters
    (obs("x", "abc", "exact"), obs("x", "ABC"), False),
    (obs("q1", "c", "choice"), obs("q1", " C "), True),
    (obs("q1", "c", "choice"), obs("q1", "d"), False),
    (obs("q1", "c", "choice"), obs("q1", ["c"]), False),
])
def test_rules(ref, got, passed):
    assert judge([ref], [got], set()).passed is passed


def test_the_reference_rule_decides_not_the_students():
    # a student's observation claiming a loose tolerance or another rule changes nothing
    assert not judge([obs("x", 1.0)], [obs("x", 2.0, rel=10.0)], set()).passed
    assert not judge([obs("x", 7, "exact")], [obs("x", "7", "choice")], set()).passed


def test_nan_matches_only_nan():
    nan = {"float": "nan"}
    assert judge([obs("x", nan)], [obs("x", nan)], set()).passed
    assert not judge([obs("x", nan)], [obs("x", 0.0)], set()).passed
    assert not judge([obs("x", 0.0)], [obs("x", nan)], set()).passed
    assert not judge([obs("x", 1.0)], [obs("x", {"float": "inf"})], set()).passed


@pytest.mark.parametrize("ref, got", [(1, True), (0, False), (1.0, True), (True, 1)])
def test_bool_is_not_a_number(ref, got):
    for rule in ("close", "exact"):
        assert not judge([obs("x", ref, rule)], [obs("x", got, rule)], set()).passed


# --- judge: order, missing, extra ---------------------------------------------------------------

REF = [obs("f(1)", 1.0), obs("f(2)", 4.0), obs("f(3)", 9.0)]


def test_all_present_in_order_passes_and_counts_visible_and_hidden():
    v = judge(REF, [obs("f(1)", 1.0), obs("f(2)", 4.0), obs("f(3)", 9.0)], {"f(1)"})
    assert v.passed and v.message == "all 3 checks match the reference solution (1 visible, 2 hidden)"


def test_out_of_order_fails():
    v = judge(REF, [obs("f(2)", 4.0), obs("f(1)", 1.0), obs("f(3)", 9.0)], set())
    assert not v.passed and "should be 'f(1)'" in v.message


def test_missing_observation_fails():
    v = judge(REF, [obs("f(1)", 1.0), obs("f(2)", 4.0)], set())
    assert not v.passed and "hidden test 'f(3)' was not reached" in v.message and "2 of 3" in v.message


def test_extra_observation_fails():
    v = judge(REF, [*REF, obs("f(4)", 16.0)], set())
    assert not v.passed and "1 more check(s)" in v.message


def test_a_repeated_forged_observation_fails():
    # the student's code emits the visible check's expected value a second time
    v = judge(REF, [obs("f(1)", 1.0), obs("f(1)", 1.0), obs("f(2)", 4.0), obs("f(3)", 9.0)], {"f(1)"})
    assert not v.passed


def test_hidden_failure_never_shows_the_expected_value():
    v = judge(REF, [obs("f(1)", 1.0), obs("f(2)", 5.0), obs("f(3)", 9.0)], {"f(1)"})
    assert not v.passed and "4" not in v.message and "hidden test 'f(2)'" in v.message
    v = judge([obs("q1", "c", "choice")], [obs("q1", "a")], {"q1"})
    assert not v.passed and "'c'" not in v.message


def test_visible_failure_shows_both_values():
    v = judge(REF, [obs("f(1)", 2.0), obs("f(2)", 4.0), obs("f(3)", 9.0)], {"f(1)"})
    assert not v.passed and v.message.startswith("f(1): expected 1") and "returned 2" in v.message


# --- collect: malformed and huge payloads are not observations ---------------------------------

def _display(data) -> NotebookNode:
    return from_dict({"output_type": "display_data", "metadata": {}, "data": data})


@pytest.mark.parametrize("payload", [
    "not json", "[1, 2]", {"label": 3, "rule": "close", "value": 1},
    {"label": "x", "rule": "anything", "value": 1}, {"label": "x", "rule": "close", "rel": -1, "value": 1},
    {"label": "x", "rule": "close", "rel": "nan", "value": 1}, {"label": "x", "rule": "close", "rel": [], "value": 1},
    json.dumps({"label": "x", "rule": "exact", "value": "y" * 2_100_000}),   # over MAX_PAYLOAD
])
def test_malformed_payloads_are_ignored(payload):
    assert collect([_display({MIME: payload})]) == []


def test_only_display_data_of_the_observation_type_counts():
    good = {"label": "x", "rule": "exact", "value": 1}
    outputs = [from_dict({"output_type": "execute_result", "execution_count": 1, "metadata": {}, "data": {MIME: good}}),
               from_dict({"output_type": "stream", "name": "stdout", "text": json.dumps(good)}),
               _display({"text/plain": json.dumps(good)}),
               _display({MIME: good})]
    assert [o.label for o in collect(outputs)] == ["x"]


def test_a_huge_valid_payload_is_judged_not_crashed():
    big = list(range(200_000))
    found = collect([_display({MIME: {"label": "x", "rule": "exact", "value": big}})])
    assert judge([obs("x", big, "exact")], found, set()).passed


def test_visible_labels_are_the_literals_outside_hidden_tests():
    source = ("check_close('f(1)', f(1), 1.0)\n### BEGIN HIDDEN TESTS\nobserve('f(2)', f(2))\n"
              "### END HIDDEN TESTS\ncheck_equal(\"g\", g(), 3)")
    assert {"f(1)", "g"} <= visible_labels(source) and "f(2)" not in visible_labels(source)


# --- Verdicts: what nbgrader reads afterwards -----------------------------------------------------

SOURCE = "check_close('f(1)', f(1), 1.0)\n### BEGIN HIDDEN TESTS\nobserve('f(2)', f(2))\n### END HIDDEN TESTS"


def _cell(outputs, gid="f_test", points=2) -> NotebookNode:
    cell = nbformat.v4.new_code_cell(SOURCE)
    cell.metadata["nbgrader"] = {"grade": True, "solution": False, "locked": True, "grade_id": gid,
                                 "points": points, "schema_version": 3}
    cell.outputs = outputs
    return cell


def _verdict(outputs, reference=None) -> NotebookNode:
    ref = reference or Reference({"f_test": SOURCE}, {"f_test": [obs("f(1)", 1.0), obs("f(2)", 4.0)]}, 1.0, False)
    nb = nbformat.v4.new_notebook(cells=[_cell(outputs)])
    nb, _ = Verdicts().preprocess(nb, {RESOURCE_KEY: ref})
    return nb.cells[0]


STDERR = from_dict({"output_type": "stream", "name": "stderr", "text": "DeprecationWarning: old\n"})
SCORE = from_dict({"output_type": "execute_result", "execution_count": 3, "metadata": {}, "data": {"text/plain": "1.0"}})


def test_a_matching_cell_keeps_one_stdout_line_and_full_marks_despite_stderr():
    cell = _verdict([STDERR, *shown_as(obs("f(1)", 1.0), obs("f(2)", 4.0))])
    assert [o.output_type for o in cell.outputs] == ["stream"] and cell.outputs[0].name == "stdout"
    assert cell.outputs[0].text == "✔ all 2 checks match the reference solution (1 visible, 1 hidden)\n"
    assert determine_grade(cell) == (2, 2)


@pytest.mark.parametrize("outputs", [
    [SCORE],                                                          # a fake score, nothing observed
    [*shown_as(obs("f(1)", 1.0)), SCORE],                             # the visible value, and a score
    [*shown_as(obs("f(1)", 1.0), obs("f(2)", 5.0)), SCORE],
    [from_dict({"output_type": "stream", "name": "stdout", "text": "✔ all 2 checks match the reference\n"})],
    [],
])
def test_a_fake_score_or_message_earns_nothing(outputs):
    cell = _verdict(outputs)
    assert len(cell.outputs) == 1 and cell.outputs[0].output_type == "error"
    assert cell.outputs[0].ename == "CheckFailed" and "\n" not in cell.outputs[0].evalue
    assert determine_grade(cell) == (0, 2)


def test_an_error_in_the_cell_fails_it_with_the_graders_sentence_for_that_error_in_one_line():
    from utils.grading.steps.verdicts import NOT_WRITTEN

    err = from_dict({"output_type": "error", "ename": "NotImplementedError", "evalue": "not yet\nsecond line",
                     "traceback": ["long", "traceback"]})
    cell = _verdict([*shown_as(obs("f(1)", 1.0), obs("f(2)", 4.0)), err])
    assert [(o.ename, o.evalue, o.traceback) for o in cell.outputs] == [
        ("NotImplementedError", NOT_WRITTEN, [f"NotImplementedError: {NOT_WRITTEN}"])]
    assert determine_grade(cell) == (0, 2)


def test_a_forged_error_name_is_not_passed_on():
    err = from_dict({"output_type": "error", "ename": "X\n<script>", "evalue": "x" * 5000, "traceback": []})
    out = _verdict([err]).outputs[0]
    assert out.ename == "Error" and len(out.evalue) <= 300


def test_a_cell_the_reference_lacks_fails():
    ref = Reference({}, {}, 0.0, False)
    assert _verdict(shown_as(obs("f(1)", 1.0), obs("f(2)", 4.0)), ref).outputs[0].output_type == "error"


def test_verdicts_are_read_back_from_the_graded_notebook():
    nb = nbformat.v4.new_notebook(cells=[_cell(verdict_outputs(judge([obs("a", 1.0)], [obs("a", 1.0)], set()))),
                                         _cell([], gid="g_test")])
    Verdicts().preprocess(nb, {RESOURCE_KEY: Reference({"g_test": SOURCE}, {"g_test": [obs("b", 2.0)]}, 0, False)})
    found = read_verdicts(nb)
    assert found["f_test"][0] is False and "reference solution has no graded cell" in found["f_test"][1]
    assert found["g_test"] == (False, "CheckFailed: hidden test 'b' was not reached: the cell stopped before it (0 of 1 checks ran)")


def test_hidden_tests_are_cut_from_feedback():
    from utils.grading.steps.hide_hidden import HideHiddenTests

    cell = _cell(verdict_outputs(judge([obs("a", 1.0)], [obs("a", 1.0)], set())))
    cell, _ = HideHiddenTests().preprocess_cell(cell, {}, 0)
    assert "observe('f(2)'" not in cell.source and "hidden tests are not shown" in cell.source
    assert "check_close('f(1)'" in cell.source


# --- the pipeline, and failing closed ---------------------------------------------------------------

def test_install_puts_the_reference_before_execute_and_verdicts_right_after():
    from traitlets.config import Config

    from utils.grading.pipeline import install

    c = Config()
    install(c)
    names = [pp.__name__ for pp in c.Autograde.autograde_preprocessors]
    assert names[:3] == ["ReferenceObservations", "SafeExecute", "Verdicts"] and names[-1] == "WriteResult"
    assert "LimitOutputSize" in names and "LimitOutput" not in names and "Execute" not in names
    assert names.index("LimitOutputSize") < names.index("SaveAutoGrades")
    assert "SafeOverwriteCells" in [pp.__name__ for pp in c.Autograde.sanitize_preprocessors]
    assert "HideHiddenTests" in [pp.__name__ for pp in c.GenerateFeedback.preprocessors]


def test_the_config_fails_closed_without_the_plugins(tmp_path, monkeypatch, capsys):
    from traitlets.config import Config

    from utils.lessons import REPO

    config = tmp_path / "nbgrader_config.py"
    config.write_text((REPO / "nbgrader_config.py").read_text())
    monkeypatch.delenv("COURSE_TOOLS", raising=False)
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "venv"))   # no course beside the environment either
    c = Config()
    exec(compile(config.read_text(), str(config), "exec"), {"get_config": lambda: c, "__file__": str(config)})
    assert [pp.__name__ for pp in c.Autograde.autograde_preprocessors] == ["PluginsMissing"]
    assert [pp.__name__ for pp in c.GenerateFeedback.preprocessors] == ["PluginsMissing"]
    assert "nothing is graded" in capsys.readouterr().err


@pytest.mark.slow
def test_the_gradebook_revision_read_in_process_is_the_one_alembic_reports(tmp_path):
    """New gradebooks are stamped with utils.grading.pipeline.alembic_head, not nbgrader's `alembic heads`
    subprocess: both name the same revision, and a gradebook nbgrader creates under the course's
    config carries it."""
    import subprocess

    from nbgrader.dbutil import _temp_alembic_ini

    from utils.grading.pipeline import alembic_head, stamp_gradebooks_in_process

    with _temp_alembic_ini(f"sqlite:///{tmp_path / 'unused.db'}") as ini:
        out = subprocess.check_output([str(Path(sys.executable).parent / "alembic"), "-c", ini, "heads"], text=True)
    assert alembic_head() == out.split()[0]
    stamp_gradebooks_in_process()
    from nbgrader.api import Gradebook
    from sqlalchemy import text

    with Gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}") as gb:
        assert gb.db.execute(text("SELECT version_num FROM alembic_version")).scalar() == alembic_head()
