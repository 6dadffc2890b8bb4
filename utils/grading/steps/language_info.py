"""Notebooks that open unmodified: each carries the language_info its kernel reports.

JupyterLab writes the kernel's `language_info` (ipykernel's kernel_info reply: name, version,
mimetype, codemirror_mode, pygments_lexer, nbconvert_exporter, file_extension) into a notebook's
metadata when its kernel starts; where the notebook held less (the source notebooks hold only the
name), that change marks it unsaved before the student has typed anything. So:

- every `nbgrader generate_assignment` (make build, make check's fresh build, a release to the
  exchange) ends with `KernelLanguageInfo` (put into nbgrader's pipeline by
  utils.grading.pipeline.install), which writes the build's Python kernel's language_info into the
  generated notebook;
- `make lab` runs `python -m utils.grading.steps.language_info lessons` with the student's
  environment once, when it copies release/ to lessons/, so the copy holds what the student's own
  kernel reports (its Python version may differ from the build's). Importing it imports nothing
  else of utils/ (utils/grading/__init__.py and steps/__init__.py import nothing).

    python -m utils.grading.steps.language_info FOLDER   # every notebook under FOLDER; prints nothing
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path

from nbconvert.preprocessors import Preprocessor
from traitlets import Bool


def kernel_language_info() -> dict:
    """What this Python's ipykernel reports as language_info (the kernel_info reply), unstarted."""
    from ipykernel.ipkernel import IPythonKernel

    return copy.deepcopy(IPythonKernel.language_info)


class KernelLanguageInfo(Preprocessor):
    """The last step of generate_assignment: the full language_info of the Python kernel."""

    enabled = Bool(True)  # nbconvert runs a registered preprocessor only when it is enabled

    def preprocess(self, nb, resources):
        nb.metadata["language_info"] = kernel_language_info()
        return nb, resources


def stamp(folder: Path, info: dict | None = None) -> list[Path]:
    """Write `info` (this Python's kernel's) as language_info into every notebook under `folder`
    that holds another; returns the notebooks changed. Files otherwise byte for byte as they were
    (nbformat's own layout, as nbgrader writes them)."""
    import nbformat

    info = kernel_language_info() if info is None else info
    changed = []
    for path in sorted(Path(folder).rglob("*.ipynb")):
        if ".ipynb_checkpoints" in path.parts:
            continue
        nb = nbformat.read(str(path), as_version=nbformat.NO_CONVERT)
        if nb.metadata.get("language_info") != info:
            nb.metadata["language_info"] = info
            nbformat.write(nb, str(path))
            changed.append(path)
    return changed


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or not Path(args[0]).is_dir():
        print("usage: python -m utils.grading.steps.language_info FOLDER", file=sys.stderr)
        return 2
    stamp(Path(args[0]))  # silent: nothing a student needs to know or do (make lessons says what it made)
    return 0


if __name__ == "__main__":
    sys.exit(main())
