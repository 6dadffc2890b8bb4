"""CPU seconds of a command and of everything it starts, sandboxed kernels included.

`time` (a process's RUSAGE_CHILDREN) misses the sandboxed kernels: their processes are re-parented
before they exit and their CPU is counted for no ancestor; even a child subreaper
(prctl PR_SET_CHILD_SUBREAPER) that reaps every orphan counted only half of a sandboxed grading's
CPU here. A cgroup counts every process in it, whoever reaps it: the command starts in a new
cgroup of its own (cgroup v1's cpuacct, `cpuacct.usage`; else cgroup v2, `cpu.stat` usage_usec),
and its CPU is that cgroup's once every process in it has ended. The kernels' own cgroups
(utils/sandbox/limits.py) are made under the grader's, so they are counted too. Needs the right to
make a cgroup (root, or a delegated one)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from utils.bench.breakdown import Sampler

CGROUPS = Path("/sys/fs/cgroup")
LEFTOVER_GRACE = 60   # seconds a process may outlive the command before it is killed (and counted)


@dataclass
class Measured:
    rc: int
    wall: float
    cpu: float          # user + system seconds of the command and every process it started
    parts: dict | None = None   # with `breakdown`: {kind of process: CPU seconds} (breakdown.py)


def _own(controller: str) -> str:
    """This process's cgroup path in the hierarchy of `controller` ("" for cgroup v2)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            return path.lstrip("/")
    return ""


def new_group() -> tuple[Path, callable]:
    """A new cgroup for one measurement, and the reader of its CPU seconds."""
    name = f"cpu-bench-{uuid.uuid4().hex[:8]}"
    for mount in (CGROUPS / "cpuacct", CGROUPS / "cpu,cpuacct"):
        if (mount / "cpuacct.usage").exists():
            group = mount / _own("cpuacct") / name
            group.mkdir()
            return group, lambda group=group: int((group / "cpuacct.usage").read_text()) / 1e9
    for mount in (CGROUPS, CGROUPS / "unified"):
        if (mount / "cgroup.procs").exists() and (mount / "cgroup.controllers").exists():
            group = mount / _own_v2() / name
            group.mkdir()

            def usage(group: Path = group) -> float:
                for line in (group / "cpu.stat").read_text().splitlines():
                    key, value = line.split()
                    if key == "usage_usec":
                        return int(value) / 1e6
                raise RuntimeError(f"{group}/cpu.stat has no usage_usec")
            return group, usage
    raise RuntimeError("no cgroup to count CPU in: neither cgroup v1's cpuacct nor cgroup v2 is mounted "
                       f"under {CGROUPS}")


def _own_v2() -> str:
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        if line.startswith("0::"):
            return line[3:].lstrip("/")
    return ""


def _members(group: Path) -> list[int]:
    try:
        return [int(p) for p in (group / "cgroup.procs").read_text().split()]
    except OSError:
        return []


def measure(cmd: list[str], cwd, env: dict | None = None, breakdown: bool = False) -> Measured:
    """Run `cmd` in a new cgroup; its CPU seconds once every process in that cgroup has ended.
    `breakdown`: also each kind of process's share (breakdown.Sampler), what no sample saw apart."""
    group, usage = new_group()
    sampler = None
    procs = str(group / "cgroup.procs")

    def enter() -> None:   # in the child, before exec: everything it starts is in the group
        with open(procs, "w") as f:
            f.write(str(os.getpid()))

    try:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, preexec_fn=enter)
        if breakdown:
            sampler = Sampler(group, proc.pid)
        rc = proc.wait()
        ended = time.perf_counter()
        while _members(group):
            if time.perf_counter() - ended > LEFTOVER_GRACE:
                for pid in _members(group):
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
            time.sleep(0.05)
        total = usage()
        return Measured(rc, time.perf_counter() - start, total, sampler.parts(total) if sampler else None)
    finally:
        if sampler is not None:
            sampler.stop()
        for _ in range(100):
            try:
                group.rmdir()
                break
            except OSError:
                time.sleep(0.05)
