"""HideHiddenTests, for feedback: the hidden-test regions are cut from graded cells' source, so
test banks can be reused, and the outputs of every other code cell are left out. Those outputs come
from the student's kernel, which ran the hidden tests: any cell can print them (In, _ih, a thread,
a display updated later), in any encoding, so no filter on their text could be trusted. Graded
cells keep the one verdict line Verdicts wrote (a hidden test named by its label only, never a
hidden expected value or traceback). `--HideHiddenTests.enabled=False` (releasing the hidden
tests) leaves the notebook as graded."""

from __future__ import annotations

from nbformat.notebooknode import NotebookNode
from nbgrader.preprocessors import NbGraderPreprocessor

from utils.grading.steps.base import is_test_cell

LEFT_OUT = "(this cell's output is not part of the feedback: the grader's kernel also ran hidden tests)\n"


class HideHiddenTests(NbGraderPreprocessor):

    placeholder = "# (hidden tests are not shown)"

    def _markers(self) -> tuple[str, str]:
        from nbgrader.preprocessors import ClearHiddenTests

        markers = ClearHiddenTests(config=self.config)   # nbgrader's delimiters, as configured
        return markers.begin_test_delimeter, markers.end_test_delimeter

    def preprocess(self, nb, resources):
        begin, _ = self._markers()
        if any(c.cell_type == "code" and begin in c.source for c in nb.cells):
            for cell in nb.cells:
                if cell.cell_type == "code" and not is_test_cell(cell) and cell.get("outputs"):
                    cell.outputs = [NotebookNode(output_type="stream", name="stdout", text=LEFT_OUT)]
        for index, cell in enumerate(nb.cells):
            self.preprocess_cell(cell, resources, index)
        return nb, resources

    def preprocess_cell(self, cell, resources, index):
        """Cut the hidden-test regions from one cell's source."""
        begin, end = self._markers()
        if cell.cell_type != "code" or begin not in cell.source:
            return cell, resources
        kept, inside = [], False
        for line in cell.source.split("\n"):
            if begin in line:
                inside = True
                kept.append(line[: len(line) - len(line.lstrip())] + self.placeholder)
            elif end in line:
                inside = False
            elif not inside:
                kept.append(line)
        cell.source = "\n".join(kept)
        return cell, resources
