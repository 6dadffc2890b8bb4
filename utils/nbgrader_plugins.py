"""nbgrader preprocessors that keep grading fair when a submission misbehaves.

nbgrader_config.py puts them into nbgrader's pipelines (`install(c)`), so `nbgrader autograde`,
`nbgrader generate_feedback` and the formgrader all use them:

  SafeOverwriteCells  OverwriteCells that does not lose a submission holding a copied cell (a
                    duplicate grade id) or a cell with an unknown grade id (nbgrader KeyError), and
                    restores each cell's role (solution, graded, points) from the gradebook.
  SafeExecute       Execute whose kernels run in the bubblewrap sandbox (utils/sandbox.py), and
                    that survives a dead kernel (os._exit, a crash) and a kernel stuck in a loop
                    that ignores the interrupt: it records an error in that cell, starts a fresh
                    kernel, re-runs the cells before it and goes on, so the cells that worked keep
                    their points instead of the whole submission failing. Each graded test cell
                    must print the run's fresh token after its last line, and runs only after a
                    check that the builtins it uses and IPython's hooks are the originals; else
                    it scores 0.
  LimitOutputSize   Caps the characters a cell's outputs keep (nbgrader's LimitOutput counts lines
                    only, so one 50 MB line would reach the gradebook copy and the feedback HTML).
  ForgiveStderr     nbgrader zeroes a graded cell that wrote anything to stderr; a correct answer
                    that triggers a library warning must not lose its points. In a graded cell with
                    no error output, stderr text is moved to stdout (kept visible, marked). A cell
                    that raised still scores zero. Test cells in this course fail by raising.
  HideHiddenTests   For feedback: removes the hidden-test regions from graded cells and withholds
                    the traceback of an error raised inside one, so test banks can be reused.
                    `--HideHiddenTests.enabled=False` shows them.

Each logs what it did as one line `GRADING-EVENT {json}` for utils.grade to report per student.
"""

from __future__ import annotations

import ast
import builtins
import copy
import json
import queue
import re
import secrets
import time

from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbclient.util import ensure_async, run_sync
from nbformat.notebooknode import NotebookNode
from traitlets import Integer

from nbgrader import utils as nbutils
from nbgrader.preprocessors import Execute, NbGraderPreprocessor, OverwriteCells

EVENT = "GRADING-EVENT"
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _grade_id(cell) -> str | None:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


def _event(pp, resources, kind: str, **fields) -> None:
    nbg = (resources or {}).get("nbgrader", {})
    record = {"event": kind, "student": nbg.get("student"), "assignment": nbg.get("assignment"),
              "notebook": nbg.get("notebook"), **fields}
    pp.log.warning("%s %s", EVENT, json.dumps(record, sort_keys=True))


def parse_events(log_text: str) -> list[dict]:
    """The GRADING-EVENT records of an nbgrader log, in order."""
    events = []
    for line in log_text.splitlines():
        at = line.find(EVENT + " {")
        if at >= 0:
            try:
                events.append(json.loads(line[at + len(EVENT) + 1:]))
            except ValueError:
                pass
    return events


# Installed silently in every fresh kernel before the submission's first cell: a private module
# holding the original builtins and IPython's hooks, whose check(globals, names) lists what changed.
GUARD_SETUP = """
def _grading_guard_setup():
    import builtins, sys, types
    ip = get_ipython()
    originals = dict(vars(builtins))
    cls = type(ip)
    methods = ("run_cell", "run_cell_async", "transform_cell", "transform_ast", "run_ast_nodes",
               "run_code", "showtraceback", "_showtraceback", "showsyntaxerror", "should_run_async")
    class_methods = {k: getattr(cls, k, None) for k in methods}
    own_methods = {k: vars(ip).get(k) for k in methods}
    hooks = lambda: (list(ip.input_transformers_cleanup), list(ip.input_transformers_post),
                     list(ip.ast_transformers), tuple(ip.custom_exceptions))
    base = hooks()
    def same(a, b):
        return len(a) == len(b) and all(x is y for x, y in zip(a, b))
    def check(g, names):
        bad = []
        for name in names:
            if name in originals and vars(builtins).get(name) is not originals[name]:
                bad.append("builtins." + name + " was replaced")
            if name in originals and name in g and g[name] is not originals[name]:
                bad.append("the builtin name '" + name + "' was rebound")
        for label, a, b in zip(("input transformers", "post-input transformers", "AST transformers",
                                "custom exception handlers"), hooks(), base):
            if not same(a, b):
                bad.append("IPython's " + label + " were changed")
        for k, f in class_methods.items():
            if getattr(cls, k, None) is not f or vars(ip).get(k) is not own_methods[k]:
                bad.append("IPython's " + k + " was replaced")
        return bad
    guard = types.ModuleType("_grading_guard")
    guard.check = check
    sys.modules["_grading_guard"] = guard
_grading_guard_setup()
del _grading_guard_setup
"""


def builtin_names(source: str) -> tuple[str, ...]:
    """The builtin names a test cell uses (type, str, abs, isinstance, ...)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return ()
    return tuple(sorted({n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and hasattr(builtins, n.id)
                         and n.id != "_" and not (n.id.startswith("__") and n.id != "__import__")}))


class SafeExecute(Execute):
    """nbgrader's Execute, plus recovery from a dead or unresponsive kernel, a sandbox for every
    kernel, and proof that each graded test cell ran to its end untampered (see module doc)."""

    def __init__(self, *args, **kwargs):
        from utils.sandbox import SandboxKernelManager

        kwargs.setdefault("kernel_manager_class", SandboxKernelManager)
        super().__init__(*args, **kwargs)

    max_restarts = Integer(3, help="Fresh kernels started for one notebook before the remaining "
                                   "cells are marked as not run").tag(config=True)
    probe_timeout = Integer(10, help="Seconds a kernel has to answer after a timed-out cell was "
                                     "interrupted before it is replaced").tag(config=True)

    def preprocess(self, nb, resources=None, km=None):
        self._failed_cells: set[int] = set()   # killed the kernel or hung it: never replayed
        self._restarts = 0
        self._gave_up = False
        self._resources_ref = resources
        self._guarded = False
        self._token = "grading-token-" + secrets.token_hex(16)   # fresh for every notebook graded
        return super().preprocess(nb, resources, km)

    # -- a graded test cell must prove it ran, to its end, in an untampered kernel ----------------
    def _request(self, code: str, user_expressions: dict | None = None, timeout: float = 30) -> dict | None:
        """Send one silent execute request; its reply's content, or None without a reply."""
        try:
            msg_id = run_sync(ensure_async)(self.kc.execute(code, silent=True, store_history=False,
                                                            user_expressions=user_expressions or {}))
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                try:
                    msg = run_sync(self.kc.get_shell_msg)(timeout=max(0.1, deadline - time.monotonic()))
                except queue.Empty:
                    return None
                if msg.get("parent_header", {}).get("msg_id") == msg_id:
                    return msg.get("content", {})
        except Exception:  # noqa: BLE001 - a kernel we cannot ask gives no answer
            return None
        return None

    def _tampering(self, source: str) -> list[str]:
        """What the submission changed that this test cell relies on (empty: nothing)."""
        expr = f"__import__('_grading_guard').check(globals(), {builtin_names(source)!r})"
        reply = self._request("", {"guard": expr})
        try:
            result = reply["user_expressions"]["guard"]
            if result.get("status") != "ok":
                return [f"the grader's check could not run ({result.get('ename')}: {result.get('evalue')})"]
            found = ast.literal_eval(result["data"]["text/plain"])
            if not isinstance(found, list):
                raise ValueError(found)
            return [str(x) for x in found]
        except (KeyError, TypeError, ValueError, SyntaxError):
            return ["the grader's check got no usable answer from the kernel"]

    def _guard(self) -> None:
        """Before the submission's first cell in each kernel: record what the tests rely on."""
        if not self._guarded:
            self._guarded = True
            self._request(GUARD_SETUP)

    def _graded_test(self, cell, resources, index):
        """Run a graded test cell with the run's token printed after its last line; score 0 when
        the kernel was tampered with or the token did not come back."""
        problems = self._tampering(cell.source)
        original = cell.source
        cell.source = f"{original}\nprint({self._token!r})"
        try:
            cell, resources = super().preprocess_cell(cell, resources, index)
        finally:
            cell.source = original
        seen = False
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream" and self._token in out.get("text", ""):
                out["text"] = out["text"].replace(self._token + "\n", "").replace(self._token, "")
                seen = True
        cell.outputs = [o for o in cell.get("outputs", []) if o.get("output_type") != "stream" or o.get("text")]
        failed = any(o.get("output_type") == "error" for o in cell.outputs)
        if problems:
            cell.outputs.append(self._error("GradingTamperError", "; ".join(problems)))
            _event(self, self._resources_ref, "tampered", cell=_grade_id(cell), index=index,
                   problems="; ".join(problems))
        elif not seen and not failed:
            cell.outputs.append(self._error("CellDidNotFinish", "the test cell did not run to its end "
                                            "(its completion mark never came back)"))
            _event(self, self._resources_ref, "unfinished", cell=_grade_id(cell), index=index)
        return cell, resources

    # -- one cell ------------------------------------------------------------------------------
    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code" or not cell.source.strip():
            return super().preprocess_cell(cell, resources, index)
        self._guard()
        if self._gave_up:
            cell.outputs = [self._error("NotRun", "not run: the kernel died or hung too often in "
                                        "earlier cells of this notebook")]
            return cell, self.resources
        try:
            if nbutils.is_grade(cell) and not nbutils.is_solution(cell):
                cell, resources = self._graded_test(cell, resources, index)
            else:
                cell, resources = super().preprocess_cell(cell, resources, index)
        except DeadKernelError:
            cell.outputs = list(cell.get("outputs", [])) + [self._error(
                "DeadKernelError", "the kernel died while running this cell (os._exit, a signal "
                "or a crash); the grader started a new kernel and re-ran the cells before it")]
            _event(self, self._resources_ref, "kernel-died", cell=_grade_id(cell), index=index)
            self._failed_cells.add(index)
            self._recover(index)
            return cell, self.resources
        except CellTimeoutError:
            # the reply came (interrupted) but the kernel went on producing no idle state: hung
            cell.outputs = list(cell.get("outputs", []))
            if not self._timed_out(cell):
                cell.outputs.append(self._error(self.error_on_timeout.get("ename", "CellTimeoutError"),
                                                f"no reply from the kernel within {self.timeout} s"))
        if self._timed_out(cell):
            _event(self, self._resources_ref, "timeout", cell=_grade_id(cell), index=index,
                   seconds=self.timeout)
            if not self._responsive():
                _event(self, self._resources_ref, "kernel-unresponsive", cell=_grade_id(cell), index=index)
                self._failed_cells.add(index)
                self._recover(index)
        return cell, self.resources

    @staticmethod
    def _error(ename: str, evalue: str) -> NotebookNode:
        return NotebookNode(output_type="error", ename=ename, evalue=evalue,
                            traceback=[f"{ename}: {evalue}"])

    def _timed_out(self, cell) -> bool:
        name = self.error_on_timeout.get("ename", "CellTimeoutError")
        return any(o.get("output_type") == "error" and o.get("ename") == name for o in cell.get("outputs", []))

    def _responsive(self) -> bool:
        """After an interrupt: does the kernel answer a trivial request in probe_timeout s?"""
        try:
            msg_id = run_sync(ensure_async)(self.kc.execute("", silent=True, store_history=False))
            deadline = time.monotonic() + self.probe_timeout
            while time.monotonic() < deadline:
                try:
                    msg = run_sync(self.kc.get_shell_msg)(timeout=max(0.1, deadline - time.monotonic()))
                except queue.Empty:
                    break
                if msg.get("parent_header", {}).get("msg_id") == msg_id:
                    return True
            return False
        except Exception:  # noqa: BLE001 - a kernel we cannot even ask is not responsive
            return False

    # -- a fresh kernel --------------------------------------------------------------------------
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
        self._guarded = False
        self.km = self.create_kernel_manager()
        self.start_new_kernel()
        self.start_new_kernel_client()
        self._guard()

    def _recover(self, failed_index: int) -> None:
        """New kernel; re-run the earlier cells (outputs discarded) so later cells find the state."""
        while self._restarts < self.max_restarts:
            self._restarts += 1
            self._fresh_kernel()
            _event(self, self._resources_ref, "kernel-restarted", index=failed_index, restarts=self._restarts)
            ok = True
            for j in range(failed_index):
                earlier = self.nb.cells[j]
                if j in self._failed_cells or earlier.cell_type != "code" or not earlier.source.strip():
                    continue
                scratch = copy.deepcopy(earlier)
                try:
                    self.execute_cell(scratch, j, store_history=False)
                except (DeadKernelError, CellTimeoutError):
                    self._failed_cells.add(j)
                    ok = False
                    break
                if self._timed_out(scratch) and not self._responsive():
                    self._failed_cells.add(j)
                    ok = False
                    break
            if ok:
                return
        self._gave_up = True
        _event(self, self._resources_ref, "gave-up", index=failed_index, restarts=self._restarts)


class SafeOverwriteCells(OverwriteCells):
    """OverwriteCells that survives cells whose nbgrader metadata has no grade id.

    nbgrader's DeduplicateIds empties the metadata of a copied cell, and OverwriteCells deletes the
    grade id of a cell the gradebook does not know (a made-up id, another lesson's cell); its
    add_missing_cells step then fails with KeyError 'grade_id' and the whole submission is lost.
    Such cells become plain cells here: they still run, they grade nothing."""

    def preprocess(self, nb, resources):
        for cell in nb.cells:
            self._plain_if_no_id(cell)
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell, resources, index):
        self._restore_roles(cell, resources, index)
        cell, resources = super().preprocess_cell(cell, resources, index)
        self._plain_if_no_id(cell)
        return cell, resources

    def _restore_roles(self, cell, resources, index) -> None:
        """A cell's role (solution, graded, points) as the gradebook has it: nbgrader restores a
        locked cell's source, but a solution cell turned into a graded one lost the whole
        submission (KeyError 'points', or no such graded cell)."""
        from nbgrader.api import GradeCell, MissingEntry

        meta = cell.get("metadata", {}).get("nbgrader")
        gid = meta.get("grade_id") if meta else None
        if not gid:
            return
        where = (gid, self.notebook_id, self.assignment_id)
        try:
            self.gradebook.find_source_cell(*where)
        except MissingEntry:
            return   # an unknown cell: nbgrader's own step makes it a plain cell
        try:
            graded = self.gradebook.find_graded_cell(*where)
        except MissingEntry:
            graded = None
        if graded is not None and not isinstance(graded, GradeCell):
            return   # a task cell: nbgrader's rules apply
        try:
            self.gradebook.find_solution_cell(*where)
            solution = True
        except MissingEntry:
            solution = False
        want = {"grade": graded is not None, "solution": solution}
        if graded is not None:
            want["points"] = float(graded.max_score)
        changed = [k for k, v in want.items() if meta.get(k) != v]
        if graded is None and "points" in meta:
            del meta["points"]
        meta.update(want)
        if changed:
            _event(self, resources, "roles-restored", cell=gid, index=index, fields=", ".join(changed))

    @staticmethod
    def _plain_if_no_id(cell) -> None:
        meta = cell.get("metadata", {})
        if "nbgrader" in meta and not meta["nbgrader"].get("grade_id"):
            del meta["nbgrader"]


class LimitOutputSize(NbGraderPreprocessor):
    """Cap the text a cell's outputs keep; drop oversized rich outputs (images, HTML)."""

    max_chars = Integer(20000, help="Characters of stream text kept per cell (-1: no limit)").tag(config=True)
    max_data_chars = Integer(2_000_000, help="Size of one rich output (base64 image, HTML) kept "
                                             "(-1: no limit)").tag(config=True)

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code" or self.max_chars < 0:
            return cell, resources
        used, dropped = 0, 0
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream":
                text = out.get("text", "")
                if isinstance(text, list):
                    text = "".join(text)
                room = max(0, self.max_chars - used)
                if len(text) > room:
                    dropped += len(text) - room
                    text = text[:room] + f"\n... output truncated by the grader ({len(text) - room} characters cut) ...\n"
                used += len(text)
                out["text"] = text
            elif out.get("output_type") in ("display_data", "execute_result") and self.max_data_chars >= 0:
                data = out.get("data", {})
                for mime in list(data):
                    size = len(data[mime]) if isinstance(data[mime], str) else len(json.dumps(data[mime]))
                    if size > self.max_data_chars:
                        dropped += size
                        data[mime] = (f"[{mime} output of {size} characters removed by the grader]"
                                      if mime == "text/plain" else None)
                        if data[mime] is None:
                            del data[mime]
                if not data:
                    out["data"] = {"text/plain": "[output removed by the grader: too large]"}
        if dropped:
            _event(self, resources, "output-truncated", cell=_grade_id(cell), index=index, characters=dropped)
        return cell, resources


class ForgiveStderr(NbGraderPreprocessor):
    """In a graded cell that raised nothing, move stderr text to stdout so it costs no points."""

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code" or not nbutils.is_grade(cell):
            return cell, resources
        outputs = cell.get("outputs", [])
        if any(o.get("output_type") == "error" for o in outputs):
            return cell, resources
        moved = False
        for out in outputs:
            if out.get("output_type") == "stream" and out.get("name") == "stderr":
                out["name"] = "stdout"
                text = out.get("text", "")
                text = "".join(text) if isinstance(text, list) else text
                out["text"] = "[stderr] " + text
                moved = True
        if moved:
            _event(self, resources, "stderr-forgiven", cell=_grade_id(cell), index=index)
        return cell, resources


class HideHiddenTests(NbGraderPreprocessor):
    """Feedback without hidden tests: their source is cut from graded cells, and an error raised
    inside them shows only its type. Disable (`--HideHiddenTests.enabled=False`) to show them."""

    placeholder = "# (hidden tests are not shown)"

    def preprocess_cell(self, cell, resources, index):
        from nbgrader.preprocessors import ClearHiddenTests

        markers = ClearHiddenTests(config=self.config)   # nbgrader's delimiters, as configured
        begin, end = markers.begin_test_delimeter, markers.end_test_delimeter
        if cell.cell_type != "code" or begin not in cell.source:
            return cell, resources
        lines = cell.source.split("\n")
        hidden_rows: set[int] = set()   # 1-based line numbers inside a hidden region, markers included
        kept, inside = [], False
        for number, line in enumerate(lines, 1):
            if begin in line:
                inside = True
                hidden_rows.add(number)
                kept.append(line[: len(line) - len(line.lstrip())] + self.placeholder)
                continue
            if end in line:
                inside = False
                hidden_rows.add(number)
                continue
            if inside:
                hidden_rows.add(number)
            else:
                kept.append(line)
        hidden_text = [l.strip() for n, l in enumerate(lines, 1) if n in hidden_rows and len(l.strip()) > 3]
        cell.source = "\n".join(kept)
        for out in cell.get("outputs", []):
            if out.get("output_type") != "error":
                continue
            row = _raising_row(out.get("traceback", []))
            plain_tb = _ANSI.sub("", "\n".join(out.get("traceback", [])))
            in_hidden = (row in hidden_rows) if row is not None else any(t in plain_tb for t in hidden_text)
            if in_hidden:
                out["evalue"] = "raised by a hidden test (the test is not shown)"
            out["traceback"] = [f"{out.get('ename', 'Error')}: {out.get('evalue', '')}"]
        return cell, resources


def _raising_row(traceback: list[str]) -> int | None:
    """The cell line (1-based) IPython's traceback points at in the cell's own frame."""
    for chunk in traceback:
        plain = _ANSI.sub("", chunk)
        if "Cell In[" in plain or "<ipython-input" in plain:
            m = re.search(r"^-+>\s*(\d+)", plain, re.M)
            if m:
                return int(m.group(1))
    return None


def install(c) -> None:
    """Put the plugins into nbgrader's pipelines in config `c` (keeps nbgrader's own steps)."""
    from nbgrader.converters.autograde import Autograde
    from nbgrader.converters.generate_feedback import GenerateFeedback
    from nbgrader.preprocessors import LimitOutput, SaveAutoGrades

    pipeline = []
    for pp in Autograde.class_traits()["autograde_preprocessors"].default():
        if pp is Execute:
            pp = SafeExecute
        if pp is LimitOutput:
            pipeline.append(LimitOutputSize)
        if pp is SaveAutoGrades:
            pipeline.append(ForgiveStderr)
        pipeline.append(pp)
    c.Autograde.autograde_preprocessors = pipeline
    c.Autograde.sanitize_preprocessors = [
        SafeOverwriteCells if pp is OverwriteCells else pp
        for pp in Autograde.class_traits()["sanitize_preprocessors"].default()]

    feedback = list(GenerateFeedback.class_traits()["preprocessors"].default())
    feedback.insert(1, HideHiddenTests)  # after GetGrades, before the HTML header
    c.GenerateFeedback.preprocessors = feedback
