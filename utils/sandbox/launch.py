"""The launcher: the program that runs first inside the sandbox, before the kernel.

It sets the per-process limits (the kernel and its children inherit them), copies the
submission's regular files into the work tmpfs, and, graded by root, gives them to the kernel's
uid and becomes that uid (no capability is left after that). Then it makes HOME and the socket
folder, copies matplotlib's font list and becomes the kernel (`os.execv`).

This file is run, not imported, inside the sandbox: the checkout it lives in is not visible
there (nothing of the course folder is). The grader reads its text and passes it to the kernel's
interpreter with `python -S -c` (`utils.sandbox.command.launch_args`), which adds no mount: the
kernel's file system stays exactly `mounts`. So it imports only the standard library, and only
`main()` runs, when it is `__main__`.

Arguments (sys.argv after `-c`): memory bytes (RLIMIT_DATA), processes (RLIMIT_NPROC), largest
file copied, bytes copied at most, the kernel's uid (-1: a user namespace maps it), the submission
folder (read-only), the work folder, the socket folder, the font list's folder, then the kernel's
command.
"""

from __future__ import annotations

import os
import resource
import stat
import sys

CAP_EFFECTIVE = "CapEff:"
PR_SET_NO_NEW_PRIVS = 38


class Copier:
    """Copies a folder's regular files within `budget` bytes, none over `copy_limit` bytes, and
    notes in `left` what it left out (links, pipes, devices, files too large, unreadable ones)."""

    def __init__(self, src: str, copy_limit: int, budget: int):
        self.src, self.copy_limit, self.budget = src, copy_limit, budget
        self.left: list[str] = []

    def file(self, path: str, dest: str) -> None:
        """One file, opened without following a link or blocking on a pipe swapped in since."""
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return
            with open(dest, "xb") as out:
                while self.budget > 0:
                    chunk = os.read(fd, 1 << 20)
                    if not chunk:
                        break
                    out.write(chunk[:self.budget])
                    self.budget -= len(chunk)
        finally:
            os.close(fd)

    def tree(self, src: str, dest: str, depth: int = 0) -> None:
        """`src` into `dest`, eight folders deep at most."""
        for entry in sorted(os.scandir(src), key=lambda e: e.name):
            rel = os.path.relpath(entry.path, self.src)
            try:
                if entry.is_symlink():
                    self.left.append(repr(rel) + " (a link)")
                    continue
                if entry.is_dir(follow_symlinks=False):
                    if depth < 8:
                        os.mkdir(os.path.join(dest, entry.name))
                        self.tree(entry.path, os.path.join(dest, entry.name), depth + 1)
                    continue
                st = entry.stat(follow_symlinks=False)
                if not stat.S_ISREG(st.st_mode):
                    self.left.append(repr(rel) + " (not a regular file)")
                    continue
                if st.st_size > min(self.copy_limit, self.budget):
                    self.left.append(repr(rel) + " (%d bytes)" % st.st_size)
                    continue
                self.file(entry.path, os.path.join(dest, entry.name))
            except OSError as err:   # unreadable, or the work folder is full: the kernel starts anyway
                self.left.append(repr(rel) + " (%s)" % err.strerror)


def set_limits(memory: int, processes: int) -> None:
    """RLIMIT_DATA and RLIMIT_NPROC (0: not set), inherited by the kernel and its children."""
    if memory > 0:
        resource.setrlimit(resource.RLIMIT_DATA, (memory, memory))
    if processes > 0:
        resource.setrlimit(resource.RLIMIT_NPROC, (processes, processes))


def become(uid: int, work: str) -> None:
    """Graded by root: the work folder given to `uid`, then that uid, with no_new_privs and no
    capability left (the launcher ends, and the kernel never starts, where either is not so)."""
    for folder, dirs, files in os.walk(work):
        for name in [folder] + [os.path.join(folder, f) for f in dirs + files]:
            os.lchown(name, uid, uid)
    import ctypes   # only here: a kernel graded by an ordinary user never loads it

    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0):
        sys.exit("sandbox: no_new_privs refused")
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    with open("/proc/self/status") as status:
        if status.read().split(CAP_EFFECTIVE)[1].split()[0].strip("0"):
            sys.exit("sandbox: capabilities left")


def make_home(sockets: str, fonts: str) -> None:
    """HOME's folders and the socket folder, and matplotlib's font list copied where matplotlib
    looks (so that it is not rebuilt: seconds)."""
    for folder in (os.environ["IPYTHONDIR"], os.environ["MPLCONFIGDIR"], sockets):
        os.makedirs(folder, exist_ok=True)
    for name in os.listdir(fonts):
        with open(os.path.join(fonts, name), "rb") as f, \
                open(os.path.join(os.environ["MPLCONFIGDIR"], name), "wb") as g:
            g.write(f.read())


def main(argv: list[str]) -> None:
    memory, processes, copy_limit, budget, uid = (int(a) for a in argv[1:6])
    src, work, sockets, fonts = argv[6:10]
    set_limits(memory, processes)
    copier = Copier(src, copy_limit, budget)
    copier.tree(src, work)
    if uid >= 0:
        become(uid, work)
    if copier.left:
        print("sandbox: not copied into the work folder: " + ", ".join(copier.left), file=sys.stderr, flush=True)
    make_home(sockets, fonts)
    os.chdir(work)
    os.execv(argv[10], argv[10:])


if __name__ == "__main__":
    main(sys.argv)
