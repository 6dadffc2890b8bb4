"""A kernel starts in its sandbox on every Python layout a course runs on, and a sandbox that
cannot start stops grading at once with bubblewrap's own message.

Each layout is a virtual environment made with `python -m venv` from an interpreter this machine
has (Debian's or Ubuntu's /usr/bin/python3, a link to python3.X inside the /usr/bin that the
sandbox shows whole; the official Docker image's /usr/local/bin/python3; the interpreter this
environment was built from, such as pyenv's; conda's), skipped with the reason where absent. The
packages are this environment's, lent through a .pth file (the layout under test is the
interpreter's: its links, standard library, libpython and shared libraries), so that no layout
needs a download. In each, the grader's own check (`start_problem`) passes and a sandboxed kernel
runs a cell that imports what the lessons import.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from utils.errors import ToolError
from utils.lessons import REPO
from utils.sandbox.probe import unavailable

pytestmark = pytest.mark.skipif(unavailable() is not None, reason=f"bubblewrap cannot run here: {unavailable()}")
VERSION = f"{sys.version_info.major}.{sys.version_info.minor}"


def _conda_python() -> str | None:
    conda = shutil.which("conda") or shutil.which("mamba")
    if conda is None:
        return None
    base = Path(conda).resolve().parent.parent
    return str(base / "bin" / "python3")


LAYOUTS = {
    "debian-usr-bin": "/usr/bin/python3",
    "docker-usr-local": "/usr/local/bin/python3",
    "this-environments-base": str(Path(sys.base_prefix) / "bin" / "python3"),
    "conda": _conda_python(),
}

KERNEL = f"""
import asyncio, sys, tempfile
sys.path.insert(0, {str(REPO)!r})
from utils.sandbox.manager import SandboxKernelManager
from utils.sandbox.probe import start_problem
problem = start_problem()
if problem:
    sys.exit("START PROBLEM " + problem)

async def main():
    km = SandboxKernelManager()
    await km.start_kernel(cwd=tempfile.mkdtemp())
    kc = km.client(); kc.start_channels()
    out = []
    try:
        await kc.wait_for_ready(timeout=90)
        code = "import ctypes, ssl, sqlite3, numpy, torch, matplotlib, course; print('RAN', numpy.__version__)"
        await kc.execute_interactive(code, timeout=120, output_hook=lambda m: out.append(
            m["content"].get("text", "") if m["msg_type"] == "stream" else m["msg_type"] + " " + str(m["content"].get("evalue", ""))))
    finally:
        kc.stop_channels(); await km.shutdown_kernel(now=True)
    print("".join(out))

asyncio.run(main())
"""


def _venv_from(python: str, dest: Path) -> Path:
    """`python -m venv dest` (pip left out: it is not what the sandbox shows), with this
    environment's packages lent through a .pth file, the editable `course` install as it is."""
    subprocess.run([python, "-m", "venv", "--without-pip", str(dest)], check=True, capture_output=True, timeout=120)
    mine = Path(sysconfig.get_path("purelib"))
    theirs = Path(subprocess.run([str(dest / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                                 capture_output=True, text=True, check=True).stdout.strip())
    (theirs / "lent-packages.pth").write_text(f"{mine}\n")
    for name in glob.glob(str(mine / "__editable__*")):   # a .pth in a lent folder is not read: the finder's own
        shutil.copy(name, theirs)
    return dest / "bin" / "python"


@pytest.mark.slow
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_a_kernel_starts_in_the_sandbox_from_a_venv_of_this_python(tmp_path, layout):
    python = LAYOUTS[layout]
    if not python or not os.path.exists(python):
        pytest.skip(f"this machine has no {layout} Python ({python or 'no conda or mamba on PATH'})")
    there = subprocess.run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                           capture_output=True, text=True).stdout.strip()
    if there != VERSION:
        pytest.skip(f"{python} is Python {there}; this environment's packages are built for {VERSION}")
    if subprocess.run([python, "-c", "import ensurepip, venv"], capture_output=True).returncode:
        pytest.skip(f"{python} has no venv module (Debian: apt-get install python3-venv)")
    venv_python = _venv_from(python, tmp_path / "env")
    run = subprocess.run([str(venv_python), "-c", KERNEL], capture_output=True, text=True, timeout=300,
                         cwd=tmp_path, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert run.returncode == 0 and "RAN" in run.stdout, (run.stdout + run.stderr)[-3000:]
    assert "error" not in run.stdout.split("RAN")[0], run.stdout


@pytest.fixture
def broken_layout(monkeypatch):
    """A sandbox bwrap refuses to build (a link where a bound folder already stands, the kind of
    layout Debian's /usr/bin/python3 once gave), the checks' caches cleared around it: both the
    trial start and a kernel's start build it."""
    from utils.sandbox import manager, mounts as layout, probe

    def mounts(*args, **kw):
        return layout.mounts(*args, **kw) + [(["--symlink", "nowhere", "/usr/bin"], "a link bwrap cannot make")]

    monkeypatch.setattr(probe, "mounts", mounts)
    monkeypatch.setattr(manager, "mounts", mounts)
    probe.trial_start.cache_clear()
    yield
    probe.trial_start.cache_clear()


@pytest.mark.slow
def test_a_sandbox_that_cannot_start_stops_grading_with_bwraps_message(broken_layout, tmp_path, monkeypatch):
    from utils.authoring import demo
    from utils.grading import settings
    from utils.grading.settings import CourseSettings, require_sandbox
    from utils.sandbox.probe import start_problem

    # The trial start is a grading worker's (another process, which this layout cannot reach):
    # here it is made in this process, under the broken layout, as the worker would make it.
    monkeypatch.setattr(settings, "worker_start_problem", lambda bwrap, env: start_problem(bwrap))
    problem = start_problem()
    assert problem and "bwrap: Can't make symlink at /usr/bin" in problem and "Nobody was graded" in problem
    with pytest.raises(ToolError, match="Can't make symlink at /usr/bin"):
        require_sandbox(CourseSettings("c", f"sqlite:///{tmp_path}/g.db", True, "bwrap"))
    assert demo.main([]) == 2   # before building or grading anything


def test_a_kernel_whose_sandbox_ends_at_once_fails_with_bwraps_message(broken_layout, monkeypatch, tmp_path):
    import asyncio

    from utils.sandbox import manager
    from utils.sandbox.sandbox_error import SandboxError

    monkeypatch.setattr(manager, "start_problem", lambda bwrap="bwrap": None)   # past the check, as a race would be

    async def start():
        km = manager.SandboxKernelManager()
        try:
            await km.start_kernel(cwd=str(tmp_path))
        finally:
            if km.has_kernel:
                await km.shutdown_kernel(now=True)

    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(1) as pool:   # a loop of its own, whatever ran before
        with pytest.raises(SandboxError, match="did not start: bwrap: Can't make symlink"):
            pool.submit(asyncio.run, start()).result()
