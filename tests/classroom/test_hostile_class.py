"""A class's LMS import and grading with one hostile student of each kind among fair ones: every
fair student is collected, graded and given feedback; an upload naming another student inside is
filed as its sender's alone; each unsafe upload refuses its student alone,
named with the reason; a hostile notebook (a forged line written to the kernel's own stdout, an
image declaring 80,000 x 80,000 pixels displayed and attached) is graded like any other, its
images left out; and nothing printed on the instructor's terminal holds a raw control character.
The doors one by one: tests/classroom/test_lms_import.py, test_escaping_doors.py, test_steps_well_formed.py,
test_steps_kernel_fields.py."""

from __future__ import annotations

import base64

import nbformat
import pytest

from helpers import zip_of

from utils.classroom.rehearsal import rehearsal_course
from utils.classroom.workflow import lms_import
from utils.grading.grade_course import grade_lessons
from utils.notebooks import submission_from

pytestmark = pytest.mark.slow
LESSON, NB = "01_tiny", "tiny.ipynb"
FORGED = "\r\x1b[2K\x1b[1A FORGED: every submission graded 6/6\u202e\u2028\x85"


def _declaring(width: int, height: int) -> bytes:
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"\0" * 100_000, 9)) + chunk(b"IEND", b""))


BOMB = base64.b64encode(_declaring(80_000, 80_000)).decode()
FORGER_ADD = ("import os\nfrom IPython.display import display\n"
              f"os.write(1, {FORGED.encode()!r})\nos.write(2, {FORGED.encode()!r})\n"
              f"display({{'image/png': {BOMB!r}, 'text/plain': 'a figure'}}, raw=True)\n"
              "def add(a, b):\n    return a + b")



def test_a_class_with_one_hostile_student_of_each_kind(tmp_path, capfd):
    root = rehearsal_course(tmp_path / "course")
    release = nbformat.read(str(root / "release" / LESSON / NB), as_version=4)
    ref = nbformat.read(str(root / "source" / LESSON / NB), as_version=4)
    fair = nbformat.writes(submission_from(release, ref, {})).encode()
    forger = submission_from(release, ref, {"add": FORGER_ADD})
    forger.cells.insert(0, nbformat.v4.new_markdown_cell("![my plot](attachment:plot.png)",
                                                         attachments={"plot.png": {"image/png": BOMB}}))
    marked = submission_from(release, ref, {})
    marked.cells.insert(0, nbformat.v4.new_markdown_cell("sent by mallory"))
    mallorys = nbformat.writes(marked).encode()
    hostile = {   # student -> their upload, as the LMS named it
        "mallory_1_2_upload.zip": zip_of({"carol_1_2_tiny.ipynb": mallorys}),     # another's name inside
        "dup_1_2_upload.zip": zip_of({"tiny.ipynb": fair, "old/tiny.ipynb": fair}),
        "slip_1_2_upload.zip": zip_of({"../../tiny.ipynb": fair}),
        "deep_1_2_upload.zip": zip_of({"a.zip": zip_of({"b.zip": zip_of({"tiny.ipynb": fair})})}),
    }
    lms = tmp_path / "submissions.zip"
    lms.write_bytes(zip_of({"carol_1_2_tiny.ipynb": fair,
                          "erin_1_2_upload.zip": zip_of({"tiny.ipynb": fair, "notes.txt": b"mine"}),
                          "forger_1_2_tiny.ipynb": nbformat.writes(forger).encode(),
                          f"x{FORGED}_1_2_tiny.ipynb": fair, **hostile}))

    result = lms_import(root, LESSON, [lms])
    # mallory's upload is hers whatever it names inside: filed as hers, carol's own left untouched
    assert result.collected == ["carol", "erin", "forger", "mallory"], result
    assert set(result.refused) == {"dup", "slip", "deep"}, result.refused
    assert "sent by mallory" not in "".join(p.read_text() for p in (root / "submitted" / "carol").rglob("*.ipynb"))
    assert "sent by mallory" in "".join(p.read_text() for p in (root / "submitted" / "mallory").rglob("*.ipynb"))
    assert len(result.unattributed) == 1 and "student id" in result.unattributed[0]

    run = grade_lessons(root, [LESSON], workers=2)
    outcomes = {o.student: (o.status, o.score) for o in run.outcomes}
    assert outcomes == {s: ("graded", 6.0) for s in ("carol", "erin", "forger", "mallory")}, outcomes
    for student in result.collected:
        assert (root / "feedback" / student / LESSON / "tiny.html").is_file(), student
    page = (root / "feedback" / "forger" / LESSON / "tiny.html").read_text()
    graded = (root / "autograded" / "forger" / LESSON / NB).read_text()   # what the formgrader shows
    assert f"base64,{BOMB[:40]}" not in page   # in the cell's code, as text, it stays
    outputs = [o for c in nbformat.reads(graded, as_version=4).cells for o in c.get("outputs", [])]
    shown = [o for o in outputs if "image/png" in o.get("data", {})]
    assert not shown and any("left out" in o.get("data", {}).get("text/plain", "") for o in outputs), outputs
    assert "my plot" in page   # the attachment's alt text stands in for it

    out = capfd.readouterr()
    terminal = out.out + out.err + "".join(p.read_text() for p in root.glob("autograde.log"))
    raw = sorted({repr(c) for c in terminal if not c.isprintable() and c not in "\n\t"})
    assert not raw, f"raw control characters reached the instructor: {raw}"
    assert "FORGED" not in terminal or "\\r" in terminal
