"""The kernel manager and client of sandboxed kernels, and what an instructor may set
(`c.SandboxKernelManager.<name>` in nbgrader_config.py).

Why an AsyncKernelManager subclass and not a jupyter_client kernel provisioner: a provisioner
(`LocalProvisioner`'s pre_launch, launch_kernel, send_signal, cleanup) could take the bwrap
prefix, the cgroups, the stdout pipe, the SIGINT to the kernel inside and the clean-up, but not:

  - how the manager and its client connect (`_make_url`, `_create_connected_socket` of
    ConnectionFileMixin: O_NOFOLLOW, MAXMSGSIZE): no provisioner hook (`SafeSockets`);
  - the address: the connection file gives the sockets' path inside the sandbox, the manager
    connects through /proc/PID/root, known once bwrap runs; what `launch_kernel` returns is
    checked against the manager's connection info and written to the connection file
    (`_reconcile_connection_info`), so `ip` can change only after that, in `_async_launch_kernel`;
  - `interrupt_with = "message"`: the manager chooses signal or message (`_async_interrupt_kernel`);
  - being chosen: by name through an entry point in installed package metadata, from the kernel
    spec or as `KernelProvisionerFactory`'s one default for every kernel of the process (the
    formgrader's server's too); its settings would no longer be `c.SandboxKernelManager.*`.

The private overrides would stay, and the launch would move into a second object sharing the
manager's state: not cleaner.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import threading

from jupyter_client.asynchronous.client import AsyncKernelClient
from jupyter_client.manager import AsyncKernelManager
from traitlets import Bool, CaselessStrEnum, Float, Integer, List, Type, Unicode, default
from traitlets.config import LoggingConfigurable

from utils.sandbox.channels import WellFormedChannel
from utils.sandbox.command import bwrap_command, kernel_env, kernel_uid, launch_args
from utils.sandbox.sandbox_error import SandboxError
from utils.sandbox.interpreter import kernel_python
from utils.sandbox.limits import in_cgroups, kernel_limits, remove_cgroup
from utils.sandbox.mounts import KERNEL_TMP, RUN, give_to, mounts, new_rundir
from utils.sandbox.probe import OPT_OUT, start_problem, unavailable
from utils.sandbox.kernel_processes import forward_output, kernel_process, sandbox_pid
from utils.signals import signal_process
from utils.sandbox.seccomp import filter_in_words, program_fd
from utils.sandbox.seccomp import unavailable as seccomp_unavailable
from utils.sandbox.sockets import SafeSockets


# IPython keeps each kernel's inputs in an SQLite database (nbclient's kernels in one in memory):
# nothing reads a graded kernel's. Off, IPython neither imports sqlite3 nor writes a row for each
# cell; In and _i stay as they are.
NO_HISTORY = "--HistoryManager.enabled=False"


class SandboxSettings(LoggingConfigurable):
    """What an instructor may set, as `c.SandboxKernelManager.<name>` (see utils/sandbox/__init__.py)."""

    enabled = Bool(True, help="Run autograding kernels in a bubblewrap sandbox. Turn off only "
                              "where grading itself runs in a container without network, secrets "
                              "or the course folder.").tag(config=True)
    memory_limit_mb = Integer(4096, help="Memory of one kernel with all its processes, shared memory "
                                         "and tmpfs files included, in MiB (a cgroup where the grader "
                                         "may create one), and data memory per process (RLIMIT_DATA) "
                                         "everywhere; 0: no limit. A lesson needs about 1 GiB.").tag(config=True)
    process_limit = Integer(256, help="Processes and threads of one kernel (a pids cgroup where the "
                                      "grader may create one, and RLIMIT_NPROC for the kernel's own "
                                      "uid, never root); 0: no limit. Lesson 3 peaks at 17 on 2 "
                                      "cores and about 205 on 64 (thread pools grow with the "
                                      "kernel's CPUs; docs/instructors.md)").tag(config=True)
    work_size_mb = Integer(512, help="Size of each of the kernel's writable file systems (its work "
                                     "folder, /tmp and /dev/shm: tmpfs inside the sandbox), in MiB; "
                                     "their files count against memory_limit_mb").tag(config=True)
    copy_limit_mb = Integer(64, help="Files of the submission folder larger than this (MiB) are not "
                                     "copied into the kernel's work folder").tag(config=True)
    output_limit_kb = Integer(64, help="Of what the kernel process writes to its stdout and stderr "
                                       "(start-up messages, crashes), this much reaches the grader's "
                                       "stderr").tag(config=True)
    interrupt_with = CaselessStrEnum(["signal", "message"], default_value="signal",
                                     help="How a cell timeout interrupts the kernel: SIGINT sent to "
                                          "the kernel process inside the sandbox, or an "
                                          "interrupt_request on its control channel").tag(config=True)
    bwrap = Unicode("bwrap", help="The bubblewrap executable").tag(config=True)
    cgroups = Bool(True, help="Limit each kernel with cgroups where the grader may create them "
                              "(False: per-process limits only, as where none can be made)").tag(config=True)
    extra_readonly = List(Unicode(), help="More folders the kernel may read").tag(config=True)
    hidden = List(Unicode(), help="Folders the kernel never sees, even where the Python environment "
                                  "lies inside one (the course folder a grading work folder was "
                                  "copied from; the checkout and nbgrader's folder always)").tag(config=True)
    cpu_limit = Float(0.0, help="CPU time of one kernel with all its processes, in CPUs (a cgroup's "
                                "cpu.max, or cpu.cfs_quota_us in v1, where the grader may create one; "
                                "always also a cpuset of the grading worker's cores); 0: as many CPUs "
                                "as the worker's cores").tag(config=True)
    max_message_mb = Integer(128, help="Largest frame of a message the grader reads from a kernel, in "
                                       "MiB (ZeroMQ's MAXMSGSIZE: a larger one drops the connection "
                                       "before it is read, and the kernel's later cells time out); far "
                                       "above a fair output (a 20 MB print is graded, then cut); 0: no "
                                       "limit").tag(config=True)


class SandboxKernelClient(SafeSockets, AsyncKernelClient):
    """The client of a sandboxed kernel (SandboxKernelManager.client_class): safe sockets, and
    channels that drop what the kernel sent malformed (channels.py)."""

    shell_channel_class = Type(WellFormedChannel)
    iopub_channel_class = Type(WellFormedChannel)
    stdin_channel_class = Type(WellFormedChannel)
    control_channel_class = Type(WellFormedChannel)

    def stop_channels(self) -> None:
        super().stop_channels()
        self._close_socket_fds()


class _SandboxLifecycle(SafeSockets, SandboxSettings, AsyncKernelManager):
    """Interrupts and clean-up of a sandboxed kernel."""

    _rundir: str | None = None
    _cgroups: list = []

    async def _async_interrupt_kernel(self):
        if self.enabled and self.has_kernel and self.interrupt_with == "message":
            self._connect_control_socket()
            self.session.send(self._control_socket, self.session.msg("interrupt_request", content={}))
            return
        return await super()._async_interrupt_kernel()

    interrupt_kernel = _async_interrupt_kernel

    async def _async_signal_kernel(self, signum: int) -> None:
        """SIGINT goes to the kernel inside the sandbox: bwrap itself would end on it."""
        if self.enabled and signum == signal.SIGINT:
            proc = self.kernel_process()
            if proc is not None:
                signal_process(proc, signum)   # by pidfd, checked to be the process found
            return
        await super()._async_signal_kernel(signum)

    signal_kernel = _async_signal_kernel

    def kernel_process(self):
        """The kernel's process (as the grader sees it, a psutil.Process): the first descendant of
        bwrap that is not bwrap."""
        return kernel_process(getattr(self.provisioner, "pid", None) if self.provisioner is not None else None)

    def kernel_pid(self) -> int | None:
        proc = self.kernel_process()
        return proc.pid if proc is not None else None

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        await super()._async_cleanup_resources(restart=restart)
        self._close_socket_fds()
        if not restart:
            self._drop_cgroups()
            self._drop_rundir()

    cleanup_resources = _async_cleanup_resources

    def _close_seccomp_fd(self) -> None:
        if getattr(self, "_seccomp_fd", None) is not None:
            os.close(self._seccomp_fd)
            self._seccomp_fd = None

    def _drop_rundir(self) -> None:
        if self._rundir:
            shutil.rmtree(self._rundir, ignore_errors=True)
            self._rundir = None

    def _drop_cgroups(self) -> None:
        for group in self._cgroups:
            remove_cgroup(group)
        self._cgroups = []


class SandboxKernelManager(_SandboxLifecycle):
    """An AsyncKernelManager whose kernels run under bubblewrap (see utils/sandbox/__init__.py)."""

    @default("client_class")
    def _client_class_default(self):
        return "utils.sandbox.manager.SandboxKernelClient"

    @default("client_factory")
    def _client_factory_default(self):
        return SandboxKernelClient

    _workdir: str | None = None
    _inside_ip: str | None = None
    _uid: int = -1
    _seccomp_fd: int | None = None
    limits_applied: list = []

    def _check_sandbox(self) -> None:
        """Stop before a kernel starts where bubblewrap cannot run or a kernel cannot start in it."""
        problem = unavailable(self.bwrap)
        if problem:
            raise SandboxError(f"grading stopped: the autograding sandbox cannot run: {problem}. "
                               f"To grade without it (only inside a container without network, "
                               f"secrets or the course folder) set `{OPT_OUT}` in nbgrader_config.py.")
        problem = seccomp_unavailable() or start_problem(self.bwrap)
        if problem:
            raise SandboxError(f"grading stopped: {problem}")

    async def _async_pre_start_kernel(self, **kw):
        if self.enabled:
            self._check_sandbox()
            self._workdir = os.path.realpath(kw.get("cwd") or os.getcwd())
            if self._rundir is None:   # kept across restarts: the connection file lives there
                self._rundir, self._uid = new_rundir(), kernel_uid()
                # the sockets live in the sandbox's /tmp; the grader reaches them through /proc/PID/root
                self._inside_ip = f"{KERNEL_TMP}/.kernel-{secrets.token_hex(8)}/k"
            self.transport, self.ip = "ipc", self._inside_ip
            # the kernel inherits no file of the grader's (its stdout could be a log file): a pipe
            kw.update(stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            self.connection_file = os.path.join(self._rundir, "kernel.json")
        try:
            return await super()._async_pre_start_kernel(**kw)
        except BaseException:   # a start that failed leaves no folder behind in /tmp
            self._drop_cgroups()
            self._drop_rundir()
            raise

    def format_kernel_cmd(self, extra_arguments=None):
        cmd = super().format_kernel_cmd(extra_arguments)
        if not self.enabled:
            return cmd
        cmd = [a.replace(self._rundir, RUN) for a in cmd]   # the connection file, as the kernel sees it
        if any("ipykernel" in a for a in cmd):
            cmd.append(NO_HISTORY)
        give_to(self._rundir, self._uid)   # the kernel (its own uid) reads its connection file
        python = kernel_python(self._workdir, self._rundir, *self.hidden) + [p for p in self.extra_readonly if os.path.isdir(p)]
        mem, work = self.memory_limit_mb << 20, self.work_size_mb << 20
        self._close_seccomp_fd()
        self._seccomp_fd = program_fd()   # read by bwrap when it starts (_async_launch_kernel passes it on)
        prefix = bwrap_command(mounts(self._workdir, self._rundir, python, work), kernel_env(),
                               self._uid, self.bwrap, self._seccomp_fd)
        launch = launch_args(mem, self.process_limit, self.copy_limit_mb << 20, work // 2, self._uid,
                             self._workdir, os.path.dirname(self._inside_ip))
        self._drop_cgroups()   # a restarted kernel gets fresh groups
        self._cgroups, self.limits_applied = kernel_limits(self.process_limit, self.memory_limit_mb, self.cpu_limit,
                                                           self.work_size_mb, self._uid, self.cgroups)
        self.limits_applied = self.limits_applied + [filter_in_words()]
        self.log.info("sandbox limits: %s", "; ".join(self.limits_applied))
        return in_cgroups(prefix + launch + cmd, self._cgroups)

    async def _async_launch_kernel(self, kernel_cmd, **kw):
        if self.enabled:   # bwrap itself starts with nothing of the grader's environment
            kw["env"] = {"PATH": "/usr/bin:/bin"}
            if self._seccomp_fd is not None:
                kw["pass_fds"] = (self._seccomp_fd,)
        try:
            try:
                await super()._async_launch_kernel(kernel_cmd, **kw)
            finally:
                self._close_seccomp_fd()
            if self.enabled:   # the kernel's sockets, as the grader reaches them
                pid = sandbox_pid(self.provisioner.pid, getattr(self.provisioner, "process", None))
                self.ip = f"/proc/{pid}/root{self._inside_ip}"
        except BaseException:   # no kernel to clean up after: its cgroups and folder must not outlive it
            self._drop_cgroups()
            self._drop_rundir()
            raise
        if self.enabled:
            process = getattr(self.provisioner, "process", None)
            if process is not None and process.stdout is not None:
                threading.Thread(target=forward_output, args=(process.stdout, self.output_limit_kb << 10),
                                 daemon=True).start()
