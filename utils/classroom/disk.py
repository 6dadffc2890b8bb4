"""Disk per student: the set-up sets no quotas; where the file systems holding the homes and the
exchange have none, it says so in what is left to the administrator."""

from __future__ import annotations

import os
from pathlib import Path

from utils.classroom.room import Classroom
from utils.classroom.users import home_of

QUOTA_OPTIONS = {"usrquota", "uquota", "quota", "usrjquota", "uqnoenforce"}


def mount_of(path: Path) -> tuple[str, str, set[str]]:
    """(mount point, file system type, options) of the file system holding `path`."""
    best = ("/", "", set())
    real = os.path.realpath(path)
    with open("/proc/self/mounts") as f:
        for line in f:
            dev, point, fstype, opts = line.split()[:4]
            point = point.replace("\\040", " ")
            if (real == point or real.startswith(point.rstrip("/") + "/")) and len(point) >= len(best[0]):
                best = (point, fstype, set(opts.split(",")))
    return best


def quota_todo(room: Classroom) -> None:
    seen = set()
    for path in (Path(room.exchange), *(home_of(n) for n in room.students)):
        point, fstype, opts = mount_of(path)
        if point in seen:
            continue
        seen.add(point)
        if not opts & QUOTA_OPTIONS:
            room.todo.append(f"{point} ({fstype}, holding {path}) has no user quotas: a student can fill it; mount "
                             "it with usrquota and set one per student (setquota), or give the exchange a file "
                             "system of its own (docs/instructors.md)")
