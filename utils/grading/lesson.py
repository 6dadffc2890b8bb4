"""One grading run (Grading: the course, its settings and options, what the run says and keeps)
and one lesson's grading within it (LessonGrading): planned here (submissions.py), graded by a
runner (local_runner.py or dask/cluster_runner.py), recorded here. LessonGrading's `record` (what a runner
returned), `resume` (what a stopped run recorded) and `finish` (zeros) are the only places where
grades are written: the graded notebooks into autograded/, their feedback into feedback/, the
scores into the course's gradebook (gradebook.py), each submission's outcome."""

from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from utils.escaping import shown
from utils.lessons import source_notebook
from utils.grading import gradebook
from utils.grading.fingerprint import fingerprint
from utils.grading.journal import Journal, lesson_key
from utils.grading.result_file import verdicts
from utils.grading.settings import CACHE, CourseSettings, Options
from utils.grading.submissions import Outcome, hash_tree, safe_preflight, submitted_students
from utils.grading.work import LOG_KEEP, TIMESTAMPS, WorkDone, lesson_files


@dataclass
class GradeRun:
    """What a grading run did: every outcome, timings, logs and what failed."""
    outcomes: list[Outcome] = field(default_factory=list)
    lessons: list[str] = field(default_factory=list)
    seconds: float = 0.0
    submissions: int = 0
    logs: dict[str, str] = field(default_factory=dict)
    lesson_seconds: dict[str, float] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)   # feedback or export that failed
    record_seconds: float = 0.0                          # the grader's own work on what runners returned
    feedback_seconds: float = 0.0                        # generate_feedback, in the work folders
    cluster: dict = field(default_factory=dict)          # on a Dask cluster: each worker's share (dask/cluster_runner.py)


@dataclass
class Grading:
    """Everything one grading run needs: the course, its settings and options, where it speaks."""
    root: Path
    settings: CourseSettings
    options: Options
    say: Callable[[str], None] = print
    run: GradeRun = field(default_factory=GradeRun)

    @property
    def journal(self) -> Journal:
        return Journal(self.root)

    def decided_by(self) -> list:
        """What, besides the code and the reference, decides a grade and its feedback: a stopped
        run's grades are kept only where these are the same (journal.py)."""
        o, st = self.options, self.settings
        return [list(o.extra), o.feedback, o.show_hidden_tests, st.db_url, st.course_id]


@dataclass
class LessonGrading:
    """One lesson's submissions through one grading run."""
    grading: Grading
    name: str                                       # the lesson
    notebook: str                                   # the lesson's notebook file name
    students: list[str]
    outcomes: dict[str, Outcome]
    before: dict[str, dict[str, str] | None]        # student -> hashes of the submitted files (None: unreadable)
    reference: Path | None = None                   # the reference's observations (use_reference)
    journal_key: str = ""                           # what decides its grades (journal.lesson_key)
    template: bytes = b""                           # the gradebook every run of it starts from
    max_score: float = 0.0
    recorded: dict[str, int] = field(default_factory=dict)   # student -> times a runner returned it
    course_gradebook: object = None                 # open while recording (gradebook.open_course)

    @classmethod
    def plan(cls, grading: Grading, lesson: str, known) -> "LessonGrading":
        """Read every submission of `lesson` (a submission that breaks this scores 0 with its
        reason, the others are graded) and hash its files."""
        root = grading.root
        students = submitted_students(root, lesson)
        outcomes, before = {}, {}
        for s in students:
            outcomes[s] = safe_preflight(root, lesson, s, known)
            try:
                before[s] = hash_tree(root / "submitted" / s / lesson)
            except OSError as err:   # a file the grader may not read: this submission's problem only
                before[s] = None
                if outcomes[s].status == "pending":
                    outcomes[s].zero(f"its files could not be read ({err.strerror or type(err).__name__})")
        return cls(grading, lesson, source_notebook(root, lesson).name, students, outcomes, before)

    def use_reference(self, key: str) -> None:
        """The reference's observations, cached under `key` (its cache key) by the runner, and with
        them what decides this lesson's grades (the journal's key)."""
        self.reference = self.grading.root / CACHE / f"{key}.json"
        self.journal_key = lesson_key(fingerprint(), key, self.grading.decided_by())

    @property
    def to_grade(self) -> list[str]:
        return [s for s in self.students if self.outcomes[s].status == "pending"]

    def make_template(self) -> None:
        with tempfile.TemporaryDirectory(prefix="gradebook-") as tmp:
            path = Path(tmp) / "gradebook.db"
            self.max_score = gradebook.lesson_template(self.grading.settings, self.name, path)
            self.template = path.read_bytes()

    def files(self) -> dict:
        """What every grading run of this lesson is made of (work.lesson_files)."""
        g = self.grading
        return lesson_files(g.root, self.name, self.notebook, g.settings.course_id, self.reference,
                            self.template, g.options, g.settings.bwrap if g.settings.sandbox else None)

    def submission(self, student: str) -> tuple[Path, str | None]:
        """The submission's folder and the name its notebook was saved under, where not the lesson's."""
        return self.grading.root / "submitted" / student / self.name, self.outcomes[student].file

    # -- recording: record, resume and finish are the only places that write grades -------------

    def resume(self) -> list[str]:
        """Keep what an earlier run that stopped recorded (journal.py); the students kept."""
        kept = self.grading.journal.kept(self.name, self.journal_key, {s: self.before[s] for s in self.to_grade})
        for s, result in kept.items():
            self._take(self.outcomes[s], result)
            self.outcomes[s].notes.append("graded and recorded by an earlier run that stopped; kept, not graded again")
        return list(kept)

    def record(self, done: WorkDone) -> None:
        """What a runner returned: each graded submission's files, scores and outcome; a reason for
        each other one. A submission is recorded once, whatever a cluster delivered."""
        g, start = self.grading, time.perf_counter()
        g.run.feedback_seconds += done.feedback_seconds
        try:
            self._record(done)
        finally:
            g.run.record_seconds += time.perf_counter() - start

    def _record(self, done: WorkDone) -> None:
        g, first = self.grading, []
        for s in done.students:
            self.recorded[s] = self.recorded.get(s, 0) + 1
            if self.recorded[s] == 1:
                first.append(s)
        finished = [s for s in first if done.graded(s)]
        if finished:
            with tempfile.TemporaryDirectory(prefix="graded-") as tmp:
                (Path(tmp) / "gradebook.db").write_bytes(done.gradebook)
                if self.course_gradebook is None:
                    self.course_gradebook = gradebook.open_course(g.settings)
                gradebook.merge(f"sqlite:///{Path(tmp) / 'gradebook.db'}", g.settings, self.name, finished,
                                self.course_gradebook)
        for s in first:
            if s not in finished:
                self.outcomes[s].zero(done.reason(s, g.options.watchdog))
                g.run.logs[f"{self.name}/{s}"] = done.log[-LOG_KEEP:]
                continue
            self._files(s, done)
            self._take(self.outcomes[s], done.results[s])
            g.journal.add(self.name, self.journal_key, s, self.before[s], done.results[s])
        if done.feedback_problem and finished:
            g.run.failures.append(f"{self.name}: feedback for {len(finished)} submission(s) "
                                  f"({', '.join(map(shown, finished[:3]))}{'...' if len(finished) > 3 else ''}): "
                                  f"{done.feedback_problem}")
            g.run.logs[f"{self.name}/feedback"] = done.log[-LOG_KEEP:]

    def _files(self, student: str, done: WorkDone) -> None:
        root = self.grading.root
        for folder, files in ((root / "autograded", done.notebooks[student]),
                              (root / "feedback", done.feedback.get(student, {}))):
            dest = folder / student / self.name
            shutil.rmtree(dest, ignore_errors=True)
            if folder.name == "feedback" and not files:
                continue
            dest.mkdir(parents=True)
            for name, data in files.items():
                (dest / Path(name).name).write_bytes(data)
            for name in TIMESTAMPS:   # nbgrader's feedback and release read them: the originals
                kept = root / "submitted" / student / self.name / name
                if kept.is_file() and not kept.is_symlink():
                    shutil.copyfile(kept, dest / name)

    @staticmethod
    def _take(out: Outcome, result: dict) -> None:
        out.status, out.verdicts = "graded", verdicts(result)
        out.notes += [n for n in result.get("notes", []) if isinstance(n, str)]
        out.score, out.max_score = float(result.get("score", 0.0)), float(result.get("max_score", 0.0))

    def close(self) -> None:
        """The course's gradebook closed, once the runner returned everything (or stopped)."""
        if self.course_gradebook is not None:
            self.course_gradebook.close()
            self.course_gradebook = None

    def finish(self) -> None:
        """Zeros for the submissions that could not be graded; a warning where a submitted file
        changed while grading."""
        root = self.grading.root
        for s in self.students:
            out = self.outcomes[s]
            if out.status == "pending":   # never returned by the runner: it says why in its log
                out.zero("no grading run returned it; see autograde.log")
            if out.status != "graded":
                if not out.refused_id:   # an id the course never takes in never reaches the gradebook
                    gradebook.record_zero(self.grading.settings, self.name, s)
                out.score, out.max_score = 0.0, self.max_score
                shutil.rmtree(root / "autograded" / s / self.name, ignore_errors=True)
                shutil.rmtree(root / "feedback" / s / self.name, ignore_errors=True)
            try:
                after = hash_tree(root / "submitted" / s / self.name)
            except OSError:
                after = None
            if self.before[s] is not None and after != self.before[s]:
                out.notes.append("WARNING: the files in submitted/ changed while grading")

    def report(self) -> None:
        """One line per student, into the run."""
        g = self.grading
        for s in self.students:
            g.run.outcomes.append(self.outcomes[s])
            g.say(self.outcomes[s].line())
        g.run.submissions += len(self.students)
        g.run.lessons.append(self.name)
