"""The runner interface: what grades a lesson's submissions once they are planned. Two
implementations share the planning, the judging (the nbgrader steps, in every work folder) and the
recording (lesson.py): LocalRunner (local.py: work folders on this machine's cores) and DaskRunner
(dask/cluster_runner.py: one task per submission on a Dask cluster)."""

from __future__ import annotations

from typing import Iterator, Protocol

from utils.grading.lesson import Grading, LessonGrading
from utils.grading.work import WorkDone


class Runner(Protocol):
    workers: int   # submissions it grades at once (for the lesson's summary line)

    def prepare(self, lesson: LessonGrading) -> None:
        """Before anything is graded: the reference's observations, cached and given to
        lesson.use_reference; a submission it cannot carry scores 0 (outcome.zero)."""

    def run(self, lesson: LessonGrading, students: list[str]) -> Iterator[WorkDone]:
        """Grade `students`, yielding each run's WorkDone as it finishes (the caller records it).
        A student whose grading failed comes back without a result: one submission never costs
        another its grade."""

    def close(self, grading: Grading, completed: bool) -> None:
        """After the last lesson, or when grading stopped (completed False)."""
