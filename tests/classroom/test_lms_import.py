"""The LMS import (utils/classroom/lms_import.py) with hostile uploads among fair ones: the student
id comes only from the name the LMS gave an upload, one student's upload never stops the others'
(each hostile one is refused alone and named), and what an upload unpacks to is capped per student
before anything is written. No process: the import reads archives in this process."""

from __future__ import annotations

import io
import stat
from pathlib import Path

import pytest

from helpers import zip_of

from utils.classroom.workflow import ImportCaps, lms_import, zip_collect
from utils.lessons import REPO

LESSON, NB = "01_tiny", "tiny.ipynb"


def _nb(who: str) -> bytes:
    return ('{"cells": [], "metadata": {"who": "%s"}, "nbformat": 4, "nbformat_minor": 5}' % who).encode()



def _course(tmp_path: Path) -> Path:
    root = tmp_path / "course"
    (root / "release" / LESSON).mkdir(parents=True)
    (root / "release" / LESSON / NB).write_bytes(_nb("release"))
    return root


def _submitted(root: Path) -> dict[str, bytes]:
    base = root / "submitted"
    return {d.name: (d / LESSON / NB).read_bytes() for d in base.iterdir() if (d / LESSON / NB).exists()} \
        if base.is_dir() else {}


def _written(root: Path) -> set[str]:
    """Every file under the course but the release and the download copies."""
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()
            and not str(p.relative_to(root)).startswith(("release", "downloaded/"))}


def _nested(depth: int, inner: bytes) -> bytes:
    data = inner
    for _ in range(depth):
        data = zip_of({"more.zip": data})
    return data


def test_the_student_id_comes_from_the_lms_name_never_from_inside_an_upload(tmp_path):
    """mallory uploads a zip holding a notebook named for carol (as nbgrader's zip_collect
    unpacked it, carol's submission became mallory's file): carol keeps her own, mallory's zip is
    hers alone."""
    root = _course(tmp_path)
    lms = tmp_path / "submissions.zip"
    lms.write_bytes(zip_of({
        "carol_1001_5001_tiny.ipynb": _nb("carol"),
        "mallory_1002_5002_upload.zip": zip_of({"zcarol_1001_5001_tiny.ipynb": _nb("mallory as carol"),
                                              "carol/tiny.ipynb": _nb("mallory in carol's folder")}),
    }))
    zip_collect(root, LESSON, [lms])
    got = _submitted(root)
    assert got.get("carol") == _nb("carol"), got
    assert got.get("mallory") == _nb("mallory in carol's folder"), got   # her zip's one notebook of the lesson
    assert "zcarol" not in got


HOSTILE = {   # student -> (their upload, the words their refusal must hold)
    "dup": (zip_of({"tiny.ipynb": _nb("a"), "backup/tiny.ipynb": _nb("b")}), "two notebooks"),
    "dotdot": (zip_of({"../../tiny.ipynb": _nb("x")}), "unsafe name"),
    "absolute": (zip_of({"/etc/tiny.ipynb": _nb("x")}), "unsafe name"),
    "link": (zip_of({"tiny.ipynb": b"/etc/passwd"}, {"tiny.ipynb": stat.S_IFLNK}), "a link"),
    "device": (zip_of({"tiny.ipynb": b""}, {"tiny.ipynb": stat.S_IFCHR}), "a device"),
    "broken": (b"PK\x03\x04 not a zip at all", "could not be read"),
    "deep": (_nested(3, zip_of({"tiny.ipynb": _nb("deep")})), "deep"),
    "bomb": (zip_of({f"f{i}.ipynb": b"\0" * 1_000_000 for i in range(40)}), "over the cap"),
    "many": (zip_of({f"n{i}.txt": b"" for i in range(600)}), "entries"),
}


def test_each_hostile_upload_refuses_its_student_alone_and_names_them(tmp_path, capsys):
    root = _course(tmp_path)
    entries = {f"{s}_1_2_upload.zip": data for s, (data, _) in HOSTILE.items()}
    entries |= {f"fair{i}_1_2_tiny.ipynb": _nb(f"fair{i}") for i in range(3)}
    entries["fair3_1_2_work.zip"] = zip_of({"tiny.ipynb": _nb("fair3"), "notes.txt": b"mine"})
    lms = tmp_path / "submissions.zip"
    lms.write_bytes(zip_of(entries))
    result = lms_import(root, LESSON, [lms])
    assert _submitted(root) == {f"fair{i}": _nb(f"fair{i}") for i in range(4)}
    assert set(result.refused) == set(HOSTILE), result.refused
    for student, (_, words) in HOSTILE.items():
        assert words in result.refused[student], (student, result.refused[student])
    notes = (root / "refused" / f"{LESSON}.txt").read_text()
    assert all(f"zip-collect {s}:" in notes for s in HOSTILE), notes
    assert not any(s in p for p in _written(root) for s in HOSTILE), _written(root)
    # printed too, one line a student
    zip_collect(root, LESSON, [lms], force=True)
    out = capsys.readouterr().out
    assert all(f"zip-collect: refused {s}:" in out for s in HOSTILE), out


def test_an_upload_is_read_under_the_caps_before_anything_is_written(tmp_path):
    """Declared sizes are checked before reading, and the bytes read are counted: an entry that
    declares less than it holds never brings more than the cap into memory or onto disk."""
    root = _course(tmp_path)
    caps = ImportCaps(max_bytes=200_000, max_entries=50, max_depth=2)
    # 10 MB of zeros that declares 1,000 bytes: zipfile stops at the declared size and the CRC fails
    liar = bytearray(zip_of({"tiny.ipynb": b"\0" * 10_000_000}))
    for sig in (b"PK\x03\x04", b"PK\x01\x02"):   # the local header and the central directory record
        at = liar.find(sig)
        field = at + (22 if sig == b"PK\x03\x04" else 24)
        liar[field:field + 4] = (1000).to_bytes(4, "little")
    lms = tmp_path / "submissions.zip"
    lms.write_bytes(zip_of({"liar_1_2_upload.zip": bytes(liar),
                          "big_1_2_upload.zip": zip_of({"tiny.ipynb": b" " * 300_000}),
                          "fair_1_2_tiny.ipynb": _nb("fair")}))
    result = lms_import(root, LESSON, [lms], caps=caps)
    assert set(result.refused) == {"liar", "big"}, result.refused
    assert "declares" in result.refused["big"] and "cap" in result.refused["big"]
    assert _submitted(root) == {"fair": _nb("fair")}
    assert not any("liar" in p or "big" in p for p in _written(root))


def test_the_bytes_read_are_counted_whatever_was_declared():
    """The streaming count on its own: a stream that holds more than its declared size is stopped
    one byte past what is left of the cap."""
    from utils.classroom.lms_import import Refused, _Student, ImportResult
    one = _Student(ImportCaps(max_bytes=1000), set(), ImportResult(collected=[]))

    class Counting(io.BytesIO):
        taken = 0

        def read(self, n=-1):
            data = super().read(n)
            Counting.taken += len(data)
            return data

    with pytest.raises(Refused, match="declared 10"):
        one.read(Counting(b"x" * 10_000_000), 10, "upload")
    assert Counting.taken <= 1001


def test_the_old_name_based_entry_points_still_answer():
    """workflow.py re-exports what moved, for its CLI and nbgrader_config.py."""
    from utils.classroom import workflow
    from utils.classroom.collect import COLLECT_CLASS
    assert workflow.OwnerCheckedCollect.__module__ == "utils.classroom.collect"
    assert COLLECT_CLASS == "utils.classroom.collect.OwnerCheckedCollect"
    assert COLLECT_CLASS in (REPO / "nbgrader_config.py").read_text()


def test_a_fair_upload_under_another_name_is_kept_when_it_is_the_only_notebook(tmp_path):
    """The LMS names a notebook the student called differently (doe_1_2_my_tiny.ipynb): it is
    filed under its own name for grading to take as the one notebook there is (as collect does);
    beside the lesson's own notebook, another is left out."""
    root = _course(tmp_path)
    lms = tmp_path / "submissions.zip"
    lms.write_bytes(zip_of({"doe_1_2_my_tiny.ipynb": _nb("doe"), "roe_1_2_tiny.ipynb": _nb("roe"),
                          "roe_1_2_scratch.ipynb": _nb("roe's scratch")}))
    result = lms_import(root, LESSON, [lms])
    assert result.collected == ["doe", "roe"] and not result.refused, result
    assert (root / "submitted" / "doe" / LESSON / "my_tiny.ipynb").read_bytes() == _nb("doe")
    assert sorted(p.name for p in (root / "submitted" / "roe" / LESSON).iterdir()) == [NB]
