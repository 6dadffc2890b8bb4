"""SafeExecute: what a kernel's messages may leave in the notebook (drops, caps, the notebook's total
time), and a dead, hung or babbling kernel costing only its own cells (tests/steps_common.py says
how these tests are built)."""

from __future__ import annotations

import copy
import json
import math
import time

import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook
from traitlets.config import Config

from utils.authoring import nbauthor as author
from utils.grading.steps.base import read_notes
from utils.grading.reference_run import RESOURCE_KEY, Reference
from utils.grading.steps.execute import BUDGET_KEY, SafeExecute
from utils.sandbox.channels import well_formed_message
from nbgrader.utils import determine_grade

from course.observe import MIME
from utils.grading.steps.observations import as_autograding
from utils.grading.steps.verdicts import Verdicts
from steps_common import SOURCE_A, lesson, lesson_reference


def executor(**traits) -> SafeExecute:
    """A SafeExecute as it stands in the middle of a notebook, for messages fed by hand."""
    ex = SafeExecute(**traits)
    ex.nb = new_notebook(cells=[new_code_cell("x")])
    ex._arrived, ex._observed, ex._dropped, ex._cut_cells = 0, 0, 0, {}
    ex.reset_execution_trackers()
    ex.clear_before_next_output = False
    return ex


def msg(msg_type, content) -> dict:
    return {"msg_type": msg_type, "content": content, "parent_header": {"msg_id": "p"},
            "header": {"msg_type": msg_type, "date": "x"}, "metadata": {}}


@pytest.mark.parametrize("message", [
    msg("comm_open", {"comm_id": "c", "target_name": "jupyter.widget", "data": {"state": {"value": 1}}}),
    msg("comm_msg", {"comm_id": "c", "data": {"method": "update", "state": {"value": 2}}}),
    msg("update_display_data", {"data": {"text/plain": "new"}, "metadata": {}, "transient": {"display_id": "d"}}),
    msg("unknown_type", {"data": {"text/plain": "x"}}),
    msg("display_data", "not a dict"), msg("display_data", None), msg("stream", ["text"]),
    msg("status", {"execution_state": 1}), msg("status", {}),
    "not a message", None, {"content": {}},
    {"msg_type": ["stream"], "content": {}},           # the kernel writes its header's JSON: any type there
])
def test_a_message_the_notebook_does_not_need_is_dropped_before_nbclient_sees_it(message):
    ex = executor()
    cell = ex.nb.cells[0]
    assert ex.process_message(message, cell, 0) is None
    assert cell.outputs == [] and not ex.widget_state and not ex.comm_objects and not ex._display_id_map


def test_a_display_keeps_no_display_id_and_the_kernels_count_is_not_kept():
    ex = executor()
    cell = ex.nb.cells[0]
    ex.process_message(msg("execute_input", {"code": "x", "execution_count": 10 ** 30}), cell, 0)
    ex.process_message(msg("execute_result", {"data": {"text/plain": "1"}, "metadata": {}, "execution_count": 77,
                                              "transient": {"display_id": "secret"}}), cell, 0)
    ex.process_message(msg("display_data", {"data": {"text/plain": "2"}, "metadata": {},
                                            "transient": {"display_id": "other"}}), cell, 0)
    assert cell.execution_count == 0 and [o.get("execution_count") for o in cell.outputs] == [0, None]
    assert not ex._display_id_map and all("transient" not in o for o in cell.outputs)


def test_outputs_past_the_notebooks_bytes_are_dropped_as_they_arrive():
    ex = executor(max_output_bytes=10_000)
    cell = ex.nb.cells[0]
    one = {"data": {"text/plain": "y" * 1000}, "metadata": {}}
    size = len(json.dumps(one))
    for _ in range(30):
        ex.process_message(msg("display_data", copy.deepcopy(one)), cell, 0)
    kept = 10_000 // size
    assert len(cell.outputs) == kept + 1 and ex._dropped == 30 - kept
    assert "the grader cut this cell's output here" in cell.outputs[-1].text   # one line, where the cut is
    assert ex._arrived <= 10_000


def test_one_huge_stream_is_dropped_but_later_small_ones_still_fit():
    ex = executor(max_output_bytes=1000)
    cell = ex.nb.cells[0]
    ex.process_message(msg("stream", {"name": "stdout", "text": "z" * 50_000}), cell, 0)
    ex.process_message(msg("stream", {"name": "stdout", "text": "small\n"}), cell, 0)
    assert [o.text for o in cell.outputs][1:] == ["small\n"] and ex._dropped == 1
    assert "cut this cell's output" in cell.outputs[0].text


def test_outputs_past_a_cells_count_are_dropped_as_they_arrive():
    ex = executor(max_outputs_arrived=3)
    cell = ex.nb.cells[0]
    for i in range(10):
        ex.process_message(msg("display_data", {"data": {"text/plain": str(i)}, "metadata": {}}), cell, 0)
    assert [o.data["text/plain"] for o in cell.outputs[:3]] == ["0", "1", "2"] and ex._dropped == 7
    assert len(cell.outputs) == 4 and "cut this cell's output" in cell.outputs[3].text


def test_a_graded_cells_observations_keep_their_own_budget_when_the_students_prints_filled_hers():
    """The student's outputs reach max_output_bytes; a graded test cell's observations still
    arrive (their own budget), her next prints are cut with one line saying so, and observations
    past their own budget are dropped too: the grader stays bounded."""
    ex = executor(max_output_bytes=1000, max_observation_bytes=600, max_observations_arrived=3)
    graded = author.tests("test_a", 2, SOURCE_A)
    ex.nb.cells.append(graded)
    printed = ex.nb.cells[0]
    ex.process_message(msg("stream", {"name": "stdout", "text": "d" * 990}), printed, 0)   # just under her cap
    observation = {"data": {MIME: {"label": "a(1)", "rule": "close", "rel": 1e-6, "abs": 0.0, "value": 1.0}},
                   "metadata": {}}
    for _ in range(2):
        ex.process_message(msg("display_data", copy.deepcopy(observation)), graded, 1)
    ex.process_message(msg("stream", {"name": "stdout", "text": "more debugging\n"}), graded, 1)
    ex.process_message(msg("stream", {"name": "stdout", "text": "and more debugging\n"}), graded, 1)
    assert [o.data[MIME]["label"] for o in graded.outputs if o.output_type == "display_data"] == ["a(1)", "a(1)"]
    assert [o.text for o in graded.outputs if o.output_type == "stream"] == [
        "\n... the grader cut this cell's output here: what it printed past the notebook's 1,000 bytes of "
        "outputs or the cell's 2000 was dropped (graded cells are still judged) ...\n"]   # once
    for _ in range(5):   # observations have a budget too
        ex.process_message(msg("display_data", copy.deepcopy(observation)), graded, 1)
    assert sum(o.output_type == "display_data" for o in graded.outputs) == 3 and ex._observed <= 600
    # an observation outside a graded test cell is the student's output, under her budget
    ex.process_message(msg("display_data", copy.deepcopy(observation)), printed, 0)
    assert [o.output_type for o in printed.outputs] == ["stream", "stream"] and ex._dropped == 2 + 4 + 1


def test_content_the_grader_cannot_measure_is_dropped():
    ex = executor()
    cell = ex.nb.cells[0]
    loop = {"metadata": {}}
    loop["data"] = {"text/plain": "x", "self": loop}       # circular: json cannot size it
    assert ex.process_message(msg("display_data", loop), cell, 0) is None and cell.outputs == []


def test_no_cell_may_run_past_the_notebooks_total():
    ex = executor(timeout=300)
    ex._deadline = time.monotonic() + 5
    assert ex._get_timeout(ex.nb.cells[0]) <= 5
    ex._deadline = time.monotonic() - 100                  # spent: one second to say so, never 0 or less
    assert ex._get_timeout(ex.nb.cells[0]) == 1
    ex._deadline = math.inf
    assert ex._get_timeout(ex.nb.cells[0]) == 300


def _unsandboxed(**traits) -> SafeExecute:
    """A SafeExecute whose kernel runs without bubblewrap (set through the traitlets config, as
    an instructor would): what is tested here is the grader's own handling."""
    c = Config()
    c.SandboxKernelManager.enabled = False
    for name, value in traits.items():
        setattr(c.SafeExecute, name, value)
    return SafeExecute(config=c)


@pytest.mark.slow   # a kernel
def test_a_dead_kernel_costs_its_cell_and_a_hung_one_its_cell(tmp_path):
    """One notebook, one kernel start and one restart: a flood of displays, a cell that kills the
    kernel, a cell after it that needs the state of the cells before (re-run in the fresh kernel),
    and a cell that times out (the kernel answers after the interrupt, so it is kept)."""
    nb = new_notebook(cells=[
        new_code_cell("x = 41"),
        new_code_cell("from IPython.display import display\nfor i in range(50):\n    display(i)"),
        new_markdown_cell("between"),
        new_code_cell("import os\nos._exit(1)"),
        new_code_cell("print(x + 1)"),
        new_code_cell("import time\ntime.sleep(60)"),
        new_code_cell("print(x)"),
    ])
    ex = _unsandboxed(timeout=3, max_outputs_arrived=5, probe_timeout=10)
    nb, _ = ex.preprocess(nb, {"metadata": {"path": str(tmp_path)}})
    flood, died, after, timed_out, last = (nb.cells[i].outputs for i in (1, 3, 4, 5, 6))
    assert [o.data["text/plain"] for o in flood[:5]] == ["0", "1", "2", "3", "4"] and len(flood) == 6
    assert "the grader cut this cell's output here" in flood[5].text
    assert [o.ename for o in died] == ["DeadKernelError"]
    assert [o.get("text") for o in after] == ["42\n"]
    assert [o.get("ename") for o in timed_out if o.output_type == "error"][-1:] == ["CellTimeoutError"]
    assert [o.get("text") for o in last] == ["41\n"]
    events = [n["event"] for n in read_notes(nb)]
    assert events == ["kernel-died", "kernel-restarted", "timeout", "output-dropped"]


@pytest.mark.slow   # a kernel
def test_a_kernel_that_dies_too_often_leaves_the_rest_not_run(tmp_path):
    nb = new_notebook(cells=[new_code_cell("import os\nos._exit(1)"), new_code_cell("print(1)"),
                             author.tests("test_a", 2, SOURCE_A)])
    nb, _ = _unsandboxed(max_restarts=0).preprocess(nb, {"metadata": {"path": str(tmp_path)}})
    assert [[o.get("ename") for o in c.outputs] for c in nb.cells] == [["DeadKernelError"], ["NotRun"], ["NotRun"]]
    assert [n["event"] for n in read_notes(nb)] == ["kernel-died", "gave-up"]


@pytest.mark.parametrize("message", [
    msg("stream", {"name": "stdout"}), msg("stream", {"text": "no name\n"}),
    msg("stream", {"name": "stdout", "text": ["x", 3]}),
    msg("display_data", {"metadata": {}}), msg("display_data", {"data": ["text/plain"], "metadata": {}}),
    msg("execute_result", {"data": {"text/plain": 1}, "metadata": {}}),
    msg("error", {"evalue": "no name", "traceback": []}), msg("error", {"ename": "E", "evalue": "x", "traceback": "tb"}),
])
def test_an_output_nbformat_would_refuse_is_dropped_and_counted(message):
    ex = executor()
    cell = ex.nb.cells[0]
    assert ex.process_message(message, cell, 0) is None
    assert cell.outputs == [] and ex._dropped == 1 and ex._arrived == 0


@pytest.mark.parametrize("message, kept", [
    (msg("stream", {"name": "stdout", "text": "x"}), True),
    ({**msg("stream", {"name": "stdout", "text": "x"}), "parent_header": [1, 2]}, False),
    ({**msg("stream", {"name": "stdout", "text": "x"}), "header": "h"}, False),
    ({**msg("stream", {"name": "stdout", "text": "x"}), "metadata": None}, False),
    ({**msg("stream", {"name": "stdout", "text": "x"}), "msg_type": 7}, False),
    ({**msg("stream", {"name": "stdout", "text": "x"}), "header": {"msg_type": ["stream"]}}, False),
    ("not a message", False), (None, False),
])
def test_the_sandboxed_client_takes_only_messages_whose_parts_nbclient_can_read(message, kept):
    assert well_formed_message(message) is kept


MALFORMED = """k = get_ipython().kernel
for change in ({'parent_header': [1, 2]}, {'header': 'not a header'}, {'content': b'["no", "content"]'}):
    m = k.session.msg('stream', {'name': 'stdout', 'text': 'forged\\n'}, parent=k.get_parent())
    m.update(change)
    k.iopub_socket.send_multipart(k.session.serialize(m))
k.session.send(k.iopub_socket, 'stream', {'name': 'stdout'}, parent=k.get_parent())
k.session.send(k.iopub_socket, 'display_data', {'data': ['x'], 'metadata': {}}, parent=k.get_parent())
k.iopub_socket.send_multipart([b'<IDS|MSG>', b'not signed', b'{', b'', b'', b''])
print('after the forged messages')"""


@pytest.mark.slow   # a kernel
def test_malformed_messages_from_a_kernel_cost_nothing_but_themselves(tmp_path):
    """A kernel sends messages with parts nbclient cannot read, outputs nbformat refuses and
    frames that are no message at all: each is dropped, the cell's own output is kept, and the
    cells after it run (before, one such message ended the notebook's grading)."""
    nb = new_notebook(cells=[new_code_cell(MALFORMED), new_code_cell("print(6 * 7)")])
    ex = _unsandboxed(timeout=20)
    nb, _ = ex.preprocess(nb, {"metadata": {"path": str(tmp_path)}})
    assert [o.get("text") for o in nb.cells[0].outputs] == ["after the forged messages\n"]
    assert [o.get("text") for o in nb.cells[1].outputs] == ["42\n"]
    assert ex._dropped == 2   # the two outputs nbformat refuses; the rest never reached SafeExecute


def test_the_time_budget_is_a_floor_plus_a_multiple_of_the_reference_run_and_config_raises_it():
    ex = _unsandboxed()
    assert ex.time_budget(3.2) == 60 + 32   # the defaults: 60 s + 10 x the reference's 3.2 s
    assert ex.time_budget(500.0) == 1200    # never past notebook_timeout
    assert ex.time_budget(None) is None and ex.time_budget(0.0) is None   # no reference run: the limit only
    assert _unsandboxed(budget_multiple=20.0, budget_floor=120).time_budget(3.2) == 120 + 64   # a slow machine


SLEEP_PAST = "import time\ntime.sleep(30)"   # past its 2 s cell timeout, every time


@pytest.mark.slow   # a kernel
def test_cells_that_sleep_past_their_own_timeout_stop_at_the_notebooks_budget(tmp_path):
    """A reference run of 0.1 s, 30 times that and no floor: a budget of 3 s. Six cells each sleep
    past their own 2 s timeout: every second of them counts, the second is interrupted when the
    budget is spent, and the four after it are not run; grading ends within the budget and the
    interrupt's wait (not counted, the six would hold the kernel 6 x 2 s and more). One kernel."""
    nb = new_notebook(cells=[new_code_cell(SLEEP_PAST) for _ in range(6)] + [new_code_cell("print('late')")])
    ex = _unsandboxed(timeout=2, budget_floor=0, budget_multiple=30.0, probe_timeout=10)
    resources = {"metadata": {"path": str(tmp_path)}, RESOURCE_KEY: Reference({}, {}, 0.1, True)}
    started = []   # when the first cell started (the kernel's start is not the budget's)
    run_cell = ex.preprocess_cell
    ex.preprocess_cell = lambda *args: (started.append(time.monotonic()), run_cell(*args))[1]
    nb, resources = ex.preprocess(nb, resources)
    took = time.monotonic() - started[0]
    first, second, *rest = nb.cells
    for cell in (first, second):   # the kernel's KeyboardInterrupt, then nbclient's timeout
        assert [o.ename for o in cell.outputs if o.output_type == "error"][-1:] == ["CellTimeoutError"], cell.outputs
    assert [o.get("ename") for cell in rest for o in cell.outputs] == ["NotebookTimeout"] * 5, [c.outputs for c in rest]
    assert "time budget of 3 s" in rest[0].outputs[0].evalue
    notes = [n for n in read_notes(nb) if n["event"] == "notebook-budget"]
    assert len(notes) == 1 and "from #2 on were not run" in notes[0]["text"], read_notes(nb)
    used = resources[BUDGET_KEY]
    assert used["budget_s"] == 3 and 3.0 <= used["used_s"] < 5.0, used
    # the budget and the interrupts' answers (about 4 to 7 s, more on a loaded machine); the old count
    # let all six run, 6 x 2 s and more
    assert took < 12.0, took


@pytest.mark.slow   # a kernel
def test_a_fair_student_who_prints_just_under_the_cap_keeps_full_marks_on_later_graded_cells(tmp_path):
    """A correct submission whose first solution cell prints a debugging line just under
    max_output_bytes (50,000 here), and whose second prints more: both graded cells are judged
    from their observations and get full marks (before, the observations shared her cap, were
    dropped and both cells scored 0), and the cut is announced in the cell where it happened."""
    nb = lesson()
    nb.cells[2].source += "\nprint('d' * 49_990)"             # sol_a: 49,991 bytes of her 50,000
    nb.cells[4].source += "\nprint('still debugging ' * 10)"   # sol_b: past her cap
    ex = _unsandboxed(timeout=20, max_output_bytes=50_000)
    with as_autograding():   # observe() emits, as under nbgrader's autograde
        nb, resources = ex.preprocess(nb, {"metadata": {"path": str(tmp_path)}, RESOURCE_KEY: lesson_reference()})
    assert "the grader cut this cell's output here" in "".join(o.get("text", "") for o in nb.cells[4].outputs)
    nb, _ = Verdicts().preprocess(nb, resources)
    assert [determine_grade(nb.cells[i]) for i in (3, 5)] == [(2, 2), (3, 3)], [nb.cells[i].outputs for i in (3, 5)]


@pytest.mark.slow   # kernels
@pytest.mark.parametrize("mode, ran_its_end", [("immediate", False), ("graceful", True)])
def test_the_kernel_is_killed_after_the_last_cell_without_running_its_own_end(tmp_path, mode, ran_its_end):
    """After the last cell the kernel has given all it will give: by default (immediate) it is
    killed and runs neither the student's atexit hooks nor the interpreter's teardown. Control:
    nbclient's graceful shutdown runs them. The outputs are the same either way."""
    marker = tmp_path / "ended"
    nb = new_notebook(cells=[new_code_cell(f"import atexit\natexit.register(open, {str(marker)!r}, 'w')\nprint(6 * 7)")])
    traits = {} if mode == "immediate" else {"shutdown_kernel": mode}
    nb, _ = _unsandboxed(**traits).preprocess(nb, {"metadata": {"path": str(tmp_path)}})
    assert [o.get("text") for o in nb.cells[0].outputs] == ["42\n"]
    assert marker.exists() == ran_its_end
