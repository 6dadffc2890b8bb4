"""Every autograding kernel runs in a bubblewrap sandbox.

`SandboxKernelManager` is a jupyter_client kernel manager whose kernel command is prefixed with
`bwrap`. nbgrader_config.py makes it the kernel manager of the course's Execute step
(utils.nbgrader_plugins.SafeExecute), so `utils.grade`, plain `nbgrader autograde` and the
formgrader all grade in it. Inside the sandbox the student's code:

  - runs as uid 65534 in its own user, PID, network, IPC and UTS namespaces, with no capabilities;
    its processes die with the grader and with the kernel (`--die-with-parent`, PID namespace);
  - sees the file system read-only, with /tmp, /home, /root, /srv, /var, /run, /mnt, /media and
    the folders holding the course (the course root, the instructor tools, the grading work
    folders) replaced by empty ones; only the Python environment and the `course` package are
    bound back (read-only), and only the notebook's own work folder is writable;
  - has no network: the kernel talks to the grader over ZeroMQ's ipc transport, through sockets
    in a private folder bound into the sandbox (the loopback of a new network namespace is its own);
  - gets a scrubbed environment (no course paths, no credentials), PYTHONSAFEPATH so that nothing
    in the submission folder shadows a module, its own IPYTHONDIR and HOME;
  - has a memory limit per process (RLIMIT_DATA) and a limit on its processes and threads: a
    cgroup of its own with `pids.max` where the grader may create one (root, cgroup v1 or v2),
    and RLIMIT_NPROC (which Linux does not enforce for root).

Where bubblewrap cannot run, starting a kernel fails with a message saying why, unless the
instructor turns the sandbox off explicitly (`c.SandboxKernelManager.enabled = False`; then grade
inside a container). Interrupts (nbgrader's cell timeout) reach the kernel either as a message
on its control channel or as a SIGINT sent to the kernel process inside the sandbox
(`interrupt_with`, default "signal"); a SIGINT to bwrap itself would end the sandbox.
"""

from __future__ import annotations

import functools
import glob
import importlib.util
import itertools
import os
import shutil
import signal
import site
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from jupyter_client.manager import AsyncKernelManager
from traitlets import Bool, CaselessStrEnum, Integer, List, Unicode

HIDDEN = ("/tmp", "/var", "/home", "/root", "/srv", "/run", "/mnt", "/media")
SYSTEM = {"/usr", "/lib", "/lib32", "/lib64", "/bin", "/sbin", "/etc", "/opt", "/proc", "/sys", "/dev", "/nix"}
PASS_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS",
            "NBGRADER_EXECUTION", "CUDA_VISIBLE_DEVICES", "MPLBACKEND", "LANG", "LC_ALL", "TZ")
OPT_OUT = "c.SandboxKernelManager.enabled = False"

# Runs first inside the sandbox: set the limits (children inherit them), then become the kernel.
_LAUNCH = ("import os, resource, sys\n"
           "mem, nproc = int(sys.argv[1]), int(sys.argv[2])\n"
           "if mem > 0: resource.setrlimit(resource.RLIMIT_DATA, (mem, mem))\n"
           "if nproc > 0: resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))\n"
           "os.execv(sys.argv[3], sys.argv[3:])\n")


def pids_cgroup(limit: int) -> Path | None:
    """A new cgroup (v1 `pids` hierarchy, or the grader's own v2 cgroup) whose pids.max is `limit`,
    or None where the grader may not create one."""
    candidates = [Path("/sys/fs/cgroup/pids")]
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            if line.startswith("0::"):
                candidates.append(Path("/sys/fs/cgroup") / line[3:].lstrip("/"))
    except OSError:
        pass
    for parent in candidates:
        if not (parent / "cgroup.procs").exists():
            continue
        group = parent / f"course-grading-{os.getpid()}-{next(_GROUPS)}"
        try:
            group.mkdir()
            (group / "pids.max").write_text(str(limit))
            return group
        except OSError:
            remove_cgroup(group)
    return None


def remove_cgroup(group: Path | None) -> None:
    """Kill what is left in `group` (nothing, normally: the PID namespace ended) and remove it."""
    if group is None or not group.exists():
        return
    for _ in range(50):
        try:
            for pid in (group / "cgroup.procs").read_text().split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except OSError:
                    pass
            group.rmdir()
            return
        except OSError:
            time.sleep(0.02)


_GROUPS = itertools.count()


class SandboxError(RuntimeError):
    """Grading cannot be sandboxed here; the message says why and how to opt out."""


@functools.lru_cache(maxsize=None)
def unavailable(bwrap: str = "bwrap") -> str | None:
    """None when bubblewrap can start a sandbox here, else the reason it cannot."""
    exe = shutil.which(bwrap)
    if exe is None:
        return (f"'{bwrap}' is not installed (Debian/Ubuntu: apt-get install bubblewrap; "
                f"Fedora: dnf install bubblewrap)")
    try:
        proc = subprocess.run([exe, "--unshare-all", "--unshare-user", "--uid", "65534", "--gid", "65534",
                               "--die-with-parent", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
                               "true"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"bubblewrap could not start a sandbox: {err}"
    if proc.returncode != 0:
        return (f"bubblewrap could not start a sandbox ({proc.stderr.strip() or f'exit {proc.returncode}'}); "
                f"user namespaces may be disabled (sysctl kernel.unprivileged_userns_clone, "
                f"user.max_user_namespaces) or the container forbids them")
    return None


def python_paths() -> list[str]:
    """Folders the kernel's Python needs (read-only): the prefixes, site-packages, the `course` package."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
             os.path.dirname(os.path.realpath(sys.executable))}
    paths.update(site.getsitepackages())
    user_site = site.getusersitepackages()
    if isinstance(user_site, str):
        paths.add(user_site)
    spec = importlib.util.find_spec("course")
    if spec is not None and spec.submodule_search_locations:
        paths.update(spec.submodule_search_locations)
    return sorted(p for p in {os.path.realpath(p) for p in paths} | paths if os.path.isdir(p))


def hidden_folders(*course_paths: str) -> list[str]:
    """Folders replaced by empty ones: the usual places of files that are not the system's, and the
    top-level folder holding each of `course_paths` (the folder itself if that is a system folder)."""
    hide = [h for h in HIDDEN if os.path.isdir(h)]
    for path in course_paths:
        real = os.path.realpath(path)
        parts = Path(real).parts
        if len(parts) < 2:
            continue
        top = "/" + parts[1]
        target = real if top in SYSTEM else top
        if target not in hide:
            hide.append(target)
    return hide


def bwrap_command(workdir: str, rundir: str, *, hide: list[str], ro: list[str], env: dict[str, str],
                  bwrap: str = "bwrap") -> list[str]:
    cmd = [shutil.which(bwrap) or bwrap, "--unshare-all", "--unshare-user", "--uid", "65534", "--gid", "65534",
           "--die-with-parent", "--new-session", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    for dev in sorted(glob.glob("/dev/nvidia*")) + sorted(glob.glob("/dev/dri")):
        cmd += ["--dev-bind", dev, dev]   # a GPU stays usable
    for folder in hide:
        cmd += ["--tmpfs", folder]
    for folder in ro:
        cmd += ["--ro-bind", folder, folder]
    cmd += ["--bind", rundir, rundir, "--bind", workdir, workdir, "--chdir", workdir, "--clearenv"]
    for key, value in sorted(env.items()):
        cmd += ["--setenv", key, value]
    return cmd + ["--"]


class SandboxKernelManager(AsyncKernelManager):
    """An AsyncKernelManager whose kernels run under bubblewrap (see the module doc)."""

    enabled = Bool(True, help="Run autograding kernels in a bubblewrap sandbox. Turn off only "
                              "where grading itself runs in a container without network, secrets "
                              "or the course folder.").tag(config=True)
    memory_limit_mb = Integer(4096, help="Data memory per kernel process, in MiB (RLIMIT_DATA); "
                                         "0: no limit. A lesson needs about 1 GiB.").tag(config=True)
    process_limit = Integer(2048, help="Processes and threads of one kernel (a pids cgroup where the "
                                       "grader may create one, and RLIMIT_NPROC, which Linux does not "
                                       "enforce for root); 0: no limit. A lesson uses a few dozen; "
                                       "numeric libraries start one thread per core").tag(config=True)
    interrupt_with = CaselessStrEnum(["signal", "message"], default_value="signal",
                                     help="How a cell timeout interrupts the kernel: SIGINT sent to "
                                          "the kernel process inside the sandbox, or an "
                                          "interrupt_request on its control channel").tag(config=True)
    bwrap = Unicode("bwrap", help="The bubblewrap executable").tag(config=True)
    extra_readonly = List(Unicode(), help="More folders the kernel may read").tag(config=True)

    _rundir: str | None = None
    _workdir: str | None = None
    _cgroup: Path | None = None

    async def _async_pre_start_kernel(self, **kw):
        if self.enabled:
            problem = unavailable(self.bwrap)
            if problem:
                raise SandboxError(f"grading stopped: the autograding sandbox cannot run: {problem}. "
                                   f"To grade without it (only inside a container without network, "
                                   f"secrets or the course folder) set `{OPT_OUT}` in nbgrader_config.py.")
            self._workdir = os.path.realpath(kw.get("cwd") or os.getcwd())
            if self._rundir is None:   # kept across restarts: the connection file lives there
                self._rundir = tempfile.mkdtemp(prefix="kb-")   # short: ipc socket paths are limited
                os.makedirs(os.path.join(self._rundir, "mpl"))
                self._copy_font_cache(os.path.join(self._rundir, "mpl"))
            self.transport = "ipc"
            self.ip = os.path.join(self._rundir, "k")
            self.connection_file = os.path.join(self._rundir, "kernel.json")
        return await super()._async_pre_start_kernel(**kw)

    @staticmethod
    def _copy_font_cache(dest: str) -> None:
        """matplotlib's font list, so that each kernel does not rebuild it (seconds)."""
        cache = os.environ.get("MPLCONFIGDIR") or os.path.join(os.path.expanduser("~"), ".cache", "matplotlib")
        for path in glob.glob(os.path.join(cache, "fontlist-*.json")):
            shutil.copy2(path, dest)

    def format_kernel_cmd(self, extra_arguments=None):
        cmd = super().format_kernel_cmd(extra_arguments)
        if not self.enabled:
            return cmd
        rundir = self._rundir
        env = {k: os.environ[k] for k in PASS_ENV if k in os.environ}
        env.update(PATH=os.pathsep.join([os.path.dirname(sys.executable), "/usr/local/bin", "/usr/bin", "/bin"]),
                   HOME=rundir, IPYTHONDIR=os.path.join(rundir, "ipython"), MPLCONFIGDIR=os.path.join(rundir, "mpl"),
                   JUPYTER_RUNTIME_DIR=rundir, JUPYTER_DATA_DIR=rundir, JUPYTER_CONFIG_DIR=rundir,
                   TMPDIR=self._workdir, PYTHONSAFEPATH="1", PYTHONDONTWRITEBYTECODE="1")
        env.setdefault("LANG", "C.UTF-8")
        from utils.coursedir import REPO

        hide = hidden_folders(str(REPO), os.getcwd(), self._workdir, rundir)
        ro = python_paths() + [p for p in self.extra_readonly if os.path.isdir(p)]
        mem = self.memory_limit_mb * 1024 * 1024
        prefix = bwrap_command(self._workdir, rundir, hide=hide, ro=ro, env=env, bwrap=self.bwrap)
        cmd = prefix + [sys.executable, "-S", "-c", _LAUNCH, str(mem), str(self.process_limit), *cmd]
        remove_cgroup(self._cgroup)   # a restarted kernel gets a fresh group
        self._cgroup = pids_cgroup(self.process_limit) if self.process_limit > 0 else None
        if self._cgroup is not None:   # join the group before bwrap starts anything
            cmd = ["/bin/sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', str(self._cgroup), *cmd]
        return cmd

    # -- interrupts -------------------------------------------------------------------------------
    async def _async_interrupt_kernel(self):
        if self.enabled and self.has_kernel and self.interrupt_with == "message":
            msg = self.session.msg("interrupt_request", content={})
            self._connect_control_socket()
            self.session.send(self._control_socket, msg)
            return
        return await super()._async_interrupt_kernel()

    interrupt_kernel = _async_interrupt_kernel

    async def _async_signal_kernel(self, signum: int) -> None:
        """SIGINT goes to the kernel inside the sandbox: bwrap itself would end on it."""
        if self.enabled and signum == signal.SIGINT:
            pid = self.kernel_pid()
            if pid is not None:
                os.kill(pid, signum)
            return
        await super()._async_signal_kernel(signum)

    signal_kernel = _async_signal_kernel

    def kernel_pid(self) -> int | None:
        """The kernel's process (as the grader sees it): the first descendant of bwrap that is not bwrap."""
        import psutil

        if self.provisioner is None or getattr(self.provisioner, "pid", None) is None:
            return None
        try:
            for child in psutil.Process(self.provisioner.pid).children(recursive=True):
                if child.name() != "bwrap":
                    return child.pid
        except psutil.Error:
            pass
        return None

    # -- clean-up -------------------------------------------------------------------------------
    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        await super()._async_cleanup_resources(restart=restart)
        if not restart:
            remove_cgroup(self._cgroup)
            self._cgroup = None
        if not restart and self._rundir:
            shutil.rmtree(self._rundir, ignore_errors=True)
            self._rundir = None

    cleanup_resources = _async_cleanup_resources
