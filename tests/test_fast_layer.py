"""The fast layer's rule (tests/conftest.py): a test marked neither slow nor browser that starts a
process, a kernel or reaches another machine fails, naming itself and saying to mark it slow; a
slow test is let through. Each case runs under the rule in a thread of its own, as a test would,
and nothing is started: the rule refuses before the process exists."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import socket
import subprocess
import sys
import threading

import pytest

from conftest import SlowTestInFastLayer, _fast_layer_rule, _run_under_the_rule, _watched


class FakeItem:
    def __init__(self, *markers: str):
        self.nodeid, self.markers = "tests/test_x.py::test_new", markers

    def get_closest_marker(self, name):
        return object() if name in self.markers else None


def in_a_thread(function):
    """function() in a new thread; what it returned or raised."""
    done = {}

    def run():
        try:
            done["returned"] = function()
        except BaseException as err:   # noqa: BLE001 - handed back to the test
            done["raised"] = err

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=60)
    assert not thread.is_alive()
    return done


# Each starter cleans up after itself, for when the rule is missing and the process does start.
def _start_a_kernel():
    from jupyter_client.manager import start_new_kernel
    km, kc = start_new_kernel(kernel_name="python3")
    kc.stop_channels()
    km.shutdown_kernel(now=True)


def _fork():
    child = os.fork()
    if child == 0:
        os._exit(0)
    os.waitpid(child, 0)


async def _asyncio_subprocess():
    await asyncio.create_subprocess_exec(sys.executable, "-c", "pass")


def _multiprocessing():
    process = multiprocessing.get_context("spawn").Process(target=print)
    process.start()
    process.join()


def _connect_elsewhere():
    with socket.socket() as sock:
        sock.settimeout(2)
        sock.connect(("192.0.2.1", 9))   # TEST-NET-1: no machine answers there


STARTERS = {
    "subprocess.run": lambda: subprocess.run([sys.executable, "-c", "pass"]),
    "asyncio's subprocess": lambda: asyncio.run(_asyncio_subprocess()),
    "os.fork": _fork,
    "os.system": lambda: os.system("true"),
    "os.posix_spawn": lambda: os.posix_spawn(sys.executable, [sys.executable, "-c", "pass"], {}),
    "multiprocessing (spawn)": _multiprocessing,
    "a Jupyter kernel": _start_a_kernel,
    "a connection to another machine": _connect_elsewhere,
}


@pytest.mark.parametrize("starter", STARTERS)
def test_a_fast_test_that_starts_a_process_fails_and_says_mark_it_slow(starter):
    pid = os.getpid()

    def under_the_rule():
        with _fast_layer_rule(FakeItem()) as tried:
            try:
                STARTERS[starter]()
            finally:
                assert os.getpid() == pid   # no forked child carries on here
            return tried

    done = in_a_thread(under_the_rule)
    err = done.get("raised")
    assert isinstance(err, SlowTestInFastLayer), done
    assert str(err).startswith("tests/test_x.py::test_new ") and "mark it slow" in str(err), err


def test_a_refusal_the_test_swallowed_still_fails_it():
    """The rule's hook fails the test even where its code caught the error and went on."""
    def swallowing_test():
        hook = _run_under_the_rule(FakeItem())
        next(hook)   # the test starts
        try:
            subprocess.run(["true"])
        except Exception:   # noqa: BLE001 - what a careless test or library does
            pass
        try:
            hook.send(None)   # the test returned
        except StopIteration:
            return "passed"

    err = in_a_thread(swallowing_test).get("raised")
    assert isinstance(err, SlowTestInFastLayer) and "started a process (true)" in str(err), err


def test_slow_tests_and_other_threads_are_not_watched():
    """Slow and browser tests may start processes (the rule watches no thread of theirs); nor
    does the rule watch threads other than the test's (a slow test's server, still running)."""
    for markers in (("slow",), ("browser",)):
        assert in_a_thread(lambda markers=markers: _watch_state(FakeItem(*markers))) == {"returned": (None, False)}
    assert threading.get_ident() in _watched   # this test, a fast one, is watched in its own thread
    assert in_a_thread(lambda: threading.get_ident() in _watched) == {"returned": False}


def _watch_state(item):
    with _fast_layer_rule(item) as tried:
        return tried, threading.get_ident() in _watched


def test_a_fast_test_has_the_short_limit_and_a_slow_one_the_long(request):
    """tests/conftest.py gives a fast test 30 s (a hang in the fast layer fails in seconds, not
    after pyproject.toml's 900 s); a slow test keeps the 900 s, or its own."""
    from conftest import FAST_TIMEOUT_S

    assert request.node.get_closest_marker("timeout").args == (FAST_TIMEOUT_S,) and FAST_TIMEOUT_S == 30
    slow = [item for item in request.session.items if item.get_closest_marker("slow")]
    assert all(item.get_closest_marker("timeout") is None or item.get_closest_marker("timeout").args != (FAST_TIMEOUT_S,)
               for item in slow)


def test_every_file_the_test_order_names_is_there(tmp_path):
    """tests/conftest.py's LONGEST_FIRST (the long files first, so that no test process is left with
    one alone at the end) stops the run when it names a file that is not there; the control: a
    file moved away is named."""
    from conftest import LONGEST_FIRST, _TESTS, missing_files

    assert missing_files() == []
    for name in LONGEST_FIRST:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    assert missing_files(folder=tmp_path) == []
    (tmp_path / LONGEST_FIRST[3]).unlink()
    assert missing_files(folder=tmp_path) == [LONGEST_FIRST[3]] and (_TESTS / LONGEST_FIRST[3]).is_file()
