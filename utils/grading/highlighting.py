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


def _key(converter: Highlight2HTML, source, language, metadata) -> tuple | None:
    """What nbconvert's HTML depends on; None where it is not plain data of the usual types (a
    non-string source, language or magics language: made by nbconvert itself, never remembered)."""
    magics = metadata.get("magics_language", "") if isinstance(metadata, dict) else ""
    language = language or converter.pygments_lexer
    if not (isinstance(source, str) and isinstance(language, str) and isinstance(magics, str)):
        return None
    has_magics = isinstance(metadata, dict) and "magics_language" in metadata
    return (source, language, has_magics, magics, repr(sorted(converter.extra_formatter_options.items())))


def _highlighted(self: Highlight2HTML, source, language=None, metadata=None):
    key = _key(self, source, language, metadata)
    made = _made.get(key) if key is not None else None
    if made is not None:
        return made
    return _highlight(self, source, language, metadata)


def install() -> None:
    """Every Highlight2HTML of this process (and the children it forks) looks up what was remembered."""
    Highlight2HTML.__call__ = _highlighted


def remember(course: str | Path) -> None:
    """Highlight the code cells of `course`'s source notebooks (source/LESSON/*.ipynb) as a
    feedback page will: the graded notebook's Pygments lexer, the exporter's default options. Each
    notebook once per process (by its bytes' digest). Only a cache: a notebook or cell that cannot
    be read or highlighted is left for the children to highlight as nbconvert does (never raises)."""
    install()
    for path in sorted(Path(course, "source").glob("*/*.ipynb")):
        try:
            _remember_notebook(path)
        except Exception:  # noqa: BLE001 - nothing remembered from it; nbconvert judges it on the page
            continue


def _remember_notebook(path: Path) -> None:
    global _size
    if path.is_symlink() or path.stat().st_size > MAX_NOTEBOOK_BYTES:
        return
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest in _read:
        return
    _read.add(digest)
    nb = nbformat.reads(data.decode(), as_version=4)
    # the page's lexer is the graded notebook's, which its kernel wrote (ipykernel: ipython3)
    info = nb.metadata.get("language_info")
    lexer = info.get("pygments_lexer") if isinstance(info, dict) else None
    converter = Highlight2HTML(pygments_lexer=lexer if isinstance(lexer, str) and lexer else KERNEL_LEXER)
    for cell in nb.cells:
        if cell.get("cell_type") != "code" or _size > MAX_REMEMBERED:
            continue
        source, metadata = cell.get("source"), cell.get("metadata", {})
        key = _key(converter, source, None, metadata)
        if key is not None and key not in _made:
            try:
                _made[key] = _highlight(converter, source, None, metadata)
            except Exception:  # noqa: BLE001 - this cell is left to nbconvert on the page
                continue
            _size += len(_made[key]) + len(source)
