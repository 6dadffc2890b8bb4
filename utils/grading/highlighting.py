"""The lesson's code highlighted once per grading worker, not once per feedback page.

A feedback page shows every code cell highlighted by nbconvert's `Highlight2HTML` (pygments with
IPython's lexer): lesson 2's 47 code cells cost 0.16 CPU-s a page, and about nine tenths of their
text is the lesson's own (given code, tests), the same on every student's page. What it returns
depends on nothing but the cell's source, the language, the cell's magics language and the
formatter options, so a grading worker highlights the code cells of the lesson's source notebooks
once (`remember`, before it forks the child that writes a student's feedback) and every child it
forks finds them made (`install`); what a child highlights itself, a student's own code, stays
in that child. Nothing of one student reaches another: what is remembered comes from source/ alone.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import nbformat
from nbconvert.filters.highlight import Highlight2HTML

MAX_NOTEBOOK_BYTES = 16 << 20   # a source notebook larger than this is not read for it
MAX_REMEMBERED = 64 << 20       # characters of highlighted HTML kept in all
KERNEL_LEXER = "ipython3"        # the Pygments lexer ipykernel names in the notebooks it runs

_highlight = Highlight2HTML.__call__
_made: dict[tuple, str] = {}     # (source, language, magics language, formatter options) -> HTML
_read: set[str] = set()          # digests of the source notebooks already highlighted
_size = 0


def _key(converter: Highlight2HTML, source: str, language, metadata) -> tuple:
    magics = metadata.get("magics_language") if isinstance(metadata, dict) else None
    return (source, language or converter.pygments_lexer, str(magics),
            repr(sorted(converter.extra_formatter_options.items())))


def _highlighted(self: Highlight2HTML, source, language=None, metadata=None):
    if isinstance(source, str):
        made = _made.get(_key(self, source, language, metadata))
        if made is not None:
            return made
    return _highlight(self, source, language, metadata)


def install() -> None:
    """Every Highlight2HTML of this process (and the children it forks) looks up what was remembered."""
    Highlight2HTML.__call__ = _highlighted


def remember(course: str | Path) -> None:
    """Highlight the code cells of `course`'s source notebooks (source/LESSON/*.ipynb) as a
    feedback page will: the graded notebook's Pygments lexer, the exporter's default options. Each
    notebook once per process (by its bytes' digest); a notebook that cannot be read is skipped."""
    global _size
    install()
    for path in sorted(Path(course, "source").glob("*/*.ipynb")):
        try:
            if path.is_symlink() or path.stat().st_size > MAX_NOTEBOOK_BYTES:
                continue
            data = path.read_bytes()
            digest = hashlib.sha256(data).hexdigest()
            if digest in _read:
                continue
            _read.add(digest)
            nb = nbformat.reads(data.decode(), as_version=4)
        except (OSError, ValueError, UnicodeDecodeError, nbformat.reader.NotJSONError):
            continue
        # the page's lexer is the graded notebook's, which its kernel wrote (ipykernel: ipython3)
        converter = Highlight2HTML(pygments_lexer=nb.metadata.get("language_info", {}).get("pygments_lexer") or KERNEL_LEXER)
        for cell in nb.cells:
            if cell.cell_type != "code" or _size > MAX_REMEMBERED:
                continue
            key = _key(converter, cell.source, None, cell.metadata)
            if key not in _made:
                _made[key] = _highlight(converter, cell.source, None, cell.metadata)
                _size += len(_made[key])
