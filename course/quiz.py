"""Format checks for checkpoint quizzes answered in code cells.

Only the *format* is checked here (the answer is one of the offered options). Whether it is the
right option is decided by the hidden tests; no answer is stored in this package.

    with checking("q1"):
        check_choice("q1", q1, "abcd")
"""

from __future__ import annotations

from typing import Iterable

from course.checks import CheckFailed
from course.observe import grading, observe


class QuizAnswerError(CheckFailed, ValueError):
    """A quiz answer that is not one of the options; shown in one line (see CheckFailed).

    Also a ValueError, as check_choice has always raised."""


def check_choice(question: str, answer: object, options: Iterable[str]) -> None:
    """Accept `answer` only if it is one of `options` (case-insensitive, surrounding spaces ignored).

    Prints the recorded answer; raises QuizAnswerError (a ValueError) naming the question and
    showing how to answer otherwise.
    """
    __tracebackhide__ = True
    if grading():
        return observe(question, answer, "choice")
    options = [str(o).strip().lower() for o in options]
    listed = ", ".join(options[:-1]) + f" or {options[-1]}" if len(options) > 1 else options[0]
    how = f'answer with one letter in quotes, for example {question} = "{options[0]}" (one of {listed})'
    if not isinstance(answer, str):
        raise QuizAnswerError(f"{question}: {how}; it is {answer!r}, of type {type(answer).__name__}")
    cleaned = answer.strip().lower()
    if cleaned not in options:
        raise QuizAnswerError(f"{question}: {answer!r} is not one of the options; {how}")
    print(f"{question}: answer {cleaned!r} recorded (one of {listed}); it is graded after you submit.")
