"""utils.classroom's checks that need no users or root: the class list, names, who can run what.
The whole setup runs in tests/test_hub_classroom.py."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from utils import classroom
from utils.coursedir import ToolError


def test_students_file_plain_or_roster_csv(tmp_path):
    plain = tmp_path / "students.txt"
    plain.write_text("# the class\nalice\n\nbob\nalice\n")
    assert classroom.read_students(plain) == ["alice", "bob"]
    roster = tmp_path / "students.csv"
    roster.write_text("id,first_name,last_name,email\nalice,Alice,A,a@example.org\nbob_2,Bob,B,\n")
    assert classroom.read_students(roster) == ["alice", "bob_2"]


@pytest.mark.parametrize("name", ["Alice", "al+ice", "../x", "1abc", "a b"])
def test_unusable_names_are_named(tmp_path, name):
    f = tmp_path / "students.txt"
    f.write_text(f"alice\n{name}\n")
    with pytest.raises(ToolError, match="not a usable user name") as err:
        classroom.read_students(f)
    assert repr(name) in str(err.value)


def test_runnable_by_everyone_names_the_closed_folder():
    base = Path(tempfile.mkdtemp(prefix="classroom-test-"))   # pytest's own tmp_path is private
    try:
        base.chmod(0o755)
        top = base
        while top != top.parent:
            if not os.stat(top).st_mode & 0o001:
                pytest.skip(f"{top} is closed to other users already")
            top = top.parent
        folder = base / "private" / "bin"
        folder.mkdir(parents=True)
        exe = folder / "python"
        exe.write_text("#!/bin/sh\n")
        exe.chmod(0o755)
        (base / "private").chmod(0o755)
        assert classroom.runnable_by_everyone(exe) is None
        (base / "private").chmod(0o700)
        assert classroom.runnable_by_everyone(exe) == str(base / "private")
        (base / "private").chmod(0o755)
        exe.chmod(0o700)
        assert classroom.runnable_by_everyone(exe) == str(exe)
    finally:
        shutil.rmtree(base)


def test_setup_refuses_without_root(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(ToolError, match="as root"):
        classroom.require_root()


def test_pins_come_from_the_requirements():
    pins = classroom.pinned_requirements()
    assert any(p.startswith("nbgrader==") for p in pins) and any(p.startswith("jupyterhub==") for p in pins)
