"""LimitOutputSize: each cell's and the notebook's outputs are cut to their budgets with a note, graded
cells and Markdown never (tests/steps_common.py says how these tests are built)."""

from __future__ import annotations

import copy

import nbformat
from nbformat.notebooknode import from_dict

from utils.authoring import nbauthor as author
from utils.grading.steps.base import read_notes
from utils.grading.steps.limit_output import LimitOutputSize
from steps_common import SOURCE_A, display, notebook, ran, stream


def limited(*cells, **traits):
    nb, _ = LimitOutputSize(**traits).preprocess(notebook(cells), {})
    return nb


def test_a_cells_stream_text_is_cut_at_its_budget_with_a_note():
    nb = limited(ran(outputs=[stream("a" * 15_000), stream(["b" * 7_000, "b" * 8_000], "stderr")]), max_chars=20_000)
    first, second = nb.cells[0].outputs
    assert first.text == "a" * 15_000 and second.text.startswith("b" * 5_000 + "\n... output truncated")
    assert "(10000 characters cut)" in second.text and second.name == "stderr"
    assert [(n["event"], n["text"]) for n in read_notes(nb)] == [
        ("output-truncated", "cell '#0' printed 10000 characters too many; its output was cut")]


def test_a_rich_output_too_large_is_removed_and_its_text_kept():
    big = display({"image/png": "i" * 5000, "text/html": "<p>" + "h" * 5000, "text/plain": "fig"})
    plain = display({"text/plain": "p" * 5000})
    gone = display({"image/png": "i" * 5000})
    nb = limited(ran(outputs=[big, plain, gone]), max_data_chars=1000)
    assert [o.data for o in nb.cells[0].outputs] == [
        {"text/plain": "fig"}, {"text/plain": "[text/plain output of 5000 characters removed by the grader]"},
        {"text/plain": "[output removed by the grader: too large]"}]


def test_an_output_whose_data_is_not_a_bundle_is_replaced():
    forged = from_dict({"output_type": "execute_result", "execution_count": 1, "metadata": {}, "data": "x" * 100})
    assert limited(ran(outputs=[forged])).cells[0].outputs[0].data == {
        "text/plain": "[output removed by the grader: not an output]"}


def test_a_flood_of_outputs_keeps_the_first_ones_and_says_how_many_went():
    nb = limited(ran(outputs=[display({"text/plain": str(i)}) for i in range(150)]), max_outputs=100)
    outs = nb.cells[0].outputs
    assert [o.data["text/plain"] for o in outs[:100]] == [str(i) for i in range(100)] and len(outs) == 101
    assert outs[-1].output_type == "stream" and "50 output(s)" in outs[-1].text


def test_the_notebooks_budget_is_shared_by_its_cells_in_order():
    cells = [ran(outputs=[display({"text/plain": "x" * 900})]) for _ in range(3)]
    nb = limited(*cells, max_notebook_chars=2500)
    assert [len(c.outputs) for c in nb.cells] == [1, 1, 1]
    assert [c.outputs[0].output_type for c in nb.cells] == ["display_data", "display_data", "stream"]
    assert [n["text"].split(" printed")[0] for n in read_notes(nb)] == ["cell '#2'"]


def test_a_cells_total_size_is_bounded():
    nb = limited(ran(outputs=[display({"text/plain": "x" * 900}) for _ in range(5)]), max_cell_chars=3000)
    assert [o.output_type for o in nb.cells[0].outputs] == ["display_data"] * 3 + ["stream"]


def test_graded_test_cells_and_markdown_are_never_cut():
    cell = author.tests("test_a", 2, SOURCE_A)
    cell.outputs = [stream("✔ " + "v" * 50_000)]
    text = author.md("m" * 50_000)
    nb = limited(cell, text, max_chars=10, max_cell_chars=10, max_notebook_chars=10)
    assert nb.cells[0].outputs == [stream("✔ " + "v" * 50_000)] and nb.cells[1].source == "m" * 50_000
    assert read_notes(nb) == []


def test_minus_one_leaves_every_output():
    outputs = [stream("s" * 50_000), display({"image/png": "i" * 50_000})] + [display({"text/plain": "x"})] * 200
    nb = limited(ran(outputs=copy.deepcopy(outputs)), max_chars=-1, max_data_chars=-1, max_outputs=-1,
                 max_cell_chars=-1, max_notebook_chars=-1)
    assert nb.cells[0].outputs == outputs


def test_what_it_leaves_is_valid_nbformat():
    outputs = [stream(["a" * 30_000]), display({"image/png": "i" * 5000}), display({"text/plain": "y"})] * 60
    nb = limited(ran(outputs=outputs, count=1), max_data_chars=1000)
    nbformat.validate(nb)
