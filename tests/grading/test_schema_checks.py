"""The compiled schema checks take and refuse exactly what nbformat's and nbgrader's own do."""

from __future__ import annotations

import copy

import jsonschema
import nbformat.v4.nbbase as nbbase
import pytest
from nbformat.notebooknode import from_dict
from nbgrader.nbgraderformat import MetadataValidator, SchemaTooOldError, ValidationError
from nbgrader.preprocessors import CheckCellMetadata

from utils.grading.steps import schema_checks
from utils.grading.steps.schema_checks import CheckCellMetadataOnce

OUTPUTS = [   # what a kernel may send, well formed or not
    {"output_type": "stream", "name": "stdout", "text": "hi\n"},
    {"output_type": "stream", "name": "stderr", "text": ["a", "b"]},
    {"output_type": "stream", "name": "stdout", "text": 3},
    {"output_type": "stream", "name": "stdout"},
    {"output_type": "stream", "name": "stdout", "text": "x", "extra": 1},
    {"output_type": "display_data", "data": {"text/plain": "x"}, "metadata": {}},
    {"output_type": "display_data", "data": {"text/plain": ["x", "y"]}, "metadata": {}},
    {"output_type": "display_data", "data": {"application/json": {"a": [1, None]}}, "metadata": {}},
    {"output_type": "display_data", "data": {"image/png": 5}, "metadata": {}},
    {"output_type": "display_data", "data": {"text/plain": "x"}, "metadata": []},
    {"output_type": "display_data", "data": "x", "metadata": {}},
    {"output_type": "display_data", "data": {"text/plain": "x"}},
    {"output_type": "execute_result", "data": {"text/plain": "x"}, "metadata": {}, "execution_count": 1},
    {"output_type": "execute_result", "data": {"text/plain": "x"}, "metadata": {}, "execution_count": None},
    {"output_type": "execute_result", "data": {"text/plain": "x"}, "metadata": {}, "execution_count": -1},
    {"output_type": "execute_result", "data": {"text/plain": "x"}, "metadata": {}, "execution_count": "1"},
    {"output_type": "error", "ename": "E", "evalue": "v", "traceback": ["t"]},
    {"output_type": "error", "ename": "E", "evalue": "v", "traceback": "t"},
    {"output_type": "error", "ename": 1, "evalue": "v", "traceback": ["t"]},
    {"output_type": "nope"},
    {},
    [],
    None,
]


def _verdict(check, node, ref="output") -> str:
    try:
        check(node, ref)
    except Exception as err:  # noqa: BLE001 - the verdict is the error's kind and words
        return f"{type(err).__name__}: {err}"
    return "taken"


@pytest.mark.parametrize("ref", schema_checks.FAST)
@pytest.mark.parametrize("output", OUTPUTS, ids=range(len(OUTPUTS)))
def test_an_output_is_taken_or_refused_as_nbformat_does(output, ref):
    node = from_dict(copy.deepcopy(output)) if isinstance(output, dict) else output
    assert _verdict(schema_checks._validate, node, ref) == _verdict(schema_checks._nbformat_validate, node, ref)


def test_the_corpus_holds_both_kinds():
    verdicts = [_verdict(schema_checks._nbformat_validate, o) for o in OUTPUTS]
    assert "taken" in verdicts and len([v for v in verdicts if v != "taken"]) >= 10


def test_the_fast_path_is_what_checks(monkeypatch):
    """A well-formed output never reaches nbformat's own check once installed; control: a refused one does."""
    schema_checks.fast_node_checks()
    calls = []
    monkeypatch.setattr(schema_checks, "_nbformat_validate", lambda node, ref=None: calls.append(ref))
    nbbase.output_from_msg({"header": {"msg_type": "stream"}, "content": {"name": "stdout", "text": "x"}})
    assert calls == []
    schema_checks._validate({"output_type": "stream"}, "stream")
    assert calls == ["stream"]


def _nb(metadata):
    cell = nbbase.new_code_cell("x = 1")
    cell.metadata["nbgrader"] = metadata
    return nbbase.new_notebook(cells=[cell])


GOOD = {"grade": True, "grade_id": "t1", "locked": True, "points": 2, "schema_version": 3, "solution": False,
        "task": False}


@pytest.mark.parametrize("metadata", [
    GOOD,
    {**GOOD, "points": "two"},
    {**GOOD, "grade_id": 7},
    {**GOOD, "solution": "yes"},
    {k: v for k, v in GOOD.items() if k != "grade_id"},
    {**GOOD, "schema_version": 1},
], ids=["good", "points-text", "id-number", "solution-text", "no-id", "old-schema"])
def test_cell_metadata_is_judged_as_nbgrader_judges_it(metadata):
    def outcome(step):
        try:
            step().preprocess(_nb(copy.deepcopy(metadata)), {})
        except (ValidationError, SchemaTooOldError) as err:
            return f"{type(err).__name__}: {err}"
        return "taken"

    assert outcome(CheckCellMetadataOnce) == outcome(CheckCellMetadata)


def test_the_metadata_schema_is_checked_once(monkeypatch):
    """What made nbgrader's check slow: jsonschema.validate checks the schema before every cell."""
    schema_checks._metadata_validator.cache_clear()
    checked = []
    real = jsonschema.validators.validator_for(MetadataValidator().schema).check_schema
    monkeypatch.setattr(jsonschema.validators.validator_for(MetadataValidator().schema), "check_schema",
                        lambda schema: checked.append(1) or real(schema))
    nb = _nb(dict(GOOD))
    for i in range(5):
        cell = copy.deepcopy(nb.cells[0])
        cell.id, cell.metadata["nbgrader"]["grade_id"] = f"c{i}", f"t{i + 2}"
        nb.cells.append(cell)
    CheckCellMetadataOnce().preprocess(nb, {})
    assert len(checked) == 1
    CheckCellMetadata().preprocess(nb, {})
    assert len(checked) == 7   # control: nbgrader's own checks it once a cell
