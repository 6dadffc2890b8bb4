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

    python -m utils.nbgrader_worker     reads one JSON request a line on stdin, answers one a line

The client side (`run`, used by utils.processes.nbgrader) keeps a pool of idle workers per process
(the grader, a Dask worker, a test process), started when first needed and ended with the process.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

from jinja2 import BytecodeCache

IDLE_POLL = 0.02    # seconds between checks of a running child
UNCHECKED = ("PYTHONUNBUFFERED", "COURSE_KERNEL_THREADS")   # besides the threads: no bearing on the sandbox
GRACE = 120         # seconds past a request's own limit before its worker itself is ended


# --- the worker -------------------------------------------------------------------------------

def _warm() -> None:
    """Import what every nbgrader command of the course needs, and fill the caches each process
    fills on first use (compiled patterns of the highlighter, the Markdown renderer and the HTML
    cleaner; the notebook schema's validator; the gradebook's mappings; the installed libraries'
    versions), before any child is forked: every child inherits them instead of paying them."""
    import nbformat
    from nbconvert.exporters import HTMLExporter
    from traitlets.config import Config

    import nbgrader
    import nbgrader.apps.nbgraderapp  # noqa: F401 - every subcommand's application
    import utils.sandbox.manager  # noqa: F401
    from nbgrader.api import Gradebook
    from utils.grading.fingerprint import library_versions
    from utils.grading.pipeline import stamp_gradebooks_in_process
    from utils.grading.steps.safe_html import configure_html

    library_versions()
    stamp_gradebooks_in_process()
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
    from nbconvert.exporters.templateexporter import TemplateExporter

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
    from jupyter_core.application import NoStart
    from nbgrader.apps.nbgraderapp import NbGraderApp

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
    from utils.grading.result_file import graded, read_result

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

    @staticmethod
    def _key(env: dict) -> str:
        """What the sandbox's answer depends on: the environment, but for the numeric libraries'
        threads, which each run sets for its share of the cores."""
        from utils.sandbox.command import THREAD_VARS

        kept = {k: v for k, v in env.items() if k not in THREAD_VARS and k not in UNCHECKED}
        return hashlib.sha256(json.dumps(sorted(kept.items())).encode()).hexdigest()

    def _probe(self, request: dict) -> str | None:
        """The sandbox's check (probe.unavailable, then the trial start) in this process, under the
        request's environment; cached (per environment) and inherited by every child."""
        from utils.sandbox import probe

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

    def handle(self, request: dict) -> dict:
        from utils.processes import BoundedLog, kill_tree

        if request.get("probe"):
            return {"problem": self._probe(request)}
        if request.get("sandbox"):
            self._probe(request)
        stale = self._key(request["env"]) != self.current   # the caches answer for another environment
        fd, status = tempfile.mkstemp(prefix="nbgrader-worker-", suffix=".json")
        os.close(fd)
        read, write = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:   # the child: never returns
            code = 0
            try:
                os.close(read)
                os.dup2(write, 1)
                os.dup2(write, 2)
                os.close(write)
                if stale:
                    from utils.sandbox import probe
                    probe.unavailable.cache_clear()
                    probe.trial_start.cache_clear()
                _child(request, status)
            except BaseException:  # noqa: BLE001
                traceback.print_exc()
                code = 1
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        os.close(write)
        log = BoundedLog()
        reader = threading.Thread(target=_read_log, args=(read, log), daemon=True)
        reader.start()
        deadline = time.monotonic() + request["timeout"] if request.get("timeout") else None
        killed, wstatus = False, 0
        while True:
            got, wstatus = os.waitpid(pid, os.WNOHANG)
            if got:
                break
            if deadline is not None and time.monotonic() > deadline:
                killed = True
                kill_tree(pid)
                _, wstatus = os.waitpid(pid, 0)
                break
            time.sleep(IDLE_POLL)
        kill_tree(pid, children_only=True)   # kernels a dead or killed child left behind
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


def serve() -> int:
    """Answer requests (one JSON line each on stdin) until stdin closes."""
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)   # nothing printed here reaches the answers
    _warm()
    worker = Worker()
    for line in sys.stdin:
        try:
            answer = worker.handle(json.loads(line))
        except Exception as err:  # noqa: BLE001 - the client reports it
            answer = {"error": f"{type(err).__name__}: {err}\n{traceback.format_exc()[-2000:]}"}
        answers.write(json.dumps(answer) + "\n")
        answers.flush()
    return 0


# --- the client -------------------------------------------------------------------------------

class WorkerLost(RuntimeError):
    """The worker process ended or stopped answering."""


class _Client:
    def __init__(self):
        from utils.lessons import REPO
        from utils.processes import nbgrader_env

        self.proc = subprocess.Popen([sys.executable, "-m", "utils.nbgrader_worker"], cwd=REPO,
                                     env=nbgrader_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, start_new_session=True, text=True)

    def ask(self, request: dict) -> dict:
        import selectors

        limit = (request.get("timeout") or 0) + GRACE if request.get("timeout") else None
        try:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
            with selectors.DefaultSelector() as sel:
                sel.register(self.proc.stdout, selectors.EVENT_READ)
                if not sel.select(limit):
                    raise WorkerLost(f"the nbgrader worker gave no answer in {limit:g} s")
            line = self.proc.stdout.readline()
        except (OSError, ValueError) as err:
            raise WorkerLost(f"the nbgrader worker ended ({err})") from None
        if not line:
            raise WorkerLost(f"the nbgrader worker ended (exit {self.proc.poll()})")
        answer = json.loads(line)
        if "error" in answer:
            raise WorkerLost(f"the nbgrader worker failed: {answer['error']}")
        return answer

    def close(self, kill: bool = False) -> None:
        from utils.processes import kill_tree

        if kill:
            kill_tree(self.proc.pid)
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            kill_tree(self.proc.pid)
            self.proc.wait()


_idle: list[_Client] = []
_lock = threading.Lock()


def ask(request: dict) -> dict:
    """One request answered by an idle worker of this process (one is started when none is idle)."""
    with _lock:
        client = _idle.pop() if _idle else None
    if client is None or client.proc.poll() is not None:
        client = _Client()
    try:
        answer = client.ask(request)
    except WorkerLost:
        client.close(kill=True)
        raise
    with _lock:
        _idle.append(client)
    return answer


def run(steps: list[dict], cwd, env: dict, *, timeout: float | None = None, cpus=None,
        sandbox: str | None = None) -> dict:
    """Run nbgrader commands (`steps`: {"argv": [...], "if_graded": result file or absent}) in
    one child of a worker, in course folder `cwd`, with environment `env` (whole) and `cpus`, all
    killed after `timeout` seconds; `sandbox`: the bubblewrap the course's kernels use, checked
    once per worker. Returns {"rcs": exit status per command run (None: skipped), "seconds",
    "killed", "log"}."""
    return ask({"steps": steps, "cwd": str(cwd), "env": env, "timeout": timeout,
                "cpus": sorted(cpus) if cpus else None, "sandbox": sandbox})


def start_problem(bwrap: str, env: dict) -> str | None:
    """probe.start_problem (the trial start) made by a worker, which keeps the answer for the
    kernels it starts: the grader need not start a trial of its own."""
    return ask({"probe": True, "sandbox": bwrap, "env": env})["problem"]


@atexit.register
def close_all() -> None:
    with _lock:
        clients = list(_idle)
        _idle.clear()
    for client in clients:
        client.close()


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # the client ends it by closing stdin
    sys.exit(serve())
