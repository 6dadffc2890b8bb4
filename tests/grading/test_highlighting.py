"""The lesson's code highlighted once per worker (utils/grading/highlighting.py): the same HTML as
nbconvert's own, for the source's cells only, and looked up instead of made again."""

from __future__ import annotations

import nbformat
import pytest
from nbconvert.filters import highlight as nbconvert_highlight
from nbconvert.filters.highlight import Highlight2HTML

from utils.grading import highlighting
from utils.lessons import REPO

ORIGINAL = Highlight2HTML.__call__


@pytest.fixture()
def fresh(monkeypatch):
    """A process whose memory of highlighted code is empty, restored afterwards."""
    monkeypatch.setattr(highlighting, "_made", {})
    monkeypatch.setattr(highlighting, "_read", set())
    monkeypatch.setattr(highlighting, "_size", 0)
    monkeypatch.setattr(Highlight2HTML, "__call__", ORIGINAL)
    made = []
    real = nbconvert_highlight._pygments_highlight
    monkeypatch.setattr(nbconvert_highlight, "_pygments_highlight",
                        lambda source, *a, **k: made.append(source) or real(source, *a, **k))
    return made


def _code(lesson_glob="*"):
    cells = []
    for path in sorted((REPO / "source").glob(f"{lesson_glob}/*.ipynb")):
        cells += [c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]
    return cells


def test_a_page_finds_the_lessons_code_made_and_gets_nbconvert_s_own_html(fresh):
    cells = _code()
    plain = Highlight2HTML(pygments_lexer="ipython3")
    expected = [ORIGINAL(plain, c.source, metadata=c.metadata) for c in cells]
    highlighting.remember(REPO)
    fresh.clear()
    assert [plain(c.source, metadata=c.metadata) for c in cells] == expected
    assert fresh == []   # none made again: the control above made each one
    highlighting.remember(REPO)   # each notebook once per process
    assert fresh == []


def test_what_the_lesson_does_not_hold_is_made_and_not_kept(fresh):
    highlighting.remember(REPO)
    plain = Highlight2HTML(pygments_lexer="ipython3")
    student = "def mine(x):\n    return x + 1  # a student's own\n"
    kept = dict(highlighting._made)
    for source, language, metadata in [(student, None, None), ("", None, None),
                                       (_code()[0].source, "python", None),
                                       (_code()[0].source, None, {"magics_language": "bash"})]:
        fresh.clear()
        assert plain(source, language, metadata) == ORIGINAL(plain, source, language, metadata)
        assert len(fresh) == 2   # made by the lookup, then by the control
    options = Highlight2HTML(pygments_lexer="ipython3", extra_formatter_options={"linenos": True})
    fresh.clear()
    assert options(_code()[0].source) == ORIGINAL(options, _code()[0].source) and len(fresh) == 2
    assert highlighting._made == kept


def test_a_notebook_that_cannot_be_read_is_skipped(fresh, tmp_path):
    (tmp_path / "source" / "lesson").mkdir(parents=True)
    (tmp_path / "source" / "lesson" / "broken.ipynb").write_text("{not json")
    (tmp_path / "source" / "lesson" / "link.ipynb").symlink_to(next((REPO / "source").glob("*/*.ipynb")))
    highlighting.remember(tmp_path)
    assert highlighting._made == {} and fresh == []
