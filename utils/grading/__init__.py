"""The course's grading: graded cells observe in the student's kernel, the grader judges outside it.

nbgrader_config.py calls `install(c)`, so `utils.grading.run`, plain `nbgrader autograde`, `utils.authoring.check`,
the demo and the formgrader all grade through the same steps (one file each, as nbgrader's own
preprocessors):

  sanitize   WellFormed (well_formed.py)       every cell rebuilt from well-typed parts: a
                                                notebook is hostile data, any type anywhere
             SafeOverwriteCells (overwrite.py)  nbgrader's OverwriteCells that survives copied or
                                                unknown cells and restores edited cell roles
  autograde  ReferenceObservations (reference.py)  the reference solution's observations
             SafeExecute (execute.py)          each kernel in the bubblewrap sandbox; a dead or
                                                hung kernel costs only its cell
             Verdicts (verdicts.py)            judge each graded test cell against the reference
                                                and replace its outputs by one verdict line
             KernelFields (kernel_fields.py)   every field the kernel's messages set (execution
                                                counts, metadata, language_info) rewritten or dropped
             LimitOutputSize (limit_output.py) cap what the other cells printed, per cell and
                                                per notebook
  feedback   HideHiddenTests (hide_hidden.py)  hidden tests cut from the feedback's source, and
                                                the outputs of ungraded cells left out
  release    KernelLanguageInfo (../language_info.py)  the kernel's full language_info in each
                                                generated notebook, so it opens unmodified
  HTML       safe_html.py                      student Markdown and outputs sanitised wherever
                                                nbconvert renders a submission (feedback, formgrader)

observations.py holds the judging itself (collect, judge), base.py the notes each step leaves in
the graded notebook for `utils.grading.run`'s report.
"""

from __future__ import annotations


def install(c) -> None:
    """Put the course's steps into nbgrader's pipelines in config `c` (nbgrader's own steps kept)."""
    from nbgrader.converters.autograde import Autograde
    from nbgrader.converters.generate_feedback import GenerateFeedback
    from nbgrader.preprocessors import Execute, LimitOutput, OverwriteCells

    from utils.grading.steps.execute import SafeExecute
    from utils.grading.steps.hide_hidden import HideHiddenTests
    from utils.grading.steps.kernel_fields import KernelFields
    from utils.grading.steps.safe_html import configure_html
    from utils.grading.steps.limit_output import LimitOutputSize
    from utils.grading.steps.overwrite import SafeOverwriteCells
    from utils.grading.reference import ReferenceObservations
    from utils.grading.steps.verdicts import Verdicts
    from utils.grading.steps.well_formed import WellFormed

    replace = {Execute: [ReferenceObservations, SafeExecute, Verdicts, KernelFields],
               LimitOutput: [LimitOutputSize]}
    c.Autograde.autograde_preprocessors = [
        step for pp in Autograde.class_traits()["autograde_preprocessors"].default() for step in replace.get(pp, [pp])]
    c.Autograde.sanitize_preprocessors = [WellFormed] + [
        SafeOverwriteCells if pp is OverwriteCells else pp
        for pp in Autograde.class_traits()["sanitize_preprocessors"].default()]
    # Generated notebooks carry the kernel's full language_info, so they open unmodified.
    from nbgrader.converters.generate_assignment import GenerateAssignment

    from utils.authoring.language_info import KernelLanguageInfo

    c.GenerateAssignment.preprocessors = [
        *GenerateAssignment.class_traits()["preprocessors"].default(), KernelLanguageInfo]
    feedback = list(GenerateFeedback.class_traits()["preprocessors"].default())
    feedback.insert(1, HideHiddenTests)  # after GetGrades, before the HTML header
    c.GenerateFeedback.preprocessors = feedback
    configure_html(c)
    stamp_gradebooks_in_process()


def alembic_head() -> str:
    """The newest revision of nbgrader's gradebook schema, read from nbgrader's own migration
    scripts in this process."""
    from alembic.script import ScriptDirectory
    from nbgrader.dbutil import ALEMBIC_DIR

    return ScriptDirectory(ALEMBIC_DIR).get_current_head()


def stamp_gradebooks_in_process() -> None:
    """nbgrader stamps every new gradebook with the schema's revision by running `alembic heads`
    as a subprocess (a Python start and alembic's imports: a second or two of CPU each time, and
    every scratch course of check, demo and build has a new gradebook). The same revision, read
    in the nbgrader process instead (tests/test_grading.py checks the two agree)."""
    import nbgrader.api

    nbgrader.api.get_alembic_version = alembic_head
