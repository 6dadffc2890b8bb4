"""Lesson 1 stays within its budget and is graded on its ideas (quick: reads the notebooks only).

- at most 2,500 words of text (markdown cells, split on whitespace), and the expected time stated
  in the first cell;
- no word a student must not read ("seed") in the release;
- at most one graded cell in five checks input validation, so a right formula without a NaN
  check keeps its points; hidden tests only observe (no assert, no expected value), quizzes have
  no hidden part;
- Llama-2-70B's N (without the embedding table) and every number built on it, from the shapes;
  the conventions stated, the quiz rule where students answer, no words from elsewhere;
- every graded test cell wraps its visible checks in `checking(...)`, and the visible checks pass
  a numpy array where the hidden tests do.
- the ridge crossing stated is the computed one; a cell after the staircase plot needs none of the
  plot cell's names (a student who skips the plot can still run it).
- one idea a paragraph where section 4 once packed two (T* and DF/(D+F)), no pointer ahead to
  lesson 2 in the fused bound's definition, no speculative-decoding aside (nor its acceptance rule
  without the resampling), and no code line a 1,400-pixel window cuts off.
"""

from __future__ import annotations

import re

import nbformat
import pytest

from utils.lessons import REPO
from utils.notebooks import BEGIN_HIDDEN, END_HIDDEN, nbgrader_meta

LESSON = "01_two_phases"
SOURCE = REPO / "source" / LESSON / "two_phases.ipynb"
RELEASE = REPO / "release" / LESSON / "two_phases.ipynb"


@pytest.fixture(scope="module")
def source():
    return nbformat.read(str(SOURCE), as_version=4)


def graded(nb):
    return [c for c in nb.cells if nbgrader_meta(c).get("grade") and not nbgrader_meta(c).get("solution")]


def split(cell) -> tuple[str, str]:
    visible, _, rest = cell.source.partition(BEGIN_HIDDEN)
    return visible, rest.partition(END_HIDDEN)[0]


def test_at_most_2500_words_and_the_time_stated_at_the_top(source):
    words = sum(len(c.source.split()) for c in source.cells if c.cell_type == "markdown")
    assert words <= 2500, f"lesson 1 has {words} words of text"
    assert re.search(r"Expected time: about \d+ minutes", source.cells[0].source)


def test_no_seed_where_students_read():
    text = RELEASE.read_text().lower()
    assert "seed" not in text


def test_graded_on_ideas_not_on_validation(source):
    """At most one graded cell in five checks input validation, so a right formula without a NaN
    check keeps its points."""
    cells = graded(source)
    validation = [nbgrader_meta(c)["grade_id"] for c in cells if "check_raises(" in c.source or "ValueError" in c.source]
    assert len(validation) <= len(cells) / 5, f"graded cells on validation: {validation}"


def test_hidden_tests_observe_and_never_judge(source):
    """Hidden parts pass inputs and observe results: no assert, no expected value or formula; the
    quiz cells have no hidden part (check_choice's observation is the answer)."""
    for cell in graded(source):
        visible, hidden = split(cell)
        grade_id = nbgrader_meta(cell)["grade_id"]
        if grade_id.startswith("quiz_"):
            assert BEGIN_HIDDEN not in cell.source and "check_choice(" in visible, grade_id
            continue
        assert "from course.observe import observe" in hidden, f"{grade_id}: observe not imported in the hidden part"
        assert re.search(r"^\s*observe\(", hidden, flags=re.M), f"{grade_id}: the hidden part observes nothing"
        assert not re.search(r"^\s*(assert|raise)\b", hidden, flags=re.M), f"{grade_id}: the hidden part judges"
        assert not re.search(r"isclose|allclose|\bwant\b|expected", hidden), f"{grade_id}: an expected value in hidden code"


def llama_2_70b_counts() -> tuple[int, int]:
    """(all parameters, N without the token-embedding table) of Llama-2-70B, from its shapes."""
    from course.models import PRESETS

    m = PRESETS["llama-2-70b"]
    kv = m.n_kv_heads * m.head_dim
    per_layer = 2 * m.d_model * m.d_model + 2 * m.d_model * kv + 3 * m.d_model * m.d_ff + 2 * m.d_model
    embedding = m.vocab_size * m.d_model
    total = embedding + m.n_layers * per_layer + m.d_model + m.vocab_size * m.d_model  # + final norm, output head
    return total, total - embedding


def test_numbers_follow_from_the_model_shapes(source):
    """N without the embedding table, and every number that depends on it, in text and checks."""
    total, n = llama_2_70b_counts()
    assert total == 68_976_648_192  # the released checkpoint's parameter count
    kv, bf16, tpot = 2 * 80 * 8 * 128 * 2, 2, 0.030
    text = "\n".join(c.source for c in source.cells)
    code = "\n".join(c.source for c in source.cells if c.cell_type == "code")
    assert f"{total:,}" in text and f"{n:,}" in text and f"{total - n:,}" in text
    assert f"{kv:_}" in code and "327{,}680" in text
    assert "68_976_648_192" not in code and code.count(f"{n:_}") == 3, "N_70B is N in every code cell"
    decode_bytes = n * bf16 + 1000 * kv
    for literal in (2 * n, 2 * n * 1000, n * bf16, decode_bytes):
        assert f"{literal:_}" in code, literal
    mbu = decode_bytes / (4 * 2.039e12) / tpot
    assert f"{100 * mbu:.1f} %" in text, f"the example's MBU is {mbu:.2%}"
    assert f"N \\approx {1e-9 * n:.1f}$ billion" in text


def test_conventions_stated_and_no_words_from_elsewhere(source):
    markdown = [c.source for c in source.cells if c.cell_type == "markdown"]
    text = "\n".join(markdown).lower()
    assert "conventions used in all three lessons" in text
    quiz = next(m for m in markdown if "Checkpoint quiz" in m)
    assert "one letter in quotes" in quiz and "case and surrounding spaces are ignored" in quiz
    for phrase in ("its own module", "later module", "the references", "references predict"):
        assert phrase not in text, phrase
    assert "about $p$ flop/byte only while" in text  # prefill's intensity, with its condition


def test_visible_checks_in_checking_and_with_the_hidden_tests_input_types(source):
    for cell in graded(source):
        visible, hidden = split(cell)
        grade_id = nbgrader_meta(cell)["grade_id"]
        assert "with checking(" in visible, f"{grade_id}: visible checks outside checking()"
        if "np.array(" in hidden:
            assert "np.array(" in visible, f"{grade_id}: the hidden tests pass numpy arrays, the visible checks do not"


def test_the_ridge_crossing_is_the_computed_one(source):
    """Counting weight bytes only, a bf16 prefill of S tokens does about S FLOP/byte, so it passes
    an A100's ridge point (312 TFLOP/s over 2,039 GB/s) at S equal to that ridge."""
    ridge = 312e12 / 2.039e12
    text = "\n".join(c.source for c in source.cells if c.cell_type == "markdown")
    assert f"\\approx {ridge:.0f}$ FLOP/byte" in text
    assert f"past the ridge point from about {ridge:.0f} tokens" in text


def test_a_student_who_skips_the_plot_still_has_the_names_later_cells_use(source):
    """The staircase plot cell's names are not needed by later cells: each later cell that uses
    one of them assigns it itself (or an earlier non-plot cell does)."""
    import ast

    code = [c for c in source.cells if c.cell_type == "code"]
    plot = next(i for i, c in enumerate(code) if "token_staircase(" in c.source and "drawing(" in c.source)

    def names(cell, kind):
        body = "\n".join(line for line in cell.source.splitlines() if not line.startswith("%"))
        return {n.id for n in ast.walk(ast.parse(body)) if isinstance(n, ast.Name) and isinstance(n.ctx, kind)}

    before = set().union(*(names(c, ast.Store) for c in code[:plot]))
    only_in_plot = names(code[plot], ast.Store) - before
    for cell in code[plot + 1:]:
        missing = (names(cell, ast.Load) & only_in_plot) - names(cell, ast.Store)
        assert not missing, f"a cell after the plot uses {sorted(missing)}, defined only in the plot cell"


def test_each_idea_in_its_own_sentence_and_nothing_ahead_of_the_student(source):
    """Section 4 states the ridge in tokens and the activations' limit in paragraphs of their own;
    the fused bound is defined without pointing ahead to lesson 2's roofline; the
    speculative-decoding aside is gone, and min(1, p/q) is never stated without the resampling from
    norm(max(0, p - q)) that keeps the target model's distribution (Leviathan et al. 2023)."""
    markdown = "\n\n".join(c.source for c in source.cells if c.cell_type == "markdown")
    both = [p for p in markdown.split("\n\n") if "T^* =" in p and "DF/(D+F)" in p]
    assert not both, both
    text = " ".join(markdown.split())
    assert "DF/(D+F)" in text and "T^* = \\text{ridge} \\times b_w / 2" in text
    assert "roofline bound, lesson 2" not in text
    assert "speculative" not in text.lower()
    assert "min(1, p/q)" not in text or "max(0, p - q)" in text


def test_code_fits_a_1400_pixel_window():
    """JupyterLab does not wrap code: at 1,400 pixels with the file browser open a code cell shows
    about 124 characters (tests/browser/test_student.py checks the page itself), so no visible
    code line of the release is longer than 120."""
    nb = nbformat.read(str(RELEASE), as_version=4)
    long = [(i, len(line)) for i, c in enumerate(nb.cells) if c.cell_type == "code"
            for line in c.source.splitlines() if len(line) > 120]
    assert not long, f"(cell, characters) of code lines past 120: {long}"


def _sentences(nb) -> list[str]:
    text = " ".join(" ".join(c.source.split()) for c in nb.cells if c.cell_type == "markdown")
    return re.split(r"(?<=[.?!])\s+(?=[A-Z*$(])", text)


@pytest.mark.parametrize("idea, not_with", [
    ("ridge in tokens** $T^*$", ["compute-bound", "memory-bound", "153"]),  # what T* is, then what past it means
    ("160 a token", ["8,192-wide", "latency"]),  # how many all-reduces, then their size, then what they cost
    ("1.28x", ["50x", "3.2x"]),  # the step at batch 64, then its tokens/s, then the long-context case
])
def test_one_idea_a_sentence_where_three_were_packed(source, idea, not_with):
    """Section 1's ridge in tokens, the all-reduce count and the batch-64 comparison each get a sentence
    of their own: a sentence carrying `idea` carries none of the ideas that used to follow it."""
    carrying = [s for s in _sentences(source) if idea in s]
    assert carrying, idea
    for sentence in carrying:
        assert not [w for w in not_with if w in sentence], sentence
