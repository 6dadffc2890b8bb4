"""Running the tools' processes: nbgrader (the only way the tools run it) with the environment it
needs, a bounded log of what a process prints, and a process tree killed whole (kernels included)."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from utils.errors import ToolError
from utils.escaping import escaped
from utils.signals import signal_process
from utils.lessons import REPO
from utils.nbgrader_client import WorkerLost, run


def nbgrader_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for an nbgrader subprocess: this interpreter's bin folder first on PATH
    (nbgrader runs `alembic` from PATH), and COURSE_TOOLS pointing at this repository so that
    nbgrader_config.py finds the grading plugins even in a scratch copy of the course."""
    env = dict(os.environ)
    env.update(extra or {})
    bindir, path = str(Path(sys.executable).parent), env.get("PATH", "")
    if path.split(os.pathsep)[0] != bindir:   # once: a PATH that differs is a different sandbox to probe
        env["PATH"] = os.pathsep.join([bindir, path])
    env["COURSE_TOOLS"] = str(REPO)
    return env


@dataclass
class NbgraderRun:
    rc: int
    log: str            # stdout and stderr together
    killed: bool        # stopped by the timeout


def nbgrader(args: list[str], cwd: Path, *, check: bool = True, timeout: float | None = None,
             env_extra: dict[str, str] | None = None, cpus: set[int] | None = None) -> NbgraderRun:
    """Run one nbgrader command in course directory `cwd`: the only way the tools run nbgrader.

    It runs in a child of a long-lived nbgrader process (utils/grading/nbgrader_worker.py: nbgrader's
    imports paid once, a fresh process state per command), as `python -m nbgrader` would.
    check: raise ToolError when it fails. timeout: kill the whole process tree (kernels included)
    after that many seconds. cpus: the cores it (and the kernels it starts) may run on. The grading
    plugins are found through COURSE_TOOLS (nbgrader_env)."""
    env = nbgrader_env(env_extra)
    env.setdefault("PYTHONUNBUFFERED", "1")
    try:
        done = run([{"argv": list(args)}], cwd, env, timeout=timeout, cpus=cpus)
        result = NbgraderRun(done["rcs"][0], done["log"], done["killed"])
    except WorkerLost as err:
        result = NbgraderRun(-9, str(err), False)
    if check and result.rc != 0:
        raise ToolError(f"nbgrader {' '.join(args)} failed in {cwd}:\n{escaped(result.log[-3000:], keep_newlines=True)}")
    return result


class BoundedLog:
    """What a tool printed, bounded as it is read: its first `head` and last `tail` bytes, with the
    number cut between them (a grading process prints what a student's kernel makes it print; it
    never fills the disk or the instructor's process, and is never read whole)."""

    def __init__(self, head: int = 256 << 10, tail: int = 768 << 10):
        self.head_limit, self.tail_limit = head, tail
        self.head, self.tail, self.cut = bytearray(), bytearray(), 0

    def add(self, chunk: bytes) -> None:
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        self.tail += chunk
        if len(self.tail) > 2 * self.tail_limit:
            self.cut += len(self.tail) - self.tail_limit
            del self.tail[:len(self.tail) - self.tail_limit]

    def read_all(self, pipe) -> None:
        with pipe:
            for chunk in iter(lambda: pipe.read1(1 << 16), b""):
                self.add(chunk)

    def text(self) -> str:
        tail = self.tail
        if len(tail) > self.tail_limit:
            self.cut += len(tail) - self.tail_limit
            tail = tail[len(tail) - self.tail_limit:]
        middle = f"\n[... {self.cut} bytes of output cut ...]\n".encode() if self.cut else b""
        return (bytes(self.head) + middle + bytes(tail)).decode(errors="replace")


def kill_tree(pid: int, children_only: bool = False) -> None:
    """SIGKILL `pid` and its descendants (`children_only`: only those; where it has ended, the
    processes of the session it led). Each by utils.signals, as psutil found it."""
    import psutil

    try:
        parent = psutil.Process(pid)
        procs = parent.children(recursive=True) + ([] if children_only else [parent])
    except psutil.NoSuchProcess:
        procs = []
    if children_only and not procs:
        # the parent is gone: its kernels were re-parented; find them by their session id
        procs = [p for p in psutil.process_iter() if _safe_sid(p) == pid]
    for p in procs:
        signal_process(p)


def _safe_sid(p) -> int | None:
    try:
        return os.getsid(p.pid)
    except OSError:
        return None


def log_tail(text: str, lines: int = 8) -> str:
    """The last `lines` lines of a tool's log, indented under the message that quotes them."""
    return "\n".join("    " + escaped(line) for line in text.strip().split("\n")[-lines:])
