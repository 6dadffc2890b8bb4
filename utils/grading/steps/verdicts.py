"""Verdicts: right after Execute, judge each graded test cell's observations against the reference's
(observations.judge, under the reference's rules) and replace ALL the cell's outputs by one: a
stdout line "✔ all N checks match the reference solution (v visible, h hidden)", or one error
(CheckFailed, or the type of the error the cell raised) with a one-line value and traceback. So
nothing the kernel wrote (an execute_result nbgrader reads as partial credit, stderr, a forged
observation or message) reaches SaveAutoGrades, the gradebook copy or the feedback.

A cell that raised keeps only what the grader decides about it: the error's type where it is one of
Python's own (or the course's CheckFailed), else "Error", and a sentence of the grader's chosen by
that type and by which of the course's messages the kernel's text is (`grader_message`). The kernel's
own message, traceback and exception class name never reach the notebook: the kernel also ran the
hidden tests and could have put them there.
"""

from __future__ import annotations

import builtins
import re

from nbformat.notebooknode import NotebookNode
from nbgrader.preprocessors import NbGraderPreprocessor

from utils.grading.steps.base import grade_id, is_test_cell
from utils.grading.steps.observations import Verdict, collect, judge, unreadable, visible_labels
from utils.grading.reference_run import RESOURCE_KEY

MAX_LINE = 300
VERDICTS_KEY = "course_verdicts"   # resources: grade_id -> (passed, line), for the result file (result_file.py)


def one_line(text: object, limit: int = MAX_LINE) -> str:
    first = (str(text).strip().splitlines() or [""])[0]
    return first if len(first) <= limit else first[: limit - 3] + "..."


# Exception types whose name the grader passes on: Python's own and the course's. Any other name was
# chosen by the kernel (a class of its own can be named after anything it read) and becomes "Error".
KNOWN_ERRORS = frozenset(n for n, v in vars(builtins).items() if isinstance(v, type) and issubclass(v, BaseException)) \
    | {"CheckFailed"}
# The grader's own errors (utils/grading/steps/execute.py): their sentence is the grader's, whatever the text.
GRADER_ERRORS = {
    "NotRun": "not run: the kernel died or hung too often in earlier cells of this notebook",
    "NotebookTimeout": "not run: the notebook ran past its total time limit (SafeExecute.notebook_timeout)",
    "DeadKernelError": "the kernel died while running this cell (os._exit, a signal or a crash); the "
                       "grader started a new kernel and re-ran the cells before it",
    "CellTimeoutError": "the cell ran past its time limit (Execute.timeout) and was interrupted",
}
NOT_WRITTEN = ("a function this cell calls is not written yet: replace `raise NotImplementedError()` in its "
               "cell above with your code, then run that cell and this one")
# (pattern in the kernel's first line, the grader's sentence): the course's own one-line messages
# (course/checks.py and course/stubs.py), recognised but never copied, so the kernel can choose among these few only
COURSE_MESSAGES = (
    (re.compile(r"not written yet"), NOT_WRITTEN),
    (re.compile(r"is not answered yet"), "a quiz question is not answered yet: write your letter, in quotes, "
                                         "in the answer cell above (q1 = \"a\"), then run that cell and this one"),
    (re.compile(r"is not defined yet"), "a name this cell uses is not defined yet: run the cells above this "
                                        "one, from the top (Run > Run All Above Selected Cell)"),
    (re.compile(r"returned None"), "your function returned None: does it end with `return ...`?"),
    (re.compile(r"has no key"), "the returned value lacks a key the exercise asks for: check their spelling"),
)


def grader_message(name: str, kernel_text: str) -> str:
    """The grader's sentence for an error of type `name` (already checked) whose kernel message is
    `kernel_text`: never the kernel's text itself."""
    if name in GRADER_ERRORS:
        return GRADER_ERRORS[name]
    if name == "NotImplementedError":
        return NOT_WRITTEN
    for pattern, sentence in COURSE_MESSAGES:
        if pattern.search(kernel_text):
            return sentence
    what = f"raised {name}" if name != "Error" else "raised an exception of a class of its own"
    return (f"the test cell {what}; run it in your notebook to see its message (the grading kernel's "
            f"message is not shown: that kernel also ran the hidden tests)")


def kernel_error(outputs: list) -> tuple[str, str] | None:
    """(type, the grader's one-line sentence) of the first error reported in a cell, or None. The
    type is a known one or "Error"; the sentence is the grader's (grader_message)."""
    for out in outputs or []:
        if out.get("output_type") == "error":
            name = str(out.get("ename", ""))
            name = name if name in KNOWN_ERRORS or name in GRADER_ERRORS else "Error"
            return name, grader_message(name, one_line(out.get("evalue", "")))
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
        decided = resources[VERDICTS_KEY] = {}
        for cell in nb.cells:
            if is_test_cell(cell):
                try:
                    verdict, ename = judge_cell(cell, reference)
                except Exception as err:  # noqa: BLE001 - any value a kernel sent: the cell fails
                    verdict, ename = Verdict(False, f"the cell's results could not be read ({type(err).__name__}): "
                                                    f"the test cell did not run as written"), "CheckFailed"
                cell.outputs = verdict_outputs(verdict, ename)
                line = one_line(verdict.message)
                decided[grade_id(cell)] = (True, line) if verdict.passed else (False, f"{ename}: {line}")
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
            name = str(outs[0].get("ename", ""))
            found[grade_id(cell)] = (False, f"{name}: {one_line(outs[0].get('evalue', ''))}")
        else:
            found[grade_id(cell)] = None
    return found
