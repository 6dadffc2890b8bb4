"""Where a measured command's CPU goes, by kind of process (cpu.measure(..., breakdown=True)).

A thread samples every process in the command's cgroup (and the groups under it) every
`INTERVAL` seconds: its parent, its program (/proc/PID/cmdline, again after an exec) and its CPU
so far (/proc/PID/stat: user + system of all its threads, in clock ticks). Each process gets a
role from where it sits in the tree: the command itself (`driver`), a long-lived nbgrader process
it started (`worker`), a child forked from one (`child`), or a process under one of those (`ROLE >
PROGRAM`: bwrap, the sandbox's launcher, the kernel, the trial start's program, the cgroup-joining
shell...). What no sample saw (a process that lived less than a sample, each process's last
moments) is the cgroup's total less the sum: `unseen`.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

INTERVAL = 0.02
TICK = os.sysconf("SC_CLK_TCK")
WORKER = "utils.grading.nbgrader_worker"
FORKED_WORKER = "nbgrader-worker"   # nbgrader_worker.NAME: the comm of a worker forked from the grader


def _stat(pid: int) -> tuple[str, int, float, int] | None:
    """(comm, ppid, CPU seconds, start time in ticks) of `pid`, or None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    comm, rest = text[text.index("(") + 1:text.rindex(")")], text[text.rindex(")") + 2:].split()
    return comm, int(rest[1]), (int(rest[11]) + int(rest[12])) / TICK, int(rest[19])


def _program(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")[:-1]
    except OSError:
        return []


def program_kind(comm: str, argv: list[str]) -> str:
    """What a process runs, in a few words."""
    if comm == "bwrap":
        return "bwrap"
    if "ipykernel_launcher" in argv:
        return "kernel"
    if argv[1:3] == ["-S", "-c"]:
        return "sandbox launcher (python -S)"
    if len(argv) > 2 and argv[1] == "-m":
        return f"python -m {argv[2]}"
    if len(argv) > 1 and argv[1] == "-c":
        return "python -c"
    return comm


class Sampler:
    """Samples the processes of cgroup `group`, `root` being the measured command's PID."""

    def __init__(self, group: Path, root: int):
        self.group, self.root = group, root
        self.procs: dict[tuple[int, int], dict] = {}   # (pid, start): {ppid, segments [[kind, cpu at start, cpu last]]}
        self.halt = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _pids(self) -> list[int]:
        pids = []
        for folder, _, files in os.walk(self.group):
            if "cgroup.procs" in files:
                try:
                    pids += [int(p) for p in Path(folder, "cgroup.procs").read_text().split()]
                except OSError:
                    pass
        return pids

    def _run(self) -> None:
        while not self.halt.is_set():
            self.sample()
            self.halt.wait(INTERVAL)
        self.sample()

    def sample(self) -> None:
        for pid in self._pids():
            st = _stat(pid)
            if st is None:
                continue
            comm, ppid, cpu, start = st
            argv = _program(pid)
            rec = self.procs.setdefault((pid, start), {"pid": pid, "ppid": ppid, "segments": []})
            rec["comm"] = comm
            kind = program_kind(comm, argv) if argv else None
            segs = rec["segments"]
            if not segs:
                segs.append([kind or comm, 0.0, cpu, argv[:3]])
            elif kind and kind != segs[-1][0]:   # an exec since the last sample
                segs.append([kind, segs[-1][2], cpu, argv[:3]])
            else:
                segs[-1][2] = cpu

    def stop(self) -> None:
        self.halt.set()
        self.thread.join()

    def _roles(self, by_pid: dict[int, dict]) -> dict[int, str]:
        """{pid: driver | worker | child} for the processes that have one."""
        roles = {self.root: "driver"}
        workers = {pid for pid, rec in by_pid.items() if pid != self.root and self._runs_worker(rec, self.root)}
        for pid in workers:   # a child is forked from a worker: the same program, a worker its parent
            roles[pid] = "child" if by_pid[pid]["ppid"] in workers else "worker"
        for pid, rec in by_pid.items():   # forked from a worker forked from the command: its name, a worker its parent
            if pid not in roles and rec["ppid"] in workers and rec.get("comm") == FORKED_WORKER:
                roles[pid] = "child"
        return roles

    @staticmethod
    def _runs_worker(rec: dict, root: int) -> bool:
        """A worker started as a program of its own, or forked from the command and named so."""
        return any(WORKER in seg[3] for seg in rec["segments"]) or (
            rec["ppid"] == root and rec.get("comm") == FORKED_WORKER)

    @staticmethod
    def _role_of(pid: int, roles: dict[int, str], by_pid: dict[int, dict]) -> str:
        seen = set()
        while pid in by_pid and pid not in roles and pid not in seen:
            seen.add(pid)
            pid = by_pid[pid]["ppid"]
        return roles.get(pid, "outside")

    def parts(self, total: float) -> dict[str, float]:
        """{role or `ROLE > program`: CPU seconds}, with `unseen` and the count of each as `N ...`."""
        self.stop()
        by_pid = {rec["pid"]: rec for rec in self.procs.values()}
        roles = self._roles(by_pid)
        out: dict[str, float] = {}
        counts: dict[str, int] = {}
        for rec in self.procs.values():
            pid = rec["pid"]
            for kind, first, last, _ in rec["segments"]:
                name = roles[pid] if pid in roles else f"{self._role_of(rec['ppid'], roles, by_pid)} > {kind}"
                out[name] = out.get(name, 0.0) + (last - first)
                counts[name] = counts.get(name, 0) + 1
        out["unseen"] = total - sum(out.values())
        return {**out, **{f"N {k}": float(v) for k, v in counts.items()}}


def show(parts: dict[str, float], per: int = 1) -> str:
    """The breakdown in lines, largest first, CPU seconds divided by `per` (submissions)."""
    shares = sorted(((v, k) for k, v in parts.items() if not k.startswith("N ")), reverse=True)
    return "\n".join(f"    {k:45} {v / per:7.3f} CPU-s" + (f"  ({int(parts['N ' + k])} processes)"
                                                        if f"N {k}" in parts else "")
                     for v, k in shares)
