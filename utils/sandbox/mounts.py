"""The kernel's file system, built up from nothing: one ordered list of bwrap mounts, each with
its reason (`mounts`), and the folder of the kernel's connection file (`new_rundir`).

Nothing else of the machine is there: no home, /srv, /var, /opt, /usr/local (the nbgrader
exchange), checkout, course folder or gradebook, whatever path they are at.
"""

from __future__ import annotations

import glob
import os
import shutil
import tempfile
from pathlib import Path

from utils.sandbox.interpreter import unused_packages

SUBMISSION = "/run/submission"   # the real work folder, read-only, inside the sandbox
RUN = "/run/kernel"              # the connection file and matplotlib's font list, read-only
KERNEL_TMP = "/tmp"

Layout = list[tuple[list[str], str]]   # (bwrap arguments, reason), in order

# What of the system a kernel sees (read-only), and why.
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


def _shown_already(path: str, layout: Layout) -> bool:
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


def mounts(workdir: str, rundir: str, python: list[str], work_size: int,
           emptied: tuple[str, ...] | None = None) -> Layout:
    """The kernel's file system, built up from nothing in this order (bwrap args, reason). Of the
    Python environment's paths, those that the system's folders already show are left out; a
    folder of `emptied` (default: interpreter.unused_packages) that they show is there, empty and
    read-only."""
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
    for p in unused_packages() if emptied is None else emptied:
        if os.path.isdir(p) and not os.path.islink(p) and _shown_already(p, layout):
            layout += [(["--tmpfs", p], "a package a graded kernel never uses (the debugger), empty"),
                       (["--remount-ro", p], "the same, read-only")]
    return layout + [
        (["--ro-bind", rundir, RUN], "the connection file and matplotlib's font list"),
        (["--ro-bind", workdir, SUBMISSION], "the submission, read once to copy it into the work folder"),
        (tmpfs + [workdir], "the work folder at the path nbgrader gives: a tmpfs the grader never reads"),
    ]


def new_rundir() -> str:
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
