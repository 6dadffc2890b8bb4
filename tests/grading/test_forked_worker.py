"""Workers forked from the grader (utils/nbgrader_client.py, fork_here): nbgrader commands run as
in a worker started anew; each worker holds its own pipes only, so closing one ends it while
another lives; they end with the process; a process running threads starts them anew instead."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from utils.lessons import REPO

SCRIPT = textwrap.dedent("""
    import json, os, sys, threading, time
    import nbgrader.api   # what the grader has imported when it asks for a worker
    from utils import nbgrader_client as nc
    from utils.processes import nbgrader, nbgrader_env

    def comm(pid):   # a forked worker names itself first thing: given a moment
        for _ in range(100):
            with open(f"/proc/{pid}/comm") as f:
                name = f.read().strip()
            if name == "nbgrader-worker":
                break
            time.sleep(0.02)
        return name

    if sys.argv[1] == "fork":
        from utils.grading.nbgrader_worker import serve_forked
        nc.fork_here(serve_forked)
    if sys.argv[2] == "thread":
        threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
    nc.start_idle(2, nbgrader_env())
    first, second = nc._idle
    out = {"comms": [comm(c.proc.pid) for c in (first, second)],
           "parents": [open(f"/proc/{c.proc.pid}/stat").read().split(")")[1].split()[1] for c in (first, second)],
           "me": os.getpid()}
    done = nbgrader(["--version"], cwd=os.getcwd(), check=False)
    out["rc"], out["said"] = done.rc, done.log.strip().splitlines()[-1:]
    # closing the first worker's pipe ends it while the second lives: the second holds none of it
    nc._idle.remove(first)
    start = time.monotonic()
    first.close()
    out["first_closed_in"] = time.monotonic() - start
    out["second_alive"] = second.proc.poll() is None
    nc.close_all()
    out["second_rc"] = second.proc.poll()
    print(json.dumps(out))
""")


def _run(mode: str, threads: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", SCRIPT, mode, threads], cwd=REPO, capture_output=True, text=True,
                          timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_forked_workers_run_commands_and_end_one_by_one():
    out = _run("fork", "alone")
    assert out["comms"] == ["nbgrader-worker"] * 2
    assert out["parents"] == [str(out["me"])] * 2
    assert out["rc"] == 0 and out["said"][0].startswith("nbgrader version"), out
    assert out["first_closed_in"] < 5 and out["second_alive"] and out["second_rc"] == 0


@pytest.mark.slow
def test_a_process_with_threads_starts_its_workers_anew():
    """Forking a process that runs threads could copy a lock another thread holds: never done."""
    out = _run("fork", "thread")
    assert "nbgrader-worker" not in out["comms"], out
    assert out["rc"] == 0


def test_the_nbgrader_environment_is_the_same_made_twice(monkeypatch):
    """The grader once put its bin folder on PATH again for each run (PATH changed by alembic_on_path
    in between), and a worker took that for another sandbox and started a second trial kernel."""
    import os
    from utils.processes import nbgrader_env
    from utils.scores import alembic_on_path

    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    before = nbgrader_env()
    alembic_on_path()
    assert nbgrader_env() == before == nbgrader_env(nbgrader_env())
    assert before["PATH"].split(os.pathsep)[0] == os.path.dirname(sys.executable)
