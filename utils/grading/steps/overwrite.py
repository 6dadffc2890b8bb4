"""SafeOverwriteCells: nbgrader's OverwriteCells that restores each cell's role (solution, graded,
points) from the gradebook and does not lose a submission holding a copied cell or an unknown
grade id (nbgrader's add_missing_cells failed on them with KeyError 'grade_id'): such cells become
plain cells that run and grade nothing. A deleted test cell comes back after the nearest earlier
cell of the source that the submission still has (nbgrader's own step failed with KeyError when
the cell just before it was deleted too, or was not a solution or graded cell). As the first course step, it empties the grading notes a
submission may carry in its metadata (base.py).
"""

from __future__ import annotations

from nbgrader.api import GradeCell, MissingEntry
from nbgrader.preprocessors import OverwriteCells

from utils.grading.steps.base import add_note, reset_notes


class SafeOverwriteCells(OverwriteCells):

    def preprocess(self, nb, resources):
        reset_notes(nb)
        self._nb, self._cells = nb, None
        for cell in nb.cells:
            self._plain_if_no_id(cell)
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell, resources, index):
        self._restore_roles(cell)
        cell, resources = super().preprocess_cell(cell, resources, index)
        self._plain_if_no_id(cell)
        return cell, resources

    def _restore_roles(self, cell) -> None:
        """A cell's role as the gradebook has it: nbgrader restores a locked cell's source, but a
        solution cell turned into a graded one lost the whole submission (KeyError 'points')."""
        meta = cell.get("metadata", {}).get("nbgrader")
        gid = meta.get("grade_id") if meta else None
        if not gid:
            return
        sources, graded_cells, solutions = self._gradebook_cells()
        if gid not in sources:
            return   # an unknown cell: nbgrader's own step makes it a plain cell
        graded = graded_cells.get(gid)
        if graded is not None and not isinstance(graded, GradeCell):
            return   # a task cell: nbgrader's rules apply
        solution = gid in solutions
        want = {"grade": graded is not None, "solution": solution}
        if graded is not None:
            want["points"] = float(graded.max_score)
        changed = [k for k, v in want.items() if meta.get(k) != v]
        if graded is None and "points" in meta:
            del meta["points"]
        meta.update(want)
        if changed:
            add_note(self._nb, "roles-restored", gid, f"cell '{gid}' had its nbgrader role edited "
                                                      f"({', '.join(changed)}); restored from the gradebook")

    def _gradebook_cells(self) -> tuple[set, dict, set]:
        """The notebook's cells as the gradebook has them (source cells' names; graded cells by name,
        a grade cell before a task cell of the same name, as find_graded_cell answers; solution
        cells' names): read once a notebook, where a query per cell and kind cost about 0.03 CPU-s
        a submission."""
        if self._cells is None:
            try:
                source_nb = self.gradebook.find_notebook(self.notebook_id, self.assignment_id)
            except MissingEntry:
                self._cells = (set(), {}, set())
            else:
                graded = {c.name: c for c in source_nb.task_cells}
                graded.update((c.name, c) for c in source_nb.grade_cells)
                self._cells = ({c.name for c in source_nb.source_cells}, graded,
                               {c.name for c in source_nb.solution_cells})
        return self._cells

    @staticmethod
    def _plain_if_no_id(cell) -> None:
        meta = cell.get("metadata", {})
        if "nbgrader" in meta and not meta["nbgrader"].get("grade_id"):
            del meta["nbgrader"]

    def add_missing_grade_cells(self, nb, resources):
        source_nb = self.gradebook.find_notebook(self.notebook_id, self.assignment_id)
        source = {c.name: c for c in source_nb.source_cells}
        order = list(source)
        graded = {c.name: c for c in source_nb.grade_cells}
        solutions = {c.name for c in source_nb.solution_cells}
        for gid in order:
            present = {c.metadata["nbgrader"]["grade_id"]: i for i, c in enumerate(nb.cells)
                       if c.get("metadata", {}).get("nbgrader", {}).get("grade_id")}
            if gid not in graded or gid in present:
                continue
            self.log.warning("Missing grade cell %s encountered, adding to notebook", gid)
            earlier = [present[e] for e in order[:order.index(gid)] if e in present]
            nb.cells.insert(earlier[-1] + 1 if earlier else 0, self.missing_cell_transform(
                source[gid], graded[gid].max_score, is_solution=gid in solutions))
        return nb, resources
