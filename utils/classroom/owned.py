"""One job: a path with the owner and the mode it must have. Every folder and file the set-up
makes or checks goes through here: made so when missing, its mode (and group) set when they
differ, each change said once in the run's summary; and refused, with what to do, when what is
there is not the kind of thing it should be or belongs to someone else (a link or a folder a
student may have planted before the set-up ran). Nothing is ever written through a link."""

from __future__ import annotations

import grp
import os
import pwd
import secrets
import stat
from pathlib import Path

from utils.classroom.room import Classroom, ToolError


def user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def group_name(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return f"gid {gid}"


def folder(room: Classroom, path: Path, *, uid: int, mode: int, what: str, gid: int | None = None,
           create: bool = True, refusal: str = "") -> bool:
    """`path` a folder owned by `uid` with mode `mode` (and group `gid` when given): made so when
    missing (with `create`; said as `what`), mode and group set when they differ. A link, a file or
    another user's folder there is refused (`refusal` adds why it matters). True when it was made."""
    path = Path(path)
    made = False
    if create and not os.path.lexists(path):
        path.mkdir(mode=mode)
        os.chown(path, uid, -1 if gid is None else gid)
        os.chmod(path, mode)   # mkdir's mode passes through the umask
        room.did(f"created {path} ({what})")
        made = True
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != uid:
        found = "a link" if stat.S_ISLNK(st.st_mode) else "not a folder" if not stat.S_ISDIR(st.st_mode) \
            else f"a folder of {user_name(st.st_uid)}'s"
        raise ToolError(f"{path} should be a folder of {user_name(uid)}'s and is {found}{refusal}; look at what is "
                        "in it, move it away and rerun")
    if stat.S_IMODE(st.st_mode) != mode:
        os.chmod(path, mode)
        room.did(f"{path}: mode {mode:04o} (was {stat.S_IMODE(st.st_mode):04o})")
    if gid is not None and st.st_gid != gid:
        os.chown(path, uid, gid)
        room.did(f"{path}: group {group_name(gid)}")
    return made


def closed_to_others(room: Classroom, path: Path, why: str, uid: int | None = None) -> None:
    """`path` (a folder, not a link; `uid`'s when given) with no permission for its group or others:
    those bits taken off, the owner's kept."""
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise ToolError(f"{path} is not a folder (a link or missing); fix it and rerun")
    if uid is not None and st.st_uid != uid:
        raise ToolError(f"{path} is owned by {user_name(st.st_uid)}, not by {user_name(uid)}; fix it and rerun")
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o077:
        os.chmod(path, mode & 0o700)
        room.did(f"{path}: mode {mode & 0o700:04o} (was {mode:04o}){why}")


def root_file(room: Classroom, path: Path, text: str, why: str) -> None:
    """`text` at `path`, root's, mode 0644. A link or another file found there is removed and the
    file written anew, never written through (it may be shared with another environment)."""
    path = Path(path)
    if path.is_symlink() or not path.is_file() or path.read_text() != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.unlink(missing_ok=True)
        path.write_text(text)
        room.did(f"wrote {path} ({why})")
    st = os.lstat(path)
    if st.st_uid != 0 or stat.S_IMODE(st.st_mode) != 0o644:
        os.chown(path, 0, 0)
        os.chmod(path, 0o644)
        room.did(f"{path}: root's, mode 0644")


def secret_file(room: Classroom, path: Path, what: str) -> None:
    """A random secret at `path`, made once: a plain file of root's, mode 0600."""
    if not os.path.lexists(path):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32) + "\n")
        room.did(f"wrote {path} ({what}, root alone)")
    st = os.lstat(path)
    if not stat.S_ISREG(st.st_mode) or st.st_uid != 0:
        raise ToolError(f"{path} is not a plain file of root's; look at it, remove it and rerun")
    if stat.S_IMODE(st.st_mode) != 0o600:
        os.chmod(path, 0o600)
        room.did(f"{path}: mode 0600 (was {stat.S_IMODE(st.st_mode):04o})")


def private_file(room: Classroom, path: Path) -> None:
    """A file that exists (a database the hub made) readable by its owner alone."""
    if os.path.lexists(path) and stat.S_ISREG(os.lstat(path).st_mode) and stat.S_IMODE(os.lstat(path).st_mode) & 0o077:
        os.chmod(path, 0o600)
        room.did(f"{path}: mode 0600")
