"""WriteResult, the last autograde step: the notebook's result file (utils/grading/result_file.py) with
the verdicts Verdicts decided, the notes the steps left and the score nbgrader saved; and
`recording_failure`, which gives every step of the pipeline a way to say, in that same file, why
a notebook could not be graded (the step, the error's type and its first line) before nbgrader
drops the notebook and goes on with the next one."""

from __future__ import annotations

from pathlib import Path

from nbgrader.api import Gradebook
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import NbGraderPreprocessor

from utils.grading.result_file import result_path, write_result
from utils.grading.steps.base import read_notes
from utils.grading.steps.execute import BUDGET_KEY
from utils.grading.steps.verdicts import VERDICTS_KEY

MAX_REASON = 300


def _path(step, resources) -> Path | None:
    info = resources.get("nbgrader") if isinstance(resources, dict) else None
    if not isinstance(info, dict) or not all(info.get(k) for k in ("assignment", "student", "notebook")):
        return None
    return result_path(Path(CourseDirectory(config=step.config).root), info["assignment"], info["student"],
                       info["notebook"])


class WriteResult(NbGraderPreprocessor):
    """The result file of the notebook just graded (after SaveAutoGrades and the late penalty)."""

    def preprocess(self, nb, resources):
        info = resources["nbgrader"]
        with Gradebook(info["db_url"], CourseDirectory(config=self.config).course_id or "default_course") as gb:
            saved = gb.find_submission_notebook(info["notebook"], info["assignment"], info["student"])
            score, max_score, penalty = saved.score, saved.max_score, saved.late_submission_penalty
        write_result(_path(self, resources), {
            "lesson": info["assignment"], "student": info["student"], "notebook": info["notebook"],
            "verdicts": {gid: list(v) for gid, v in resources.get(VERDICTS_KEY, {}).items()},
            "notes": [n["text"] for n in read_notes(nb) if isinstance(n.get("text"), str)],
            "score": float(score or 0.0), "max_score": float(max_score or 0.0),
            "late_penalty": float(penalty or 0.0), "time_budget": resources.get(BUDGET_KEY), "reason": ""})
        return nb, resources


def recording_failure(step: type) -> type:
    """`step` under its own name (its config section applies unchanged), writing the notebook's
    result file with the reason when it raises; the error goes on to nbgrader, which drops that
    notebook and grades the next."""
    def preprocess(self, nb, resources):
        try:
            return step.preprocess(self, nb, resources)
        except Exception as err:
            first = (str(err).strip().splitlines() or [""])[0][:MAX_REASON]
            path = _path(self, resources)
            if path is not None:
                info = resources["nbgrader"]
                write_result(path, {"lesson": info["assignment"], "student": info["student"],
                                    "notebook": info["notebook"],
                                    "reason": f"{step.__name__}: {type(err).__name__}" + (f": {first}" if first else "")})
            raise

    return type(step)(step.__name__, (step,), {"preprocess": preprocess, "__module__": step.__module__,
                                               "__doc__": step.__doc__})
