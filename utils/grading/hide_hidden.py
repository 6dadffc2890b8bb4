"""HideHiddenTests, for feedback: the hidden-test regions are cut from graded cells' source, so
test banks can be reused. `--HideHiddenTests.enabled=False` shows them.

The outputs need nothing here: Verdicts (verdicts.py) left each graded cell one line, which names
a hidden test by its label only and never shows a hidden expected value or traceback."""

from __future__ import annotations

from nbgrader.preprocessors import NbGraderPreprocessor


class HideHiddenTests(NbGraderPreprocessor):

    placeholder = "# (hidden tests are not shown)"

    def preprocess_cell(self, cell, resources, index):
        from nbgrader.preprocessors import ClearHiddenTests

        markers = ClearHiddenTests(config=self.config)   # nbgrader's delimiters, as configured
        begin, end = markers.begin_test_delimeter, markers.end_test_delimeter
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
