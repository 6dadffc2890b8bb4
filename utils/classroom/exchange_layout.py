"""nbgrader's exchange on the class server: the root root-owned, mode 1777 (nbgrader's release
insists on o+rwx), and the course's folder in it with inbound/, outbound/ and feedback/, made and
owned by the instructor before any student can take the name."""

from __future__ import annotations

import os
import pwd
from pathlib import Path

from utils.classroom.owned import folder
from utils.classroom.room import Classroom
from utils.classroom.users import check_course_group

# nbgrader's own modes (inbound write-only for students, feedback listable by nobody), and the
# sticky bit on inbound, which nbgrader leaves out: nobody moves or removes another's submission;
# inbound's group is the instructor's, with the setgid bit, so every submission folder gets it
COURSE_FOLDERS = (("", 0o755), ("outbound", 0o755), ("inbound", 0o3733), ("feedback", 0o711))


def exchange(room: Classroom) -> None:
    root = Path(room.exchange)
    for p in reversed(root.parents):
        if not p.exists():
            p.mkdir(mode=0o755)
            os.chown(p, 0, 0)
    folder(room, root, uid=0, mode=0o1777, what="the exchange root: everyone may create, nobody may remove another's")
    pw = pwd.getpwnam(room.instructor)
    check_course_group(room, pw.pw_gid)
    course = root / room.course_id
    for name, mode in COURSE_FOLDERS:
        folder(room, course / name if name else course, uid=pw.pw_uid, gid=pw.pw_gid, mode=mode,
               what=f"the instructor {room.instructor}'s, mode {mode:04o}",
               refusal=": someone created it before the setup")
