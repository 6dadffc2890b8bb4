"""nbgrader notebooks' cells: their nbgrader metadata, the graded cells, the solution and hidden-test
markers, and a submission built from the release with chosen solution cells."""

from __future__ import annotations

import nbformat

from utils.errors import ToolError

BEGIN_SOLUTION, END_SOLUTION = "### BEGIN SOLUTION", "### END SOLUTION"
BEGIN_HIDDEN, END_HIDDEN = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"


def nbgrader_meta(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def graded_cells(nb) -> list[str]:
    return [nbgrader_meta(c)["grade_id"] for c in nb.cells if nbgrader_meta(c).get("grade")]


def strip_markers(source: str) -> str:
    """Reference solution as a student would type it: the solution markers removed."""
    return "\n".join(l for l in source.splitlines() if l.strip() not in (BEGIN_SOLUTION, END_SOLUTION))


def submission_from(release_nb, reference_nb, overrides: dict[str, str]):
    """A submission built on the release: each solution cell takes `overrides[grade_id]` if given,
    else the reference solution. Unknown grade ids are an error (a typo would test nothing)."""
    reference = {nbgrader_meta(c).get("grade_id"): c.source for c in reference_nb.cells if nbgrader_meta(c).get("solution")}
    unknown = set(overrides) - set(reference)
    if unknown:
        raise ToolError(f"no solution cell named {', '.join(sorted(unknown))}; solution cells: {', '.join(reference)}")
    nb = nbformat.reads(nbformat.writes(release_nb), as_version=4)
    for cell in nb.cells:
        meta = nbgrader_meta(cell)
        if meta.get("solution"):
            gid = meta["grade_id"]
            cell.source = overrides[gid] if gid in overrides else strip_markers(reference[gid])
    return nb
