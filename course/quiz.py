"""Format checks for checkpoint quizzes answered in code cells.

Only the *format* is checked here (the answer is one of the offered options). Whether it is the
right option is decided by the hidden tests; no answer is stored in this package.
"""

from __future__ import annotations

from typing import Iterable


def check_choice(question: str, answer: object, options: Iterable[str]) -> None:
    """Accept `answer` only if it is one of `options` (case-insensitive, surrounding spaces ignored).

    Prints the recorded answer; raises ValueError naming the question otherwise.
    """
    options = [str(o).lower() for o in options]
    if not isinstance(answer, str):
        raise ValueError(f"{question}: answer with one of {options} as a string, e.g. {options[0]!r}; "
                         f"got {answer!r}")
    cleaned = answer.strip().lower()
    if cleaned not in options:
        raise ValueError(f"{question}: {answer!r} is not one of the options {options}")
    print(f"{question}: answer {cleaned!r} recorded (one of {options}); it is graded after submission.")
