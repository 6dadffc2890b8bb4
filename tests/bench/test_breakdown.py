"""The benchmark's CPU breakdown by process (utils/bench/breakdown.py): each sampled process filed
under its role from where it sits in the tree, a program it exec'd into apart, and what no sample
saw as `unseen`."""

from __future__ import annotations

import threading

from utils.bench.breakdown import FORKED_WORKER, WORKER, Sampler, program_kind, show

PY = "/venv/bin/python"


def _sampler(records: dict) -> Sampler:
    """A sampler holding `records` ({pid: (ppid, [[kind, cpu at start, cpu last, argv]])}), as if sampled."""
    s = Sampler.__new__(Sampler)
    s.root, s.halt = 10, threading.Event()
    s.thread = threading.Thread(target=lambda: None)
    s.thread.start()
    s.procs = {(pid, 0): {"pid": pid, "ppid": ppid, "segments": segs} for pid, (ppid, segs) in records.items()}
    return s


def test_each_process_is_filed_under_its_role_and_the_rest_is_unseen():
    worker = [PY, "-m", WORKER]
    s = _sampler({
        10: (1, [["python -m utils.grading", 0.0, 2.0, [PY, "-m", "utils.grading"]]]),
        11: (10, [[f"python -m {WORKER}", 0.0, 1.5, worker]]),
        12: (11, [[f"python -m {WORKER}", 0.0, 0.5, worker]]),      # a child forked from the worker
        13: (12, [["bwrap", 0.0, 0.0, ["bwrap"]], ["kernel", 0.0, 3.0, [PY, "-S", "-c"]]]),   # bwrap, then exec
        14: (13, [["uname", 0.0, 0.25, ["uname"]]]),                 # under the kernel: still the child's
    })
    parts = s.parts(8.0)
    assert {k: v for k, v in parts.items() if not k.startswith("N ")} == {
        "driver": 2.0, "worker": 1.5, "child": 0.5, "child > bwrap": 0.0, "child > kernel": 3.0,
        "child > uname": 0.25, "unseen": 0.75}
    assert parts["N child"] == 1 and "child > kernel" in show(parts, 2)


def test_a_kernel_is_named_by_its_program():
    assert program_kind("python", [PY, "-m", "ipykernel_launcher", "-f", "k.json"]) == "kernel"
    assert program_kind("python", [PY, "-S", "-c", "launcher"]) == "sandbox launcher (python -S)"
    assert program_kind("bwrap", ["bwrap", "--"]) == "bwrap"


def test_a_worker_forked_from_the_command_is_known_by_its_name():
    """A worker forked from the grader has the grader's command line; its name (comm) and its
    parent make it a worker. A process its child forks keeps the name for a moment, and stays the child's."""
    grader = [PY, "-m", "utils.grading"]
    s = _sampler({
        10: (1, [["python -m utils.grading", 0.0, 2.0, grader]]),
        11: (10, [["python -m utils.grading", 0.0, 1.0, grader]]),   # the forked worker
        12: (11, [["python -m utils.grading", 0.0, 0.5, grader]]),   # a child forked from it
        13: (12, [["python -m utils.grading", 0.0, 0.1, grader]]),   # forked by the child, named so too
    })
    for pid in (11, 12, 13):
        s.procs[(pid, 0)]["comm"] = FORKED_WORKER
    parts = s.parts(3.6)
    assert {k: v for k, v in parts.items() if not k.startswith("N ")} == {
        "driver": 2.0, "worker": 1.0, "child": 0.5, "child > python -m utils.grading": 0.1, "unseen": 0.0}
