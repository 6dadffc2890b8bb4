"""The grader's side of the boundary with a student's kernel, mostly without kernels: what the kernel's
messages set never reaches feedback, the grader's memory and log stay bounded, the grader never follows
a path the kernel controls, a notebook has a total time, every printed name is quoted, and student
Markdown and outputs are sanitised wherever nbconvert renders a submission."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from nbformat.notebooknode import from_dict
from utils.lessons import REPO


HIDDEN = "observe('flops, hidden case 4', flops(7, 11))"   # a hidden test, as the kernel can read it (In)


def _test_cell(outputs, gid="f_test"):
    cell = nbformat.v4.new_code_cell("check_close('f(1)', f(1), 1.0)\n### BEGIN HIDDEN TESTS\n" + HIDDEN + "\n### END HIDDEN TESTS")
    cell.metadata["nbgrader"] = {"grade": True, "solution": False, "locked": True, "grade_id": gid,
                                 "points": 2, "schema_version": 3}
    cell.outputs = outputs
    return cell


# --- 1. nothing the kernel's messages set reaches feedback ------------------------------------------

def _kernel_set_notebook():
    """An executed notebook as a hostile kernel could leave it: every field it can set carries the
    hidden test."""
    secret = HIDDEN.encode().hex()
    plain = nbformat.v4.new_code_cell("x = 1")
    plain.execution_count = int(secret[:30], 16)
    plain.metadata["execution"] = {"iopub.status.busy": HIDDEN}
    plain.metadata["leak"] = HIDDEN
    plain.outputs = [
        from_dict({"output_type": "display_data", "data": {"text/plain": "ok"}, "metadata": {"leak": HIDDEN},
                   "transient": {"display_id": HIDDEN}}),
        from_dict({"output_type": "execute_result", "execution_count": 10 ** 40, "data": {"text/plain": "1"},
                   "metadata": {"image/png": {"alt": HIDDEN}}}),
        from_dict({"output_type": "stream", "name": HIDDEN, "text": "hi\n"}),
        from_dict({"output_type": "error", "ename": "ValueError", "evalue": "x", "traceback": [HIDDEN]}),
        from_dict({"output_type": HIDDEN, "data": {}}),
    ]
    err = from_dict({"output_type": "error", "ename": "ValueError", "evalue": HIDDEN, "traceback": [HIDDEN]})
    odd = from_dict({"output_type": "error", "ename": "HiddenCase4_flops_7_11", "evalue": HIDDEN, "traceback": []})
    nb = nbformat.v4.new_notebook()
    nb.cells = [plain, _test_cell([err]), _test_cell([odd], "g_test")]   # not valid nbformat: as a kernel leaves it
    nb.cells[1].execution_count = 77777
    nb.metadata["language_info"] = {"name": "python", "version": HIDDEN, "pygments_lexer": HIDDEN}
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {"x": HIDDEN}}}
    return nb


def test_feedback_shows_only_what_the_grader_decided():
    from utils.grading.steps.kernel_fields import KernelFields
    from utils.grading.reference_run import RESOURCE_KEY, Reference
    from utils.grading.steps.verdicts import Verdicts

    nb = _kernel_set_notebook()
    ref = Reference({"f_test": nb.cells[1].source, "g_test": nb.cells[2].source}, {"f_test": [], "g_test": []}, 0.0, False)
    nb, _ = Verdicts().preprocess(nb, {RESOURCE_KEY: ref})
    nb, _ = KernelFields().preprocess(nb, {})
    text = json.dumps({"metadata": nb.metadata, "cells": [{k: v for k, v in c.items() if k != "source"} for c in nb.cells]})
    assert HIDDEN not in text and HIDDEN.encode().hex()[:30] not in text and "HiddenCase4" not in text
    assert [c.execution_count for c in nb.cells] == [1, 2, 3]
    assert nb.cells[0].outputs[1].execution_count == 1
    assert all(set(c.metadata) <= {"nbgrader", "tags", "editable", "deletable"} for c in nb.cells)
    assert all(o.get("metadata", {}) == {} and "transient" not in o for c in nb.cells for o in c.outputs)
    assert [o.output_type for o in nb.cells[0].outputs] == ["display_data", "execute_result", "stream", "error"]
    assert "widgets" not in nb.metadata and nb.metadata.language_info.name == "python"
    assert [(o.ename, o.evalue.split(";")[0]) for c in nb.cells[1:] for o in c.outputs] == [
        ("ValueError", "the test cell raised ValueError"),
        ("Error", "the test cell raised an exception of a class of its own")]


def test_the_kernels_course_messages_become_the_graders_sentences():
    from utils.grading.steps.verdicts import COURSE_MESSAGES, kernel_error

    said = "[Exercise B] `" + HIDDEN + "` is not written yet: replace `raise NotImplementedError()`"
    name, line = kernel_error([from_dict({"output_type": "error", "ename": "CheckFailed", "evalue": said})])
    assert name == "CheckFailed" and line == COURSE_MESSAGES[0][1] and HIDDEN not in line


@pytest.mark.slow
@pytest.mark.parametrize("lesson", ["01_two_phases", "02_arithmetic_intensity", "03_timing_prefill_decode"])
def test_every_lessons_graded_notebooks_hold_only_the_graders_fields(lesson):
    """The session's one grading of each lesson (tests/grading_runs.py): in every graded notebook
    (reference, release, samples) execution counts are the grader's, no metadata of the kernel's
    is left and no hidden-test line is anywhere but in a cell's source."""
    from grading_runs import graded

    run = graded(lesson)
    assert run.kernel_fields, f"{lesson}: nothing graded"
    assert {s: p for s, p in run.kernel_fields.items() if p} == {}


# --- 2. the grader's own process bounded --------------------------------------------------------

def _executor(**traits):
    from utils.grading.steps.execute import SafeExecute

    ex = SafeExecute(**traits)
    ex.nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x")])
    ex._arrived, ex._dropped = 0, 0
    ex.reset_execution_trackers()
    ex.clear_before_next_output = False
    return ex


def _msg(msg_type, content, parent="p"):
    return {"msg_type": msg_type, "content": content, "parent_header": {"msg_id": parent},
            "header": {"msg_type": msg_type, "date": "x"}, "metadata": {}}


def test_outputs_widgets_and_unknown_messages_are_capped_or_dropped_as_they_arrive(caplog):
    ex = _executor(max_output_bytes=10_000, max_outputs_arrived=50)
    cell = ex.nb.cells[0]
    for i in range(200):
        ex.process_message(_msg("display_data", {"data": {"text/plain": "y" * 1000}, "metadata": {},
                                                 "transient": {"display_id": f"d{i}"}}), cell, 0)
    ex.process_message(_msg("comm_open", {"comm_id": "c", "target_name": "x" * 100_000, "data": {"state": {}}}), cell, 0)
    ex.process_message(_msg("comm_msg", {"comm_id": "c", "data": {"state": {"v": "z" * 100_000}}}), cell, 0)
    ex.process_message(_msg("u" * 100_000, {}), cell, 0)
    ex.process_message(_msg("update_display_data", {"data": {"text/plain": "w"}, "metadata": {},
                                                    "transient": {"display_id": "d0"}}), cell, 0)
    kept = [o for o in cell.outputs if o.output_type == "display_data"]
    assert len(kept) <= 10 and len(cell.outputs) == len(kept) + 1 and ex._dropped >= 190   # + the line saying so
    assert not ex.widget_state and not ex._display_id_map and not ex.comm_objects
    assert all(o.data["text/plain"] == "y" * 1000 for o in kept)
    assert sum(len(r.getMessage()) for r in caplog.records) < 1000   # nothing the kernel sent was logged


@pytest.mark.slow
def test_the_nbgrader_log_is_bounded_as_it_is_read():
    from utils.processes import BoundedLog

    log = BoundedLog(head=1000, tail=4000)
    proc = subprocess.Popen([sys.executable, "-c", "import sys\nfor i in range(300): sys.stdout.write('x' * 99999 + '\\n')\n"
                             "print('the last line')"], stdout=subprocess.PIPE)
    log.read_all(proc.stdout)
    proc.wait()
    text = log.text()
    assert len(text) < 6000 and text.rstrip().endswith("the last line") and "bytes of output cut" in text
    assert len(log.tail) <= 2 * 4000 + 65536


def test_a_too_large_message_frame_is_refused_before_it_is_read():
    """ZeroMQ's MAXMSGSIZE is set on every socket of a sandboxed kernel's client before it connects:
    a larger frame drops the connection instead of being read into the grader's memory."""
    import zmq

    from utils.sandbox.manager import SandboxKernelClient

    client = SandboxKernelClient(transport="tcp", ip="127.0.0.1", iopub_port=5, shell_port=6)
    client.max_message_mb = 1
    for sock in (client.connect_iopub(), client.connect_shell()):
        assert sock.getsockopt(zmq.MAXMSGSIZE) == 1 << 20
        sock.close(0)


# --- 3. no path the kernel controls is followed ------------------------------------------------

def _inside(path: Path) -> str:
    """`path` as the grader names a kernel's socket: under /proc/PID/root."""
    return f"/proc/{os.getpid()}/root{path}"


def test_the_kernels_socket_is_opened_without_following_links(tmp_path):
    from utils.sandbox.sockets import SocketRefused, open_kernel_socket

    kernel = tmp_path / "kernel-tmp" / ".kernel-1"
    kernel.mkdir(parents=True)
    own = socket.socket(socket.AF_UNIX)
    own.bind(str(kernel / "k-1"))
    own.listen(1)
    fd = open_kernel_socket(_inside(kernel / "k-1"), timeout=1)
    client = socket.socket(socket.AF_UNIX)
    client.connect(f"/proc/self/fd/{fd}")   # how ZeroMQ reaches it: that socket, whatever the name becomes
    client.close()
    os.close(fd)

    elsewhere = socket.socket(socket.AF_UNIX)   # a socket of the grader's machine the kernel would like reached
    elsewhere.bind(str(tmp_path / "machine.sock"))
    elsewhere.listen(1)
    os.symlink(tmp_path / "machine.sock", kernel / "k-2")
    with pytest.raises(SocketRefused, match="a link"):
        open_kernel_socket(_inside(kernel / "k-2"), timeout=1)
    (kernel / "k-3").write_text("")
    with pytest.raises(SocketRefused, match="not the kernel's own socket"):
        open_kernel_socket(_inside(kernel / "k-3"), timeout=1)
    os.symlink(tmp_path, tmp_path / "kernel-tmp" / ".kernel-2")   # the folder swapped for a link
    with pytest.raises(SocketRefused, match="refused"):
        open_kernel_socket(_inside(tmp_path / "kernel-tmp" / ".kernel-2" / "machine.sock"), timeout=1)
    with pytest.raises(SocketRefused, match="did not appear"):
        open_kernel_socket(_inside(kernel / "k-4"), timeout=0.2)
    own.close()
    elsewhere.close()


def test_the_sandboxs_channels_connect_through_a_descriptor(tmp_path):
    from utils.sandbox.manager import SandboxKernelClient

    kernel = tmp_path / ".kernel-1"
    kernel.mkdir()
    own = socket.socket(socket.AF_UNIX)
    own.bind(str(kernel / "k-5"))
    client = SandboxKernelClient(transport="ipc", ip=_inside(kernel / "k"), shell_port=5)
    assert client._make_url("shell").startswith("ipc:///proc/self/fd/")
    client._close_socket_fds()
    own.close()


# --- 5. a total time per notebook ---------------------------------------------------------------

@pytest.mark.slow
def test_a_notebook_of_many_short_cells_is_stopped_at_its_total_and_scored_with_its_reason(tmp_path):
    from utils.grading.steps.base import read_notes
    from utils.grading.steps.execute import SafeExecute
    from utils.grading.steps.verdicts import Verdicts
    from utils.grading.reference_run import RESOURCE_KEY, Reference

    cells = [nbformat.v4.new_code_cell("import time\ntime.sleep(0.25)") for _ in range(40)]
    cells.append(_test_cell([]))
    nb = nbformat.v4.new_notebook(cells=cells)
    ex = SafeExecute(timeout=60, notebook_timeout=4)
    ex.km_class_kwargs = {}
    start = time.monotonic()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("utils.sandbox.manager.SandboxKernelManager.enabled", False)   # speed: the limit is the grader's
        nb, resources = ex.preprocess(nb, {"metadata": {"path": str(tmp_path)}})
    assert time.monotonic() - start < 30
    stopped = [c for c in nb.cells if c.outputs and c.outputs[0].get("ename") == "NotebookTimeout"]
    assert 5 <= len(stopped) <= 37 and nb.cells[-1] in stopped
    nb, _ = Verdicts().preprocess(nb, {RESOURCE_KEY: Reference({"f_test": cells[-1].source}, {"f_test": []}, 0, False)})
    assert nb.cells[-1].outputs[0].ename == "NotebookTimeout"
    assert "total time limit" in nb.cells[-1].outputs[0].evalue
    assert any(n["event"] == "notebook-timeout" and "4 s" in n["text"] for n in read_notes(nb))


def test_the_total_time_is_stated_in_the_config():
    text = (REPO / "nbgrader_config.py").read_text()
    assert "c.SafeExecute.notebook_timeout = " in text


# --- 6. every printed name quoted ----------------------------------------------------------------

def test_a_name_with_newlines_or_control_characters_cannot_forge_report_lines():
    from utils.scores import CellScore, score_table
    from utils.grading.submissions import Outcome

    evil = "mallory\n01_two_phases  alice: 0/5  ZERO: \x1b[2Kcopied"
    out = Outcome("01_two_phases", evil, status="zero", reason=f"no two_phases.ipynb (found: {evil}.ipynb)",
                  notes=[f"other notebooks ignored: {evil}", "a\rb\u202eexe.ipynb"], score=0.0, max_score=5.0)
    lines = out.line().splitlines()
    assert len(lines) == 3 and all(l.isprintable() for l in lines)
    assert lines[0].startswith("01_two_phases  'mallory\\n01_two_phases")
    assert Outcome("l", "bob").line() == "l  bob: -"
    table = score_table([CellScore("l", evil, "c", 1.0, 1.0)])
    assert len(table.splitlines()) == 3 and all(l.isprintable() for l in table.splitlines())


# --- #35: student Markdown and outputs never run in a browser ------------------------------------

SCRIPTED = ("<script>window.PWNED = 1</script>", "<img src=x onerror=\"PWNED()\">",
            "[a link](javascript:PWNED())", "<iframe src=\"https://example.org\"></iframe>",
            "<a href=\"data:text/html,PWNED\">x</a>", "<svg onload=\"PWNED()\"></svg>")


def _exporter_config(template: str):
    """The HTMLExporter settings nbgrader's feedback (and the formgrader) use."""
    from nbgrader.server_extensions.formgrader import handlers
    from traitlets.config import Config

    c = Config()
    c.HTMLExporter.template_name = template
    c.HTMLExporter.extra_template_basedirs = [handlers.template_path]
    c.HTMLExporter.extra_template_paths = [str(Path(handlers.__file__).parent / "static" / "node_modules" / "bootstrap" / "dist" / "css")]
    return c


RESOURCES = {"nbgrader": {"notebook": "n", "assignment": "a", "student": "s", "score": 0, "max_score": 0, "late_penalty": 0},
             "metadata": {"name": "n", "path": "."}, "base_url": "/", "index": 0, "total": 1,
             "submission_id": "x", "notebook_id": "n", "assignment_id": "a", "student": "s", "first_name": "f",
             "last_name": "l", "notebook_path": "n.ipynb", "inlining": {"css": []}}


def _scripted_notebook():
    md = nbformat.v4.new_markdown_cell("# Answer\n\n" + "\n\n".join(SCRIPTED) + "\n\n**bold** stays, $x < y$ too")
    code = nbformat.v4.new_code_cell("x")
    code.outputs = [from_dict({"output_type": "display_data", "metadata": {}, "data": {
        "text/html": "".join(SCRIPTED), "text/markdown": "\n\n".join(SCRIPTED),
        "application/javascript": "PWNED()", "image/svg+xml": "<svg onload=\"PWNED()\"></svg>",
        "text/plain": "x"}})]
    return nbformat.v4.new_notebook(cells=[md, code])


@pytest.mark.parametrize("template", ["feedback", "formgrade"])
def test_student_markdown_and_outputs_are_sanitised_in_feedback_and_the_formgrader(template):
    from nbconvert.exporters import HTMLExporter

    from utils.grading.pipeline import install

    c = _exporter_config(template)
    install(c)
    html, _ = HTMLExporter(config=c).from_notebook_node(_scripted_notebook(), resources=dict(RESOURCES))
    import re

    for active in ("<script>window.PWNED", "PWNED()</script>", "<iframe", "<svg"):
        assert active not in html, active
    assert not re.search(r"(href|src)\s*=\s*[\"']?\s*(javascript|data:text)", html)
    assert not re.search(r"<[a-zA-Z][^<>]*\son[a-z]+\s*=\s*[\"']?PWNED", html)   # no student event handler in a tag
    assert "<strong>bold</strong>" in html and "<h1" in html
    assert "window.PWNED" not in html   # a script is dropped with its text, not shown


def test_without_the_sanitiser_the_script_would_run():
    """The control: nbgrader's feedback template renders a student's Markdown as it is."""
    from nbconvert.exporters import HTMLExporter

    html, _ = HTMLExporter(config=_exporter_config("feedback")).from_notebook_node(
        _scripted_notebook(), resources=dict(RESOURCES))
    assert "<script>window.PWNED" in html
