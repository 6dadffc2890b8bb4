"""nbgrader's submit for a class on one server: the submission private to its student.

`python -m utils.classroom setup` copies this file into the class's environment as the module
`prefill_decode_exchange` and names `PrivateSubmit` in each student's ~/.jupyter/nbgrader_config.py
(c.ExchangeFactory.submit), so `nbgrader submit` in a terminal and the Assignments tab's Submit
both use it. Only the standard library and nbgrader: it runs in the students' servers.

nbgrader's own submit leaves the submission folder in inbound/ writable by everyone (mode 0777)
and its files readable by everyone, hidden only by a random name. Here, once nbgrader has copied
the files, the submission folder is made 0750: its owner (the student) and its group alone may
enter it; everyone else can neither list nor read nor change nor remove anything in it. Its
group is inbound/'s, which the setup makes the instructor's group (no student in it) and sets on
inbound/ with the setgid bit, so every new submission folder inherits it; the instructor's collect
enters through it. What is inside is made readable (folders 0755, files 0644) for the instructor,
who reaches it through the folder alone. (A student who is not in that group cannot give her
files that group: nbgrader's copy drops the setgid bit, so they keep hers.) Where the folder has
no such group (an exchange not laid out by the setup) it is left as nbgrader made it and a
warning says why.
"""

from __future__ import annotations

import os
import stat

from nbgrader.exchange.default.submit import ExchangeSubmit

FOLDER_MODE, INNER_DIR_MODE, FILE_MODE = 0o750, 0o755, 0o644


def make_private(folder: str) -> None:
    """The submission folder 0750 (first, so nobody else can enter while the rest changes), what
    is in it readable through it: folders 0755, plain files 0644, anything else (a link) as is."""
    os.chmod(folder, FOLDER_MODE)
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in filenames:
            path = os.path.join(dirpath, name)
            if stat.S_ISREG(os.lstat(path).st_mode):
                os.chmod(path, FILE_MODE)
        for name in dirnames:
            path = os.path.join(dirpath, name)
            if stat.S_ISDIR(os.lstat(path).st_mode):
                os.chmod(path, INNER_DIR_MODE)


class PrivateSubmit(ExchangeSubmit):
    """nbgrader's submit, then the submission closed to everyone but its student and the
    instructor's group."""

    def copy_files(self):
        super().copy_files()
        dest = os.path.join(self.inbound_path, self.assignment_filename)
        inbound = os.stat(self.inbound_path)
        group = os.lstat(dest).st_gid
        if not inbound.st_mode & stat.S_ISGID or group != inbound.st_gid or group in os.getgroups() + [os.getgid()]:
            self.log.warning(f"{self.inbound_path} gives submissions no course group of their own (setgid, a "
                             "group you are not in): the submission is left readable by everyone, as nbgrader makes it")
            return
        try:
            make_private(dest)
        except OSError as err:
            self.log.warning(f"could not make the submission private ({err}); it is readable by others")
