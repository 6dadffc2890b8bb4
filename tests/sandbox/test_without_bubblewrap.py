"""Where bubblewrap cannot run: the demo grades its own samples without the sandbox and says so;
grading real submissions (python -m utils.grading, plain nbgrader autograde) still refuses.

bubblewrap is made unavailable the way a machine without it looks: a PATH on which there is no
`bwrap` (every folder of PATH that holds one is replaced by a folder of links to everything else
in it). Nothing is uninstalled.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from utils.authoring import demo
from utils.authoring.check import REFERENCE, RELEASE
from utils.errors import ToolError
from utils.lessons import REPO
from utils.processes import nbgrader
from utils.scores import read_scores
from utils.scratch import scratch_course
from utils.sandbox.probe import OPT_OUT

from conftest import SYNTH, make_course, synthetic_cells
from helpers import digest


def path_without(tool: str, shadows: Path) -> str:
    """This PATH with every folder that holds `tool` replaced by links to everything else in it."""
    folders = []
    for i, folder in enumerate(p for p in os.environ.get("PATH", "").split(os.pathsep) if p):
        if not os.path.exists(os.path.join(folder, tool)):
            folders.append(folder)
            continue
        shadow = shadows / f"path-{i}"
        shadow.mkdir(parents=True)
        for name in os.listdir(folder):
            if name != tool:
                (shadow / name).symlink_to(os.path.join(folder, name))
        folders.append(str(shadow))
    path = os.pathsep.join(folders)
    assert shutil.which(tool, path=path) is None
    return path


@pytest.fixture
def no_bwrap_env(tmp_path) -> dict[str, str]:
    return dict(os.environ, PATH=path_without("bwrap", tmp_path / "shadow"))


# --- the demo ---------------------------------------------------------------------------------

def test_the_demo_names_why_it_grades_without_the_sandbox(tmp_path, monkeypatch):
    monkeypatch.setattr(demo, "unavailable", lambda bwrap="bwrap": f"'{bwrap}' is not installed")
    problem = demo.sandbox_problem(REPO)
    assert problem == "'bwrap' is not installed"
    line = demo.without_sandbox_line(problem)
    assert "\n" not in line and line.startswith("WITHOUT SANDBOX")
    for words in ("'bwrap' is not installed", "Linux with user namespaces", "container or VM", "make grade"):
        assert words in line

    monkeypatch.setattr(demo, "unavailable", lambda bwrap="bwrap": None)
    assert demo.sandbox_problem(REPO) is None
    course = tmp_path / "c"
    course.mkdir()
    (course / "nbgrader_config.py").write_text((REPO / "nbgrader_config.py").read_text() + f"\n{OPT_OUT}\n")
    assert demo.sandbox_problem(course) == demo.TURNED_OFF
    assert "container or VM" in demo.without_sandbox_line(demo.TURNED_OFF)


@pytest.mark.slow
def test_demo_run_without_the_sandbox_turns_it_off_in_the_scratch_course_only(tmp_path):
    root = make_course(tmp_path / "c", synthetic_cells())
    before = digest(root / "nbgrader_config.py")
    scratch, table, problems = demo.run(root, build_release=False, sandbox=False)
    assert problems == [] and REFERENCE in table and RELEASE in table
    assert OPT_OUT in (scratch / "nbgrader_config.py").read_text()
    assert digest(root / "nbgrader_config.py") == before
    assert {r.student for r in read_scores(scratch) if r.lesson == SYNTH} == {REFERENCE, RELEASE}
    shutil.rmtree(scratch, ignore_errors=True)


@pytest.mark.slow
def test_make_demo_passes_without_bubblewrap_and_says_so(no_bwrap_env):
    """What `make demo` runs, on a machine without bubblewrap, for the first lesson (grading every
    lesson's samples is test_lessons.py's, in the sandbox): the lesson is built, its three samples
    graded without the sandbox, the scores printed, and the line about the sandbox is at the top and
    in the summary."""
    config = digest(REPO / "nbgrader_config.py")
    first = demo.lessons(REPO)[0]
    proc = subprocess.run([sys.executable, "-m", "utils.authoring.demo", first], cwd=REPO, env=no_bwrap_env,
                          capture_output=True, text=True, timeout=1800)
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:] + proc.stderr[-3000:]
    lines = [l for l in out.splitlines() if l.strip()]
    assert lines[0].startswith("WITHOUT SANDBOX") and "'bwrap' is not installed" in lines[0]
    assert lines[-2] == lines[0], "the summary repeats the line about the sandbox"
    assert lines[-1].startswith("demo finished") and "all as expected" in lines[-1]
    assert any(l.startswith(f"built {first}") for l in lines)
    header = next(l for l in lines if l.startswith("cell "))
    for student in (REFERENCE, RELEASE, demo.MISTAKEN):
        assert student in header
    totals = [l for l in lines if " TOTAL " in l]
    assert len(totals) == 1 and first in totals[0]
    for total in totals:
        scores = total.split()[2:]
        assert len(scores) == 3 and all("/" in s for s in scores)
    scratch = Path(next(l for l in lines if l.startswith("graded in the scratch course")).split()[5])
    assert OPT_OUT in (scratch / "nbgrader_config.py").read_text()
    assert digest(REPO / "nbgrader_config.py") == config
    shutil.rmtree(scratch, ignore_errors=True)


def test_the_demo_grades_three_samples_of_every_lesson_by_default(tmp_path):
    """`make demo` (no lesson named) places the three samples of every lesson, and judges each."""
    scratch = scratch_course(REPO, demo.lessons(REPO), tmp_path / "c", release=True)
    demo.place_samples(scratch)
    for lesson in demo.lessons(REPO):
        students = {p.name for p in (scratch / "submitted").iterdir() if (p / lesson).is_dir()}
        assert students == {REFERENCE, RELEASE, demo.MISTAKEN}, lesson
    assert demo.problems_in(scratch) == [f"{lesson}: {what}" for lesson in demo.lessons(REPO) for what in (
        "the reference solution did not get full marks", "the untouched release did not score zero")]
    with pytest.raises(ToolError, match="unknown lesson"):
        demo.run(REPO, build_release=False, sandbox=False, names=["no_such_lesson"])


# --- real grading still fails closed ----------------------------------------------------------

@pytest.mark.slow
def test_grading_real_submissions_still_refuses_without_bubblewrap(tmp_path, no_bwrap_env):
    course = make_course(tmp_path / "c", synthetic_cells())
    release = nbformat.read(str(course / "release" / SYNTH / "synthetic.ipynb"), as_version=4)
    (course / "submitted" / "ann" / SYNTH).mkdir(parents=True)
    nbformat.write(release, str(course / "submitted" / "ann" / SYNTH / "synthetic.ipynb"))

    proc = subprocess.run([sys.executable, "-m", "utils.grading", "--course", str(course)], cwd=REPO,
                          env=no_bwrap_env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1
    assert "the autograding sandbox cannot run: 'bwrap' is not installed" in proc.stderr
    assert "Nothing was graded" in proc.stderr and OPT_OUT in proc.stderr
    assert not (course / "autograded" / "ann").exists() and not read_scores(course)

    run = nbgrader(["autograde", SYNTH, "--force"], cwd=course, check=False, env_extra={"PATH": no_bwrap_env["PATH"]})
    assert run.rc != 0 and "sandbox cannot run" in run.log and "'bwrap' is not installed" in run.log
    assert all(r.score == 0 for r in read_scores(course))


# --- the make targets -------------------------------------------------------------------------

def _make_n(*args: str) -> str:
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    # run under `make test` too: not as a sub-make (which would print the folders it enters)
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")}
    return subprocess.run(["make", "--no-print-directory", "-n", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, check=True).stdout


@pytest.mark.slow
def test_make_demo_installs_bubblewrap_where_it_can():
    assert "utils/system_deps.sh bubblewrap" in _make_n("-B", "demo")


@pytest.mark.slow
def test_make_gpu_check_with_py_uses_that_python_and_installs_nothing():
    out = _make_n("-B", "gpu-check", "PY=python3")
    assert out.strip() == "python3 -m utils.bench.gpu_check"
