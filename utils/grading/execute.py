"""SafeExecute: nbgrader's Execute with every kernel in the bubblewrap sandbox (utils/sandbox.py),
where a kernel that dies or ignores the interrupt costs only its cell: the cell gets an error, a
fresh kernel re-runs the cells before it (outputs discarded) and grading goes on. It judges
nothing; Verdicts does, outside the kernel.
"""

from __future__ import annotations

import copy
import queue
import time

from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbclient.util import ensure_async, run_sync
from nbformat.notebooknode import NotebookNode
from nbgrader.preprocessors import Execute
from traitlets import Integer

from utils.grading.base import add_note, grade_id


def error_output(ename: str, evalue: str) -> NotebookNode:
    return NotebookNode(output_type="error", ename=ename, evalue=evalue, traceback=[f"{ename}: {evalue}"])


class SafeExecute(Execute):
    max_restarts = Integer(3, help="Fresh kernels started for one notebook before the remaining "
                                   "cells are marked as not run").tag(config=True)
    probe_timeout = Integer(10, help="Seconds a kernel has to answer after a timed-out cell was "
                                     "interrupted before it is replaced").tag(config=True)

    def __init__(self, *args, **kwargs):
        from utils.sandbox import SandboxKernelManager

        kwargs.setdefault("kernel_manager_class", SandboxKernelManager)
        super().__init__(*args, **kwargs)

    def preprocess(self, nb, resources=None, km=None):
        self._failed_cells: set[int] = set()   # killed the kernel or hung it: never replayed
        self._restarts = 0
        self._gave_up = False
        return super().preprocess(nb, resources, km)

    def _note(self, event: str, cell, text: str) -> None:
        add_note(self.nb, event, grade_id(cell) if cell is not None else None, text)

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code" or not cell.source.strip():
            return super().preprocess_cell(cell, resources, index)
        where = grade_id(cell) or f"#{index}"
        if self._gave_up:
            cell.outputs = [error_output("NotRun", "not run: the kernel died or hung too often in "
                                                   "earlier cells of this notebook")]
            return cell, self.resources
        try:
            cell, resources = super().preprocess_cell(cell, resources, index)
        except DeadKernelError:
            cell.outputs = list(cell.get("outputs", [])) + [error_output(
                "DeadKernelError", "the kernel died while running this cell (os._exit, a signal "
                "or a crash); the grader started a new kernel and re-ran the cells before it")]
            self._note("kernel-died", cell, f"the kernel died in cell '{where}' (os._exit, a signal or a crash)")
            self._failed_cells.add(index)
            self._recover(cell, index)
            return cell, self.resources
        except CellTimeoutError:   # interrupted, but the kernel never went idle again
            cell.outputs = list(cell.get("outputs", []))
            if not self._timed_out(cell):
                cell.outputs.append(error_output(self._timeout_name(), f"no reply from the kernel within {self.timeout} s"))
        if self._timed_out(cell):
            self._note("timeout", cell, f"cell '{where}' ran past the {self.timeout} s limit and was "
                                        f"interrupted (0 for that cell)")
            if not self._responsive():
                self._note("kernel-unresponsive", cell, f"the kernel ignored the interrupt in cell '{where}'; "
                                                        f"it was replaced")
                self._failed_cells.add(index)
                self._recover(cell, index)
        return cell, self.resources

    def _timeout_name(self) -> str:
        return self.error_on_timeout.get("ename", "CellTimeoutError")

    def _timed_out(self, cell) -> bool:
        return any(o.get("output_type") == "error" and o.get("ename") == self._timeout_name()
                   for o in cell.get("outputs", []))

    def _responsive(self) -> bool:
        """After an interrupt: does the kernel answer a trivial request in probe_timeout s?"""
        try:
            msg_id = run_sync(ensure_async)(self.kc.execute("", silent=True, store_history=False))
            deadline = time.monotonic() + self.probe_timeout
            while time.monotonic() < deadline:
                try:
                    msg = run_sync(self.kc.get_shell_msg)(timeout=max(0.1, deadline - time.monotonic()))
                except queue.Empty:
                    return False
                if msg.get("parent_header", {}).get("msg_id") == msg_id:
                    return True
        except Exception:  # noqa: BLE001 - a kernel we cannot even ask is not responsive
            pass
        return False

    def _fresh_kernel(self) -> None:
        try:
            if self.km is not None and run_sync(self.km.is_alive)():
                run_sync(self.km.shutdown_kernel)(now=True)
        except Exception:  # noqa: BLE001 - already dead or half dead: start over regardless
            pass
        try:
            if self.kc is not None:
                run_sync(ensure_async)(self.kc.stop_channels())
            if self.km is not None:
                run_sync(self.km.cleanup_resources)()
        except Exception:  # noqa: BLE001
            pass
        self.kc = None
        self.km = self.create_kernel_manager()
        self.start_new_kernel()
        self.start_new_kernel_client()

    def _replay(self, failed_index: int) -> bool:
        """Re-run the cells before `failed_index` in the fresh kernel (outputs discarded)."""
        for j in range(failed_index):
            earlier = self.nb.cells[j]
            if j in self._failed_cells or earlier.cell_type != "code" or not earlier.source.strip():
                continue
            scratch = copy.deepcopy(earlier)
            try:
                self.execute_cell(scratch, j, store_history=False)
            except (DeadKernelError, CellTimeoutError):
                self._failed_cells.add(j)
                return False
            if self._timed_out(scratch) and not self._responsive():
                self._failed_cells.add(j)
                return False
        return True

    def _recover(self, cell, failed_index: int) -> None:
        while self._restarts < self.max_restarts:
            self._restarts += 1
            self._fresh_kernel()
            self._note("kernel-restarted", None, "a fresh kernel re-ran the cells before it and grading went on")
            if self._replay(failed_index):
                return
        self._gave_up = True
        self._note("gave-up", None, "the kernel failed too often; the remaining cells were not run (0)")
