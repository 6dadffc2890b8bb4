"""Shared fixtures: a small fabricated lesson for testing the instructor tools quickly; and the
fast layer's rule: a test not marked slow (or browser) starts no process and reaches no other
machine (`make test-fast` runs those tests alone)."""

from __future__ import annotations

import atexit
import hashlib
import ipaddress
import json
import multiprocessing.util
import os
import shutil
import socket
import subprocess
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path

import pytest

import grading_runs

from utils.authoring import nbauthor as nb
from utils.lessons import REPO
from utils.processes import nbgrader
from utils.scratch import scratch_config

SYNTH = "00_synthetic"


def synthetic_cells(test_body: str | None = None, quiz_hidden: str | None = None) -> list:
    """A lesson with one function exercise and one quiz question, shaped like the real ones: the
    graded cells observe (course.observe), the quiz answer is its check_choice observation."""
    return [
        nb.md("# A synthetic lesson\nSquares and a quiz.", "intro"),
        nb.readonly("setup", "import math\nfrom course.checks import check_close\nfrom course.quiz import check_choice"),
        nb.solution("square", "def square(x):\n    ### BEGIN SOLUTION\n    if x != x:\n"
                               "        raise ValueError('x is NaN')\n    return x * x\n    ### END SOLUTION"),
        nb.tests("square_test", 2, test_body or (
            "check_close('square(3)', square(3), 9.0)\n"
            "### BEGIN HIDDEN TESTS\n"
            "from course.observe import observe\n"
            "observe('square(1.5)', square(1.5))\n"
            "### END HIDDEN TESTS")),
        nb.solution("quiz_q1", "### BEGIN SOLUTION\nq1 = 'c'\n### END SOLUTION"),
        nb.tests("quiz_q1_test", 1, "check_choice('q1', q1, 'abcd')" + (quiz_hidden or "")),
    ]


# Nothing a test runs writes into the checkout: figures that lesson 3's code measures (course.detect)
# go to a folder of this test process (tests that need the default delete the variable).
_cache = tempfile.mkdtemp(prefix="course-cache-")
atexit.register(shutil.rmtree, _cache, True)
os.environ["COURSE_CACHE_DIR"] = _cache

_built: dict[str, Path] = {}   # the cells' digest -> a course built from them once per test process
_templates = Path(tempfile.mkdtemp(prefix="synthetic-courses-"))
atexit.register(shutil.rmtree, _templates, True)


def make_course(root: Path, cells: list) -> Path:
    """A course directory at `root` with the synthetic lesson in source/ and its release built.
    Built (nbgrader generate_assignment, about 6 s) once per test process for the same cells, then
    copied, with a config naming its own gradebook."""
    # the cells' random ids left out: the same cells built twice are the same lesson
    key = hashlib.sha256(json.dumps([{k: v for k, v in c.items() if k != "id"} for c in cells],
                                    sort_keys=True).encode()).hexdigest()
    if key not in _built:
        template = _templates / key
        scratch_config(template, REPO)
        (template / "course").mkdir(exist_ok=True)
        nb.write(template / "source" / SYNTH / "synthetic.ipynb", cells)
        nbgrader(["generate_assignment", SYNTH, "--force"], cwd=template)
        _built[key] = template
    shutil.copytree(_built[key], root, dirs_exist_ok=True)
    scratch_config(root, REPO)
    return root


# The order in which the test processes take the files (pytest-xdist hands each process the next
# file when it runs short of tests; `make test` passes --no-loadscope-reorder, without which it would
# hand them out by number of tests, and the long files hold few): the three lesson gradings first,
# the other long files in the other process meanwhile (make lab's fresh install, the class server's
# environment built as its set-up builds it), the Dask cluster once the gradings it is
# compared with are done, the files that read a lesson's grading after that, then the short files in
# collection order, so that neither process is left running a long file alone at the end.
# A file named here that is not there (renamed, moved) stops the run at once: it would silently
# lose its place and be run last.
LONGEST_FIRST = ("lessons/test_lesson3_check.py", "lessons/test_lessons.py", "browser/test_student.py", "classroom/test_hub_classroom.py",
                 "sandbox/test_sandbox_grading.py", "grading/test_bad_submissions.py",
                 "grading/test_cheats.py", "sandbox/test_without_bubblewrap.py", "grading/test_dask.py",
                 "grading/test_slurm_grading.py", "lessons/test_lesson2_observations.py",
                 "classroom/test_workflow.py", "authoring/test_tools.py", "grading/test_postgres.py",
                 "browser/test_lesson2.py", "lessons/test_lesson3_observations.py")
_TESTS = Path(__file__).resolve().parent


def missing_files(names=LONGEST_FIRST, folder: Path = _TESTS) -> list[str]:
    return [name for name in names if not (folder / name).is_file()]


def _rank(item) -> int:
    name = item.path.resolve().relative_to(_TESTS).as_posix()
    return LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)


# A fast test (neither slow nor browser) gets this limit unless it names its own: the slowest take
# about 12 s on a loaded 2-core machine; the 900 s of pyproject.toml are for the slow layer.
FAST_TIMEOUT_S = 30


def pytest_collection_modifyitems(config, items):
    missing = missing_files()
    if missing:
        raise pytest.UsageError(f"tests/conftest.py's LONGEST_FIRST names test files that are not there: {missing}")
    items.sort(key=_rank)
    for item in items:
        if not any(item.get_closest_marker(m) for m in SLOW_MARKERS + ("timeout",)):
            item.add_marker(pytest.mark.timeout(FAST_TIMEOUT_S))


# --- the fast layer: enforced, not hoped ---------------------------------------------------------
# While a test that is marked neither slow nor browser sets up and runs, whatever starts a process
# (subprocess and asyncio's subprocesses, a Jupyter kernel, nbgrader, bwrap, multiprocessing, a
# fork) or connects to another machine fails that test with an error naming it. Only the test's own
# thread is watched: a slow test's servers and clusters, running in threads of their own while a
# fast test runs in the same process, keep starting what they start.
SLOW_MARKERS = ("slow", "browser")


class SlowTestInFastLayer(RuntimeError):
    """A test outside the slow layer started a process or reached the network."""


_watched: dict[int, tuple[str, list[str]]] = {}   # thread id -> (the test's id, what it tried)


def _refuse(what) -> None:
    """Refuse in a watched thread (a fast test's own); `what()` says what the test tried."""
    watched = _watched.get(threading.get_ident())
    if watched is None:
        return
    nodeid, tried = watched
    try:
        what = what()
    except Exception:   # noqa: BLE001 - the description is a courtesy; the refusal is not
        what = "started a process"
    tried.append(what)
    raise SlowTestInFastLayer(f"{nodeid} {what}, but it is not marked slow: the fast layer (make test-fast) "
                              f"runs no process and reaches no network; mark it slow (@pytest.mark.slow)")


def _guarded(what, original):
    def guarded(*args, **kwargs):
        _refuse(lambda: what(*args))
        return original(*args, **kwargs)
    guarded.__wrapped__ = original
    return guarded


def _program(args) -> str:
    args = [args] if isinstance(args, (str, bytes, os.PathLike)) else list(args or [])
    return " ".join(str(a) for a in args[:3]) + (" ..." if len(args) > 3 else "")


def _remote(address) -> bool:
    """An Internet address that is not this machine's loopback (Unix sockets never are remote)."""
    if not isinstance(address, tuple) or not address or not isinstance(address[0], str):
        return False
    try:
        return not ipaddress.ip_address(address[0].split("%")[0]).is_loopback
    except ValueError:   # a host name
        return address[0] != "localhost"


def _guarded_connect(original):
    def connect(sock, address):
        if _remote(address):
            _refuse(lambda: f"connected to {address!r}")
        return original(sock, address)
    connect.__wrapped__ = original
    return connect


def _install_process_guards() -> None:
    """Wrap every way a Python process starts another, and a socket's connect (each wrapper refuses
    only in a watched thread, else calls through): subprocess.Popen (asyncio's subprocesses and
    jupyter_client's kernels go through it), os.fork, os.forkpty, os.posix_spawn[p], os.system,
    multiprocessing's spawn and forkserver, and a connection to an address that is not loopback."""
    popen = subprocess.Popen._execute_child
    if getattr(popen, "__wrapped__", None) is not None:
        return
    subprocess.Popen._execute_child = _guarded(lambda self, args, *rest: f"started a process ({_program(args)})",
                                               popen)
    for name in ("fork", "forkpty"):
        if hasattr(os, name):
            setattr(os, name, _guarded(lambda: "forked a process (os.fork)", getattr(os, name)))
    for name in ("posix_spawn", "posix_spawnp"):
        if hasattr(os, name):
            setattr(os, name, _guarded(lambda path, argv, *rest: f"started a process ({_program(argv)})",
                                       getattr(os, name)))
    os.system = _guarded(lambda command: f"started a shell ({_program([command])})", os.system)
    multiprocessing.util.spawnv_passfds = _guarded(lambda path, args, fds: f"started a process ({_program(args)})",
                                                   multiprocessing.util.spawnv_passfds)
    socket.socket.connect = _guarded_connect(socket.socket.connect)
    socket.socket.connect_ex = _guarded_connect(socket.socket.connect_ex)


@contextmanager
def _fast_layer_rule(item):
    if any(item.get_closest_marker(m) for m in SLOW_MARKERS):
        yield None
        return
    ident, tried = threading.get_ident(), []
    _watched[ident] = (item.nodeid, tried)
    try:
        yield tried
    finally:
        _watched.pop(ident, None)


def pytest_configure(config):
    _install_process_guards()


def _run_under_the_rule(item):
    with _fast_layer_rule(item) as tried:
        result = yield
    if tried:   # refused, even where the test caught the error and went on
        raise SlowTestInFastLayer(f"{item.nodeid} {tried[0]}, but it is not marked slow: mark it slow "
                                  f"(@pytest.mark.slow, or pytestmark = pytest.mark.slow for a whole file)")
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    return (yield from _run_under_the_rule(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    return (yield from _run_under_the_rule(item))


@pytest.fixture(scope="session", autouse=True)
def _one_grading_per_lesson_across_test_processes(tmp_path_factory):
    """Under pytest-xdist, the lessons' shared gradings (tests/grading_runs.py) live in the folder
    above every process's own temporary folder, which all of them see."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        grading_runs.SHARED = tmp_path_factory.getbasetemp().parent


@pytest.fixture
def synthetic_course(tmp_path: Path) -> Path:
    return make_course(tmp_path / "course-root", synthetic_cells())
