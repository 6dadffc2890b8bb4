"""WellFormed, the first step: whatever a student's file holds comes out a valid nbformat notebook of
cells, with only the metadata nbgrader and Jupyter read (tests/steps_common.py says how these tests
are built)."""

from __future__ import annotations

import nbformat
import pytest
from nbformat.notebooknode import from_dict

from utils.grading.steps.well_formed import MAX_TEXT, WellFormed
from steps_common import JPEG, PNG, SVG


def well_formed(cells, minor=5, metadata=None):
    """A notebook of raw (possibly hostile) cells through WellFormed."""
    nb = from_dict({"nbformat": 4, "nbformat_minor": minor, "metadata": metadata or {}, "cells": cells})
    nb, _ = WellFormed().preprocess(nb, {})
    return nb


def test_well_formed_drops_what_is_not_a_cell_and_keeps_cells_in_order():
    cells = [{"cell_type": "markdown", "source": "first", "metadata": {}}, "a string", 42, None, [],
             {"cell_type": "heading", "source": "x"}, {"cell_type": ["code"], "source": "y"},
             {"source": "no type"}, {"cell_type": "code", "source": "last", "metadata": {}}]
    nb = well_formed(cells)
    assert [(c.cell_type, c.source) for c in nb.cells] == [("markdown", "first"), ("code", "last")]


@pytest.mark.parametrize("source, kept", [
    (["a = 1\n", "b = 2"], "a = 1\nb = 2"), ("plain", "plain"),
    (["a", 3], ""), ({"text": "x"}, ""), (None, ""), (12, ""),
])
def test_well_formed_makes_every_source_text(source, kept):
    assert well_formed([{"cell_type": "code", "source": source}]).cells[0].source == kept


def test_well_formed_cuts_a_huge_source():
    nb = well_formed([{"cell_type": "markdown", "source": "x" * (MAX_TEXT + 10)}])
    assert len(nb.cells[0].source) == MAX_TEXT


def test_well_formed_keeps_of_the_metadata_only_what_nbgrader_and_jupyter_read():
    given = {"editable": False, "deletable": "no", "tags": ["a", "b"], "execution": {"x": 1},
             "collapsed": True, "leak": "hidden"}
    nb = well_formed([{"cell_type": "code", "source": "", "metadata": given},
                      {"cell_type": "code", "source": "", "metadata": ["not", "a", "dict"]},
                      {"cell_type": "code", "source": "", "metadata": {"tags": ["ok", 3]}},
                      {"cell_type": "code", "source": "", "metadata": {"tags": [f"t{i}" for i in range(80)]}}])
    assert [c.metadata for c in nb.cells[:3]] == [{"editable": False, "tags": ["a", "b"]}, {}, {}]
    assert len(nb.cells[3].metadata.tags) == 50


ROLE = {"grade": True, "solution": False, "locked": True, "task": False, "grade_id": "t", "points": 2,
        "schema_version": 3, "checksum": "abc", "cell_type": "code"}


@pytest.mark.parametrize("given, kept", [
    (ROLE, ROLE),                                                       # every key of its type: kept
    (dict(ROLE, grade="yes", locked=1), {k: v for k, v in ROLE.items() if k not in ("grade", "locked")}),
    (dict(ROLE, points=True), {k: v for k, v in ROLE.items() if k != "points"}),      # bool is no number
    (dict(ROLE, schema_version=3.0), {k: v for k, v in ROLE.items() if k != "schema_version"}),
    (dict(ROLE, points=float("inf")), {k: v for k, v in ROLE.items() if k != "points"}),
    (dict(ROLE, points=-1), {k: v for k, v in ROLE.items() if k != "points"}),
    (dict(ROLE, points=1e12), {k: v for k, v in ROLE.items() if k != "points"}),
    (dict(ROLE, checksum="c" * 500), {k: v for k, v in ROLE.items() if k != "checksum"}),
    (dict(ROLE, extra={"x": 1}), ROLE),                                 # unknown keys dropped
    (dict(ROLE, grade_id=7), None),              # a role without a name nbgrader can check: a plain cell
    (dict(ROLE, grade_id="x" * 300), None),
    ("grade", None), ([ROLE], None),
    ({"grade": False, "solution": False, "locked": False, "task": False}, {"grade": False, "solution": False,
                                                                           "locked": False, "task": False}),
])
def test_well_formed_keeps_each_nbgrader_key_only_with_a_value_of_its_type(given, kept):
    cell = well_formed([{"cell_type": "code", "source": "", "metadata": {"nbgrader": given}}]).cells[0]
    assert cell.metadata.get("nbgrader") == kept


def test_well_formed_drops_outputs_and_counts_a_kernel_or_student_left():
    forged = {"cell_type": "code", "source": "x", "execution_count": 99, "attachments": {"a.png": {}},
              "outputs": [{"output_type": "execute_result", "data": {"text/plain": "5"}}]}
    md_cell = {"cell_type": "markdown", "source": "y", "outputs": [{"output_type": "stream"}], "execution_count": 3}
    code, text = well_formed([forged, md_cell]).cells
    assert code.outputs == [] and code.execution_count is None and "attachments" not in code
    assert "outputs" not in text and "execution_count" not in text


def test_well_formed_cell_ids_are_unique_and_valid_from_nbformat_4_5():
    cells = [{"cell_type": "code", "source": "", "id": "same"}, {"cell_type": "code", "source": "", "id": "same"},
             {"cell_type": "code", "source": ""}, {"cell_type": "code", "source": "", "id": "i" * 65},
             {"cell_type": "code", "source": "", "id": 12}, {"cell_type": "code", "source": "", "id": "kept"}]
    ids = [c.id for c in well_formed(cells).cells]
    assert ids[0] == "same" and ids[5] == "kept" and len(set(ids)) == 6
    assert all(isinstance(i, str) and 0 < len(i) <= 64 for i in ids)
    assert all("id" not in c for c in well_formed([{"cell_type": "code", "source": ""}], minor=4).cells)


def test_a_hostile_notebook_comes_out_valid_nbformat():
    cells = [{"cell_type": "code", "source": ["a", None], "metadata": {"nbgrader": {"grade": "x", "points": []}},
              "outputs": "no", "execution_count": "1"},
             {"cell_type": "raw", "source": 5, "metadata": 5}, "junk",
             {"cell_type": "markdown", "source": "ok", "metadata": {"nbgrader": ROLE, "tags": "t"}, "id": None}]
    nb = well_formed(cells)
    nbformat.validate(nb)
    assert [c.cell_type for c in nb.cells] == ["code", "raw", "markdown"]


def test_well_formed_survives_cells_and_metadata_that_are_not_containers():
    nb = from_dict({"nbformat": 4, "nbformat_minor": 5, "metadata": "x", "cells": {"0": {"cell_type": "code"}}})
    nb, _ = WellFormed().preprocess(nb, {})
    assert nb.cells == [] and nb.metadata == {}


def pasted(attachments, source="![pasted](attachment:image.png)"):
    return {"cell_type": "markdown", "metadata": {}, "source": source, "attachments": attachments}


def test_an_image_pasted_into_markdown_is_kept_and_what_is_not_one_is_dropped():
    nb = well_formed([pasted({"image.png": {"image/png": PNG}, "photo.jpg": {"image/jpeg": JPEG},
                              "drawing.svg": {"image/svg+xml": SVG}, "fake.png": {"image/png": "PHNjcmlwdD4="},
                              "page.html": {"text/html": "PHA+"}, "split.png": {"image/png": [PNG[:20], PNG[20:]]},
                              7: {"image/png": PNG}, "bad.png": "not a bundle"})])
    assert nb.cells[0].attachments == {"image.png": {"image/png": PNG}, "photo.jpg": {"image/jpeg": JPEG},
                                       "split.png": {"image/png": PNG}}
    nbformat.validate(nb)


def test_attached_images_are_capped_per_image_and_per_notebook():

    from utils.grading.steps import well_formed as module

    big, huge = _noise(560, 560), _noise(600, 600)   # just under and over MAX_ATTACHMENT as PNGs
    assert len(big) * 3 // 4 < module.MAX_ATTACHMENT < len(huge) * 3 // 4
    cells = [pasted({"image.png": {"image/png": big}}) for _ in range(6)] + [pasted({"image.png": {"image/png": huge}})]
    kept = [bool(c.get("attachments")) for c in well_formed(cells).cells]
    assert kept == [True] * (module.MAX_ATTACHMENTS // module.MAX_ATTACHMENT) + [False] * (7 - module.MAX_ATTACHMENTS // module.MAX_ATTACHMENT)


def test_attachments_of_other_cells_are_dropped():
    cell = {"cell_type": "code", "metadata": {}, "source": "x", "attachments": {"image.png": {"image/png": PNG}}}
    assert "attachments" not in well_formed([cell]).cells[0]


def _noise(width: int, height: int) -> str:
    """A PNG of random pixels (it does not compress): about 3 bytes a pixel."""
    import base64
    import io
    import random
    from PIL import Image
    out = io.BytesIO()
    Image.frombytes("RGB", (width, height), random.Random(1).randbytes(width * height * 3)).save(out, "PNG")
    return base64.b64encode(out.getvalue()).decode()


def declaring(width: int, height: int) -> bytes:
    """A tiny PNG whose header (IHDR, written here) declares `width` x `height` grey pixels, with a
    little compressed data: what a browser would allocate width * height bytes for."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\0" * 100_000, 9))
            + chunk(b"IEND", b""))


@pytest.mark.parametrize("size", [(80_000, 80_000), (5_000, 5_000), (100_000, 1)])
def test_an_image_declaring_more_pixels_than_the_cap_is_dropped_from_its_header_alone(size):
    """A crafted PNG of a few hundred bytes declaring 80,000 x 80,000 pixels (25 GB decoded) is
    dropped, the page shows the alt text; the header is read, nothing is decoded."""
    import base64
    import time
    raw = declaring(*size)
    assert len(raw) < 1000
    start = time.perf_counter()
    nb = well_formed([pasted({"image.png": {"image/png": base64.b64encode(raw).decode()}})])
    assert "attachments" not in nb.cells[0] and time.perf_counter() - start < 1.0
    # the control: the same crafted file declaring a small image is kept (decoded and written again)
    from utils.grading.steps.images import image_problem
    assert image_problem("image/png", declaring(300, 300)) is None
    assert image_problem("image/png", raw).startswith(("an image of", "an image of more pixels"))


def test_a_kept_image_is_decoded_and_written_again():
    """What reaches the page is Pillow's own encoding of the decoded pixels: bytes after the image's
    end, or chunks a browser reads and Pillow does not, are not carried over."""
    import base64
    import struct
    import zlib
    png = base64.b64decode(PNG)
    text = b"tEXt" + b"Comment\0<script>alert(1)</script>"
    chunk = struct.pack(">I", len(text) - 4) + text + struct.pack(">I", zlib.crc32(text))
    for raw in (png + b"<script>alert(1)</script>", png[:33] + chunk + png[33:]):   # after IEND; a text chunk
        kept = well_formed([pasted({"image.png": {"image/png": base64.b64encode(raw).decode()}})]).cells[0].attachments
        assert base64.b64decode(kept["image.png"]["image/png"]) == png
