"""LimitOutputSize: caps the characters a cell's outputs keep (nbgrader's LimitOutput counts lines
only, so one 50 MB line would reach the gradebook copy and the feedback HTML), and drops
oversized rich outputs (images, HTML)."""

from __future__ import annotations

import json

from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Integer

from utils.grading.base import add_note, grade_id


class LimitOutputSize(NbGraderPreprocessor):

    max_chars = Integer(20000, help="Characters of stream text kept per cell (-1: no limit)").tag(config=True)
    max_data_chars = Integer(2_000_000, help="Size of one rich output (base64 image, HTML) kept "
                                             "(-1: no limit)").tag(config=True)

    def preprocess(self, nb, resources):
        self._nb = nb
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code" or self.max_chars < 0:
            return cell, resources
        used, dropped = 0, 0
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream":
                text = out.get("text", "")
                text = "".join(text) if isinstance(text, list) else text
                room = max(0, self.max_chars - used)
                if len(text) > room:
                    dropped += len(text) - room
                    text = text[:room] + f"\n... output truncated by the grader ({len(text) - room} characters cut) ...\n"
                used += len(text)
                out["text"] = text
            elif out.get("output_type") in ("display_data", "execute_result") and self.max_data_chars >= 0:
                dropped += self._cap_data(out)
        if dropped:
            add_note(self._nb, "output-truncated", grade_id(cell),
                     f"cell '{grade_id(cell) or f'#{index}'}' printed {dropped} characters too many; its output was cut")
        return cell, resources

    def _cap_data(self, out) -> int:
        data, dropped = out.get("data", {}), 0
        for mime in list(data):
            size = len(data[mime]) if isinstance(data[mime], str) else len(json.dumps(data[mime]))
            if size > self.max_data_chars:
                dropped += size
                if mime == "text/plain":
                    data[mime] = f"[{mime} output of {size} characters removed by the grader]"
                else:
                    del data[mime]
        if not data:
            out["data"] = {"text/plain": "[output removed by the grader: too large]"}
        return dropped
