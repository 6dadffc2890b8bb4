"""LimitOutputSize: bounds what a notebook keeps of its cells' outputs, in autograded/ (and so in the
feedback made from it). nbgrader's LimitOutput counts lines only: one 50 MB line, or ten thousand
outputs of a few kilobytes, would reach the gradebook copy and the feedback HTML. Here each cell
keeps at most `max_outputs` outputs, `max_chars` characters of stream text and `max_cell_chars` in
all; one rich output (image, HTML) at most `max_data_chars`; the whole notebook at most
`max_notebook_chars`. Graded test cells keep their one verdict line whatever the budget."""

from __future__ import annotations

import json

from nbformat.notebooknode import NotebookNode
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Integer

from utils.grading.steps.base import add_note, grade_id, is_test_cell


def _size(out) -> int:
    try:
        return len(json.dumps(out))
    except (TypeError, ValueError, RecursionError):
        return 10 ** 9


def _note(text: str) -> NotebookNode:
    return NotebookNode(output_type="stream", name="stdout", text=f"\n... {text} ...\n")


class LimitOutputSize(NbGraderPreprocessor):

    max_chars = Integer(20000, help="Characters of stream text kept per cell (-1: no limit)").tag(config=True)
    max_data_chars = Integer(2_000_000, help="Size of one rich output (base64 image, HTML) kept "
                                             "(-1: no limit)").tag(config=True)
    max_outputs = Integer(100, help="Outputs kept per cell (-1: no limit)").tag(config=True)
    max_cell_chars = Integer(4_000_000, help="Size of all of a cell's outputs kept (-1: no limit)").tag(config=True)
    max_notebook_chars = Integer(16_000_000, help="Size of all outputs a notebook keeps (-1: no "
                                                  "limit)").tag(config=True)

    def preprocess(self, nb, resources):
        self._nb, self._left = nb, self.max_notebook_chars
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code" or is_test_cell(cell):
            return cell, resources
        dropped = self._cap_text_and_data(cell)
        dropped += self._cap_count_and_size(cell)
        if dropped:
            add_note(self._nb, "output-truncated", grade_id(cell),
                     f"cell '{grade_id(cell) or f'#{index}'}' printed {dropped} characters too many; its output was cut")
        return cell, resources

    def _cap_text_and_data(self, cell) -> int:
        used, dropped = 0, 0
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream" and self.max_chars >= 0:
                text = out.get("text", "")
                text = "".join(text) if isinstance(text, list) else str(text)
                room = max(0, self.max_chars - used)
                if len(text) > room:
                    dropped += len(text) - room
                    text = text[:room] + f"\n... output truncated by the grader ({len(text) - room} characters cut) ...\n"
                used += len(text)
                out["text"] = text
            elif out.get("output_type") in ("display_data", "execute_result") and self.max_data_chars >= 0:
                dropped += self._cap_data(out)
        return dropped

    def _cap_count_and_size(self, cell) -> int:
        """Keep outputs in order while they fit the cell's count and size and the notebook's size."""
        kept, size, dropped = [], 0, 0
        room = self.max_cell_chars if self.max_cell_chars >= 0 else float("inf")
        if self.max_notebook_chars >= 0:
            room = min(room, self._left)
        for out in cell.get("outputs", []):
            n = _size(out)
            if (self.max_outputs >= 0 and len(kept) >= self.max_outputs) or size + n > room:
                dropped += n
                continue
            kept.append(out)
            size += n
        if dropped:
            kept.append(_note(f"{len(cell.outputs) - len(kept)} output(s) of {dropped} characters "
                              f"removed by the grader (too many or too large)"))
        cell.outputs = kept
        self._left -= size
        return dropped

    def _cap_data(self, out) -> int:
        data = out.get("data", {})
        if not isinstance(data, dict):
            out["data"] = {"text/plain": "[output removed by the grader: not an output]"}
            return 1
        dropped = 0
        for mime in list(data):
            size = len(data[mime]) if isinstance(data[mime], str) else _size(data[mime])
            if size > self.max_data_chars:
                dropped += size
                if mime == "text/plain":
                    data[mime] = f"[{mime} output of {size} characters removed by the grader]"
                else:
                    del data[mime]
        if not data:
            out["data"] = {"text/plain": "[output removed by the grader: too large]"}
        return dropped
