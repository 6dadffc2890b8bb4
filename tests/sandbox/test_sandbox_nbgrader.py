"""The same protection for plain nbgrader (`nbgrader autograde` runs its kernels in the sandbox, and
refuses to grade without it), interrupts that reach a sandboxed kernel, and a process bomb stopped
by the limit."""

from __future__ import annotations

import os

import nbformat
import psutil
import pytest

from utils.errors import ToolError
from utils.processes import nbgrader
from utils.scores import read_scores_url
from utils.grading.grade_course import grade_lessons
from utils.grading.settings import course_settings
from utils.sandbox.probe import unavailable
from utils.classroom.rehearsal import rehearsal_course
from sandbox_common import LESSON, NB, _write, cheats, in_kernel, run_async


pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(unavailable() is not None, reason=f"bubblewrap cannot run here: {unavailable()}")]


def test_plain_nbgrader_autograde_is_sandboxed_and_fails_closed(tmp_path):
    course = rehearsal_course(tmp_path / "course")
    release = nbformat.read(str(course / "release" / LESSON / NB), as_version=4)
    for student, add in cheats(course, 9).items():
        if student in ("secret_reader", "input_transformer"):
            nb = nbformat.reads(nbformat.writes(release), as_version=4)
            next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "add").source = add
            _write(course / "submitted" / student / LESSON, nb)
    nbgrader(["autograde", LESSON, "--force"], cwd=course)
    s = course_settings(course)
    rows = read_scores_url(s.db_url, s.course_id, [LESSON])
    assert {r.student for r in rows} == {"secret_reader", "input_transformer"}
    assert sum(r.score for r in rows) == 0

    # where bubblewrap cannot run, nothing is graded, and the command says why
    proc = nbgrader(["autograde", LESSON, "--force", "--SandboxKernelManager.bwrap=no-such-bwrap"],
                    cwd=course, check=False)
    assert proc.rc != 0 and "sandbox cannot run" in proc.log
    with open(course / "nbgrader_config.py", "a") as f:
        f.write("\nc.SandboxKernelManager.bwrap = 'no-such-bwrap'\n")
    with pytest.raises(ToolError, match="sandbox cannot run.*enabled = False"):
        grade_lessons(course, [LESSON], workers=1, quiet=True)


@pytest.mark.parametrize("mode", ["signal", "message"])
def test_interrupt_reaches_the_sandboxed_kernel(tmp_path, mode):
    from utils.sandbox.manager import SandboxKernelManager

    async def run():
        km = SandboxKernelManager(interrupt_with=mode)
        await km.start_kernel(cwd=str(tmp_path))
        kc = km.client()
        kc.start_channels()
        try:
            await kc.wait_for_ready(timeout=60)
            msg_id = kc.execute("import os, time\nprint(os.getuid(), flush=True)\nwhile True:\n    time.sleep(0.01)",
                                stop_on_error=False)   # as nbgrader asks: later requests are not aborted
            while True:   # the loop is running once the uid is printed
                msg = await kc.get_iopub_msg(timeout=30)
                if msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "stream":
                    uid = msg["content"]["text"].strip()
                    break
            await km.interrupt_kernel()
            while True:
                reply = await kc.get_shell_msg(timeout=20)
                if reply["parent_header"].get("msg_id") == msg_id:
                    break
            after = await kc.execute_interactive("x = 1", timeout=20, stop_on_error=False)
            return reply["content"], after["content"]["status"], uid
        finally:
            kc.stop_channels()
            await km.shutdown_kernel(now=True)

    content, status, uid = run_async(run)
    # graded by root, a uid of its own outside too (RLIMIT_NPROC then holds); else 65534 in a user namespace
    assert int(uid) >= 0x100000 if os.geteuid() == 0 else uid == "65534"
    assert content["status"] == "error" and content["ename"] == "KeyboardInterrupt"
    assert status == "ok"   # the kernel survived the interrupt


def _cgroups_here() -> bool:
    from utils.sandbox.limits import pids_cgroup, remove_cgroup

    group = pids_cgroup(10)
    remove_cgroup(group)
    return group is not None


def test_a_process_bomb_is_stopped_by_the_limit(tmp_path):
    spawn = ("import subprocess\nprocs = []\ntry:\n    for i in range(150):\n"
             "        procs.append(subprocess.Popen(['sleep', '60.25']))\nexcept OSError as err:\n"
             "    print(type(err).__name__)\nprint(len(procs))")

    out, _ = in_kernel(tmp_path, spawn, timeout=60, process_limit=40)
    lines = out.split()
    assert lines[0] == "BlockingIOError" and int(lines[-1]) < 40, lines
    assert not [p for p in psutil.process_iter(["cmdline"]) if p.info["cmdline"] == ["sleep", "60.25"]]
