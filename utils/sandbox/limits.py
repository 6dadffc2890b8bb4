"""The kernel's limits: cgroups (memory, processes, CPU time, CPU set) where the grader may make
them, the per-process rlimits the launcher sets everywhere, and the CPUs a kernel gets.

Each limit that took effect is said in words (`kernel_limits`, logged at every kernel start);
`limits_not_enforced` says before grading which of them cannot hold here.
"""

from __future__ import annotations

import itertools
import os
import time
from pathlib import Path

from utils.signals import kill_cgroup

CGROUP_ROOT = Path("/sys/fs/cgroup")
PERIOD_US = 100_000
_GROUPS = itertools.count()


# -- cgroups ----------------------------------------------------------------------------------------
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


def cpu_list(cpus) -> str:
    """CPUs as cpuset.cpus writes them: "0,1,5"."""
    return ",".join(str(c) for c in sorted(cpus))


def kernel_cgroups(processes: int, memory: int, cpus=None, cores: float = 0.0) -> tuple[list[Path], list[str]]:
    """New cgroups for one kernel (v2: one group; v1: a pids, a memory, a cpu and a cpuset group),
    with `processes` as pids.max, `memory` bytes as the memory limit, the CPUs `cpus` as its cpuset
    and `cores` CPUs' worth of time per period as its quota (cpu.max, or cpu.cfs_quota_us in v1)
    (0 or None: that limit is not wanted), and the limits that took effect, in words. ([], [])
    where the grader may not create cgroups. The kernel cannot undo any of them: it holds no
    capability, sees no cgroup file system and is in a cgroup namespace of its own."""
    own = _own_cgroups()
    quota = int(cores * PERIOD_US) if cores and cores > 0 else 0
    if "" in own and (CGROUP_ROOT / "cgroup.controllers").exists():
        return _v2_group(CGROUP_ROOT / own[""], processes, memory, cpus, cores, quota)
    return _v1_groups(own, processes, memory, cpus, cores, quota)


def _v2_group(parent: Path, processes: int, memory: int, cpus, cores: float,
              quota: int) -> tuple[list[Path], list[str]]:
    """`kernel_cgroups` in cgroup v2: one child of the grader's own group."""
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
        settings["cpuset.cpus"] = cpu_list(cpus)
    group = _new_group(parent, settings)
    if group is None:
        return [], []
    applied = []
    if processes > 0 and (group / "pids.max").exists():
        applied.append(f"pids.max {processes} (cgroup v2)")
    if memory > 0 and (group / "memory.max").exists():
        applied.append(f"memory.max {memory >> 20} MiB (cgroup v2"
                       f"{', swap 0' if (group / 'memory.swap.max').exists() else ''})")
    if quota and (group / "cpu.max").exists():
        applied.append(f"cpu.max {cores:g} CPU(s) (cgroup v2)")
    if cpus and (group / "cpuset.cpus").exists():
        applied.append(f"cpuset CPUs {cpu_list(cpus)} (cgroup v2)")
    if not applied:   # the controllers are not enabled for the grader's children
        remove_cgroup(group)
        return [], []
    return [group], applied


def _v1_group(controller: str, own_path: str, settings) -> Path | None:
    """A new v1 group of `controller` under the grader's own group of it, else under its root;
    `settings(parent)` gives what to write (an OSError: that parent cannot have one)."""
    for parent in (CGROUP_ROOT / controller / own_path, CGROUP_ROOT / controller):
        try:
            wanted = settings(parent)
        except OSError:
            continue
        group = _new_group(parent, wanted)
        if group is not None:
            return group
    return None


def _v1_groups(own: dict[str, str], processes: int, memory: int, cpus, cores: float,
               quota: int) -> tuple[list[Path], list[str]]:
    """`kernel_cgroups` in cgroup v1: a group of each controller wanted."""
    made: list[tuple[Path | None, str]] = []
    if processes > 0:
        group = _v1_group("pids", own.get("pids", ""), lambda parent: {"pids.max": str(processes)})
        made.append((group, f"pids.max {processes} (cgroup v1)"))
    if memory > 0:
        group = _v1_group("memory", own.get("memory", ""),
                          lambda parent: {"memory.limit_in_bytes": str(memory), "memory.swappiness": "0"})
        swap = _v1_no_swap(group, memory) if group is not None else ""
        made.append((group, f"memory.limit_in_bytes {memory >> 20} MiB (cgroup v1{swap})"))
    if quota:
        group = _v1_group("cpu", own.get("cpu", own.get("cpu,cpuacct", "")),
                          lambda parent: {"cpu.cfs_period_us": str(PERIOD_US), "cpu.cfs_quota_us": str(quota)})
        made.append((group, f"cpu.cfs_quota_us {cores:g} CPU(s) (cgroup v1)"))
    if cpus:
        group = _v1_group("cpuset", own.get("cpuset", ""), lambda parent: {
            "cpuset.cpus": cpu_list(cpus), "cpuset.mems": (parent / "cpuset.mems").read_text().strip()})
        made.append((group, f"cpuset CPUs {cpu_list(cpus)} (cgroup v1)"))
    made = [(group, words) for group, words in made if group is not None]
    return [group for group, _ in made], [words for _, words in made]


def _v1_no_swap(group: Path, memory: int) -> str:
    """Memory and swap together limited to `memory` where the system counts swap; in words."""
    try:
        (group / "memory.memsw.limit_in_bytes").write_text(str(memory))
        return ", swap 0"
    except OSError:
        return ", swappiness 0"


def pids_cgroup(limit: int) -> Path | None:
    """A new cgroup whose pids.max is `limit`, or None where the grader may not create one."""
    groups, applied = kernel_cgroups(limit, 0)
    if not applied:
        for g in groups:
            remove_cgroup(g)
        return None
    return groups[0]


def remove_cgroup(group: Path | None) -> None:
    """Kill what is left in `group` (nothing, normally: the PID namespace ended) and remove it."""
    if group is None or not group.exists():
        return
    for _ in range(50):
        try:
            kill_cgroup(group)   # by cgroup.kill or pidfds, never by a PID read from cgroup.procs alone
            group.rmdir()
            return
        except OSError:
            time.sleep(0.02)


def in_cgroups(cmd: list[str], groups: list[Path]) -> list[str]:
    """`cmd`, started after its shell joined `groups` (so before bwrap starts anything)."""
    if not groups:
        return cmd
    join = 'while [ "$1" != -- ]; do echo $$ > "$1/cgroup.procs" || exit 1; shift; done; shift; exec "$@"'
    return ["/bin/sh", "-c", join, "sh", *map(str, groups), "--", *cmd]


# -- CPUs -------------------------------------------------------------------------------------------
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


# -- in words ---------------------------------------------------------------------------------------
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


def _limits_cpu(applied: list[str]) -> bool:
    return any(a.startswith(("cpu.max", "cpu.cfs", "cpuset")) for a in applied)


def kernel_limits(processes: int, memory_mb: int, cpu_limit: float, work_size_mb: int, uid: int,
                  cgroups: bool = True) -> tuple[list[Path], list[str]]:
    """One kernel's cgroups (none where `cgroups` is False) on this worker's CPUs, at most
    `cpu_limit` CPUs (0: as many as it has), and every limit it gets, in words."""
    cpus = kernel_cpu_set()
    cores = cpu_limit if cpu_limit > 0 else float(len(cpus))
    groups, applied = kernel_cgroups(processes, memory_mb << 20, cpus, cores) if cgroups else ([], [])
    if not _limits_cpu(applied):
        applied.append(f"CPU: affinity {cpu_list(cpus)} only (no cpu cgroup could be made: the kernel can undo it)")
    words = applied + rlimits_in_words(applied, memory_mb, processes, uid)
    words.append(f"work folder, /tmp and /dev/shm: tmpfs of {work_size_mb} MiB each; "
                 f"{kernel_cpus()} CPU(s) for thread pools")
    return groups, words


def limits_not_enforced() -> str | None:
    """One line saying which kernel limit cannot hold here, or None (said before grading starts)."""
    groups, applied = kernel_cgroups(1024, 64 << 20, kernel_cpu_set(), 1.0)
    for group in groups:
        remove_cgroup(group)
    lines = []
    if not any(a.startswith("memory") for a in applied):
        lines.append("sandbox: no memory cgroup can be made here, so a kernel's total memory is not limited: "
                     "each of its processes is (RLIMIT_DATA), and their number (RLIMIT_NPROC)")
    if not _limits_cpu(applied):
        lines.append("sandbox: no cpu or cpuset cgroup can be made here, so a kernel's CPU time is not limited: "
                     "it is only asked to stay on its worker's cores (affinity), which it can undo")
    return "\n".join(lines) or None
