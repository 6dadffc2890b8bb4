"""Small helpers more than one test file needs: a free loopback port and a digest of files."""

from __future__ import annotations

import hashlib
import os
import socket
from pathlib import Path


def free_port() -> int:
    """A loopback TCP port nothing listens on (the one the system handed out, closed again)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def digest(path: Path) -> str | dict[str, str]:
    """A file's SHA-256; for a folder, each file's under it by relative path, a link by where it
    points (never followed), so that any change to the tree shows."""
    path = Path(path)
    if not path.is_dir():
        return hashlib.sha256(path.read_bytes()).hexdigest()
    found = {}
    for p in sorted(path.rglob("*")):
        rel = p.relative_to(path).as_posix()
        if p.is_symlink():
            found[rel] = "link to " + os.readlink(p)
        elif p.is_file():
            found[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return found
