"""The same schema checks as nbformat's and nbgrader's, without compiling a schema for every node.

Two checks run hundreds of times per submission and did the same work each time:

- nbformat checks every output the kernel sends (`output_from_msg`, then `new_output`, checks it
  against the notebook schema's `output` definition) with jsonschema, walking the schema anew for
  each one; the executor checks each output twice (`SafeExecute` before handing it to nbclient).
  `fast_node_checks` compiles each output definition once with fastjsonschema (the validator nbformat
  itself uses for whole notebooks) and lets a node through when the compiled check passes. A node
  it refuses is checked again by nbformat's own `validate`, so what is refused, and the error
  that says why, are nbformat's exactly.
- nbgrader's CheckCellMetadata calls `jsonschema.validate` for every graded cell, which checks the
  metadata schema itself before each cell (about 0.8 ms of the 0.85 a cell). `CheckCellMetadataOnce`
  builds the validator once per process and raises the error `jsonschema.validate` would raise.

Measured on lesson 2 (8 submissions of about 550 outputs and 47 graded cells each): about 0.09
and 0.07 CPU-s a submission (docs/grading-processes.md).
"""

from __future__ import annotations

import functools
import traceback

import fastjsonschema
import nbformat.v4.nbbase as nbbase
from jsonschema.exceptions import best_match
from jsonschema.validators import validator_for
from nbformat.validator import _get_schema_json
from nbgrader.nbgraderformat.common import BaseMetadataValidator
from nbgrader.nbgraderformat import MetadataValidator, SchemaTooNewError, SchemaTooOldError, ValidationError
from nbgrader.preprocessors import CheckCellMetadata

_nbformat_validate = nbbase.validate   # nbformat's own: the judge of every node the fast check refuses


@functools.lru_cache(maxsize=None)
def _compiled(ref: str):
    """The notebook schema's definition `ref`, compiled (once per process)."""
    schema = _get_schema_json(nbbase, nbbase.nbformat, nbbase.nbformat_minor)   # the schema nbformat checks with
    return fastjsonschema.compile({"$schema": schema.get("$schema"), "$ref": f"#/definitions/{ref}",
                                   "definitions": schema["definitions"]})


# the definitions checked hundreds of times a submission: new_output checks an output against its
# own type's definition, a notebook's outputs are checked against "output"
FAST = ("output", "stream", "display_data", "execute_result", "error")


def _validate(node, ref=None):
    if ref in FAST:
        try:
            _compiled(ref)(node)
            return None
        except Exception:  # noqa: BLE001 - refused, or a definition it cannot compile: nbformat decides
            pass
    return _nbformat_validate(node, ref=ref)


def fast_node_checks() -> None:
    """nbformat's v4 node constructors (new_output, new_code_cell...) check with `_validate` in
    this process. Idempotent; the worker calls it before forking, the course's config in every
    nbgrader process."""
    if nbbase.validate is not _validate:
        nbbase.validate = _validate
    for ref in FAST:   # compiled here, inherited by every child the worker forks
        _compiled(ref)


class _SchemaOnce(BaseMetadataValidator):
    """nbgrader's schema check of one cell's metadata (BaseMetadataValidator.validate_cell) with a
    jsonschema validator built, and its schema checked, once per process instead of once per cell."""

    def validate_cell(self, cell) -> None:
        if "nbgrader" not in cell.metadata:
            return
        meta = cell.metadata["nbgrader"]
        version = meta.get("schema_version", 0)
        if version < self.schema_version:
            raise SchemaTooOldError(f"Outdated schema version: {version} (expected {self.schema_version})",
                                    version, self.schema_version)
        if version > self.schema_version:
            raise SchemaTooNewError(f"Schema version is too new: {version} (expected {self.schema_version})",
                                    version, self.schema_version)
        error = best_match(_metadata_validator().iter_errors(meta))
        if error is not None:
            raise error


class _MetadataOnce(MetadataValidator, _SchemaOnce):
    """nbgrader's metadata validator (its own checks of ids, points and cell types kept), whose
    call to the base class's schema check lands on _SchemaOnce."""


@functools.lru_cache(maxsize=None)
def _metadata_validator():
    schema = MetadataValidator().schema
    cls = validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


class CheckCellMetadataOnce(CheckCellMetadata):
    """nbgrader's CheckCellMetadata (the same checks, log lines and error) with `_MetadataOnce`."""

    def preprocess(self, nb, resources):
        try:
            _MetadataOnce().validate_nb(nb)
        except ValidationError as err:
            self.log.error(traceback.format_exc())
            msg = "Notebook failed to validate; the nbgrader metadata may be corrupted."
            self.log.error(msg)
            raise ValidationError(msg) from err
        return nb, resources
