"""A long-lived nbgrader process: nbgrader, nbconvert, jupyter_client and the course's steps are
imported once (about 1.3 CPU-s a process), then every nbgrader command it is given runs in a child
forked from it (milliseconds), through nbgrader's own application (NbGraderApp, as
`python -m nbgrader` runs it). A child starts from the imported code alone: its own working
folder, environment, cores and process session; its config is read again from its course folder;
nothing one child did (a gradebook session, a kernel, a global) reaches the next. A child that
runs past its time is killed with everything it started, kernels included.

One request may hold several commands (a submission's `autograde` then its `generate_feedback`):
they run one after another in the same child; a command may be skipped unless a result file says
its notebook was graded (`if_graded`).

The sandbox's trial start (utils/sandbox/probe.py, cached per process) is made in the worker itself
before its first sandboxed child, so each child inherits it: once per worker and environment.
The same holds for the lesson's code highlighted as the feedback pages show it
(utils/grading/highlighting.py): once per worker and source notebook, before the child that
writes a page.

    python -m utils.grading.nbgrader_worker     reads one JSON request a line on stdin, answers one a line

The client side (utils/nbgrader_client.py, used by utils.processes.nbgrader) keeps a pool of idle
workers per process (the grader, a Dask worker, a test process), started when first needed and
ended with the process. The grading command forks its workers from itself instead (serve_forked:
it has imported all of the above by then), after warming the caches once for all of them (warm).
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import select
import signal
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

import nbformat
import nbgrader
import nbgrader.apps.nbgraderapp
import utils.sandbox.manager  # noqa: F401 - the kernels' manager, imported once
from jinja2 import BytecodeCache
from jupyter_core.application import NoStart
from nbconvert.exporters import HTMLExporter
from nbconvert.exporters.templateexporter import TemplateExporter
from nbgrader.api import Gradebook
from nbgrader.apps.nbgraderapp import NbGraderApp
from traitlets.config import Config

from utils.fork import fork_into
from utils.processes import BoundedLog, kill_tree
from utils.grading import highlighting
from utils.grading.fingerprint import library_versions
from utils.grading.pipeline import stamp_gradebooks_in_process
from utils.grading.result_file import graded, read_result
from utils.grading.steps.safe_html import configure_html
from utils.grading.steps.schema_checks import fast_node_checks
from utils.sandbox import probe
from utils.sandbox.command import THREAD_VARS

CHECK_EVERY = 0.5   # seconds between checks that the grader still waits, while a child runs
IDLE_POLL = 0.02    # where no pidfd can be had: seconds between checks of a running child
UNCHECKED = ("PYTHONUNBUFFERED", "COURSE_KERNEL_THREADS")   # besides the threads: no bearing on the sandbox


# --- the worker -------------------------------------------------------------------------------

_warmed = False


def warm() -> None:
    """Import what every nbgrader command of the course needs, and fill the caches each process
    fills on first use (compiled patterns of the highlighter, the Markdown renderer and the HTML
    cleaner; the notebook schema's validator; the gradebook's mappings; the installed libraries'
    versions), before any child is forked: every child inherits them instead of paying them. Once
    per process: a grader that forks its workers warms itself once for all of them."""
    global _warmed
    if not _warmed:
        _warmed = True
        _warm()
        # What is imported and warmed by now lives as long as the process: out of the collector's
        # reach (gc.freeze), a child's collections never walk it, nor write to its pages (each
        # write copies a page the child shares with its parent). About 0.04 CPU-s a submission.
        gc.freeze()


def _warm() -> None:
    library_versions()
    stamp_gradebooks_in_process()
    fast_node_checks()
    try:   # the caches only: a child that finds one empty fills it itself
        nb = nbformat.v4.new_notebook(cells=[
            nbformat.v4.new_markdown_cell("# Warm\nText with *emphasis*, `code`, $x^2$, a [link](https://example.org)"
                                          "\n\n| a | b |\n|---|---|\n| 1 | 2 |"),
            nbformat.v4.new_code_cell("def f(x):\n    return x * 2  # a comment\nprint(f'{f(2)}')",
                                      outputs=[nbformat.v4.new_output("stream", text="4\n")])])
        nbformat.validate(nb)
        _share_compiled_templates()
        config = Config()
        configure_html(config)
        config.RenderDeadline.seconds = 0
        config.HTMLExporter.template_name = "classic"   # what the feedback page's template extends
        HTMLExporter(config=config).from_notebook_node(nb)
        formgrader = Path(nbgrader.__file__).parent / "server_extensions" / "formgrader"
        config.HTMLExporter.template_name = "feedback"   # as GenerateFeedback renders its pages
        config.HTMLExporter.extra_template_basedirs = [str(formgrader / "templates")]
        config.HTMLExporter.extra_template_paths = [str(formgrader / "static" / "node_modules" / "bootstrap" / "dist" / "css")]
        try:   # its page needs a grade's figures, which this notebook lacks: compiling it is what is kept
            HTMLExporter(config=config).from_notebook_node(nb)
        except Exception:  # noqa: BLE001
            pass
        with Gradebook("sqlite:///:memory:") as gb:
            gb.update_or_create_assignment("warm")
    except Exception:  # noqa: BLE001
        traceback.print_exc()

class _CompiledTemplates(BytecodeCache):
    """Jinja's bytecode cache, in this process's memory: a template compiled here (keyed by its
    name and checked against its source) is not compiled again by a child's new exporter."""

    def __init__(self):
        self.compiled: dict[str, bytes] = {}

    def load_bytecode(self, bucket):
        code = self.compiled.get(bucket.key)
        if code is not None:
            bucket.bytecode_from_string(code)

    def dump_bytecode(self, bucket):
        self.compiled[bucket.key] = bucket.bytecode_to_string()


def _share_compiled_templates() -> None:
    """Every nbconvert exporter of this process (and its children) uses one bytecode cache: each
    makes a Jinja environment of its own, which would compile the same templates again."""
    cache, make = _CompiledTemplates(), TemplateExporter._create_environment

    def environment(self):
        env = make(self)
        env.bytecode_cache = cache
        return env

    TemplateExporter._create_environment = environment


def _exit_code(err: SystemExit) -> int:
    code = err.code
    if code is None:
        return 0
    return code if isinstance(code, int) else 1


def _one_command(argv: list[str]) -> int:
    """One nbgrader command in this (child) process, as `python -m nbgrader` runs it."""
    app = NbGraderApp.instance()
    try:
        app.initialize(argv)
        app.start()
        return 0
    except NoStart:   # a subcommand's end, as launch_instance takes it
        return 0
    except SystemExit as err:
        return _exit_code(err)
    except BaseException:  # noqa: BLE001 - whatever it raised is its log's, as the command line prints it
        traceback.print_exc()
        return 1
    finally:
        try:
            app.reset()
        except Exception:  # noqa: BLE001
            pass
        sys.stdout.flush()
        sys.stderr.flush()


def _graded(path: str) -> bool:
    return graded(read_result(path))


def _child(request: dict, status: str) -> None:
    """In the forked child: its session, folder, environment and cores, then each command."""
    os.setsid()
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    if request.get("cpus"):
        try:
            os.sched_setaffinity(0, set(request["cpus"]))
        except (AttributeError, OSError):
            pass
    done = []
    for step in request["steps"]:
        if step.get("if_graded") and not _graded(step["if_graded"]):
            done.append({"rc": None, "seconds": 0.0})
        else:
            if done:
                print(f"===== {step['argv'][0]}", flush=True)
            start = time.perf_counter()
            rc = _one_command(step["argv"])
            done.append({"rc": rc, "seconds": time.perf_counter() - start})
        with open(status, "w") as f:
            json.dump(done, f)


def _read_log(fd: int, log) -> None:
    with os.fdopen(fd, "rb", buffering=0) as pipe:
        for chunk in iter(lambda: pipe.read(1 << 16), b""):
            log.add(chunk)


class Worker:
    """The worker's side: requests in, children forked, answers out."""

    def __init__(self):
        self.current: str | None = None   # the environment whose sandbox answers the probe's caches hold
        self.client = os.getppid()         # when it ends, so does the child it waits for

    @staticmethod
    def _key(env: dict) -> str:
        """What the sandbox's answer depends on: the environment, but for the numeric libraries'
        threads, which each run sets for its share of the cores."""
        kept = {k: v for k, v in env.items() if k not in THREAD_VARS and k not in UNCHECKED}
        return hashlib.sha256(json.dumps(sorted(kept.items())).encode()).hexdigest()

    def _probe(self, request: dict) -> str | None:
        """The sandbox's check (probe.unavailable, then the trial start) in this process, under the
        request's environment; cached (per environment) and inherited by every child."""
        key = self._key(request["env"])
        if key != self.current:
            probe.unavailable.cache_clear()
            probe.trial_start.cache_clear()
            self.current = key
        saved = dict(os.environ)
        os.environ.clear()
        os.environ.update(request["env"])
        try:
            return probe.start_problem(request["sandbox"])
        finally:
            os.environ.clear()
            os.environ.update(saved)

    def _wait(self, pid: int, deadline: float | None) -> bool:
        """Until child `pid` has ended (not reaped: until then its PID, and so the session id its
        kernels carry, is still its own, never another process's) or it is killed, at its deadline
        or when the grader is gone (nobody waits for it then). Whether it was killed. The child's end
        wakes this process (a pidfd); it wakes on its own only every CHECK_EVERY seconds, where a
        poll every IDLE_POLL seconds cost about 3 ms of CPU per second of grading."""
        try:
            pidfd = os.pidfd_open(pid)
        except (AttributeError, OSError):   # Linux before 5.3: poll
            pidfd = None
        try:
            while os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
                orphaned = os.getppid() != self.client
                if orphaned or (deadline is not None and time.monotonic() > deadline):
                    kill_tree(pid)
                    os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
                    return True
                if pidfd is None:
                    time.sleep(IDLE_POLL)
                    continue
                wait = CHECK_EVERY if deadline is None else min(CHECK_EVERY, max(0.0, deadline - time.monotonic()))
                select.select([pidfd], [], [], wait)
            return False
        finally:
            if pidfd is not None:
                os.close(pidfd)

    def handle(self, request: dict) -> dict:
        if request.get("probe"):
            return {"problem": self._probe(request)}
        if request.get("sandbox"):
            self._probe(request)
        stale = self._key(request["env"]) != self.current   # the caches answer for another environment
        for step in request["steps"]:   # the lesson's own code, highlighted for every child's pages
            if step["argv"][:1] == ["generate_feedback"]:
                roots = [a.split("=", 1)[1] for a in step["argv"] if a.startswith("--CourseDirectory.root=")]
                highlighting.remember(os.path.join(request["cwd"], roots[-1] if roots else "."))
        fd, status = tempfile.mkstemp(prefix="nbgrader-worker-", suffix=".json")
        os.close(fd)
        read, write = os.pipe()

        def child() -> int:
            if stale:
                probe.unavailable.cache_clear()
                probe.trial_start.cache_clear()
            _child(request, status)
            return 0

        pid = fork_into(child, {1: write, 2: write}, drop=(read, write))
        os.close(write)
        log = BoundedLog()
        reader = threading.Thread(target=_read_log, args=(read, log), daemon=True)
        reader.start()
        deadline = time.monotonic() + request["timeout"] if request.get("timeout") else None
        killed = self._wait(pid, deadline)
        kill_tree(pid, children_only=True)   # kernels a dead or killed child left behind
        _, wstatus = os.waitpid(pid, 0)
        reader.join(timeout=10)
        try:
            with open(status) as f:
                steps = json.load(f)
        except (OSError, ValueError):
            steps = []
        finally:
            os.unlink(status)
        exit_rc = os.waitstatus_to_exitcode(wstatus)
        rcs = [s["rc"] for s in steps]
        if len(rcs) < len(request["steps"]):   # the command running when the child ended: the child's exit
            rcs.append(exit_rc if exit_rc != 0 else 1)
        return {"rcs": rcs, "seconds": [s["seconds"] for s in steps], "killed": killed, "log": log.text()}


def serve(requests=None) -> int:
    """Answer requests (one JSON line each on stdin, or `requests`) until it closes."""
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)   # nothing printed here reaches the answers
    warm()
    worker = Worker()
    for line in requests if requests is not None else sys.stdin:
        try:
            answer = worker.handle(json.loads(line))
        except Exception as err:  # noqa: BLE001 - the client reports it
            answer = {"error": f"{type(err).__name__}: {err}\n{traceback.format_exc()[-2000:]}"}
        answers.write(json.dumps(answer) + "\n")
        answers.flush()
    return 0


NAME = b"nbgrader-worker"   # a forked worker's name in ps and /proc/PID/comm (its command line is its parent's)


def serve_forked(env: dict, cwd: str) -> int:
    """In a process just forked from the grader (utils/nbgrader_client.py, fork_here), whose
    requests arrive on fd 0 and answers leave on fd 1: the worker, as `python -m
    utils.grading.nbgrader_worker` would be, but for the imports, which it has."""
    os.setsid()
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # the client ends it by closing its requests
    try:
        import ctypes
        ctypes.CDLL(None).prctl(15, NAME, 0, 0, 0)   # PR_SET_NAME
    except (OSError, AttributeError):
        pass
    with open(0, closefd=False) as requests:
        return serve(requests)


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # the client ends it by closing stdin
    sys.exit(serve())
