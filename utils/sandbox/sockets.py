"""The kernel's sockets, reached without following anything the kernel controls.

Each socket of the kernel is opened with O_NOFOLLOW from the sandbox's root and reached through
/proc/self/fd (`open_kernel_socket`), and a message frame over `max_message_mb` is refused before
it is read (`SafeSockets`, mixed into the kernel manager and its client).
"""

from __future__ import annotations

import os
import stat
import time

import zmq

from utils.sandbox.sandbox_error import SandboxError


class SocketRefused(SandboxError):
    """A kernel's socket path holds something other than the kernel's own socket."""


def _plain_parts(path: str) -> tuple[str, list[str]]:
    """(/proc/PID, the components of the path below /proc/PID/root), or SocketRefused."""
    head, sep, inside = path.partition("/root/")
    if not (head.startswith("/proc/") and sep):
        raise SocketRefused(f"not a path under a sandbox's root: {path!r}")
    parts = [p for p in inside.split("/") if p]
    if not parts or any(p in (".", "..") for p in parts):
        raise SocketRefused(f"not a plain path: {path!r}")
    return head, parts


def open_kernel_socket(path: str, timeout: float = 60.0) -> int:
    """An O_PATH descriptor of the Unix socket at `path`, a path under /proc/PID/root (the
    sandbox's root, which the kernel cannot move): each component below it opened with O_NOFOLLOW
    from the one above, the last required to be a socket on the same file system as the folder
    holding it (the kernel's own tmpfs). The kernel may write that folder, so a name there could be
    a link to any socket of the machine; a link, a folder swapped for a link, or anything but a
    socket is refused. Waits up to `timeout` s for the socket to appear (the kernel is starting)."""
    head, parts = _plain_parts(path)
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


class SafeSockets:
    """For the sandbox's kernel manager and client: each channel connects to the kernel's socket
    through /proc/self/fd/N of a descriptor from `open_kernel_socket` (ZeroMQ's reconnects reach the
    same socket, never what a name in the kernel's folder points to later), and refuses a message
    frame over `max_message_mb` before reading it (ZeroMQ's MAXMSGSIZE drops the connection).

    jupyter_client has no public hook for how a manager or client connects, so this overrides
    ConnectionFileMixin's `_make_url` and `_create_connected_socket`."""

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
