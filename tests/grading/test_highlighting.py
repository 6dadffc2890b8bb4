"""The lesson's code highlighted once per worker (utils/grading/highlighting.py): the same HTML as
nbconvert's own, for the source's cells only, looked up instead of made again, and never an error
of its own."""

from __future__ import annotations

import json
import shutil

import nbformat
import pytest
from nbconvert.filters import highlight as nbconvert_highlight
from nbconvert.filters.highlight import Highlight2HTML

from utils.grading import highlighting
from utils.lessons import REPO

ORIGINAL = Highlight2HTML.__call__
LESSON = "01_two_phases"


@pytest.fixture()
def made(monkeypatch):
    """A process whose memory of highlighted code is empty (restored afterwards); the list of the
    sources nbconvert highlights from here on."""
    monkeypatch.setattr(highlighting, "_made", {})
    monkeypatch.setattr(highlighting, "_read", set())
    monkeypatch.setattr(highlighting, "_size", 0)
    monkeypatch.setattr(Highlight2HTML, "__call__", ORIGINAL)
    sources = []
    real = nbconvert_highlight._pygments_highlight
    monkeypatch.setattr(nbconvert_highlight, "_pygments_highlight",
                        lambda source, *a, **k: sources.append(source) or real(source, *a, **k))
    return sources


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """A course folder holding lesson 1's source notebook, and that notebook's code cells."""
    folder = tmp_path_factory.mktemp("course")
    shutil.copytree(REPO / "source" / LESSON, folder / "source" / LESSON)
    path = next((folder / "source" / LESSON).glob("*.ipynb"))
    return folder, [c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]


def test_a_page_finds_the_lessons_code_made_and_gets_nbconvert_s_own_html(made, course):
    folder, cells = course
    plain = Highlight2HTML(pygments_lexer="ipython3")
    expected = [ORIGINAL(plain, c.source, metadata=c.metadata) for c in cells]
    highlighting.remember(folder)
    made.clear()
    assert [plain(c.source, metadata=c.metadata) for c in cells] == expected
    assert made == []   # none made again: the control above made each one
    highlighting.remember(folder)   # each notebook once per process
    assert made == []


@pytest.mark.filterwarnings("ignore:No lexer found")   # nbconvert's own, for the magics language "None"
def test_what_the_lesson_does_not_hold_is_made_and_not_kept(made, course):
    folder, cells = course
    highlighting.remember(folder)
    plain = Highlight2HTML(pygments_lexer="ipython3")
    student, lesson = "def mine(x):\n    return x + 1  # a student's own\n", cells[0].source
    kept = dict(highlighting._made)
    for source, language, metadata in [(student, None, None), ("", None, None), (lesson, "python", None),
                                       (lesson, None, {"magics_language": "bash"}),
                                       (lesson, None, {"magics_language": "None"}),
                                       (lesson, None, {"magics_language": None})]:
        made.clear()
        assert plain(source, language, metadata) == ORIGINAL(plain, source, language, metadata)
        assert len(made) == 2   # made by the lookup, then by the control
    options = Highlight2HTML(pygments_lexer="ipython3", extra_formatter_options={"linenos": True})
    made.clear()
    assert options(lesson) == ORIGINAL(options, lesson) and len(made) == 2
    assert highlighting._made == kept


def test_a_source_notebook_it_cannot_use_is_left_to_nbconvert_and_never_an_error(made, course, tmp_path):
    folder, cells = course
    odd = json.loads(next((folder / "source" / LESSON).glob("*.ipynb")).read_text())
    odd["metadata"]["language_info"] = "python"
    code = [c for c in odd["cells"] if c["cell_type"] == "code"]
    code[0]["metadata"]["magics_language"] = 3
    del code[1]["source"]
    (tmp_path / "source" / "lesson").mkdir(parents=True)
    (tmp_path / "source" / "lesson" / "odd.ipynb").write_text(json.dumps(odd))
    (tmp_path / "source" / "lesson" / "broken.ipynb").write_text("{not json")
    (tmp_path / "source" / "lesson" / "link.ipynb").symlink_to(next((folder / "source" / LESSON).glob("*.ipynb")))
    highlighting.remember(tmp_path)
    assert len(highlighting._made) == len(code) - 2   # every cell but the two it cannot use


def test_a_notebook_that_cannot_be_read_is_skipped(made, tmp_path):
    (tmp_path / "source" / "lesson").mkdir(parents=True)
    (tmp_path / "source" / "lesson" / "broken.ipynb").write_text("{not json")
    highlighting.remember(tmp_path)
    assert highlighting._made == {} and made == []
