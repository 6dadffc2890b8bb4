"""Every autograding kernel runs in a bubblewrap sandbox.

`SandboxKernelManager` (manager.py) is a jupyter_client kernel manager whose kernel command is
prefixed with `bwrap`. nbgrader_config.py makes it the kernel manager of the course's Execute
step, so `utils.grading.grade_course`, plain `nbgrader autograde` and the formgrader all grade in it.

What the student's code sees (guaranteed wherever bubblewrap runs):

  - Its file system is built up from nothing (`mounts` in mounts.py, one ordered list, each entry
    with its reason): the system's programs and libraries (SYSTEM: /usr/bin, /usr/lib, /lib*, the
    loader's files in /etc, time zones), the interpreter (its stdlib, executable and libpython, not
    the rest of its prefix), the virtual environment, site-packages and .pth folders that hold no
    course, and of the course only the `course` package (at the path the editable-install finder
    or .pth file expects) - all read-only, with the debugger's package (debugpy) an empty folder
    (interpreter.UNUSED: ipykernel would import it at every start); a minimal /dev, /proc of its
    own PID namespace, a private /tmp and /dev/shm. Nothing else of the machine exists there: no home or /root (beyond the
    environment's own folders, where it lives there), /srv, /var, /opt,
    /usr/local (the nbgrader exchange), checkout, course folder, gradebook or .grading-cache,
    whatever path they are at.
  - Its working folder is a fresh tmpfs of `work_size_mb` at the path nbgrader gives, holding a
    copy of that folder's regular files (links, pipes, devices and files over `copy_limit_mb` are
    left out; the real folder is bound read-only at /run/submission only for that copy). /tmp and
    /dev/shm are tmpfs of the same size; HOME, IPYTHONDIR, MPLCONFIGDIR and TMPDIR are in /tmp.
    Nothing the kernel writes reaches the grader's file system. The kernel holds no open file of
    the grader: its own stdout and stderr are a pipe, forwarded (64 KiB, each line marked) to the
    grader's stderr.
  - Nothing of the grader's environment: bwrap itself starts with only PATH, the kernel with its own
    (no course paths, no credentials), PYTHONSAFEPATH, and thread pools sized to the CPUs the grader
    gives the kernel (OMP_NUM_THREADS and friends, unless the instructor set them).
  - Its own PID, network, IPC and UTS namespaces, no capabilities, no network (the kernel's ZeroMQ
    sockets are Unix sockets in its /tmp, reached by the grader through /proc/PID/root); its
    processes die with the grader (`--die-with-parent`, PID namespace). Graded by an ordinary user:
    uid 65534 in a user namespace. Graded by root: no user namespace (its uid 0 outside would exempt
    the kernel from RLIMIT_NPROC); the launcher copies the submission, then becomes a uid of its own
    (`kernel_uid`) outside as inside, with no_new_privs and no capability left.
  - No nested namespace and none of the calls a kernel never needs (seccomp.py: a filter built by
    libseccomp from Flatpak's blocklist and what Docker's default profile leaves out, loaded by
    bwrap's `--seccomp`, inherited by every process inside): unshare, clone with a namespace flag,
    setns, mount, chroot, ptrace and the other ways into another process, the keyring, bpf,
    io_uring, perf_event_open, userfaultfd, the NUMA calls, modules, kexec, the clock, modify_ldt,
    uselib, personality, ioctl TIOCSTI/TIOCLINUX and sockets other than unix, inet, inet6 and
    netlink answer EPERM (clone3 and the mount API ENOSYS, so that the C library uses clone), as do
    calls of another ABI (ENOSYS). In the user namespace also `--disable-userns` where bwrap has it
    (0.8 on). On an architecture other than x86-64 and aarch64 there is no filter (said in the
    kernel's limits line); where libseccomp cannot be loaded, no kernel starts.

Limits (which applied is logged at every kernel start; utils.grading.grade_course says in one line before grading
what does not hold here):

  - memory per kernel: a cgroup with `memory.max` (v2, swap 0) or `memory.limit_in_bytes` (v1,
    memsw equal, i.e. no swap) where the grader may create one (root, or a delegated v2 subtree).
    Shared memory, tmpfs files and memfd count against it. Always also RLIMIT_DATA per process,
    which is all there is where no cgroup can be made (then the kernel's total is NOT limited:
    each process is, and the number of processes is, and shared mappings only by the tmpfs sizes);
  - processes and threads per kernel: `pids.max` in the same cgroup (v2) or a v1 pids cgroup; and
    always RLIMIT_NPROC, which holds as root too since the kernel never runs as uid 0.

  - CPU per kernel: a cpuset of the grading worker's cores and a quota of as many CPUs
    (`cpu_limit` to set fewer: `cpu.max` in v2, `cpu.cfs_quota_us` in v1) where the grader may
    create them; elsewhere only the affinity, which the kernel can undo (said before grading).

The grader never follows a path the kernel controls: each socket of the kernel is opened with
O_NOFOLLOW from the sandbox's root and reached through /proc/self/fd (`open_kernel_socket` in
sockets.py), and a message frame over `max_message_mb` is refused before it is read.

Not guaranteed: memory of kernels graded without a cgroup (see above), CPU without one.

Before the first kernel of a process, `trial_start` (probe.py) starts one sandbox exactly as a
kernel's with a trivial program: where bubblewrap runs but that fails (a layout of the interpreter
the mounts get wrong), grading stops with bwrap's or Python's own message (`start_problem`), and
so does a kernel whose bwrap ends before its sandbox is built. Paths of the environment that the
system's folders already show (Debian's /usr/bin/python3 -> python3.11 under /usr/bin) are not
bound again.

Where bubblewrap cannot run, starting a kernel fails with a message saying why, unless the
instructor turns the sandbox off explicitly (`c.SandboxKernelManager.enabled = False`; then grade
inside a container). Interrupts (nbgrader's cell timeout) reach the kernel either as a message
on its control channel or as a SIGINT sent to the kernel process inside the sandbox
(`interrupt_with`, default "signal"); a SIGINT to bwrap itself would end the sandbox.

One file per job (each imports what it needs at its top; this __init__ imports nothing, so that
no module of the package imports its way back into it):

  - manager.py: SandboxKernelManager, its client and its settings (`c.SandboxKernelManager.*`);
  - probe.py: whether a kernel can be sandboxed here (`unavailable`, `start_problem`,
    `trial_start`, `OPT_OUT`);
  - mounts.py: the kernel's file system (`mounts`, SYSTEM, the run folder);
  - interpreter.py: what of this Python the kernel's Python needs (`python_paths`);
  - command.py: the bwrap command line: namespaces, user, environment (`kernel_env`, PASS_ENV),
    the launcher's arguments;
  - seccomp.py: the seccomp filter (the list of calls; libseccomp builds the BPF);
  - launch.py: the launcher, the program that runs first inside the sandbox;
  - limits.py: cgroups, rlimits and CPUs, in words;
  - sockets.py: the kernel's sockets opened without following links, message size;
  - kernel_processes.py: the sandbox's processes and the kernel's own output;
  - sandbox_error.py: SandboxError.
"""
