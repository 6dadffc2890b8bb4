"""WellFormed: the first sanitize step. A submitted notebook is hostile data: nbformat accepts any
type in any metadata field, and nbgrader's own steps (and ours) assume dicts, strings and numbers.
Every cell is rebuilt from what it may hold, typed (of its metadata only nbgrader's, tags,
editable and deletable are kept): a cell that is not a dict or of an unknown type
is dropped, a source that is not text becomes text, metadata that is not a dict becomes {}, and the
cell's nbgrader metadata keeps only its known keys with values of their type (nbgrader then restores
the graded cells from the gradebook as usual). Outputs are dropped: the grader runs the notebook.
A Markdown cell keeps its attachments (an image pasted into it) that are images the feedback page
can show: PNG, JPEG or GIF whose bytes are what they say, at most MAX_ATTACHMENT bytes each and
MAX_ATTACHMENTS a notebook, of at most images.MAX_PIXELS pixels, decoded and written again by
Pillow (steps/images.py); SVG (a document that can hold script) and anything else is
dropped, and the page shows the image's alt text instead (safe_html.SafeMarkdown rewrites a
reference to an attachment that is not there; nbconvert would stop the whole page).
utils.grading.submissions.preflight reads submissions through `well_formed` too.
"""

from __future__ import annotations

import math

from nbformat.corpus.words import generate_corpus_id as random_cell_id
from nbformat.notebooknode import NotebookNode, from_dict
from nbgrader.preprocessors import NbGraderPreprocessor

from utils.grading.steps.images import SIGNATURES as IMAGES, reencoded_b64

CELL_TYPES = ("code", "markdown", "raw")
NBGRADER_KEYS = {"grade": bool, "solution": bool, "locked": bool, "task": bool, "grade_id": str,
                 "points": (int, float), "schema_version": int, "checksum": str, "cell_type": str}
MAX_TEXT = 2_000_000   # characters of one cell's source kept
MAX_ATTACHMENT = 1 << 20        # bytes of one image attached to a Markdown cell
MAX_ATTACHMENTS = 4 << 20       # bytes of all of a notebook's attached images


def _text(value) -> str:
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        value = "".join(value)
    return value[:MAX_TEXT] if isinstance(value, str) else ""


def _image(mime, data, room: int) -> str | None:
    """The attachment's data decoded and re-encoded when it is an image of a kept type within
    `room` bytes and the pixel cap."""
    if mime not in IMAGES:
        return None
    return reencoded_b64(mime, data, min(room, MAX_ATTACHMENT))


def _attachments(given, room: list[int]) -> dict:
    """The kept images of a Markdown cell's attachments ({name: {mime: base64}}), `room[0]` the
    notebook's bytes left for them."""
    kept = {}
    if not isinstance(given, dict):
        return kept
    for name, bundle in list(given.items())[:20]:
        if not isinstance(name, str) or not 0 < len(name) <= 200 or not name.isprintable() or not isinstance(bundle, dict):
            continue
        for mime, data in bundle.items():
            image = _image(mime, data, room[0])
            if image is not None:
                kept[name] = {mime: image}
                room[0] -= len(image) * 3 // 4
                break
    return kept


def _nbgrader(meta) -> dict | None:
    if not isinstance(meta, dict):
        return None
    kept = {}
    for key, kind in NBGRADER_KEYS.items():
        value = meta.get(key)
        if isinstance(value, kind) and not (kind is not bool and isinstance(value, bool)):
            if key == "points" and not (math.isfinite(value) and 0 <= value < 1e9):
                continue
            if isinstance(value, str) and len(value) > 200:
                continue
            kept[key] = value
    if any(kept.get(k) for k in ("grade", "solution", "locked", "task")) and not kept.get("grade_id"):
        return None   # a role without a name nbgrader can check: an ordinary cell
    return kept


def well_formed_cell(cell, room: list[int] | None = None) -> NotebookNode | None:
    """`cell` rebuilt from its well-typed parts, or None for what is not a cell; `room` the bytes
    left for the notebook's attached images."""
    if not isinstance(cell, dict) or cell.get("cell_type") not in CELL_TYPES:
        return None
    given = cell.get("metadata") if isinstance(cell.get("metadata"), dict) else {}
    meta = {k: given[k] for k in ("editable", "deletable") if isinstance(given.get(k), bool)}
    if isinstance(given.get("tags"), list) and all(isinstance(t, str) for t in given["tags"][:50]):
        meta["tags"] = given["tags"][:50]
    grader = _nbgrader(given.get("nbgrader"))
    if grader is not None:
        meta["nbgrader"] = grader
    new = {"cell_type": cell["cell_type"], "metadata": meta, "source": _text(cell.get("source"))}
    if isinstance(cell.get("id"), str) and 0 < len(cell["id"]) <= 64:
        new["id"] = cell["id"]
    if cell["cell_type"] == "code":
        new.update(outputs=[], execution_count=None)
    if cell["cell_type"] == "markdown" and cell.get("attachments"):
        attachments = _attachments(cell.get("attachments"), room if room is not None else [MAX_ATTACHMENTS])
        if attachments:
            new["attachments"] = attachments
    return from_dict(new)


def well_formed(nb) -> NotebookNode:
    """The notebook `nb` with every cell well formed (in place, and returned)."""
    cells = nb.get("cells") if isinstance(nb.get("cells"), list) else []
    room = [MAX_ATTACHMENTS]
    nb["cells"] = [c for c in (well_formed_cell(c, room) for c in cells) if c is not None]
    if nb.get("nbformat_minor", 0) >= 5:   # cell ids are required from 4.5 on, and unique
        seen = set()
        for cell in nb["cells"]:
            if cell.get("id") in seen or "id" not in cell:
                cell["id"] = random_cell_id()
            seen.add(cell["id"])
    if not isinstance(nb.get("metadata"), dict):
        nb["metadata"] = from_dict({})
    return nb


class WellFormed(NbGraderPreprocessor):

    def preprocess(self, nb, resources):
        return well_formed(nb), resources
