"""The command line that starts a kernel in its sandbox: bwrap with its namespaces and user
(`namespaces`, `kernel_uid`), the seccomp filter (seccomp.py), the mounts, the kernel's whole
environment (`kernel_env`) (`bwrap_command`), then the launcher (`launch_args`), then the kernel's
own command.
"""

from __future__ import annotations

import functools
import os
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

from utils.sandbox import launch
from utils.sandbox.limits import kernel_cpus
from utils.sandbox.mounts import KERNEL_TMP, RUN, SUBMISSION, Layout

THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS")
PASS_ENV = THREAD_VARS + ("NBGRADER_EXECUTION", "CUDA_VISIBLE_DEVICES", "MPLBACKEND", "LANG", "LC_ALL", "TZ")


@functools.lru_cache(maxsize=None)
def has_option(bwrap: str, option: str) -> bool:
    """Whether this bwrap's --help names `option`."""
    exe = shutil.which(bwrap) or bwrap
    try:
        proc = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=30, env={})
    except (OSError, subprocess.TimeoutExpired):
        return False
    return f"{option} " in proc.stdout + proc.stderr


def namespaces(uid: int, bwrap: str = "bwrap") -> list[str]:
    """bwrap's namespace options. As an ordinary user: a user namespace mapping the kernel's uid
    65534 to the grader's (RLIMIT_NPROC counts the grader's processes). As root: no user namespace
    (inside one, the kernel would still be root outside, which RLIMIT_NPROC exempts); the launcher
    becomes `uid` outside too, with only what it needs to copy the submission and change user.
    In the user namespace, `--disable-userns` where this bwrap has it (0.8 on): no process inside
    can make a user namespace of its own (the seccomp filter refuses it in both cases)."""
    common = ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
              "--die-with-parent", "--new-session"]
    if uid < 0:
        nested = ["--disable-userns"] if has_option(bwrap, "--disable-userns") else []
        return ["--unshare-user", *nested, "--uid", "65534", "--gid", "65534", *common]
    caps = ["--cap-drop", "ALL"] + [a for c in ("SETUID", "SETGID", "CHOWN", "DAC_READ_SEARCH")
                                    for a in ("--cap-add", f"CAP_{c}")]
    return common + caps


def kernel_uid() -> int:
    """The uid (outside the sandbox too) of a kernel graded by root: one of its own, so that
    RLIMIT_NPROC counts that kernel's processes only; -1 (a user namespace) for other graders."""
    return 0x100000 + secrets.randbelow(0x10000) if os.geteuid() == 0 else -1


def kernel_env() -> dict[str, str]:
    """The kernel's whole environment: nothing of the grader's but the variables that must match
    the reference's run (PASS_ENV), thread pools sized to the kernel's CPUs, HOME in /tmp."""
    env = {k: os.environ[k] for k in PASS_ENV if k in os.environ}
    for var in THREAD_VARS:
        env.setdefault(var, str(kernel_cpus()))
    home = f"{KERNEL_TMP}/home"
    env.update(PATH=os.pathsep.join([os.path.dirname(sys.executable), "/usr/bin", "/bin"]),
               HOME=home, IPYTHONDIR=f"{home}/.ipython", MPLCONFIGDIR=f"{home}/.matplotlib",
               JUPYTER_RUNTIME_DIR=f"{home}/.jupyter", JUPYTER_DATA_DIR=f"{home}/.jupyter",
               JUPYTER_CONFIG_DIR=f"{home}/.jupyter", TMPDIR=KERNEL_TMP, PYTHONSAFEPATH="1",
               PYTHONDONTWRITEBYTECODE="1",
               # the kernel's parent is the PID namespace's init, as ipykernel reads PID 1: it
               # watches no parent (which would be the grader's) and, told it has one, does not
               # print its "Ctrl-C will not work" banner into the grader's log at every start
               JPY_PARENT_PID="1")
    env.setdefault("LANG", "C.UTF-8")
    return env


def bwrap_command(layout: Layout, env: dict[str, str], uid: int = -1, bwrap: str = "bwrap",
                  seccomp_fd: int | None = None) -> list[str]:
    """The bwrap prefix: `namespaces(uid)`, the seccomp program bwrap reads from `seccomp_fd`
    (seccomp.program_fd; passed on to bwrap), the mounts of `layout`, a clean environment `env`."""
    cmd = [shutil.which(bwrap) or bwrap, *namespaces(uid, bwrap)]
    if seccomp_fd is not None:
        cmd += ["--seccomp", str(seccomp_fd)]
    links = {args[-1] for args, _ in layout if args[0] == "--symlink"}
    parents = sorted({str(a) for args, _ in layout for a in Path(args[-1]).parents if str(a) != "/"} - links)
    for folder in parents:   # bwrap would make them 0700: the kernel's uid could not pass
        cmd += ["--perms", "0755", "--dir", folder]
    for args, _reason in layout:
        cmd += args
        if "--tmpfs" in args:   # a tmpfs hides the folders made under it above: make them again
            under = args[-1].rstrip("/") + "/"
            for folder in parents:
                if folder.startswith(under):
                    cmd += ["--perms", "0755", "--dir", folder]
    cmd += ["--chdir", "/", "--clearenv"]
    for key, value in sorted(env.items()):
        cmd += ["--setenv", key, value]
    return cmd + ["--"]


def _launcher() -> str:
    """The launcher's program text: its file is not visible inside the sandbox (see launch.py)."""
    return Path(launch.__file__).read_text()


def launch_args(mem: int, processes: int, copy_limit: int, budget: int, uid: int, workdir: str,
                sockets: str) -> list[str]:
    """The launcher (utils/sandbox/launch.py, run as `python -S -c`) and its arguments, up to the
    kernel's own command."""
    return [sys.executable, "-S", "-c", _launcher(), str(mem), str(processes), str(copy_limit), str(budget),
            str(uid), SUBMISSION, workdir, sockets, f"{RUN}/mpl"]
