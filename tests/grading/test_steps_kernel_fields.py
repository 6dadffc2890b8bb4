"""KernelFields: execution counts, outputs and metadata rebuilt from their well-typed parts, the
grader's own language_info (tests/steps_common.py says how these tests are built)."""

from __future__ import annotations

import copy

import pytest
from nbformat.notebooknode import from_dict

from course.observe import MIME
from utils.authoring import nbauthor as author
from utils.grading.steps.kernel_fields import LANGUAGE_INFO, KernelFields
from steps_common import SOURCE_A, display, error, notebook, ran, stream


def fields(*cells, metadata=None):
    nb, _ = KernelFields().preprocess(notebook(cells, metadata), {})
    return nb


def test_execution_counts_are_the_graders_count_of_the_cells_that_ran():
    nb = fields(ran(count=0), author.md("text"), ran(), ran(outputs=[stream("a")]), ran(count=10 ** 40),
                ran(outputs=[from_dict({"output_type": "execute_result", "execution_count": 5, "metadata": {},
                                        "data": {"text/plain": "5"}})], count=-3))
    assert [c.get("execution_count") for c in nb.cells] == [1, None, None, 2, 3, 4]
    assert nb.cells[5].outputs[0].execution_count == 4


@pytest.mark.parametrize("given, rebuilt", [
    (stream(["a", "b"], "stderr"), stream("ab", "stderr")),
    (stream(7, "stdin"), stream("", "stdout")),
    (display({"text/plain": ["1", "2"], "text/html": "<b>", MIME: {"label": "x"}}),
     display({"text/plain": "12", "text/html": "<b>", MIME: {"label": "x"}})),
    (display({"not a mime": "x", "text/plain": {"a": 1}, "image/" + "p" * 200: "x", "text/html<script>": "y"}),
     display({})),
    (display({"text/plain": "x"}, transient={"display_id": "d"}, metadata={"leak": 1}), display({"text/plain": "x"})),
    (error("Evil Name\n", "first\nsecond", ["tb"]), error("Error", "first", ["Error: first"])),
    (error("ValueError", "x" * 5000), error("ValueError", "x" * 297 + "...", ["ValueError: " + "x" * 297 + "..."])),
])
def test_every_output_is_rebuilt_from_its_well_typed_parts(given, rebuilt):
    assert fields(ran(outputs=[given])).cells[0].outputs == [rebuilt]


def test_what_is_not_an_output_is_dropped():
    cell = ran(outputs=[stream("kept"), "text", 5, None, from_dict({"output_type": "secret", "text": "x"})])
    assert fields(cell).cells[0].outputs == [stream("kept")]
    cell = ran(count=1)
    cell.outputs = {"output_type": "stream"}                            # not a list
    assert fields(cell).cells[0].outputs == []


def test_cell_metadata_keeps_only_nbgraders_and_jupyters_keys():
    cell = author.tests("test_a", 2, SOURCE_A)
    cell.metadata.update(execution={"iopub.status.busy": "t"}, tags=["t"], editable=False, leak="x")
    text = author.md("x")
    text.metadata["leak"] = "x"
    odd = ran()
    odd["metadata"] = "not a dict"
    nb = fields(cell, text, odd)
    assert set(nb.cells[0].metadata) == {"nbgrader", "tags", "editable"}
    assert nb.cells[1].metadata == {} and nb.cells[2].metadata == {}


def test_the_notebooks_language_info_is_the_graders_and_widget_state_is_dropped():
    nb = fields(ran(), metadata={"language_info": {"name": "python", "version": "observe('a(2)')"},
                                 "widgets": {"state": {}}, "kernelspec": {"name": "python3"}})
    assert nb.metadata == {"language_info": LANGUAGE_INFO, "kernelspec": {"name": "python3"}}
    assert fields(ran(), metadata="not a dict").metadata == "not a dict"   # survived, left as it was


def test_kernel_fields_twice_is_kernel_fields_once():
    cells = [ran(outputs=[stream(["a"]), error("E x", "1\n2"), display({"text/plain": ["a"]})], count=9),
             author.md("y")]
    once = fields(*copy.deepcopy(cells))
    assert fields(*copy.deepcopy(once.cells)).cells == once.cells


def test_an_image_a_cell_displays_is_decoded_under_the_pixel_cap_or_left_out():
    """Student code can display any bytes as image/png: a crafted PNG declaring 80,000 x 80,000
    pixels never reaches the formgrader or the feedback (a line says it was left out); a real
    image is decoded and written again."""
    import base64
    from steps_common import PNG
    from grading.test_steps_well_formed import declaring
    bomb = base64.b64encode(declaring(80_000, 80_000)).decode()
    out = fields(ran(outputs=[display({"image/png": bomb, "text/plain": "<Figure>"}),
                              display({"image/png": bomb}), display({"image/png": PNG})])).cells[0].outputs
    assert "image/png" not in out[0].data and "left out" in out[0].data["text/plain"]
    assert "<Figure>" in out[0].data["text/plain"]
    assert list(out[1].data) == ["text/plain"] and "left out" in out[1].data["text/plain"]
    assert out[2].data == {"image/png": PNG}
