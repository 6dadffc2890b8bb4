"""Verdicts: right after Execute, judge each graded test cell's observations against the reference's
(observations.judge, under the reference's rules) and replace ALL the cell's outputs by one: a
stdout line "✔ all N checks match the reference solution (v visible, h hidden)", or one error
(CheckFailed, or the type of the error the cell raised) with a one-line value and traceback. So
nothing the kernel wrote (an execute_result nbgrader reads as partial credit, stderr, a forged
observation or message) reaches SaveAutoGrades, the gradebook copy or the feedback.
"""

from __future__ import annotations

import re

from nbformat.notebooknode import NotebookNode
from nbgrader.preprocessors import NbGraderPreprocessor

from utils.grading.base import grade_id, is_test_cell
from utils.grading.observations import Verdict, collect, judge, unreadable, visible_labels
from utils.grading.reference import RESOURCE_KEY

MAX_LINE = 300
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]{0,80}")


def one_line(text: object, limit: int = MAX_LINE) -> str:
    first = (str(text).strip().splitlines() or [""])[0]
    return first if len(first) <= limit else first[: limit - 3] + "..."


def kernel_error(outputs: list) -> tuple[str, str] | None:
    """(type, first line) of the first error the kernel reported in a cell, or None."""
    for out in outputs or []:
        if out.get("output_type") == "error":
            name = str(out.get("ename", ""))
            name = name if _NAME.fullmatch(name) else "Error"
            return name, one_line(out.get("evalue", ""))
    return None


def verdict_outputs(verdict: Verdict, ename: str = "CheckFailed") -> list[NotebookNode]:
    """The one output a graded cell keeps."""
    message = one_line(verdict.message)
    if verdict.passed:
        return [NotebookNode(output_type="stream", name="stdout", text=f"✔ {message}\n")]
    return [NotebookNode(output_type="error", ename=ename, evalue=message, traceback=[f"{ename}: {message}"])]


def judge_cell(cell, reference) -> tuple[Verdict, str]:
    """(verdict, error name) of one executed graded test cell against the reference."""
    gid = grade_id(cell)
    error = kernel_error(cell.get("outputs", []))
    if error is not None:
        return Verdict(False, error[1] or "(no message)"), error[0]
    if reference is None or gid not in reference.observations:
        return Verdict(False, f"the reference solution has no graded cell '{gid}'; ask the instructor"), "CheckFailed"
    bad = unreadable(cell.get("outputs", []))
    if bad:
        return Verdict(False, f"{bad} of the cell's checks reported a value the grader cannot read (malformed, "
                              f"too large or nested too deep): the test cell did not run as written"), "CheckFailed"
    shown = visible_labels(reference.sources[gid])
    return judge(reference.observations[gid], collect(cell.get("outputs", [])), shown), "CheckFailed"


class Verdicts(NbGraderPreprocessor):

    def preprocess(self, nb, resources):
        reference = resources.get(RESOURCE_KEY)
        for cell in nb.cells:
            if is_test_cell(cell):
                try:
                    verdict, ename = judge_cell(cell, reference)
                except Exception as err:  # noqa: BLE001 - any value a kernel sent: the cell fails
                    verdict, ename = Verdict(False, f"the cell's results could not be read ({type(err).__name__}): "
                                                    f"the test cell did not run as written"), "CheckFailed"
                cell.outputs = verdict_outputs(verdict, ename)
        return nb, resources


def read_verdicts(nb) -> dict[str, tuple[bool, str] | None]:
    """grade_id -> (passed, the verdict's line) of an autograded notebook's graded test cells;
    None for a cell without a verdict (Verdicts did not run on it)."""
    found = {}
    for cell in nb.cells:
        if not is_test_cell(cell):
            continue
        outs = cell.get("outputs", [])
        if len(outs) == 1 and outs[0].get("output_type") == "stream" and outs[0].get("name") == "stdout":
            found[grade_id(cell)] = (True, one_line(outs[0].get("text", "")).lstrip("✔ "))
        elif len(outs) == 1 and outs[0].get("output_type") == "error":
            found[grade_id(cell)] = (False, "{}: {}".format(*kernel_error(outs)))
        else:
            found[grade_id(cell)] = None
    return found
