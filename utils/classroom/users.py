"""The class's accounts: every student and the instructor exist (made with --create-users), their
homes private, the instructor's group free of students, and running a program as one of them."""

from __future__ import annotations

import grp
import os
import pwd
import subprocess
from pathlib import Path

from utils.classroom.owned import closed_to_others
from utils.classroom.room import Classroom, ToolError


def exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


def home_of(name: str) -> Path:
    return Path(pwd.getpwnam(name).pw_dir)


def ensure_users(room: Classroom, create: bool, home_base: Path | None = None) -> None:
    missing = [name for name in [room.instructor, *room.students] if not exists(name)]
    if missing and not create:
        raise ToolError(f"no such user(s): {', '.join(missing)}; create them first (useradd -m NAME, then "
                        "passwd NAME) or pass --create-users")
    for name in missing:
        args = ["useradd", "--create-home", "--shell", "/bin/bash"]
        if home_base is not None:
            args += ["--base-dir", str(home_base)]
        subprocess.run([*args, name], check=True, capture_output=True, text=True)
        room.did(f"created user {name} (password locked: set one with passwd {name})")
    if missing:
        room.todo.append(f"set a password for the new user(s) {', '.join(missing)} (passwd NAME or chpasswd)")


def private_homes(room: Classroom) -> None:
    """Every home of the class mode 0700 at most: no student reads another's work or secrets."""
    for name in [room.instructor, *room.students]:
        closed_to_others(room, home_of(name), "", uid=pwd.getpwnam(name).pw_uid)


def check_course_group(room: Classroom, gid: int) -> None:
    """Submissions are readable by the instructor's primary group (inbound/'s, setgid): no student
    may be in it."""
    group = grp.getgrgid(gid)
    inside = [n for n in room.students if n in group.gr_mem or pwd.getpwnam(n).pw_gid == gid]
    if inside:
        raise ToolError(f"the instructor's group {group.gr_name} holds student(s) {', '.join(inside)}: every "
                        "submission is readable by that group. Give the instructor a group of their own "
                        "(usermod -g) or take the students out of it, and rerun")


def as_user(name: str, args: list[str], cwd: Path | None = None, **kw) -> subprocess.CompletedProcess:
    """Run `args` as user `name`: their uid, gid and groups, HOME and a plain PATH."""
    pw = pwd.getpwnam(name)
    env = {"HOME": pw.pw_dir, "USER": name, "LOGNAME": name, "PATH": "/usr/local/bin:/usr/bin:/bin",
           "LANG": os.environ.get("LANG", "C.UTF-8")}
    env.update(kw.pop("env", {}))
    return subprocess.run(args, cwd=str(cwd or pw.pw_dir), env=env, user=pw.pw_uid, group=pw.pw_gid,
                          extra_groups=os.getgrouplist(name, pw.pw_gid), capture_output=True, text=True, **kw)
