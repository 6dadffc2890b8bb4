"""Build nbgrader notebooks from Python: for authoring lessons and for fabricating test notebooks.

Each helper returns one nbformat cell carrying the nbgrader metadata of its role:
  md / code        plain cells (markdown text, runnable example code)
  readonly         locked setup or given code, not graded
  solution         the student's cell: code between ### BEGIN SOLUTION / ### END SOLUTION
  tests            a graded, locked test cell: visible checks, then ### BEGIN HIDDEN TESTS
"""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook


def _meta(grade_id: str, *, grade: bool, solution: bool, locked: bool, points: float | None = None) -> dict:
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": 3,
            "solution": solution, "task": False}
    if points is not None:
        meta["points"] = points
    return {"nbgrader": meta}


def md(text: str, grade_id: str | None = None) -> nbformat.NotebookNode:
    """Markdown; locked (students cannot edit it) when given a grade_id."""
    cell = new_markdown_cell(text.strip("\n"))
    if grade_id:
        cell.metadata.update(_meta(grade_id, grade=False, solution=False, locked=True))
    return cell


def code(source: str) -> nbformat.NotebookNode:
    """An ordinary code cell the student may edit and run."""
    return new_code_cell(source.strip("\n"))


def readonly(grade_id: str, source: str) -> nbformat.NotebookNode:
    """Locked code (setup, given helpers); restored from the source notebook at grading."""
    cell = new_code_cell(source.strip("\n"))
    cell.metadata.update(_meta(grade_id, grade=False, solution=False, locked=True))
    return cell


def solution(grade_id: str, source: str) -> nbformat.NotebookNode:
    """The student's answer cell; wrap the reference answer in BEGIN/END SOLUTION markers."""
    cell = new_code_cell(source.strip("\n"))
    cell.metadata.update(_meta(grade_id, grade=False, solution=True, locked=False))
    return cell


def tests(grade_id: str, points: float, source: str) -> nbformat.NotebookNode:
    """A graded test cell; hidden tests go between BEGIN/END HIDDEN TESTS markers."""
    cell = new_code_cell(source.strip("\n"))
    cell.metadata.update(_meta(grade_id, grade=True, solution=False, locked=True, points=points))
    return cell


def notebook(cells: list) -> nbformat.NotebookNode:
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
    nb.metadata["language_info"] = {"name": "python"}
    return nb


def write(path: str | Path, cells: list) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook(cells), str(path))
    return path
