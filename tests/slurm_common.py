"""A real one-node Slurm on this machine for the cluster tests (tests/grading/test_slurm_grading.py,
tests/classroom/test_hub_classroom.py): Debian's `munged`, `slurmctld` and `slurmd`, started as root from a
`slurm.conf` written for this machine, all their state in one temporary folder, on free ports.

Without cgroups (a container's are rarely usable) the node tracks a job's processes by their
parents (ProctrackType=proctrack/linuxproc, TaskPlugin=task/none). A job that is cancelled gets
SIGTERM, and SIGKILL KillWait (2) seconds later. The folder is world-readable: students' jobs
(sbatch run as them) read slurm.conf and reach munged's socket.

`slurm_problem()` says in one line why no such cluster can run here (not root, Debian's packages
missing and not installable, a daemon that does not start); the tests skip with it."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from utils.lessons import REPO

DAEMONS = ("munged", "slurmctld", "slurmd")
PARTITION = "debug"
START_WAIT = 30.0      # seconds for the node to come up idle


def _sbin(name: str) -> str | None:
    return shutil.which(name) or next((p for p in (f"/usr/sbin/{name}", f"/sbin/{name}") if os.access(p, os.X_OK)), None)


def slurm_problem() -> str | None:
    """One line when a one-node Slurm cannot start here; installs Debian's slurm-wlm and munge
    first where they are missing and this is root with apt-get (utils/system_deps.sh)."""
    if os.name != "posix" or os.geteuid() != 0:
        return "a one-node Slurm needs root (slurmd starts each job as its user)"
    missing = [d for d in DAEMONS if _sbin(d) is None] + [c for c in ("sbatch", "squeue", "scancel", "sinfo")
                                                          if shutil.which(c) is None]
    if missing and shutil.which("apt-get"):
        subprocess.run(["flock", "/tmp/apt.lock", "bash", str(REPO / "utils" / "system_deps.sh"), "slurm-wlm", "munge"],
                       capture_output=True, timeout=900)
        missing = [d for d in DAEMONS if _sbin(d) is None] + [c for c in ("sbatch", "squeue", "scancel", "sinfo")
                                                              if shutil.which(c) is None]
    if missing:
        return f"Slurm is not installed here ({', '.join(missing)} missing; Debian: apt-get install slurm-wlm munge)"
    return None


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


@dataclass
class OneNodeSlurm:
    base: Path
    conf: Path
    node: str
    cpus: int
    memory_mb: int
    procs: dict = field(default_factory=dict)     # daemon -> subprocess.Popen

    @property
    def env(self) -> dict[str, str]:
        """What the Slurm commands (sbatch, squeue, scancel) need to find this cluster."""
        return {"SLURM_CONF": str(self.conf)}

    def command(self, *args: str, timeout: float = 30) -> subprocess.CompletedProcess:
        return subprocess.run(list(args), env={**os.environ, **self.env}, capture_output=True, text=True,
                              timeout=timeout)

    def jobs(self) -> dict[str, str]:
        """{job id: state} of the jobs Slurm still knows as pending, running or ending."""
        out = self.command("squeue", "-h", "-o", "%i %T").stdout
        return dict(line.split(None, 1) for line in out.splitlines() if line.strip())

    def log(self, daemon: str) -> str:
        path = self.base / "log" / f"{daemon}.log"
        return path.read_text(errors="replace")[-3000:] if path.is_file() else ""


def _conf(base: Path, host: str, ports: list[int], cpus: int, memory_mb: int, munge_socket: Path,
          node_addr: str = "127.0.0.1") -> str:
    return "\n".join([
        f"ClusterName=course{ports[0]}",
        f"SlurmctldHost={host}(127.0.0.1)",
        f"SlurmctldPort={ports[0]}",
        f"SlurmdPort={ports[1]}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={munge_socket}",
        f"StateSaveLocation={base / 'state'}",
        f"SlurmdSpoolDir={base / 'spool'}",
        f"SlurmctldPidFile={base / 'slurmctld.pid'}",
        f"SlurmdPidFile={base / 'slurmd.pid'}",
        f"SlurmctldLogFile={base / 'log' / 'slurmctld.log'}",
        f"SlurmdLogFile={base / 'log' / 'slurmd.log'}",
        # no cgroups: a job's processes are those descended from it
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "MpiDefault=none",
        "ReturnToService=2",
        "KillWait=2",            # SIGTERM, then SIGKILL 2 s later
        "MinJobAge=10",
        "InactiveLimit=0",
        "SlurmdParameters=config_overrides",
        f"NodeName={host} NodeAddr={node_addr} CPUs={cpus} RealMemory={memory_mb} State=UNKNOWN",
        f"PartitionName={PARTITION} Nodes={host} Default=YES MaxTime=INFINITE State=UP",
        "",
    ])


@contextlib.contextmanager
def one_node_slurm(cpus: int | None = None, node_addr: str = "127.0.0.1"):
    """munged, slurmctld and slurmd in the foreground (their own processes, killed at the end by
    their ids), with this machine as the one node of partition `debug` (offering `cpus` CPUs:
    default, those it has), known to Slurm at `node_addr` (an address of this machine: the one a
    compute node has on a cluster's network). Jobs still known at the end are cancelled first."""
    base = Path(tempfile.mkdtemp(prefix="course-slurm-", dir="/tmp"))
    base.chmod(0o755)
    for d in ("state", "spool", "log"):
        (base / d).mkdir(mode=0o700)
    (base / "munge").mkdir(mode=0o755)
    key = base / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    munge_socket = base / "munge" / "munge.socket"
    host = socket.gethostname().split(".")[0]
    cpus = cpus or os.cpu_count() or 1
    memory_mb = max(1024, os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20 // 2)
    conf = base / "slurm.conf"
    conf.write_text(_conf(base, host, _free_ports(2), cpus, memory_mb, munge_socket, node_addr))
    conf.chmod(0o644)
    cluster = OneNodeSlurm(base, conf, host, cpus, memory_mb)
    try:
        cluster.procs["munged"] = subprocess.Popen(
            [_sbin("munged"), "--foreground", "--force", f"--key-file={key}", f"--socket={munge_socket}",
             f"--pid-file={base / 'munge' / 'munged.pid'}", f"--log-file={base / 'log' / 'munged.log'}",
             f"--seed-file={base / 'munge' / 'munged.seed'}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + START_WAIT
        while not munge_socket.exists():
            if cluster.procs["munged"].poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"munged did not start: {cluster.log('munged')}")
            time.sleep(0.05)
        for daemon in ("slurmctld", "slurmd"):
            cluster.procs[daemon] = subprocess.Popen(
                [_sbin(daemon), "-D", "-f", str(conf)], env={**os.environ, **cluster.env},
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        while cluster.command("sinfo", "-h", "-o", "%T").stdout.strip() not in ("idle", "mixed", "allocated"):
            stopped = [d for d, p in cluster.procs.items() if p.poll() is not None]
            if stopped or time.monotonic() > deadline:
                raise RuntimeError(f"the one-node Slurm did not come up ({', '.join(stopped) or 'no idle node'}): "
                                   + " | ".join(cluster.log(d)[-600:] for d in DAEMONS))
            time.sleep(0.2)
        yield cluster
    finally:
        _stop(cluster)
        shutil.rmtree(base, ignore_errors=True)


def _stop(cluster: OneNodeSlurm) -> None:
    """Cancel every job this cluster still knows, let slurmd end them, then stop the daemons."""
    if cluster.procs.get("slurmctld") is not None and cluster.procs["slurmctld"].poll() is None:
        with contextlib.suppress(Exception):
            ids = list(cluster.jobs())
            if ids:
                cluster.command("scancel", *ids)
                deadline = time.monotonic() + 15
                while cluster.jobs() and time.monotonic() < deadline:
                    time.sleep(0.3)
    for daemon in ("slurmd", "slurmctld", "munged"):
        proc = cluster.procs.get(daemon)
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def address_problem(addr: str) -> str | None:
    """One line when `addr` cannot be made an address of this machine (needs root and `ip`)."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        return f"giving this machine the address {addr} needs root and iproute2's ip"
    return None


@contextlib.contextmanager
def secondary_address(addr: str):
    """`addr` (a /32 or /128) added to the loopback interface for the block, as a compute node's
    address on a cluster's network, and removed after it; an address already there is used and
    left. The hub test binds the hub's API there: not 127.0.0.0/8, yet reachable from this machine
    alone."""
    plen = 128 if ":" in addr else 32
    present = subprocess.run(["ip", "-o", "addr", "show", "dev", "lo"], capture_output=True, text=True).stdout
    added = f" {addr}/" not in present
    if added:
        subprocess.run(["ip", "addr", "add", f"{addr}/{plen}", "dev", "lo"], check=True, capture_output=True, text=True)
    try:
        yield addr
    finally:
        if added:
            subprocess.run(["ip", "addr", "del", f"{addr}/{plen}", "dev", "lo"], capture_output=True)
