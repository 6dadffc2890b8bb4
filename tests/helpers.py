"""Small helpers more than one test file needs: a free loopback port, a digest of files, a zip in memory."""

from __future__ import annotations

import hashlib
import io
import os
import socket
import stat
import zipfile
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


def zip_of(entries: dict[str, bytes | str], special: dict[str, int] | None = None) -> bytes:
    """A zip of `entries` (name: content), as an upload holds one; `special` gives an entry its Unix
    file type (a link, a device)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in entries.items():
            info = zipfile.ZipInfo(name)
            info.create_system = 3
            info.external_attr = ((special or {}).get(name, stat.S_IFREG) | 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    return buf.getvalue()
