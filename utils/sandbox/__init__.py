"""Every autograding kernel runs in a bubblewrap sandbox.

`SandboxKernelManager` is a jupyter_client kernel manager whose kernel command is prefixed with
`bwrap`. nbgrader_config.py makes it the kernel manager of the course's Execute step, so
`utils.grading.run`, plain `nbgrader autograde` and the formgrader all grade in it.

What the student's code sees (guaranteed wherever bubblewrap runs):

  - Its file system is built up from nothing (`mounts`, one ordered list, each entry with its
    reason): the system's programs and libraries (SYSTEM: /usr/bin, /usr/lib, /lib*, the loader's
    files in /etc, time zones), the interpreter (its stdlib, executable and libpython, not the rest of
    its prefix), the virtual environment, site-packages and .pth folders that hold no course, and of
    the course only the `course` package (at the path the editable-install finder or .pth file
    expects) - all read-only; a minimal /dev, /proc of its own PID namespace, a private /tmp and
    /dev/shm. Nothing else of the machine exists there: no home or /root (beyond the
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

Limits (which applied is logged at every kernel start; utils.grading.run says in one line before grading
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
O_NOFOLLOW from the sandbox's root and reached through /proc/self/fd (`open_kernel_socket`), and
a message frame over `max_message_mb` is refused before it is read.

Not guaranteed: memory of kernels graded without a cgroup (see above), CPU without one.

Before the first kernel of a process, `trial_start` starts one sandbox exactly as a kernel's with a
trivial program: where bubblewrap runs but that fails (a layout of the interpreter the mounts get
wrong), grading stops with bwrap's or Python's own message (`start_problem`), and so does a kernel
whose bwrap ends before its sandbox is built. Paths of the environment that the system's folders
already show (Debian's /usr/bin/python3 -> python3.11 under /usr/bin) are not bound again.

Where bubblewrap cannot run, starting a kernel fails with a message saying why, unless the
instructor turns the sandbox off explicitly (`c.SandboxKernelManager.enabled = False`; then grade
inside a container). Interrupts (nbgrader's cell timeout) reach the kernel either as a message
on its control channel or as a SIGINT sent to the kernel process inside the sandbox
(`interrupt_with`, default "signal"); a SIGINT to bwrap itself would end the sandbox.
"""

from __future__ import annotations

import ast
import functools
import glob
import importlib.util
import itertools
import os
import secrets
import shutil
import signal
import site
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from jupyter_client.asynchronous.client import AsyncKernelClient
from jupyter_client.manager import AsyncKernelManager
from traitlets import Bool, CaselessStrEnum, Float, Integer, List, Unicode, default
from traitlets.config import LoggingConfigurable

THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS")
PASS_ENV = THREAD_VARS + ("NBGRADER_EXECUTION", "CUDA_VISIBLE_DEVICES", "MPLBACKEND", "LANG", "LC_ALL", "TZ")
OPT_OUT = "c.SandboxKernelManager.enabled = False"
SUBMISSION = "/run/submission"   # the real work folder, read-only, inside the sandbox
RUN = "/run/kernel"              # the connection file and matplotlib's font list, read-only
KERNEL_TMP = "/tmp"

# Runs first inside the sandbox: set the limits (children inherit them), copy the submission's
# regular files into the work tmpfs; as root, give them to the kernel's uid and become that uid
# (every capability is gone after that); make HOME and the socket folder, then become the kernel.
_LAUNCH = r"""
import os, resource, stat, sys
mem, nproc, copy_limit, budget, uid = (int(a) for a in sys.argv[1:6])
src, work, sockets, fonts = sys.argv[6:10]
if mem > 0: resource.setrlimit(resource.RLIMIT_DATA, (mem, mem))
if nproc > 0: resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
left = []
def copy_file(path, dest, size):
    global budget
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode): return
        with open(dest, 'xb') as out:
            while budget > 0:
                chunk = os.read(fd, 1 << 20)
                if not chunk: break
                out.write(chunk[:budget]); budget -= len(chunk)
    finally:
        os.close(fd)
def copy(s, d, depth):
    for e in sorted(os.scandir(s), key=lambda e: e.name):
        rel = os.path.relpath(e.path, src)
        try:
            if e.is_symlink(): left.append(rel + ' (a link)'); continue
            if e.is_dir(follow_symlinks=False):
                if depth < 8: os.mkdir(os.path.join(d, e.name)); copy(e.path, os.path.join(d, e.name), depth + 1)
                continue
            st = e.stat(follow_symlinks=False)
            if not stat.S_ISREG(st.st_mode): left.append(rel + ' (not a regular file)'); continue
            if st.st_size > min(copy_limit, budget): left.append(rel + ' (%d bytes)' % st.st_size); continue
            copy_file(e.path, os.path.join(d, e.name), st.st_size)
        except OSError as err:   # unreadable, or the work folder is full: the kernel starts anyway
            left.append(rel + ' (%s)' % err.strerror)
copy(src, work, 0)
if uid >= 0:
    for d, dirs, files in os.walk(work):
        for name in [d] + [os.path.join(d, f) for f in dirs + files]:
            os.lchown(name, uid, uid)
    import ctypes
    if ctypes.CDLL(None, use_errno=True).prctl(38, 1, 0, 0, 0): sys.exit('sandbox: no_new_privs refused')
    os.setgroups([]); os.setresgid(uid, uid, uid); os.setresuid(uid, uid, uid)
    if open('/proc/self/status').read().split('CapEff:')[1].split()[0].strip('0'): sys.exit('sandbox: capabilities left')
if left: print('sandbox: not copied into the work folder: ' + ', '.join(left), file=sys.stderr, flush=True)
for d in (os.environ['IPYTHONDIR'], os.environ['MPLCONFIGDIR'], sockets):
    os.makedirs(d, exist_ok=True)
for name in os.listdir(fonts):   # matplotlib's font list, so that it is not rebuilt (seconds)
    with open(os.path.join(fonts, name), 'rb') as f, open(os.path.join(os.environ['MPLCONFIGDIR'], name), 'wb') as g:
        g.write(f.read())
os.chdir(work)
os.execv(sys.argv[10], sys.argv[10:])
"""


# -- cgroups ----------------------------------------------------------------------------------------
_GROUPS = itertools.count()


def _own_cgroups() -> dict[str, str]:
    """{controller (or "" for v2): this process's cgroup path} from /proc/self/cgroup."""
    found = {}
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for c in controllers.split(",") if controllers else [""]:
                found[c] = path.lstrip("/")
    except (OSError, ValueError):
        pass
    return found


def _new_group(parent: Path, settings: dict[str, str]) -> Path | None:
    """A new child of `parent` with `settings` written (a file that is missing is left out), or None."""
    if not (parent / "cgroup.procs").exists():
        return None
    group = parent / f"course-grading-{os.getpid()}-{next(_GROUPS)}"
    try:
        group.mkdir()
        for name, value in settings.items():
            if (group / name).exists():
                (group / name).write_text(value)
        return group
    except OSError:
        remove_cgroup(group)
        return None


PERIOD_US = 100_000


def _cpu_list(cpus) -> str:
    return ",".join(str(c) for c in sorted(cpus))


def kernel_cgroups(processes: int, memory: int, cpus=None, cores: float = 0.0) -> tuple[list[Path], list[str]]:
    """New cgroups for one kernel (v2: one group; v1: a pids, a memory, a cpu and a cpuset group),
    with `processes` as pids.max, `memory` bytes as the memory limit, the CPUs `cpus` as its cpuset
    and `cores` CPUs' worth of time per period as its quota (cpu.max, or cpu.cfs_quota_us in v1)
    (0 or None: that limit is not wanted), and the limits that took effect, in words. ([], [])
    where the grader may not create cgroups. The kernel cannot undo any of them: it holds no
    capability, sees no cgroup file system and is in a cgroup namespace of its own."""
    own = _own_cgroups()
    groups: list[Path] = []
    applied: list[str] = []
    quota = int(cores * PERIOD_US) if cores and cores > 0 else 0
    if "" in own and (Path("/sys/fs/cgroup") / "cgroup.controllers").exists():   # v2
        parent = Path("/sys/fs/cgroup") / own[""]
        for controller in ("+pids", "+memory", "+cpu", "+cpuset"):
            try:   # controllers for the children (refused where the parent holds processes: then as given)
                (parent / "cgroup.subtree_control").write_text(controller)
            except OSError:
                pass
        settings = {}
        if processes > 0:
            settings["pids.max"] = str(processes)
        if memory > 0:
            settings.update({"memory.max": str(memory), "memory.swap.max": "0"})
        if quota:
            settings["cpu.max"] = f"{quota} {PERIOD_US}"
        if cpus:
            settings["cpuset.cpus"] = _cpu_list(cpus)
        group = _new_group(parent, settings)
        if group is not None:
            groups.append(group)
            if processes > 0 and (group / "pids.max").exists():
                applied.append(f"pids.max {processes} (cgroup v2)")
            if memory > 0 and (group / "memory.max").exists():
                applied.append(f"memory.max {memory >> 20} MiB (cgroup v2"
                               f"{', swap 0' if (group / 'memory.swap.max').exists() else ''})")
            if quota and (group / "cpu.max").exists():
                applied.append(f"cpu.max {cores:g} CPU(s) (cgroup v2)")
            if cpus and (group / "cpuset.cpus").exists():
                applied.append(f"cpuset CPUs {_cpu_list(cpus)} (cgroup v2)")
            if not applied:   # the controllers are not enabled for the grader's children
                remove_cgroup(group)
                groups = []
        return groups, applied
    v1 = Path("/sys/fs/cgroup")
    if processes > 0:
        for parent in (v1 / "pids" / own.get("pids", ""), v1 / "pids"):
            group = _new_group(parent, {"pids.max": str(processes)})
            if group is not None:
                groups.append(group)
                applied.append(f"pids.max {processes} (cgroup v1)")
                break
    if memory > 0:
        for parent in (v1 / "memory" / own.get("memory", ""), v1 / "memory"):
            group = _new_group(parent, {"memory.limit_in_bytes": str(memory), "memory.swappiness": "0"})
            if group is not None:
                try:
                    (group / "memory.memsw.limit_in_bytes").write_text(str(memory))
                    swap = ", swap 0"
                except OSError:
                    swap = ", swappiness 0"
                groups.append(group)
                applied.append(f"memory.limit_in_bytes {memory >> 20} MiB (cgroup v1{swap})")
                break
    if quota:
        for parent in (v1 / "cpu" / own.get("cpu", own.get("cpu,cpuacct", "")), v1 / "cpu"):
            group = _new_group(parent, {"cpu.cfs_period_us": str(PERIOD_US), "cpu.cfs_quota_us": str(quota)})
            if group is not None:
                groups.append(group)
                applied.append(f"cpu.cfs_quota_us {cores:g} CPU(s) (cgroup v1)")
                break
    if cpus:
        for parent in (v1 / "cpuset" / own.get("cpuset", ""), v1 / "cpuset"):
            try:
                mems = (parent / "cpuset.mems").read_text().strip()
            except OSError:
                continue
            group = _new_group(parent, {"cpuset.cpus": _cpu_list(cpus), "cpuset.mems": mems})
            if group is not None:
                groups.append(group)
                applied.append(f"cpuset CPUs {_cpu_list(cpus)} (cgroup v1)")
                break
    return groups, applied


def pids_cgroup(limit: int) -> Path | None:
    """A new cgroup whose pids.max is `limit`, or None where the grader may not create one."""
    groups, applied = kernel_cgroups(limit, 0)
    if not applied:
        for g in groups:
            remove_cgroup(g)
        return None
    return groups[0]


def limits_not_enforced() -> str | None:
    """One line saying which kernel limit cannot hold here, or None (said before grading starts)."""
    groups, applied = kernel_cgroups(1024, 64 << 20, kernel_cpu_set(), 1.0)
    for group in groups:
        remove_cgroup(group)
    lines = []
    if not any(a.startswith("memory") for a in applied):
        lines.append("sandbox: no memory cgroup can be made here, so a kernel's total memory is not limited: "
                     "each of its processes is (RLIMIT_DATA), and their number (RLIMIT_NPROC)")
    if not any(a.startswith(("cpu.max", "cpu.cfs", "cpuset")) for a in applied):
        lines.append("sandbox: no cpu or cpuset cgroup can be made here, so a kernel's CPU time is not limited: "
                     "it is only asked to stay on its worker's cores (affinity), which it can undo")
    return "\n".join(lines) or None


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
        proc = subprocess.run([exe, *namespaces(0 if os.geteuid() == 0 else -1), "--ro-bind", "/", "/",
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


# -- what the kernel's Python needs -----------------------------------------------------------------
def _site_dirs() -> list[str]:
    dirs = list(site.getsitepackages())
    user_site = site.getusersitepackages()
    if isinstance(user_site, str):
        dirs.append(user_site)
    return [d for d in dirs if os.path.isdir(d)]


def _finder_mappings(site_dir: str) -> dict[str, str]:
    """{package: folder} of the setuptools editable-install finders in `site_dir` (read, not imported)."""
    found = {}
    for path in glob.glob(os.path.join(site_dir, "__editable__*finder.py")):
        try:
            tree = ast.parse(Path(path).read_text())
        except (OSError, SyntaxError, ValueError):
            continue
        for node in tree.body:
            target = node.target if isinstance(node, ast.AnnAssign) else (
                node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None)
            if isinstance(target, ast.Name) and target.id == "MAPPING" and node.value is not None:
                try:
                    found.update({str(k): str(v) for k, v in ast.literal_eval(node.value).items()})
                except ValueError:
                    pass
    return found


def _pth_folders(site_dir: str) -> list[str]:
    """The folders that the .pth files in `site_dir` add to sys.path (lines that are not imports)."""
    found = []
    for path in glob.glob(os.path.join(site_dir, "*.pth")):
        try:
            lines = Path(path).read_text().splitlines()
        except (OSError, UnicodeDecodeError):
            continue
        for line in lines:
            line = line.strip()
            if line and not line.startswith(("#", "import ", "import\t")):
                folder = os.path.join(site_dir, line)
                if os.path.isdir(folder):
                    found.append(os.path.normpath(folder))
    return found


def course_package_paths() -> list[str]:
    """Where the kernel's Python will import `course` from: the editable-install finders' mapping,
    `course/` under a .pth folder, else where this Python finds it."""
    found = []
    for site_dir in _site_dirs():
        mapped = _finder_mappings(site_dir).get("course")
        if mapped and os.path.isdir(mapped):
            found.append(mapped)
        found += [os.path.join(f, "course") for f in _pth_folders(site_dir)
                  if os.path.isfile(os.path.join(f, "course", "__init__.py"))]
    if not found:
        spec = importlib.util.find_spec("course")
        if spec is not None and spec.submodule_search_locations:
            found += list(spec.submodule_search_locations)
    return sorted({os.path.normpath(p) for p in found})


def _holds_a_course(folder: str) -> bool:
    return any(os.path.exists(os.path.join(folder, name))
               for name in ("course/__init__.py", "nbgrader_config.py", "source", "gradebook.db", "utils"))


def _link_chain(path: str) -> list[str]:
    """`path` and every link it goes through to the file (each is shown, a link as the same link)."""
    chain = [os.path.abspath(path)]
    while os.path.islink(chain[-1]) and len(chain) < 40:
        chain.append(os.path.normpath(os.path.join(os.path.dirname(chain[-1]), os.readlink(chain[-1]))))
    return chain


def _interpreter_files() -> set[str]:
    """The interpreter itself: its standard library, its executable and its shared library (not the
    rest of its prefix, which may be /usr/local, holding the nbgrader exchange)."""
    import sysconfig

    found = {sysconfig.get_path("stdlib"), sysconfig.get_path("platstdlib"), *_link_chain(sys.executable)}
    libdir, soname = sysconfig.get_config_var("LIBDIR"), sysconfig.get_config_var("INSTSONAME")
    if libdir and soname and sysconfig.get_config_var("Py_ENABLE_SHARED"):
        found.add(os.path.join(libdir, soname))
    if libdir and os.path.realpath(sys.base_prefix) != "/usr":
        # an interpreter of its own prefix (conda, /usr/local, pyenv): its extension modules link
        # the prefix's own shared libraries (libffi for ctypes, libssl, libz, libsqlite3)
        found.update(glob.glob(os.path.join(libdir, "lib*.so*")))
    if sys.prefix != sys.base_prefix:   # a virtual environment: its bin/python, pyvenv.cfg, packages
        found.add(sys.prefix)
    return {p for p in found if p and os.path.exists(p)}


def python_paths(*course_roots: str) -> list[str]:
    """What the kernel's Python needs (bound read-only): the interpreter, site-packages, the folders
    the .pth files add (never one holding a course root: of that only the `course` package) and the
    `course` package. Nothing that is or holds a course root."""
    paths = _interpreter_files()
    for site_dir in _site_dirs():
        paths.add(site_dir)
        paths.update(f for f in _pth_folders(site_dir) if not _holds_a_course(f))
    roots = [os.path.realpath(r) for r in course_roots]
    safe = set()
    for p in paths | {os.path.realpath(p) for p in paths}:
        real = os.path.realpath(p)
        if os.path.exists(p) and not any(real == r or r.startswith(real.rstrip("/") + "/") for r in roots):
            safe.add(p)
    return _outermost(safe | set(course_package_paths()))


def _outermost(paths) -> list[str]:
    """`paths` less those inside another of them (already shown), sorted."""
    kept: list[str] = []
    for p in sorted(paths):
        if not any(p.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(p)
    return kept


# What of the system a kernel sees (read-only), and why. Nothing else of the machine is there: no
# home, /srv, /var, /opt, /usr/local (the nbgrader exchange), course folder or gradebook.
SYSTEM = (
    ("/usr/bin", "programs a kernel may start (sh, sleep) and the interpreter's links"),
    ("/bin", "the same on systems without merged /usr"),
    ("/usr/lib", "shared libraries the interpreter and the wheels link (libc, libstdc++, libgomp)"),
    ("/usr/lib64", "the same, 64-bit layouts"),
    ("/usr/lib32", "the same, multilib layouts"),
    ("/lib", "shared libraries, systems without merged /usr"),
    ("/lib64", "the dynamic loader"),
    ("/lib32", "multilib layouts"),
    ("/etc/ld.so.cache", "where the loader finds shared libraries"),
    ("/etc/ld.so.conf", "the same"),
    ("/etc/ld.so.conf.d", "the same"),
    ("/etc/alternatives", "Debian's links behind some programs"),
    ("/etc/localtime", "the time zone"),
    ("/usr/share/zoneinfo", "time zones"),
)


def _show(path: str, reason: str, dest: str | None = None) -> tuple[list[str], str]:
    """A read-only bind of `path` (at `dest`), or the same link where `path` is a link."""
    dest = dest or path
    if dest == path and os.path.islink(path):
        return ["--symlink", os.readlink(path), path], reason
    return ["--ro-bind", path, dest], reason


def _shown_already(path: str, layout: list[tuple[list[str], str]]) -> bool:
    """Whether `path` already exists inside the sandbox as it does outside: it, or a folder above
    it, is bound from the same place, or it is reached through a link of `layout` (as /bin/python3
    is through /bin -> usr/bin) to such a place. bwrap cannot add a link or a bind there (`Can't
    make symlink at /usr/bin/python3: File exists`), and need not."""
    binds = {args[-1] for args, _ in layout if args[0] in ("--ro-bind", "--bind", "--dev-bind") and args[1] == args[2]}
    links = {args[-1]: args[1] for args, _ in layout if args[0] == "--symlink"}
    for _ in range(40):   # each round follows one link of the layout
        p = Path(path)
        for above in (p, *p.parents):
            if str(above) in binds:
                return True
            if str(above) in links:
                rest = p.relative_to(above)
                path = os.path.normpath(os.path.join(above.parent, links[str(above)], rest))
                break
        else:
            return False
    return False


def mounts(workdir: str, rundir: str, python: list[str], work_size: int) -> list[tuple[list[str], str]]:
    """The kernel's file system, built up from nothing in this order (bwrap args, reason). Of the
    Python environment's paths, those that the system's folders already show are left out."""
    tmpfs = ["--size", str(work_size), "--perms", "01777", "--tmpfs"]
    gpus = sorted(glob.glob("/dev/nvidia*")) + sorted(glob.glob("/dev/dri"))
    layout = [
        (["--dev", "/dev"], "a minimal /dev (null, zero, random, tty), no disk or host device"),
        (["--proc", "/proc"], "/proc of its own PID namespace: only its own processes"),
        (tmpfs + ["/tmp"], "a private /tmp (HOME, the kernel's sockets), size-limited"),
        (tmpfs + ["/dev/shm"], "shared memory, size-limited"),
        *[(["--dev-bind", d, d], "a GPU stays usable") for d in gpus],
        *([_show("/sys", "the GPU driver's device information")] if gpus else []),
        *[_show(p, why) for p, why in SYSTEM if os.path.lexists(p)],
    ]
    for p in python:
        if not _shown_already(p, layout):
            layout.append(_show(p, "the Python environment, and the course package alone"))
    return layout + [
        (["--ro-bind", rundir, RUN], "the connection file and matplotlib's font list"),
        (["--ro-bind", workdir, SUBMISSION], "the submission, read once to copy it into the work folder"),
        (tmpfs + [workdir], "the work folder at the path nbgrader gives: a tmpfs the grader never reads"),
    ]


def namespaces(uid: int) -> list[str]:
    """bwrap's namespace options. As an ordinary user: a user namespace mapping the kernel's uid
    65534 to the grader's (RLIMIT_NPROC counts the grader's processes). As root: no user namespace
    (inside one, the kernel would still be root outside, which RLIMIT_NPROC exempts); the launcher
    becomes `uid` outside too, with only what it needs to copy the submission and change user."""
    common = ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
              "--die-with-parent", "--new-session"]
    if uid < 0:
        return ["--unshare-user", "--uid", "65534", "--gid", "65534", *common]
    caps = ["--cap-drop", "ALL"] + [a for c in ("SETUID", "SETGID", "CHOWN", "DAC_READ_SEARCH")
                                    for a in ("--cap-add", f"CAP_{c}")]
    return common + caps


def bwrap_command(layout: list[tuple[list[str], str]], env: dict[str, str], uid: int = -1,
                  bwrap: str = "bwrap") -> list[str]:
    """The bwrap prefix: `namespaces(uid)`, the mounts of `layout`, a clean environment `env`."""
    cmd = [shutil.which(bwrap) or bwrap, *namespaces(uid)]
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


def kernel_uid() -> int:
    """The uid (outside the sandbox too) of a kernel graded by root: one of its own, so that
    RLIMIT_NPROC counts that kernel's processes only; -1 (a user namespace) for other graders."""
    return 0x100000 + secrets.randbelow(0x10000) if os.geteuid() == 0 else -1


def kernel_cpu_set() -> set[int]:
    """The CPUs this process (a grading worker, on its own cores) and so its kernels may run on."""
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return set(range(os.cpu_count() or 1))


def kernel_cpus() -> int:
    """The CPUs this process (and so the kernel) may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


KERNEL_LINE = "sandboxed kernel | "


def _forward(pipe, limit: int) -> None:
    """Copy the kernel's own stdout and stderr (not its cells' output) to the grader's stderr, up to
    `limit` bytes, every line marked as the kernel's (it cannot pass for a line of the grader's log),
    and read the rest to its end so that the kernel never blocks on a full pipe."""
    line_start = True
    with pipe:
        for chunk in iter(lambda: pipe.read1(65536), b""):
            if limit > 0:
                text = chunk[:limit].decode(errors="replace")
                marked = (KERNEL_LINE if line_start else "") + text.replace("\n", "\n" + KERNEL_LINE)
                if text.endswith("\n"):
                    marked = marked[:-len(KERNEL_LINE)]
                line_start = text.endswith("\n")
                sys.stderr.write(marked)
                sys.stderr.flush()
                limit -= len(chunk)


def rlimits_in_words(applied: list[str], memory_mb: int, processes: int, uid: int) -> list[str]:
    """The per-process limits a kernel gets besides its cgroups (`applied`), in words, saying what
    they do not cover."""
    words = []
    if memory_mb and not any(a.startswith("memory") for a in applied):
        words.append(f"RLIMIT_DATA {memory_mb} MiB per process only (no memory cgroup could be made: "
                     f"the kernel's total is not limited, shared memory only by the tmpfs sizes)")
    elif memory_mb:
        words.append(f"RLIMIT_DATA {memory_mb} MiB per process")
    if processes and not any(a.startswith("pids") for a in applied):
        who = f"the kernel's own uid {uid}" if uid >= 0 else "the grader's uid"
        words.append(f"RLIMIT_NPROC {processes} (no pids cgroup could be made; counted for {who})")
    return words


class SandboxSettings(LoggingConfigurable):
    """What an instructor may set, as `c.SandboxKernelManager.<name>` (see the module doc)."""

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
    cpu_limit = Float(0.0, help="CPU time of one kernel with all its processes, in CPUs (a cgroup's "
                                "cpu.max, or cpu.cfs_quota_us in v1, where the grader may create one; "
                                "always also a cpuset of the grading worker's cores); 0: as many CPUs "
                                "as the worker's cores").tag(config=True)
    max_message_mb = Integer(128, help="Largest frame of a message the grader reads from a kernel, in "
                                       "MiB (ZeroMQ's MAXMSGSIZE: a larger one drops the connection "
                                       "before it is read, and the kernel's later cells time out); far "
                                       "above a fair output (a 20 MB print is graded, then cut); 0: no "
                                       "limit").tag(config=True)


def _new_rundir() -> str:
    """The folder of a kernel's connection file and matplotlib's font list (so that each kernel
    does not rebuild it: seconds), bound read-only at RUN."""
    rundir = tempfile.mkdtemp(prefix="kb-")
    try:
        os.makedirs(os.path.join(rundir, "mpl"))
        cache = os.environ.get("MPLCONFIGDIR") or os.path.join(os.path.expanduser("~"), ".cache", "matplotlib")
        for path in glob.glob(os.path.join(cache, "fontlist-*.json")):
            shutil.copy2(path, os.path.join(rundir, "mpl"))
    except BaseException:
        shutil.rmtree(rundir, ignore_errors=True)
        raise
    return rundir


def give_to(folder: str, uid: int) -> None:
    """`folder` and all in it owned by `uid` (nothing where uid < 0: a user namespace maps it)."""
    if uid >= 0:
        for name in [folder] + glob.glob(os.path.join(folder, "**"), recursive=True):
            os.lchown(name, uid, uid)


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
               PYTHONDONTWRITEBYTECODE="1")
    env.setdefault("LANG", "C.UTF-8")
    return env


def in_cgroups(cmd: list[str], groups: list[Path]) -> list[str]:
    """`cmd`, started after its shell joined `groups` (so before bwrap starts anything)."""
    if not groups:
        return cmd
    join = 'while [ "$1" != -- ]; do echo $$ > "$1/cgroup.procs" || exit 1; shift; done; shift; exec "$@"'
    return ["/bin/sh", "-c", join, "sh", *map(str, groups), "--", *cmd]


def _children(pid: int, recursive: bool = False) -> list:
    import psutil

    try:
        return psutil.Process(pid).children(recursive=recursive)
    except psutil.Error:
        return []


def _said(process) -> str:
    """The last lines an ended process wrote to its output pipe (bwrap's own error), in one line."""
    try:
        text = process.stdout.read(8192).decode(errors="replace") if process.stdout else ""
    except (OSError, ValueError):
        text = ""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return " | ".join(lines[-3:]) or f"exit {process.returncode}, nothing printed"


def sandbox_pid(bwrap_pid: int, process=None) -> int:
    """The first process inside the sandbox (bwrap's child): its /proc/PID/root is the sandbox's.
    Returned once the sandbox is built (a process other than bwrap runs in it); where bwrap
    (`process`) ends before that, its own message says why."""
    deadline = time.monotonic() + 30
    while True:
        children = _children(bwrap_pid)
        if children and any(c.name() != "bwrap" for c in _children(bwrap_pid, recursive=True)):
            return children[0].pid
        if process is not None and process.poll() is not None:
            raise SandboxError(f"the autograding sandbox did not start: {_said(process)}")
        if time.monotonic() > deadline:
            raise SandboxError("the autograding sandbox did not start (bwrap built no sandbox in 30 s)")
        time.sleep(0.005)


def kernel_python(*folders: str) -> list[str]:
    """`python_paths` of this interpreter, never showing the checkout, nbgrader's folder, the
    course a utils.grading.run worker was copied from, or `folders` (the kernel's own)."""
    from utils.coursedir import REPO

    roots = [r for r in (str(REPO), os.getcwd(), os.environ.get("COURSE_GRADING_ROOT"), *folders) if r]
    return python_paths(*roots)


def launch_args(mem: int, processes: int, copy_limit: int, budget: int, uid: int, workdir: str,
                sockets: str) -> list[str]:
    """The launcher (`_LAUNCH`) and its arguments, up to the kernel's own command."""
    return [sys.executable, "-S", "-c", _LAUNCH, str(mem), str(processes), str(copy_limit), str(budget),
            str(uid), SUBMISSION, workdir, sockets, f"{RUN}/mpl"]


TRIAL = "import ipykernel.kernelapp, course; print('kernel can start')"


@functools.lru_cache(maxsize=None)
def trial_start(bwrap: str = "bwrap") -> str | None:
    """One kernel's sandbox started for real (the same mounts, user, launcher and interpreter, a
    trivial program instead of the kernel): None when it ran, else bwrap's or Python's own last
    lines. Once per process, before anyone is graded."""
    work = rundir = None
    try:
        work, rundir, uid = tempfile.mkdtemp(prefix="kc-"), _new_rundir(), kernel_uid()
        give_to(rundir, uid)
        layout = mounts(work, rundir, kernel_python(work, rundir), 64 << 20)
        cmd = bwrap_command(layout, kernel_env(), uid, bwrap) + launch_args(
            0, 0, 0, 0, uid, work, f"{KERNEL_TMP}/.trial") + [sys.executable, "-c", TRIAL]
        proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=120,
                              env={"PATH": "/usr/bin:/bin"})
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"{err}"
    finally:
        for folder in (work, rundir):
            if folder:
                shutil.rmtree(folder, ignore_errors=True)
    if proc.returncode == 0 and b"kernel can start" in proc.stdout:
        return None
    lines = [l.strip() for l in (proc.stderr + proc.stdout).decode(errors="replace").splitlines() if l.strip()]
    return " | ".join(lines[-3:]) or f"exit {proc.returncode}, nothing printed"


# -- the kernel's sockets, reached without following anything the kernel controls ------------------
class SocketRefused(SandboxError):
    """A kernel's socket path holds something other than the kernel's own socket."""


def open_kernel_socket(path: str, timeout: float = 60.0) -> int:
    """An O_PATH descriptor of the Unix socket at `path`, a path under /proc/PID/root (the
    sandbox's root, which the kernel cannot move): each component below it opened with O_NOFOLLOW
    from the one above, the last required to be a socket on the same file system as the folder
    holding it (the kernel's own tmpfs). The kernel may write that folder, so a name there could be
    a link to any socket of the machine; a link, a folder swapped for a link, or anything but a
    socket is refused. Waits up to `timeout` s for the socket to appear (the kernel is starting)."""
    head, sep, inside = path.partition("/root/")
    if not (head.startswith("/proc/") and sep):
        raise SocketRefused(f"not a path under a sandbox's root: {path!r}")
    parts = [p for p in inside.split("/") if p]
    if not parts or any(p in (".", "..") for p in parts):
        raise SocketRefused(f"not a plain path: {path!r}")
    deadline = time.monotonic() + timeout
    while True:
        fds: list[int] = []
        try:
            fds.append(os.open(head + "/root", os.O_PATH | os.O_DIRECTORY))   # the sandbox's root
            for part in parts[:-1]:
                fds.append(os.open(part, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fds[-1]))
            fd = os.open(parts[-1], os.O_PATH | os.O_NOFOLLOW, dir_fd=fds[-1])
        except FileNotFoundError:
            if time.monotonic() > deadline:
                raise SocketRefused(f"the kernel's socket {path!r} did not appear in {timeout:g} s") from None
            time.sleep(0.02)
            continue
        except OSError as err:   # ELOOP, ENOTDIR: a link or a file where a folder was
            raise SocketRefused(f"the kernel's socket path {path!r} is not the kernel's folder "
                                f"({err.strerror}): refused") from None
        finally:
            folder_dev = os.fstat(fds[-1]).st_dev if fds else None
            for f in fds:
                os.close(f)
        info = os.fstat(fd)
        if not stat.S_ISSOCK(info.st_mode) or info.st_dev != folder_dev:
            os.close(fd)
            what = "a link" if stat.S_ISLNK(info.st_mode) else "not the kernel's own socket"
            raise SocketRefused(f"the kernel's socket path {path!r} holds {what}: refused")
        return fd


class _SafeSockets:
    """For the sandbox's kernel manager and client: each channel connects to the kernel's socket
    through /proc/self/fd/N of a descriptor from `open_kernel_socket` (ZeroMQ's reconnects reach the
    same socket, never what a name in the kernel's folder points to later), and refuses a message
    frame over `max_message_mb` before reading it (ZeroMQ's MAXMSGSIZE drops the connection)."""

    def _message_limit(self) -> int:
        for obj in (self, getattr(self, "parent", None)):
            mb = getattr(obj, "max_message_mb", None)
            if isinstance(mb, int):
                return mb << 20 if mb > 0 else -1
        return -1

    def _make_url(self, channel: str) -> str:
        url = super()._make_url(channel)
        if self.transport != "ipc" or not str(self.ip).startswith("/proc/"):
            return url
        fd = open_kernel_socket(url[len("ipc://"):])
        self.__dict__.setdefault("_socket_fds", []).append(fd)
        return f"ipc:///proc/self/fd/{fd}"

    def _create_connected_socket(self, channel, identity=None):
        import zmq

        limit = self._message_limit()
        if limit > 0:
            self.context.setsockopt(zmq.MAXMSGSIZE, limit)
        return super()._create_connected_socket(channel, identity=identity)

    def _close_socket_fds(self) -> None:
        for fd in self.__dict__.pop("_socket_fds", []):
            try:
                os.close(fd)
            except OSError:
                pass


class SandboxKernelClient(_SafeSockets, AsyncKernelClient):
    """The client of a sandboxed kernel (SandboxKernelManager.client_class)."""

    def stop_channels(self) -> None:
        super().stop_channels()
        self._close_socket_fds()


class _SandboxLifecycle(_SafeSockets, SandboxSettings, AsyncKernelManager):
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
            pid = self.kernel_pid()
            if pid is not None:
                os.kill(pid, signum)
            return
        await super()._async_signal_kernel(signum)

    signal_kernel = _async_signal_kernel

    def kernel_pid(self) -> int | None:
        """The kernel's process (as the grader sees it): the first descendant of bwrap that is not bwrap."""
        bwrap_pid = getattr(self.provisioner, "pid", None) if self.provisioner is not None else None
        found = [c.pid for c in _children(bwrap_pid, recursive=True) if c.name() != "bwrap"] if bwrap_pid else []
        return found[0] if found else None

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        await super()._async_cleanup_resources(restart=restart)
        self._close_socket_fds()
        if not restart:
            self._drop_cgroups()
            self._drop_rundir()

    cleanup_resources = _async_cleanup_resources

    def _drop_rundir(self) -> None:
        if self._rundir:
            shutil.rmtree(self._rundir, ignore_errors=True)
            self._rundir = None

    def _drop_cgroups(self) -> None:
        for group in self._cgroups:
            remove_cgroup(group)
        self._cgroups = []


class SandboxKernelManager(_SandboxLifecycle):
    """An AsyncKernelManager whose kernels run under bubblewrap (see the module doc)."""

    @default("client_class")
    def _client_class_default(self):
        return "utils.sandbox.SandboxKernelClient"

    @default("client_factory")
    def _client_factory_default(self):
        return SandboxKernelClient

    _workdir: str | None = None
    _inside_ip: str | None = None
    _uid: int = -1
    limits_applied: list = []

    async def _async_pre_start_kernel(self, **kw):
        if self.enabled:
            problem = unavailable(self.bwrap)
            if problem:
                raise SandboxError(f"grading stopped: the autograding sandbox cannot run: {problem}. "
                                   f"To grade without it (only inside a container without network, "
                                   f"secrets or the course folder) set `{OPT_OUT}` in nbgrader_config.py.")
            problem = start_problem(self.bwrap)
            if problem:
                raise SandboxError(f"grading stopped: {problem}")
            self._workdir = os.path.realpath(kw.get("cwd") or os.getcwd())
            if self._rundir is None:   # kept across restarts: the connection file lives there
                self._rundir, self._uid = _new_rundir(), kernel_uid()
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
        give_to(self._rundir, self._uid)   # the kernel (its own uid) reads its connection file
        python = kernel_python(self._workdir, self._rundir) + [p for p in self.extra_readonly if os.path.isdir(p)]
        mem, work = self.memory_limit_mb << 20, self.work_size_mb << 20
        prefix = bwrap_command(mounts(self._workdir, self._rundir, python, work), kernel_env(), self._uid, self.bwrap)
        launch = launch_args(mem, self.process_limit, self.copy_limit_mb << 20, work // 2, self._uid,
                             self._workdir, os.path.dirname(self._inside_ip))
        self._drop_cgroups()   # a restarted kernel gets fresh groups
        cpus = kernel_cpu_set()
        cores = self.cpu_limit if self.cpu_limit > 0 else float(len(cpus))
        self._cgroups, applied = kernel_cgroups(self.process_limit, mem, cpus, cores) if self.cgroups else ([], [])
        if not any(a.startswith(("cpu.max", "cpu.cfs", "cpuset")) for a in applied):
            applied.append(f"CPU: affinity {_cpu_list(cpus)} only (no cpu cgroup could be made: the kernel can undo it)")
        self.limits_applied = applied + rlimits_in_words(applied, self.memory_limit_mb, self.process_limit, self._uid)
        self.limits_applied.append(f"work folder, /tmp and /dev/shm: tmpfs of {self.work_size_mb} MiB each; "
                                   f"{kernel_cpus()} CPU(s) for thread pools")
        self.log.info("sandbox limits: %s", "; ".join(self.limits_applied))
        return in_cgroups(prefix + launch + cmd, self._cgroups)

    async def _async_launch_kernel(self, kernel_cmd, **kw):
        if self.enabled:   # bwrap itself starts with nothing of the grader's environment
            kw["env"] = {"PATH": "/usr/bin:/bin"}
        try:
            await super()._async_launch_kernel(kernel_cmd, **kw)
            if self.enabled:
                self.ip = f"/proc/{sandbox_pid(self.provisioner.pid, getattr(self.provisioner, 'process', None))}/root{self._inside_ip}"
        except BaseException:   # no kernel to clean up after: its cgroups and folder must not outlive it
            self._drop_cgroups()
            self._drop_rundir()
            raise
        if self.enabled:
            process = getattr(self.provisioner, "process", None)
            if process is not None and process.stdout is not None:
                threading.Thread(target=_forward, args=(process.stdout, self.output_limit_kb << 10),
                                 daemon=True).start()
