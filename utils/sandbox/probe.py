"""Whether a kernel can be sandboxed here, asked before anyone is graded.

`unavailable`: whether bubblewrap can start a sandbox at all (else grading stops, unless the
instructor turns the sandbox off: `OPT_OUT`). `start_problem`: whether a kernel of this Python
starts in its sandbox, tried once per process by `trial_start` with the same mounts, user,
launcher and interpreter as a kernel's (else grading stops with bwrap's or Python's own message).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile

from utils.sandbox.command import bwrap_command, kernel_env, kernel_uid, launch_args, namespaces
from utils.sandbox.interpreter import kernel_python
from utils.sandbox.mounts import KERNEL_TMP, give_to, mounts, new_rundir
from utils.sandbox.seccomp import program_fd

OPT_OUT = "c.SandboxKernelManager.enabled = False"
TRIAL = "import ipykernel.kernelapp, course; print('kernel can start')"


@functools.lru_cache(maxsize=None)
def unavailable(bwrap: str = "bwrap") -> str | None:
    """None when bubblewrap can start a sandbox here, else the reason it cannot."""
    exe = shutil.which(bwrap)
    if exe is None:
        return (f"'{bwrap}' is not installed (Debian/Ubuntu: apt-get install bubblewrap; "
                f"Fedora: dnf install bubblewrap)")
    try:
        proc = subprocess.run([exe, *namespaces(0 if os.geteuid() == 0 else -1, bwrap), "--ro-bind", "/", "/",
                               "--dev", "/dev", "--proc", "/proc", "--size", "1048576", "--tmpfs", "/tmp", "true"],
                              capture_output=True, text=True, timeout=30, env={})
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"bubblewrap could not start a sandbox: {err}"
    if proc.returncode != 0:
        return (f"bubblewrap could not start a sandbox ({proc.stderr.strip() or f'exit {proc.returncode}'}); "
                f"user namespaces may be disabled (sysctl kernel.unprivileged_userns_clone, "
                f"user.max_user_namespaces), the container forbids them, or this bubblewrap is too old "
                f"for --size (a tmpfs of limited size)")
    return None


def start_problem(bwrap: str = "bwrap") -> str | None:
    """Where bubblewrap runs (`unavailable` is None): None when a kernel of this Python starts in
    its sandbox (`trial_start`), else one sentence with bwrap's or Python's own message. Turning the
    sandbox off is no answer to this: the course's layout of this Python is at fault."""
    failed = None if unavailable(bwrap) else trial_start(bwrap)
    if failed:
        return (f"bubblewrap runs here, but a kernel of this Python ({sys.executable}) did not start in "
                f"its sandbox: {failed}. Nobody was graded. The message is bubblewrap's or the "
                f"interpreter's own; docs/instructors.md ('The autograding sandbox') lists the Python "
                f"layouts that were tried")
    return None


def run_sandboxed(program: str, uid: int, bwrap: str = "bwrap", *, seccomp: bool = True,
                  disable_userns: bool = True, name: str = ".trial") -> subprocess.CompletedProcess:
    """`program` (python -c) started by a kernel's own command line: the same mounts, user (`uid`;
    -1: a user namespace), launcher, interpreter and seccomp filter (`seccomp=False`: none;
    `disable_userns=False`: bwrap's --disable-userns left out, where it was added). Its output as
    bytes; the temporary folders are removed."""
    work = rundir = fd = None
    try:
        work, rundir = tempfile.mkdtemp(prefix="kc-"), new_rundir()
        fd = program_fd() if seccomp else None
        give_to(rundir, uid)
        layout = mounts(work, rundir, kernel_python(work, rundir), 64 << 20)
        cmd = bwrap_command(layout, kernel_env(), uid, bwrap, fd)
        if not disable_userns:
            cmd.remove("--disable-userns")
        cmd += launch_args(0, 0, 0, 0, uid, work, f"{KERNEL_TMP}/{name}") + [sys.executable, "-c", program]
        return subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=120,
                              env={"PATH": "/usr/bin:/bin"}, pass_fds=() if fd is None else (fd,))
    finally:
        if fd is not None:
            os.close(fd)
        for folder in (work, rundir):
            if folder:
                shutil.rmtree(folder, ignore_errors=True)


@functools.lru_cache(maxsize=None)
def trial_start(bwrap: str = "bwrap") -> str | None:
    """One kernel's sandbox started for real (run_sandboxed: a trivial program instead of the
    kernel): None when it ran, else bwrap's or Python's own last lines. Once per process, before
    anyone is graded."""
    try:
        proc = run_sandboxed(TRIAL, kernel_uid(), bwrap)
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"{err}"
    if proc.returncode == 0 and b"kernel can start" in proc.stdout:
        return None
    lines = [l.strip() for l in (proc.stderr + proc.stdout).decode(errors="replace").splitlines() if l.strip()]
    return " | ".join(lines[-3:]) or f"exit {proc.returncode}, nothing printed"
