"""SafeExecute: nbgrader's Execute with every kernel in the bubblewrap sandbox (utils/sandbox/),
where a kernel that dies or ignores the interrupt costs only its cell: the cell gets an error, a
fresh kernel re-runs the cells before it (outputs discarded) and grading goes on. It judges
nothing; Verdicts does, outside the kernel.

The grader's own process stays bounded whatever the kernel sends (`process_message`): only the
message types a notebook's outputs need are taken (comm and widget messages, display updates and
unknown types are dropped before nbclient sees them, logs them or keeps widget state), a display's
`transient` is dropped (no display id links one cell's output to another's), an output nbformat
would refuse is dropped (nbclient would raise on it and end the notebook's grading), and once a
notebook's outputs reach `max_output_bytes` (or a cell `max_outputs_arrived` outputs) the rest are
dropped as they arrive: the first one dropped in a cell leaves a line there saying so, and a note.
The observations of graded test cells (course.observe's MIME type) have a channel of their own,
`max_observation_bytes` a notebook and `max_observations_arrived` a cell: a student who prints up
to her limit early still has every later graded cell judged. The sandbox's kernel manager
refuses any single message frame larger than `SandboxKernelManager.max_message_mb` before it is
read (ZeroMQ's MAXMSGSIZE), and its client drops a message whose parts are not what nbclient reads (utils/sandbox/channels.py).

A notebook's time is bounded twice. Its budget comes from its lesson's reference run (the
reference solution's kernel time, utils/grading/reference_run.py): `budget_floor` + `budget_multiple`
x that time (60 s + 10 x 3.2 s = 92 s for a lesson whose reference runs in 3.2 s). Every second
a cell holds the kernel counts against it: a cell stopped by its own timeout, the wait for the
kernel to answer after the interrupt, fresh kernels and their re-runs after a dead or hung one.
A cell never runs past what is left of the budget (it is interrupted there), and once the budget
is spent the cells left are not run (their graded cells score 0 with that reason), so no notebook
holds a worker much past its budget, however many of its cells sleep past their own timeout.
`notebook_timeout` stays the hard limit on everything (kernel starts included). The budget
and the seconds it used are in the notebook's result file (BUDGET_KEY); a slow machine raises
`c.SafeExecute.budget_multiple` or `budget_floor`. Without a reference run (plain nbgrader execute
without ReferenceObservations) only `notebook_timeout` holds.
"""

from __future__ import annotations

import copy
import json
import math
import queue
import time

from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbclient.util import ensure_async, run_sync
from nbformat.notebooknode import NotebookNode
from nbformat.v4 import output_from_msg
from nbgrader.preprocessors import Execute
from traitlets import Bool, Enum, Float, Integer

from course.observe import MIME
from utils.grading.reference_run import RESOURCE_KEY
from utils.grading.steps.base import add_note, grade_id, is_test_cell
from utils.sandbox.manager import SandboxKernelManager


UNMEASURABLE = 1 << 40   # the size of content json cannot measure (circular, say): never kept
BUDGET_KEY = "time_budget"   # in resources, then in the result file: the notebook's budget and its use


def error_output(ename: str, evalue: str) -> NotebookNode:
    return NotebookNode(output_type="error", ename=ename, evalue=evalue, traceback=[f"{ename}: {evalue}"])


def _valid_output(msg: dict) -> bool:
    """Would nbclient's next step (nbformat's output_from_msg, its checks included) take this
    output? One it refuses would end the notebook's grading there."""
    try:
        output_from_msg(msg)
    except Exception:  # noqa: BLE001 - any malformed output the kernel sent
        return False
    return True


def _is_observation(msg_type, content) -> bool:
    """A display of course.observe's MIME type (the grader reads these from graded cells)."""
    data = content.get("data") if isinstance(content, dict) else None
    return msg_type == "display_data" and isinstance(data, dict) and MIME in data


def _size(content: dict) -> int:
    """About how many bytes an output message's content holds."""
    text = content.get("text")
    if isinstance(text, str) and len(content) <= 3:
        return len(text)
    try:
        return len(json.dumps(content))
    except (TypeError, ValueError, RecursionError):
        return UNMEASURABLE


class SafeExecute(Execute):
    max_restarts = Integer(3, help="Fresh kernels started for one notebook before the remaining "
                                   "cells are marked as not run").tag(config=True)
    probe_timeout = Integer(10, help="Seconds a kernel has to answer after a timed-out cell was "
                                     "interrupted before it is replaced").tag(config=True)
    notebook_timeout = Integer(1200, help="Seconds one notebook may take in all (kernel starts and "
                                          "re-runs included); the cells left when they are spent are "
                                          "not run (0 for their graded cells). 0: no limit").tag(config=True)
    budget_floor = Integer(60, help="Seconds every notebook has, on top of budget_multiple times its "
                                    "lesson's reference run, for its cells (every second counted, a cell "
                                    "stopped by its own timeout included); a cell running when it is "
                                    "spent is interrupted and the cells left are not run (0 for their "
                                    "graded cells)").tag(config=True)
    budget_multiple = Float(10.0, help="The notebook's time budget is budget_floor plus this many times "
                                       "the lesson's reference run (its kernel time); raise it on a "
                                       "machine slower than the one the reference ran on. 0 with a "
                                       "budget_floor of 0: no budget (notebook_timeout only)").tag(config=True)
    max_output_bytes = Integer(32 << 20, help="Bytes of outputs one notebook's kernel may send; what "
                                              "arrives beyond is dropped as it arrives").tag(config=True)
    max_outputs_arrived = Integer(2000, help="Outputs one cell may send; later ones are dropped as they "
                                             "arrive").tag(config=True)
    max_observation_bytes = Integer(16 << 20, help="Bytes of graded cells' observations one notebook's "
                                                   "kernel may send, apart from max_output_bytes: the "
                                                   "student's prints never take their room").tag(config=True)
    max_observations_arrived = Integer(1000, help="Observations one graded cell may send, apart from "
                                                  "max_outputs_arrived").tag(config=True)
    # Once the last cell's outputs are in (nbclient waits for each cell's idle status), the kernel has
    # nothing left to give: killed at once, it spends nothing on its own end, which a graceful
    # shutdown would (the student's atexit hooks, then the interpreter's teardown with torch loaded:
    # about 0.7 CPU-s a kernel, against 0.03 killed; measured 2026-12-07).
    shutdown_kernel = Enum(["graceful", "immediate"], default_value="immediate",
                           help="How the kernel ends after the notebook's last cell: killed at once "
                                "(immediate), or asked to shut down, running its atexit hooks and "
                                "teardown (graceful, nbclient's default)").tag(config=True)
    # nothing of the kernel's widgets or message timings is kept (nor written to the notebook)
    store_widget_state = Bool(False, help="Never: widget state is the kernel's").tag(config=True)
    record_timing = Bool(False, help="Never: the timings are the kernel's message headers").tag(config=True)

    budget: int | None = None     # set by preprocess, for each notebook
    _charged, _cell_start, _deadline, _observed = 0.0, None, math.inf, 0

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("kernel_manager_class", SandboxKernelManager)
        super().__init__(*args, **kwargs)

    def preprocess(self, nb, resources=None, km=None):
        self._failed_cells: set[int] = set()   # killed the kernel or hung it: never replayed
        self._restarts = 0
        self._gave_up = False
        self._arrived = 0          # bytes of the student's outputs taken from the kernel so far
        self._observed = 0         # bytes of graded cells' observations taken so far (their own budget)
        self._dropped = 0          # outputs dropped as they arrived
        self._cut_cells = {}       # id -> cell: the cells whose cut is announced in them
        self._observations_in = {}   # id -> [cell, observations it sent] (the cell held: its id stays its own)
        self._deadline = time.monotonic() + self.notebook_timeout if self.notebook_timeout > 0 else math.inf
        self._out_of_time = False
        reference = (resources or {}).get(RESOURCE_KEY)
        self._reference_seconds = getattr(reference, "seconds", None)
        self.budget = self.time_budget(self._reference_seconds)
        self._charged = 0.0        # seconds of the cells before this one, counted against the budget
        self._cell_start = None    # when the running cell started (monotonic)
        try:
            return super().preprocess(nb, resources, km)
        finally:
            if isinstance(resources, dict):
                resources[BUDGET_KEY] = {"budget_s": self.budget, "used_s": round(self._charged, 1),
                                         "reference_s": self._reference_seconds, "floor_s": self.budget_floor,
                                         "multiple": self.budget_multiple, "limit_s": self.notebook_timeout}
            if self._dropped:
                self._note("output-dropped", None, f"{self._dropped} output(s) sent by the kernel beyond "
                                                   f"{self.max_output_bytes >> 20} MiB (or {self.max_outputs_arrived} "
                                                   f"in one cell; observations: {self.max_observation_bytes >> 20} MiB, "
                                                   f"{self.max_observations_arrived} in one graded cell) were dropped "
                                                   f"as they arrived")

    # -- what the grader takes from the kernel's messages ------------------------------------------
    KEPT = frozenset({"status", "execute_input", "stream", "display_data", "execute_result", "error", "clear_output"})
    OUTPUTS = frozenset({"stream", "display_data", "execute_result", "error"})

    def process_message(self, msg, cell, cell_index):
        msg_type = msg.get("msg_type") if isinstance(msg, dict) else None
        content = msg.get("content") if isinstance(msg, dict) else None
        if not isinstance(msg_type, str) or msg_type not in self.KEPT or not isinstance(content, dict):
            return None   # comm_*, update_display_data, anything unknown: never logged or kept
        if msg_type == "status" and not isinstance(content.get("execution_state"), str):
            return None
        content.pop("transient", None)
        if "execution_count" in content:   # the grader numbers the cells (KernelFields): 0 is "it ran"
            content["execution_count"] = 0
        if msg_type in self.OUTPUTS:
            size = _size(content)
            if _is_observation(msg_type, content) and is_test_cell(cell):   # the grader's channel
                counted = self.__dict__.setdefault("_observations_in", {}).setdefault(id(cell), [cell, 0])
                if self._observed + size > self.max_observation_bytes or counted[1] >= self.max_observations_arrived \
                        or not _valid_output(msg):
                    self._dropped += 1
                    return None
                self._observed += size
                counted[1] += 1
            elif size < UNMEASURABLE and (self._arrived + size > self.max_output_bytes
                                          or len(cell.get("outputs", [])) >= self.max_outputs_arrived):
                self._dropped += 1
                return self._announce_cut(msg, cell, cell_index)
            elif size >= UNMEASURABLE or not _valid_output(msg):
                self._dropped += 1
                return None
            else:
                self._arrived += size
        return super().process_message(msg, cell, cell_index)

    def _announce_cut(self, msg, cell, cell_index):
        """The first output dropped in a cell becomes one line saying so; the later ones vanish."""
        cut = self.__dict__.setdefault("_cut_cells", {})
        if id(cell) in cut:
            return None
        cut[id(cell)] = cell   # held, so that no later cell takes its id
        limit = self.max_output_bytes
        amount = f"{limit / (1 << 20):g} MiB" if limit >= 1 << 20 else f"{limit:,} bytes"
        line = (f"\n... the grader cut this cell's output here: what it printed past the notebook's "
                f"{amount} of outputs or the cell's {self.max_outputs_arrived} was dropped "
                f"(graded cells are still judged) ...\n")
        note = {**msg, "msg_type": "stream", "header": {**msg["header"], "msg_type": "stream"},
                "content": {"name": "stdout", "text": line}}
        return super().process_message(note, cell, cell_index)

    def _budget_left(self) -> float:
        """Seconds of the budget not yet spent, the running cell's so far counted (inf: no budget)."""
        if self.budget is None:
            return math.inf
        running = time.monotonic() - self._cell_start if self._cell_start is not None else 0.0
        return self.budget - self._charged - running

    def _get_timeout(self, cell):
        """The cell's limit, never past the notebook's total nor what is left of its budget."""
        timeout = super()._get_timeout(cell)
        left = min(self._deadline - time.monotonic(), self._budget_left())
        if left < math.inf:
            left = max(1, math.ceil(left))
            timeout = left if timeout is None else min(timeout, left)
        return timeout

    def time_budget(self, reference_seconds) -> int | None:
        """budget_floor + budget_multiple x the reference's seconds, never past notebook_timeout;
        None without a reference run's time (or with floor and multiple 0)."""
        if not isinstance(reference_seconds, (int, float)) or not 0 < reference_seconds < math.inf \
                or (self.budget_floor <= 0 and self.budget_multiple <= 0):
            return None
        budget = math.ceil(self.budget_floor + self.budget_multiple * reference_seconds)
        return min(budget, self.notebook_timeout) if self.notebook_timeout > 0 else budget

    def _note(self, event: str, cell, text: str) -> None:
        add_note(self.nb, event, grade_id(cell) if cell is not None else None, text)

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code" or not cell.source.strip():
            return super().preprocess_cell(cell, resources, index)
        where = grade_id(cell) or f"#{index}"
        if not self._out_of_time and time.monotonic() >= self._deadline:
            self._out_of_time = f"its total time limit of {self.notebook_timeout} s"
            self._note("notebook-timeout", None, f"the notebook ran past its total limit of {self.notebook_timeout} s "
                                                 f"(SafeExecute.notebook_timeout); the cells from #{index} on were "
                                                 f"not run (0 for their graded cells)")
        elif not self._out_of_time and self.budget is not None and self._charged >= self.budget:
            self._out_of_time = f"its time budget of {self.budget} s"
            self._note("notebook-budget", None, f"the notebook's cells used its time budget of {self.budget} s "
                                                f"({self.budget_floor} s + {self.budget_multiple:g} x the reference "
                                                f"run's {self._reference_seconds:.1f} s; SafeExecute.budget_floor, "
                                                f"budget_multiple); the cells from #{index} on were not run "
                                                f"(0 for their graded cells)")
        if self._out_of_time:
            cell.outputs = [error_output("NotebookTimeout", f"not run: the notebook ran past {self._out_of_time}")]
            return cell, self.resources
        self._cell_start = time.monotonic()
        try:
            return self._run_cell(cell, resources, index, where)
        finally:   # every second counts: a timed-out cell, the interrupt's wait, fresh kernels and re-runs
            self._charged += time.monotonic() - self._cell_start
            self._cell_start = None

    def _run_cell(self, cell, resources, index, where):
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
        if self._timed_out(cell) and (time.monotonic() >= self._deadline or self._budget_left() <= 0):
            return cell, self.resources   # the notebook's total or budget, not the cell's: the next cell says so
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
        except Exception:  # noqa: BLE001 - a dead kernel's clean-up, best effort: the cell's verdict is already kept
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
