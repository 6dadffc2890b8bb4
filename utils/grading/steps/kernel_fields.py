"""KernelFields: right after Verdicts, every field of the notebook that the kernel's messages set is
rewritten by the grader or dropped, so that only what the grader decided reaches autograded/ and the
feedback made from it:

  - each code cell's execution_count (the kernel's reply sets it to any integer it likes) becomes
    the grader's own count of the cells that ran, and an execute_result's the same;
  - the timing metadata nbclient copies from the kernel's message headers (metadata.execution) is
    dropped, and so is any cell metadata but nbgrader's, tags, editable and deletable;
  - every output is rebuilt from its well-typed parts: a stream's name (stdout or stderr) and text,
    a display's MIME bundle (the display and output metadata and `transient` dropped; a PNG, JPEG
    or GIF decoded under a pixel cap and written again, steps/images.py, or left out), an error's
    type, one-line value and a traceback of that one line;
  - the notebook's language_info (the kernel's kernel_info reply) becomes the grader's, and any
    widget state is dropped.

What the outputs of ungraded cells say is the kernel's: HideHiddenTests leaves them out of the
feedback, LimitOutputSize bounds them. Graded cells hold the one verdict Verdicts wrote.
"""

from __future__ import annotations

import re
import sys

from nbformat.notebooknode import NotebookNode, from_dict
from nbgrader.preprocessors import NbGraderPreprocessor

from utils.grading.steps.images import SIGNATURES as IMAGES, reencoded_b64
from utils.grading.steps.verdicts import one_line

CELL_META = ("nbgrader", "tags", "editable", "deletable")
MAX_OUTPUT_IMAGE = 4 << 20   # bytes of one image a cell displays
_MIME = re.compile(r"[a-z]+/[A-Za-z0-9.+_-]{1,100}")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]{0,80}")
LANGUAGE_INFO = {"name": "python", "version": "{}.{}.{}".format(*sys.version_info[:3]),
                 "mimetype": "text/x-python", "file_extension": ".py", "pygments_lexer": "ipython3",
                 "codemirror_mode": {"name": "ipython", "version": 3}, "nbconvert_exporter": "python"}


def _text(value) -> str:
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "".join(value)
    return value if isinstance(value, str) else ""


def rebuilt_output(out, execution_count: int | None) -> NotebookNode | None:
    """One output made again from what it may hold, or None for what is not an output."""
    if not isinstance(out, dict):
        return None
    kind = out.get("output_type")
    if kind == "stream":
        name = out.get("name") if out.get("name") in ("stdout", "stderr") else "stdout"
        return from_dict({"output_type": "stream", "name": name, "text": _text(out.get("text"))})
    if kind in ("display_data", "execute_result"):
        data = out.get("data") if isinstance(out.get("data"), dict) else {}
        bundle, left_out = {}, None
        for mime, value in data.items():
            if not (isinstance(mime, str) and _MIME.fullmatch(mime)):
                continue
            if mime in IMAGES:
                image = reencoded_b64(mime, value, MAX_OUTPUT_IMAGE)
                if image is None:
                    left_out = f"[an image ({mime}) left out: not an image the feedback shows, or too large]"
                    continue
                bundle[mime] = image
            elif isinstance(value, (list, str)) and not mime.endswith("json"):
                bundle[mime] = _text(value)
            elif mime.endswith("json"):
                bundle[mime] = value
        if left_out and not any(m in bundle for m in IMAGES):
            bundle["text/plain"] = "\n".join(t for t in (bundle.get("text/plain"), left_out) if t)
        new = {"output_type": kind, "data": bundle, "metadata": {}}
        if kind == "execute_result":
            new["execution_count"] = execution_count
        return from_dict(new)
    if kind == "error":
        name = str(out.get("ename", ""))
        name = name if _NAME.fullmatch(name) else "Error"
        value = one_line(out.get("evalue", ""))
        return from_dict({"output_type": "error", "ename": name, "evalue": value, "traceback": [f"{name}: {value}"]})
    return None


def rewrite_kernel_fields(nb) -> None:
    """`nb` (an executed notebook) with every field the kernel set rewritten by the grader (in place)."""
    count = 0
    for cell in nb.cells:
        meta = cell.get("metadata")
        cell["metadata"] = from_dict({k: meta[k] for k in CELL_META if k in meta} if isinstance(meta, dict) else {})
        if cell.get("cell_type") != "code":
            continue
        ran = cell.get("execution_count") is not None or bool(cell.get("outputs"))
        if ran:
            count += 1
        cell["execution_count"] = count if ran else None
        outputs = cell.get("outputs") if isinstance(cell.get("outputs"), list) else []
        cell["outputs"] = [o for o in (rebuilt_output(o, cell["execution_count"]) for o in outputs) if o is not None]
    meta = nb.get("metadata")
    if isinstance(meta, dict):
        meta.pop("widgets", None)
        meta["language_info"] = from_dict(LANGUAGE_INFO)


class KernelFields(NbGraderPreprocessor):

    def preprocess(self, nb, resources):
        rewrite_kernel_fields(nb)
        return nb, resources
