"""What the tests of the course's grading steps share (tests/test_steps_*.py, one file per step, as
nbgrader tests its preprocessors): a lesson of two exercises built in memory, outputs as a kernel
sends them, the gradebook nbgrader's generate_assignment leaves and the lesson's reference.

Each test builds a notebook of a few cells, instantiates its step, calls `step.preprocess(nb,
resources)` and asserts on what it left; hostile inputs (wrong types in metadata, forged outputs and
notes, huge outputs) where the step's job is to survive them. No kernel runs but in SafeExecute's
last tests (without the sandbox, set off through the config: what they test is the grader's own
handling); the reference is built in memory or cached. The full gradings stay in
test_bad_submissions.py, test_cheats.py, test_sandbox_*.py and tests/grading_runs.py.

Steps, in pipeline order (utils/grading/__init__.py): WellFormed, SafeOverwriteCells,
ReferenceObservations, SafeExecute, Verdicts, KernelFields, LimitOutputSize, HideHiddenTests, the
HTML cleaner, KernelLanguageInfo."""

from __future__ import annotations

import copy

import nbformat
import pytest
from nbformat.notebooknode import from_dict
from nbformat.v4 import new_code_cell, new_notebook
from nbgrader.api import Gradebook
from nbgrader.preprocessors import ComputeChecksums, SaveCells

from course.observe import MIME
from utils.authoring import nbauthor as author
from utils.grading.pipeline import stamp_gradebooks_in_process
from utils.grading.reference_run import Reference
from utils.grading.steps.observations import Observation



def _pillow_image(kind: str, mode: str, size: tuple[int, int], colour) -> str:
    import base64
    import io
    from PIL import Image
    out = io.BytesIO()
    Image.new(mode, size, colour).save(out, kind)
    return base64.b64encode(out.getvalue()).decode()


# images as a Markdown cell's attachments hold them (base64): written by Pillow, so that Pillow
# writes them again byte for byte (steps/images.py decodes every image and writes it again)
PNG = _pillow_image("PNG", "RGBA", (1, 1), (255, 0, 0, 255))
JPEG = _pillow_image("JPEG", "RGB", (8, 8), (200, 30, 30))
SVG = "PHN2ZyBvbmxvYWQ9ImFsZXJ0KDEpIj48c2NyaXB0PmFsZXJ0KDIpPC9zY3JpcHQ+PC9zdmc+"   # <svg onload=..><script>

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


def obs(label, value, rule="close") -> Observation:
    return Observation(label, rule, 1e-6, 0.0, value)


def lesson_reference() -> Reference:
    return Reference({"test_a": SOURCE_A, "test_b": SOURCE_B},
                     {"test_a": [obs("a(1)", 1.0), obs("a(2)", 2.0)], "test_b": [obs("b(1)", 2.0), obs("b(2)", 4.0)]},
                     1.5, False)


def ran(source="x", outputs=(), count=None):
    cell = new_code_cell(source)
    cell.outputs, cell.execution_count = list(outputs), count
    return cell
