"""ReferenceObservations, before Execute: the reference solution's observations of the lesson
(utils/grading/reference_run.py: run once in a trusted kernel, cached) into nbgrader's resources, for
Verdicts to judge each graded cell against; refused, and nothing graded, where the gradebook was
built from other graded cells than the source's."""

from __future__ import annotations

from pathlib import Path

from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Integer, Unicode

from utils.lessons import source_notebook
from utils.grading.reference_run import RESOURCE_KEY, check_gradebook, reference_for


class ReferenceObservations(NbGraderPreprocessor):
    """Puts the reference's observations into resources[RESOURCE_KEY] (grade_id -> Observation list)."""

    cache_dir = Unicode("", help="Folder of the reference runs' cache (default: <course root>/.grading-cache); "
                                 "never one a student's kernel can see").tag(config=True)
    timeout = Integer(300, help="Seconds one cell of the reference may run").tag(config=True)

    def preprocess(self, nb, resources):
        course = CourseDirectory(config=self.config)
        root, info = Path(course.root), resources["nbgrader"]
        ref = reference_for(source_notebook(root, info["assignment"]),
                            Path(self.cache_dir or root / ".grading-cache"), self.timeout)
        check_gradebook(ref, info["db_url"], info["assignment"], info["notebook"],
                        course.course_id or "default_course")
        resources[RESOURCE_KEY] = ref
        return nb, resources
