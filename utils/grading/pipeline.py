"""The course's steps in nbgrader's own pipelines: nbgrader_config.py calls `install(c)`, so
`python -m utils.grading`, plain `nbgrader autograde`, `utils.authoring.check`, the demo and the
formgrader all grade through the same steps, nbgrader's own kept in their places:

  sanitize   WellFormed, SafeOverwriteCells (for OverwriteCells), nbgrader's others
  autograde  ReferenceObservations, SafeExecute, Verdicts, KernelFields (for Execute),
             LimitOutputSize (for LimitOutput), SaveAutoGrades and the rest of nbgrader's,
             then WriteResult: the notebook's result file (utils/grading/result_file.py)
  feedback   HideHiddenTests after GetGrades; the HTML sanitised (safe_html.py)
  release    KernelLanguageInfo last

Every sanitize and autograde step, nbgrader's included, writes the notebook's result file with the
reason when it fails (steps/write_result.py, recording_failure).
"""

from __future__ import annotations

import functools

import nbgrader.api
from alembic.script import ScriptDirectory
from nbgrader.converters.autograde import Autograde
from nbgrader.converters.generate_assignment import GenerateAssignment
from nbgrader.converters.generate_feedback import GenerateFeedback
from nbgrader.dbutil import ALEMBIC_DIR
from nbgrader.preprocessors import CheckCellMetadata, Execute, LimitOutput, OverwriteCells

from utils.grading.steps.language_info import KernelLanguageInfo
from utils.grading.steps.execute import SafeExecute
from utils.grading.steps.hide_hidden import HideHiddenTests
from utils.grading.steps.kernel_fields import KernelFields
from utils.grading.steps.limit_output import LimitOutputSize
from utils.grading.steps.overwrite import SafeOverwriteCells
from utils.grading.steps.reference_observations import ReferenceObservations
from utils.grading.steps.write_result import WriteResult, recording_failure
from utils.grading.steps.safe_html import configure_html
from utils.grading.steps.schema_checks import CheckCellMetadataOnce, fast_node_checks
from utils.grading.steps.verdicts import Verdicts
from utils.grading.steps.well_formed import WellFormed


def _defaults(app, trait: str) -> list:
    return list(app.class_traits()[trait].default())


@functools.cache
def _pipelines() -> dict[str, tuple]:
    """The steps of each nbgrader pipeline, built once per process: every nbgrader command reads
    the course's config (three times), and wrapping each step in a class of its own each time cost
    about 0.03 CPU-s a submission."""
    replace = {Execute: [ReferenceObservations, SafeExecute, Verdicts, KernelFields], LimitOutput: [LimitOutputSize],
               CheckCellMetadata: [CheckCellMetadataOnce]}
    autograde = [step for pp in _defaults(Autograde, "autograde_preprocessors") for step in replace.get(pp, [pp])]
    sanitize = [WellFormed] + [{OverwriteCells: SafeOverwriteCells, CheckCellMetadata: CheckCellMetadataOnce}.get(pp, pp)
                               for pp in _defaults(Autograde, "sanitize_preprocessors")]
    feedback = _defaults(GenerateFeedback, "preprocessors")
    feedback.insert(1, HideHiddenTests)  # after GetGrades, before the HTML header
    return {
        "sanitize": tuple(recording_failure(step) for step in sanitize),
        "autograde": tuple(recording_failure(step) for step in autograde + [WriteResult]),
        # Generated notebooks carry the kernel's full language_info, so they open unmodified.
        "assignment": (*(CheckCellMetadataOnce if pp is CheckCellMetadata else pp
                         for pp in _defaults(GenerateAssignment, "preprocessors")), KernelLanguageInfo),
        "feedback": tuple(feedback),
    }


def install(c) -> None:
    """Put the course's steps into nbgrader's pipelines in config `c` (nbgrader's own steps kept)."""
    steps = _pipelines()
    c.Autograde.sanitize_preprocessors = list(steps["sanitize"])
    c.Autograde.autograde_preprocessors = list(steps["autograde"])
    c.GenerateAssignment.preprocessors = list(steps["assignment"])
    c.GenerateFeedback.preprocessors = list(steps["feedback"])
    configure_html(c)
    stamp_gradebooks_in_process()
    fast_node_checks()


def alembic_head() -> str:
    """The newest revision of nbgrader's gradebook schema, read from nbgrader's own migration
    scripts in this process."""
    return ScriptDirectory(ALEMBIC_DIR).get_current_head()


def stamp_gradebooks_in_process() -> None:
    """nbgrader stamps every new gradebook with the schema's revision by running `alembic heads`
    as a subprocess (a Python start and alembic's imports: a second or two of CPU each time, and
    every scratch course of check, demo and build has a new gradebook). The same revision, read
    in the nbgrader process instead (tests/grading/test_grading.py checks the two agree)."""
    nbgrader.api.get_alembic_version = alembic_head
