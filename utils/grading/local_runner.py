"""LocalRunner: a lesson's submissions graded on this machine, each in a work folder of its own
(work.py), `workers` at a time, each on cores of its own where there are enough, each kernel's
numeric libraries given its share of threads (unless the instructor set them). Each submission is
graded in a process of its own (a child of a long-lived nbgrader process, utils/grading/nbgrader_worker.py),
so one submission's code never costs another its grade."""

from __future__ import annotations

import os
import queue
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from typing import Iterator

from utils.errors import ToolError
from utils.nbgrader_client import start_idle
from utils.processes import nbgrader_env
from utils.lessons import source_notebook
from utils.grading.lesson import Grading, LessonGrading
from utils.grading.reference_run import ReferenceRefused, cache_key, reference_for
from utils.grading.settings import CACHE
from utils.grading.steps.verdicts import one_line
from utils.grading.work import WorkDone, grade_in_folder, kernel_threads


def cpu_slots(workers: int) -> "queue.Queue | None":
    """One disjoint set of cores per worker, or None when there are too few cores to split."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except AttributeError:
        return None
    if workers < 2 or len(cpus) < workers:
        return None
    share = len(cpus) // workers
    slots: queue.Queue = queue.Queue()
    for i in range(workers):
        slots.put(set(cpus[i * share:(i + 1) * share]))
    return slots


class LocalRunner:
    def __init__(self, workers: int):
        self.workers = max(1, workers)

    def prepare(self, lesson: LessonGrading) -> None:
        """The reference run (or its cache) on this machine."""
        root = lesson.grading.root
        src = source_notebook(root, lesson.name)
        try:
            reference_for(src, root / CACHE)
        except ReferenceRefused as err:
            raise ToolError(str(err)) from None
        lesson.use_reference(cache_key(src))

    def run(self, lesson: LessonGrading, students: list[str]) -> Iterator[WorkDone]:
        at_once = min(self.workers, len(students))
        # parallel kernels share the cores: each gets its share of threads (unless the instructor
        # set them), and each submission runs on cores of its own when there are enough of them
        share = kernel_threads(at_once) if at_once > 1 else {}
        env = {v: n for v, n in share.items() if v not in os.environ}
        slots, files = cpu_slots(at_once), lesson.files()
        hide = [str(lesson.grading.root)]   # the course folder, hidden from the kernels too

        def one(student: str) -> WorkDone:
            cpus = slots.get() if slots is not None else None
            try:
                return grade_in_folder(files, {student: lesson.submission(student)}, env=env, cpus=cpus, hide=hide)
            except Exception as err:  # noqa: BLE001 - a submission's files that cannot be copied, say
                why = f"its work folder could not be made ({type(err).__name__}: {one_line(err)})"
                return WorkDone(lesson.name, [student], failed={student: why})
            finally:
                if slots is not None:
                    slots.put(cpus)

        if not students:
            return
        start_idle(at_once, nbgrader_env())   # before the threads: where the workers are forked, from this process
        with ThreadPoolExecutor(max_workers=at_once) as pool:
            pending = {pool.submit(one, s) for s in students}
            while pending:
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in finished:
                    yield future.result()

    def close(self, grading: Grading, completed: bool) -> None:
        pass
