"""What the instructor tools share: where lessons live, running nbgrader, reading the gradebook."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

import nbformat

REPO = Path(__file__).resolve().parents[1]
BEGIN_SOLUTION, END_SOLUTION = "### BEGIN SOLUTION", "### END SOLUTION"
BEGIN_HIDDEN, END_HIDDEN = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"


class ToolError(RuntimeError):
    """A problem the instructor must fix; the message names the lesson and cell."""


def lessons(root: Path = REPO) -> list[str]:
    """Lesson folders under source/ that hold a notebook, in teaching order."""
    src = Path(root) / "source"
    if not src.is_dir():
        return []
    return sorted(d.name for d in src.iterdir() if d.is_dir() and any(d.glob("*.ipynb")))


def source_notebook(root: Path, lesson: str) -> Path:
    notebooks = sorted((Path(root) / "source" / lesson).glob("*.ipynb"))
    if len(notebooks) != 1:
        raise ToolError(f"{lesson}: expected exactly one notebook in source/{lesson}, found {len(notebooks)}")
    return notebooks[0]


def resolve_lessons(names: list[str], root: Path = REPO) -> list[str]:
    """The lessons named on a command line (all when none), with a clear error for unknown ones."""
    known = lessons(root)
    if not names:
        return known
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ToolError(f"unknown lesson(s) {', '.join(unknown)}; known: {', '.join(known) or 'none'}")
    return names


def nbgrader_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for an nbgrader subprocess: this interpreter's bin folder first on PATH
    (nbgrader runs `alembic` from PATH), and COURSE_TOOLS pointing at this repository so that
    nbgrader_config.py finds the grading plugins even in a scratch copy of the course."""
    env = dict(os.environ)
    env.update(extra or {})
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["COURSE_TOOLS"] = str(REPO)
    return env


@dataclass
class NbgraderRun:
    rc: int
    log: str            # stdout and stderr together
    killed: bool        # stopped by the timeout


def nbgrader(args: list[str], cwd: Path, *, check: bool = True, timeout: float | None = None,
             env_extra: dict[str, str] | None = None, cpus: set[int] | None = None) -> NbgraderRun:
    """Run one nbgrader command in course directory `cwd`: the only way the tools run nbgrader.

    check: raise ToolError when it fails. timeout: kill the whole process tree (kernels included)
    after that many seconds. cpus: the cores it (and the kernels it starts) may run on. The grading
    plugins are found through COURSE_TOOLS (nbgrader_env)."""
    env = nbgrader_env(env_extra)
    env.setdefault("PYTHONUNBUFFERED", "1")
    proc = subprocess.Popen([sys.executable, "-m", "nbgrader", *args], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    if cpus:
        try:  # before nbgrader (seconds of imports) starts its kernels, which inherit it
            os.sched_setaffinity(proc.pid, cpus)
        except (AttributeError, OSError):
            pass
    log = BoundedLog()
    reader = threading.Thread(target=log.read_all, args=(proc.stdout,), daemon=True)
    reader.start()
    killed = False
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        killed = True
        kill_tree(proc.pid)
        proc.wait()
    kill_tree(proc.pid, children_only=True)  # kernels a dead grader left behind
    reader.join(timeout=10)
    run = NbgraderRun(proc.returncode, log.text(), killed)
    if check and run.rc != 0:
        raise ToolError(f"nbgrader {' '.join(args)} failed in {cwd}:\n{run.log[-3000:]}")
    return run


_PLAIN_NAME = re.compile(r"[\w.@+-]{1,120}")


def shown(name) -> str:
    """A file or student name as printed: as it is when it is plain (letters, digits, _ . @ + -),
    else quoted with every control, format or line-breaking character escaped (repr), so that a
    name can never start a line of its own or pass for another line of a report."""
    name = str(name)
    return name if _PLAIN_NAME.fullmatch(name) else repr(name)


def escaped(text) -> str:
    """`text` with every character that is not printable (newlines, carriage returns, escape
    sequences, direction overrides) written as its escape: one line, as it was received."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))


class BoundedLog:
    """What a tool printed, bounded as it is read: its first `head` and last `tail` bytes, with the
    number cut between them (a grading process prints what a student's kernel makes it print; it
    never fills the disk or the instructor's process, and is never read whole)."""

    def __init__(self, head: int = 256 << 10, tail: int = 768 << 10):
        self.head_limit, self.tail_limit = head, tail
        self.head, self.tail, self.cut = bytearray(), bytearray(), 0

    def add(self, chunk: bytes) -> None:
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        self.tail += chunk
        if len(self.tail) > 2 * self.tail_limit:
            self.cut += len(self.tail) - self.tail_limit
            del self.tail[:len(self.tail) - self.tail_limit]

    def read_all(self, pipe) -> None:
        with pipe:
            for chunk in iter(lambda: pipe.read1(1 << 16), b""):
                self.add(chunk)

    def text(self) -> str:
        tail = self.tail
        if len(tail) > self.tail_limit:
            self.cut += len(tail) - self.tail_limit
            tail = tail[len(tail) - self.tail_limit:]
        middle = f"\n[... {self.cut} bytes of output cut ...]\n".encode() if self.cut else b""
        return (bytes(self.head) + middle + bytes(tail)).decode(errors="replace")


def kill_tree(pid: int, children_only: bool = False) -> None:
    import psutil

    try:
        parent = psutil.Process(pid)
        procs = parent.children(recursive=True) + ([] if children_only else [parent])
    except psutil.NoSuchProcess:
        procs = []
    if children_only and not procs:
        # the parent is gone: its kernels were re-parented; find them by their session id
        procs = [p for p in psutil.process_iter() if _safe_sid(p) == pid]
    for p in procs:
        try:
            p.kill()
        except psutil.Error:
            pass


def _safe_sid(p) -> int | None:
    try:
        return os.getsid(p.pid)
    except OSError:
        return None


def log_tail(text: str, lines: int = 8) -> str:
    """The last `lines` lines of a tool's log, indented under the message that quotes them."""
    return "\n".join("    " + line for line in text.strip().splitlines()[-lines:])


def scratch_config(dest: Path, root: Path = REPO, extra: str = "") -> Path:
    """Write dest/nbgrader_config.py: the course's settings (from `root`), but always a gradebook
    of its own (SQLite in `dest`), whatever db_url the course names, then `extra`. Every tool that
    builds or grades in a throwaway course writes its config with this, so a PostgreSQL gradebook
    named in nbgrader_config.py is never touched by a check, a demo, a benchmark or a test."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    text = (Path(root) / "nbgrader_config.py").read_text()
    text += (f"\n\n# --- a scratch course: its own gradebook, never the instructor's ---\n"
             f"c.CourseDirectory.db_url = {'sqlite:///' + str(dest.resolve() / 'gradebook.db')!r}\n{extra}")
    path = dest / "nbgrader_config.py"
    path.write_text(text)
    return path


def scratch_course(root: Path, lesson_names: list[str], dest: Path | None = None, *,
                   release: bool = False, extra_config: str = "") -> Path:
    """A throwaway course directory (at `dest`, or a new temporary folder) with its own SQLite
    gradebook (scratch_config) and the chosen lessons' source/ (and release/ when asked)."""
    tmp = Path(dest) if dest is not None else Path(tempfile.mkdtemp(prefix="course-scratch-"))
    scratch_config(tmp, root, extra_config)
    ignore = shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__")
    for name in lesson_names:
        shutil.copytree(Path(root) / "source" / name, tmp / "source" / name, ignore=ignore)
        if release and (Path(root) / "release" / name).is_dir():
            shutil.copytree(Path(root) / "release" / name, tmp / "release" / name, ignore=ignore)
    return tmp


# --- notebooks -----------------------------------------------------------------------------

def nbgrader_meta(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def graded_cells(nb) -> list[str]:
    return [nbgrader_meta(c)["grade_id"] for c in nb.cells if nbgrader_meta(c).get("grade")]


def strip_markers(source: str) -> str:
    """Reference solution as a student would type it: the solution markers removed."""
    return "\n".join(l for l in source.splitlines() if l.strip() not in (BEGIN_SOLUTION, END_SOLUTION))


def submission_from(release_nb, reference_nb, overrides: dict[str, str]):
    """A submission built on the release: each solution cell takes `overrides[grade_id]` if given,
    else the reference solution. Unknown grade ids are an error (a typo would test nothing)."""
    reference = {nbgrader_meta(c).get("grade_id"): c.source for c in reference_nb.cells if nbgrader_meta(c).get("solution")}
    unknown = set(overrides) - set(reference)
    if unknown:
        raise ToolError(f"no solution cell named {', '.join(sorted(unknown))}; solution cells: {', '.join(reference)}")
    nb = nbformat.reads(nbformat.writes(release_nb), as_version=4)
    for cell in nb.cells:
        meta = nbgrader_meta(cell)
        if meta.get("solution"):
            gid = meta["grade_id"]
            cell.source = overrides[gid] if gid in overrides else strip_markers(reference[gid])
    return nb


# --- gradebook -----------------------------------------------------------------------------

@dataclass
class CellScore:
    lesson: str
    student: str
    cell: str
    score: float
    max_score: float


def read_scores(course: Path, lesson_names: list[str] | None = None) -> list[CellScore]:
    """Every graded cell's score for every submission in the course's SQLite gradebook.db."""
    return read_scores_url(f"sqlite:///{Path(course) / 'gradebook.db'}", None, lesson_names)


def read_scores_url(db_url: str, course_id: str | None = None, lesson_names: list[str] | None = None) -> list[CellScore]:
    """Every graded cell's score for every submission in the gradebook at `db_url` (SQLite or
    PostgreSQL), optionally only one course's and only some lessons'."""
    from nbgrader.api import Gradebook, MissingEntry

    alembic_on_path()
    if db_url.startswith("sqlite:///") and not Path(db_url[len("sqlite:///"):]).exists():
        return []
    rows: list[CellScore] = []
    with Gradebook(db_url, course_id or "default_course") as gb:
        for assignment in gb.assignments:
            if lesson_names is not None and assignment.name not in lesson_names:
                continue
            if course_id and assignment.course_id != course_id:
                continue
            for sub in assignment.submissions:
                for nb in sub.notebooks:
                    for grade in nb.grades:
                        try:
                            score = grade.score
                        except MissingEntry:
                            score = 0.0
                        rows.append(CellScore(assignment.name, sub.student.id, grade.name,
                                              float(score or 0.0), float(grade.max_score)))
    rows.sort(key=lambda r: (r.lesson, r.student))
    return rows


def alembic_on_path() -> None:
    """nbgrader's Gradebook runs `alembic` from PATH when it creates a database: make it this
    interpreter's (the virtual environment's bin folder may not be on PATH)."""
    bindir = str(Path(sys.executable).parent)
    if bindir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = os.pathsep.join([bindir, os.environ.get("PATH", "")])


def score_table(rows: list[CellScore]) -> str:
    """Cells down, students across; a total line per lesson."""
    if not rows:
        return "(no graded submissions)"
    students = sorted({r.student for r in rows})
    names = {st: shown(st) for st in students}
    by_key = {(r.lesson, r.cell, r.student): r for r in rows}
    cells: list[tuple[str, str]] = []
    for r in rows:
        if (r.lesson, r.cell) not in cells:
            cells.append((r.lesson, r.cell))
    width = max(len(f"{l}/{c}") for l, c in cells) + 2
    col = max(12, *(len(names[s]) + 2 for s in students))
    lines = ["cell".ljust(width) + "".join(names[s].rjust(col) for s in students)]
    for lesson in dict.fromkeys(l for l, _ in cells):
        for l, c in (x for x in cells if x[0] == lesson):
            entries = []
            for s in students:
                r = by_key.get((l, c, s))
                entries.append((f"{r.score:g}/{r.max_score:g}" if r else "-").rjust(col))
            lines.append(f"{l}/{c}".ljust(width) + "".join(entries))
        totals = []
        for s in students:
            mine = [r for r in rows if r.lesson == lesson and r.student == s]
            totals.append((f"{sum(r.score for r in mine):g}/{sum(r.max_score for r in mine):g}" if mine else "-").rjust(col))
        lines.append(f"{lesson} TOTAL".ljust(width) + "".join(totals))
    return "\n".join(lines)
