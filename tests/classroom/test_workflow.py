"""The instructor workflow end to end in a scratch course and exchange, as docs/instructors.md
describes it: roster, release, two students fetch and submit, collect, grade, feedback (hidden
tests left out), students fetch their feedback; and zip_collect for LMS downloads."""

from __future__ import annotations

import zipfile
from pathlib import Path

import nbformat
import pytest

from utils.notebooks import submission_from
from utils.grading.grade_course import grade_lessons
from utils.grading.settings import course_settings
from utils.scores import read_scores_url
from utils.classroom.rehearsal import rehearsal_course
from utils.classroom.feedback import feedback
from utils.classroom.release import release
from utils.classroom.roster import import_roster
from utils.classroom.workflow import collect, zip_collect
from student_side import student_fetch, student_fetch_feedback, student_submit

pytestmark = pytest.mark.slow
LESSON, NB, COURSE_ID = "01_tiny", "tiny.ipynb", "prefill-decode"
# passes the visible check mul(2, 3) == 6, fails the hidden one
ONLY_VISIBLE = "def mul(a, b):\n    return 6 if (a, b) == (2, 3) else 0"


def _answer(fetched: Path, source: Path, **overrides) -> None:
    """A student's work: the fetched notebook with the answers typed in."""
    nb = nbformat.read(str(fetched), as_version=4)
    ref = nbformat.read(str(source), as_version=4)
    nbformat.write(submission_from(nb, ref, overrides), str(fetched))


def _totals(course: Path) -> dict[str, float]:
    s = course_settings(course)
    totals: dict[str, float] = {}
    for r in read_scores_url(s.db_url, s.course_id, [LESSON]):
        totals[r.student] = totals.get(r.student, 0.0) + r.score
    return totals


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    base = tmp_path_factory.mktemp("workflow")
    return rehearsal_course(base / "course"), base / "exchange", base


def test_class_workflow_through_the_exchange(course):
    root, exchange, base = course
    exchange.mkdir()
    roster = base / "students.csv"
    roster.write_text("id,first_name,last_name,email\nalice,Alice,Archer,alice@example.org\n"
                      "bob,Bob,Baker,bob@example.org\n")
    import_roster(root, roster)
    from nbgrader.api import Gradebook
    with Gradebook(course_settings(root).db_url, COURSE_ID) as gb:
        assert {s.id for s in gb.students} >= {"alice", "bob"}
        assert gb.find_student("alice").last_name == "Archer"

    release(root, LESSON, exchange)
    assert (exchange / COURSE_ID / "outbound" / LESSON / NB).exists()

    source = root / "source" / LESSON / NB
    for student, overrides in (("alice", {}), ("bob", {"mul": ONLY_VISIBLE})):
        home = base / "home" / student
        folder = student_fetch(home, LESSON, student, exchange, COURSE_ID)
        assert (folder / NB).exists()
        released = nbformat.read(str(folder / NB), as_version=4)
        assert "HIDDEN-CHECK" not in nbformat.writes(released)          # students never see them
        _answer(folder / NB, source, **overrides)
        student_submit(home, LESSON, student, exchange, COURSE_ID)

    assert collect(root, LESSON, exchange) == ["alice", "bob"]
    submitted = {p: p.read_bytes() for p in (root / "submitted").rglob("*") if p.is_file()}
    assert any(p.name == "timestamp.txt" for p in submitted)

    run = grade_lessons(root, [LESSON], workers=2)
    assert {o.student: o.status for o in run.outcomes} == {"alice": "graded", "bob": "graded"}
    assert _totals(root) == {"alice": 6, "bob": 3}
    assert {p: p.read_bytes() for p in (root / "submitted").rglob("*") if p.is_file()} == submitted
    assert (root / "grades.csv").read_text().count("\n") >= 2

    files = feedback(root, LESSON, exchange)
    assert len(files) == 2
    bob_html = (root / "feedback" / "bob" / LESSON / "tiny.html").read_text()
    assert "hidden tests are not shown" in bob_html
    assert "HIDDEN-CHECK" not in bob_html and "rel_tol" not in bob_html
    assert "does not match the reference solution" in bob_html      # bob learns that, not the value
    assert "mul_test" in bob_html or "Score" in bob_html

    fetched = student_fetch_feedback(base / "home" / "bob", LESSON, "bob", exchange, COURSE_ID)
    assert len(fetched) == 1                                          # bob's own, not alice's
    assert "Score: 3.0 / 6.0" in fetched[0].read_text() and "HIDDEN-CHECK" not in fetched[0].read_text()

    # the instructor may choose to show them (here without releasing)
    feedback(root, LESSON, exchange, show_hidden_tests=True, release_to_students=False)
    shown = (root / "feedback" / "bob" / LESSON / "tiny.html").read_text()
    assert "HIDDEN-CHECK-MUL" in shown


def test_zip_collect_from_lms_downloads(course):
    root, _, base = course
    source = root / "source" / LESSON / NB
    release_nb = nbformat.read(str(root / "release" / LESSON / NB), as_version=4)
    ref = nbformat.read(str(source), as_version=4)
    downloads = base / "lms"
    downloads.mkdir()
    archive = downloads / "submissions.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("carol_1001_5001_tiny.ipynb", nbformat.writes(submission_from(release_nb, ref, {})))
        z.writestr("dave_LATE_1002_5002_tiny-1.ipynb",
                   nbformat.writes(submission_from(release_nb, ref, {"sub": "def sub(a, b):\n    return b - a"})))
        z.writestr("readme.txt", "not a submission")
        # an id of markup (utils/grading/student_id.py): skipped, with a line saying why
        z.writestr('x"><img src=x onerror=alert(1)>_1003_5003_tiny.ipynb', nbformat.writes(submission_from(release_nb, ref, {})))
    erin = downloads / "erin_tiny.ipynb"
    nbformat.write(submission_from(release_nb, ref, {"add": "def add(a, b):\n    return 0"}), str(erin))
    before = {p.name: p.read_bytes() for p in downloads.iterdir()}

    students = zip_collect(root, LESSON, [archive, erin])
    assert {"carol", "dave", "erin"} <= set(students) and not [s for s in students if "<" in s], students
    assert (root / "submitted" / "dave" / LESSON / NB).exists()
    assert {p.name: p.read_bytes() for p in downloads.iterdir()} == before

    run = grade_lessons(root, [LESSON], workers=2)
    totals = _totals(root)
    assert (totals["carol"], totals["dave"], totals["erin"]) == (6, 5, 4)
    assert {o.student for o in run.outcomes if o.status == "graded"} >= {"carol", "dave", "erin"}


def test_collect_survives_hostile_entries_and_caps_each_submission(course):
    """Whatever lies in inbound/ (a name nbgrader cannot parse, a file, a link, a FIFO, a folder
    over the size cap, a name with a newline or '..'), collect refuses that entry with one line in
    refused/LESSON.txt and collects every other student."""
    import os
    import shutil
    root, _, base = course
    exchange = base / "exchange-hostile"
    inbound = exchange / COURSE_ID / "inbound"
    inbound.mkdir(parents=True)
    ts = "2026-12-01 10:00:00.000000 UTC"
    for student in ("alice", "bob"):   # two submissions as nbgrader's submit lays them out
        folder = inbound / f"{student}+{LESSON}+{ts}+abcdefghijkl"
        folder.mkdir()
        shutil.copy(root / "release" / LESSON / NB, folder / NB)
        (folder / "timestamp.txt").write_text(ts)
    good = sorted(inbound.iterdir())[0]
    hostile = {
        "carol+01_tiny+not a time+x": "no usable timestamp",
        f"..+01_tiny+{ts}+x": "not a submission's name",
        f"dave\n+01_tiny+{ts}+x": "not a submission's name",
        f"erin+01_tiny+{ts}+x": "not a folder",          # a plain file
        f"fred+01_tiny+{ts}+x": "not a folder",          # a link to the course
        f"gina+01_tiny+{ts}+x": "over 20 MB",           # a folder with a large (sparse) file
        f"hank+01_tiny+{ts}+x": "more than 500 files",
    }
    for name in hostile:
        if name.startswith(("carol", "..", "dave", "gina", "hank")):
            shutil.copytree(good, inbound / name)
    (inbound / f"erin+01_tiny+{ts}+x").write_text("not a folder")
    (inbound / f"fred+01_tiny+{ts}+x").symlink_to(root)
    with open(inbound / f"gina+01_tiny+{ts}+x" / "big.bin", "wb") as f:
        f.truncate(25_000_000)
    for i in range(501):
        (inbound / f"hank+01_tiny+{ts}+x" / f"f{i}").write_text("")
    # inside a student's own folder: a FIFO and a link are not copied, her notebook is
    os.mkfifo(inbound / good.name / "pipe")
    (inbound / good.name / "link.txt").symlink_to("/etc/hostname")

    shutil.rmtree(root / "submitted", ignore_errors=True)
    shutil.rmtree(root / "refused", ignore_errors=True)
    students = collect(root, LESSON, exchange)
    assert students == ["alice", "bob"]
    collected = root / "submitted" / good.name.split("+")[0] / LESSON
    assert (collected / NB).is_file() and not (collected / "pipe").exists() and not (collected / "link.txt").exists()
    notes = (root / "refused" / f"{LESSON}.txt").read_text().splitlines()
    assert len(notes) == len(hostile), notes
    for name, why in hostile.items():
        assert sum(repr(name) in line and why in line for line in notes) == 1, (name, why, notes)
    assert not (root / LESSON).exists() and not (root / "submitted" / "..").resolve().joinpath(LESSON).exists()


def _collector(root: Path, inbound: Path, cap_mb: float = 20.0):
    """The course's collect on its own (no nbgrader process): owners not checked (one account
    plays the student here), the exchange's inbound/ given."""
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config import Config
    from utils.classroom.workflow import OwnerCheckedCollect
    cfg = Config()
    cfg.OwnerCheckedCollect.max_submission_mb = cap_mb
    cfg.OwnerCheckedCollect.check_owner = False
    coursedir = CourseDirectory(root=str(root), course_id=COURSE_ID, assignment_id=LESSON, config=cfg)
    c = OwnerCheckedCollect(coursedir=coursedir, config=cfg)
    c.inbound_path = str(inbound)
    return c


def _one_submission(tmp_path: Path, extra: dict[str, str] | None = None) -> tuple[Path, Path, dict]:
    """A course with lesson 01_tiny released (its one notebook) and one student's submission."""
    from utils.classroom.workflow import OwnerCheckedCollect
    root = tmp_path / "course"
    (root / "release" / LESSON).mkdir(parents=True)
    (root / "release" / LESSON / NB).write_text("{}")
    inbound = tmp_path / "inbound"
    name = f"alice+{LESSON}+2026-12-01 10:00:00.000000 UTC+abcdefghijkl"
    sub = inbound / name
    sub.mkdir(parents=True)
    (sub / NB).write_text("{}")
    (sub / "timestamp.txt").write_text("2026-12-01 10:00:00.000000 UTC")
    for rel, text in (extra or {}).items():
        (sub / rel).parent.mkdir(parents=True, exist_ok=True)
        (sub / rel).write_text(text)
    rec = {"username": "alice", "filename": name, "timestamp": None}
    assert OwnerCheckedCollect   # imported where nbgrader is
    return root, inbound, rec


def test_collect_takes_only_the_lessons_notebooks(tmp_path):
    """Modules, an nbgrader_config.py or a folder planted in a submission never reach submitted/,
    where a tool opening the folder would import them with the instructor's rights."""
    planted = {"nbformat.py": "import os; os.system('touch /tmp/x')", "nbgrader_config.py": "c = get_config()",
               "utils/__init__.py": "", "notes.ipynb": "{}"}
    root, inbound, rec = _one_submission(tmp_path, planted)
    c = _collector(root, inbound)
    c.src_records = [rec]
    c.copy_files()
    got = sorted(p.name for p in (root / "submitted" / "alice" / LESSON).iterdir())
    assert got == ["timestamp.txt", NB], got
    # the control: without a release to name the lesson's notebooks, every top-level notebook
    # is taken (and still no module or folder)
    import shutil
    shutil.rmtree(root / "release")
    shutil.rmtree(root / "submitted")
    c.copy_files()
    got = sorted(p.name for p in (root / "submitted" / "alice" / LESSON).iterdir())
    assert got == ["notes.ipynb", "timestamp.txt", NB], got


def test_the_size_cap_holds_on_what_is_written(tmp_path):
    """A file grown after collect counted the submission (a student appending while collect
    copies): the copy stops at the cap, its partial copy is removed and the refusal noted."""
    root, inbound, rec = _one_submission(tmp_path)
    c = _collector(root, inbound, cap_mb=1.0)
    sub = inbound / rec["filename"]
    counted = c._size_problem

    def count_then_grow(path):
        problem = counted(path)
        with open(sub / NB, "ab") as f:   # the student's file grows once it has been counted
            f.write(b" " * 3_000_000)
        return problem

    c._size_problem = count_then_grow
    c.src_records = [rec]
    c.copy_files()
    assert counted(str(sub)) is not None   # over the cap now: the count alone came too early
    assert not (root / "submitted" / "alice" / LESSON).exists()
    notes = (root / "refused" / f"{LESSON}.txt").read_text()
    assert "over 1 MB while it was copied" in notes and "partial copy removed" in notes, notes
    # the control: with a cap above what it grew to, the same grown file is collected whole
    c = _collector(root, inbound, cap_mb=5.0)
    c.src_records = [rec]
    c.copy_files()
    assert (root / "submitted" / "alice" / LESSON / NB).stat().st_size == (sub / NB).stat().st_size > 3_000_000


def test_a_failed_sandbox_start_leaves_no_folder_in_tmp(tmp_path, monkeypatch):
    """A kernel whose sandbox does not start (here: its launch fails) takes its temporary
    folder with it; the control: the folder exists while the start is under way."""
    import asyncio
    import tempfile
    from jupyter_client.manager import AsyncKernelManager
    from utils.sandbox import manager
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(manager, "unavailable", lambda bwrap: None)
    monkeypatch.setattr(manager, "start_problem", lambda bwrap: None)
    seen = []

    async def launch_fails(self, kernel_cmd, **kw):
        seen.extend(p.name for p in tmp_path.iterdir())
        raise OSError("bwrap: cannot start")

    monkeypatch.setattr(AsyncKernelManager, "_async_launch_kernel", launch_fails)
    km = manager.SandboxKernelManager(kernel_name="python3")
    with pytest.raises(OSError, match="cannot start"):
        asyncio.run(km.start_kernel(cwd=str(tmp_path)))
    assert any(n.startswith("kb-") for n in seen), seen   # the control: it was made
    assert not [p.name for p in tmp_path.iterdir()], list(tmp_path.iterdir())
