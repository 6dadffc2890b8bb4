"""One grading run in a private work folder, the same on the grader's machine and on a Dask
worker: a course folder made of the lesson's files (config, source/, the reference's observations,
the gradebook template) and the submissions to grade; each submission's `nbgrader autograde` (every
kernel in the sandbox) and, when graded, its `generate_feedback` run in one child of a long-lived
nbgrader process (utils/grading/nbgrader_worker.py); what comes back
(`WorkDone`) is plain data: each notebook's result file, the graded notebooks, their feedback, the
run's small gradebook, its log. The folder is removed before returning."""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from utils.nbgrader_client import WorkerLost, run as run_in_worker
from utils.processes import log_tail, nbgrader_env
from utils.grading.result_file import graded, read_result, result_path
from utils.grading.reference_run import GIVEN
from utils.grading.settings import CACHE
from utils.grading.submissions import copy_submission, regular_files
from utils.sandbox.command import THREAD_VARS

TIMESTAMPS = ("timestamp.txt", "submission_secret.txt")   # nbgrader's feedback and late penalty read them
RUN_LOG_KEEP = 200000   # characters of a run's nbgrader log kept (its head and tail are bounded as it runs)
LOG_KEEP = 20000        # of those, per submission that failed, for autograde.log
KERNEL_THREADS_ENV = "COURSE_KERNEL_THREADS"   # the kernels' library threads, instead of the split


def kernel_threads(at_once: int, environ=None) -> dict[str, str]:
    """The numeric libraries' threads (OpenMP, MKL, OpenBLAS, numexpr) of each kernel where
    `at_once` submissions are graded at once: the cores this process may use split between them,
    or COURSE_KERNEL_THREADS where the environment sets it."""
    environ = os.environ if environ is None else environ
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    chosen = environ.get(KERNEL_THREADS_ENV, "").strip()
    n = int(chosen) if chosen.isdigit() and int(chosen) > 0 else max(1, cores // max(1, at_once))
    return {v: str(n) for v in THREAD_VARS}


def pack(folder: Path) -> dict[str, bytes]:
    """{path inside `folder`: bytes} of its regular files (submissions.regular_files)."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in regular_files(folder)}


def unpack(files: dict[str, bytes], folder: Path) -> None:
    for name, data in files.items():
        rel = Path(name)
        if rel.is_absolute() or ".." in rel.parts:
            raise RuntimeError(f"a grading run was given a file outside its folder: {name!r}")
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes(data)


def lesson_files(root: Path, lesson: str, notebook: str, course_id: str, reference: Path, template: bytes,
                 options, sandbox: str | None = None) -> dict:
    """What every work folder of `lesson` is made of, as plain data (a Dask task carries it):
    nbgrader_config.py, the lesson's source/ folder, the reference's observations, the gradebook
    template, the course id, the run's options and the sandbox's bubblewrap (None: no sandbox)."""
    root = Path(root)
    return {"lesson": lesson, "notebook": notebook, "course_id": course_id, "sandbox": sandbox,
            "config": (root / "nbgrader_config.py").read_bytes(), "source": pack(root / "source" / lesson),
            "reference_name": reference.name, "reference": reference.read_bytes(), "template": template,
            "options": dataclasses.asdict(options)}


@dataclass
class WorkDone:
    """What one grading run produced, per student of the run (plain data end to end)."""
    lesson: str
    students: list[str]
    results: dict[str, dict] = field(default_factory=dict)               # the notebook's result file
    notebooks: dict[str, dict[str, bytes]] = field(default_factory=dict)  # the graded notebook(s)
    feedback: dict[str, dict[str, bytes]] = field(default_factory=dict)   # its feedback HTML
    gradebook: bytes = b""                                                # the run's SQLite gradebook
    rc: int = 0
    log: str = ""
    killed: bool = False
    seconds: float = 0.0                 # the whole run, its feedback included
    feedback_seconds: float = 0.0        # generate_feedback alone
    feedback_problem: str = ""           # generate_feedback failed: its exit status and last lines
    failed: dict[str, str] = field(default_factory=dict)                  # why a runner got nothing back
    worker: str = ""                     # on a Dask cluster: who graded it
    address: str = ""

    def graded(self, student: str) -> bool:
        return graded(self.results.get(student)) and bool(self.notebooks.get(student))

    def reason(self, student: str, watchdog: float) -> str:
        """Why `student` was not graded, in one line."""
        if student in self.failed:
            return self.failed[student]
        said = (self.results.get(student) or {}).get("reason")
        if said:
            return f"nbgrader could not grade it: {said}"
        if self.killed:
            return f"grading stalled and was stopped after {watchdog:g} s"
        if self.rc not in (0, 1):
            return (f"the grading process was killed (exit {self.rc}) while grading this submission; its code may "
                    f"have killed it")
        return f"nbgrader stopped before grading it (exit {self.rc}); see autograde.log"

    def without(self, students: list[str]) -> "WorkDone":
        """The same run, as if it had not been given `students` (they are graded again, alone)."""
        keep = [s for s in self.students if s not in students]
        return dataclasses.replace(self, students=keep, **{k: {s: v for s, v in getattr(self, k).items() if s in keep}
                                                           for k in ("results", "notebooks", "feedback", "failed")})


def _make_folder(work: Path, files: dict, submissions: dict) -> None:
    lesson = files["lesson"]
    (work / "nbgrader_config.py").write_bytes(files["config"])
    unpack(files["source"], work / "source" / lesson)
    (work / CACHE).mkdir()
    (work / CACHE / files["reference_name"]).write_bytes(files["reference"])   # hidden from the kernels with `work`
    (work / CACHE / GIVEN).write_text(files["reference_name"])   # no other reference is run here
    (work / "gradebook.db").write_bytes(files["template"])
    for student, (found, rename) in submissions.items():
        dest = work / "submitted" / student / lesson
        if isinstance(found, dict):
            unpack(found, dest)
            if rename:
                (dest / rename).rename(dest / files["notebook"])
        else:
            copy_submission(Path(found), dest, rename, files["notebook"])


def _collect(work: Path, files: dict, done: WorkDone, students: list[str]) -> None:
    lesson, stem = files["lesson"], Path(files["notebook"]).stem
    for s in students:
        result = read_result(result_path(work, lesson, s, stem))
        if result is not None:
            done.results[s] = result
        folder = work / "autograded" / s / lesson
        if graded(result) and folder.is_dir():   # the graded notebook, nothing else a kernel left there
            done.notebooks[s] = {p.name: p.read_bytes() for p in folder.glob("*.ipynb")
                                 if p.is_file() and not p.is_symlink()}


def _feedback_result(work: Path, files: dict, done: WorkDone, student: str, answer: dict) -> None:
    """The feedback page of `student`, made in the same child as its grading, and what failed."""
    lesson = files["lesson"]
    rcs, seconds = answer["rcs"], answer["seconds"]
    if len(seconds) > 1:
        done.feedback_seconds += seconds[1]
    rc = rcs[1] if len(rcs) > 1 else None
    if rc not in (None, 0):
        log = answer["log"].split("===== generate_feedback", 1)[-1]
        done.feedback_problem = f"nbgrader generate_feedback failed (exit {rc}):\n{log_tail(log)}"
        done.log += f"\n===== feedback\n{log[-LOG_KEEP:]}"
    page = f"{Path(files['notebook']).stem}.html"   # nbgrader also copies there any file the student sent
    html = work / "feedback" / student / lesson / page
    if html.is_file() and not html.is_symlink():
        done.feedback[student] = {page: html.read_bytes()}


def grade_in_folder(files: dict, submissions: dict, *, env: dict | None = None, cpus=None,
                    hide: list[str] = (), tmp: Path | None = None) -> WorkDone:
    """Grade `submissions` ({student: (a folder, or its files as {path: bytes}; the notebook's
    name when saved under another)}) of the lesson `files` describes (lesson_files), in a new
    folder under `tmp`; `env` and `cpus` for the nbgrader commands and the kernels they start,
    `hide`: folders the kernels must not see besides the usual ones (the course folder).

    Each submission is autograded, then its feedback written, by nbgrader's own applications in
    one child of a long-lived nbgrader process (utils/grading/nbgrader_worker.py): a process of its own,
    killed with its kernels after the watchdog's seconds, nothing of it left for the next."""
    start = time.perf_counter()
    options, lesson, stem = files["options"], files["lesson"], Path(files["notebook"]).stem
    work = Path(tempfile.mkdtemp(prefix=f"grade-{lesson}-", dir=tmp))
    done = WorkDone(lesson, sorted(submissions))
    try:
        _make_folder(work, files, submissions)
        course = [f"--CourseDirectory.root={work}", f"--CourseDirectory.db_url=sqlite:///{work / 'gradebook.db'}",
                  f"--CourseDirectory.course_id={files['course_id']}"]
        hidden = [f"--SandboxKernelManager.hidden={folder}" for folder in hide]
        shown = ["--HideHiddenTests.enabled=False"] if options["show_hidden_tests"] else []
        full_env = nbgrader_env(env)
        full_env.setdefault("PYTHONUNBUFFERED", "1")
        logs = []
        for s in done.students:
            one = [f"--CourseDirectory.student_id={s}"] if len(done.students) > 1 else []
            steps = [{"argv": ["autograde", lesson, "--force", *course, *one, *hidden, *options["extra"]]}]
            if options["feedback"]:
                steps.append({"argv": ["generate_feedback", lesson, "--force", *course, *one, *shown],
                              "if_graded": str(result_path(work, lesson, s, stem))})
            try:
                answer = run_in_worker(steps, work, full_env, timeout=options["watchdog"], cpus=cpus,
                                       sandbox=files.get("sandbox"))
            except WorkerLost as err:
                answer = {"rcs": [-9], "seconds": [], "killed": False, "log": str(err)}
            rc = answer["rcs"][0]
            if rc not in (0, None) and done.rc in (0, 1):
                done.rc = rc
            done.killed = done.killed or answer["killed"]
            logs.append(answer["log"].split("===== generate_feedback", 1)[0])
            _collect(work, files, done, [s])
            if options["feedback"] and done.graded(s):
                _feedback_result(work, files, done, s, answer)
        done.log = "\n".join(logs)[-RUN_LOG_KEEP:]
        done.gradebook = (work / "gradebook.db").read_bytes() if done.notebooks else b""
    finally:
        shutil.rmtree(work, ignore_errors=True)
    done.seconds = time.perf_counter() - start
    return done
