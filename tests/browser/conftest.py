"""Browser tests: the course in JupyterLab with nbgrader, driven in Debian's headless Chromium.

Each test module starts its own JupyterLab on loopback (a free port, a random token) with a
temporary HOME, Jupyter config, data, runtime and IPython dirs, so nothing of this machine's
Jupyter setup leaks in; the lab extensions still come from the environment (sys.prefix). The
servers serve temporary copies of the course, never the repository. Playwright for Python drives
/usr/bin/chromium (Playwright's own browser download does not work here).

Run alone:  .venv/bin/python -m pytest tests/browser      (docs/browser-tests.md)
Screenshots go to artifacts/browser/ (BROWSER_ARTIFACTS overrides); a failing test names the step
that failed and leaves <test>-FAILED.png and <test>-server.log there.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from helpers import free_port

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("BROWSER_ARTIFACTS", REPO / "artifacts" / "browser"))
CHROMIUM = "/usr/bin/chromium"
# Flags a machine without outside network needs: without the
# background-networking ones Chromium's own connection attempts are refused, many at a time.
# Playwright adds a fresh temporary --user-data-dir to every launch by itself.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
COURSE_ID = "prefill-decode"  # as in nbgrader_config.py
LESSON_1 = "01_two_phases"
SERVER_START_S = 120  # a loaded 2-core machine; JupyterLab usually answers within 10 s
# `make lab` from a fresh checkout: the student environment's install (2 to 3 minutes on a loaded
# 2-core machine with pip's cache warm), then JupyterLab. Pip's retries against an unreachable
# index took 15 to 20 minutes.
MAKE_LAB_S = 600
UI_TIMEOUT_MS = 60_000  # default for every wait in the browser


def missing_browser() -> str | None:
    """Why the browser tests cannot run here, or None."""
    if not Path(CHROMIUM).exists():
        return f"{CHROMIUM} is missing: install Debian's chromium (make system-deps, as root)"
    try:
        import playwright.sync_api  # noqa: F401 - only whether it imports
    except ImportError:
        return "playwright is not installed: pip install -r requirements-dev.txt"
    return None


def pytest_collection_modifyitems(config, items):
    # Skip before any server starts or course copy is built.
    reason = missing_browser()
    if reason:
        for item in items:
            if item.get_closest_marker("browser"):
                item.add_marker(pytest.mark.skip(reason=reason))


# --- the course the servers serve ------------------------------------------------------------

@dataclass
class Lesson:
    name: str
    release_nb: Path  # inside the temporary course copy
    source_nb: Path


@pytest.fixture(scope="session")
def course_copy(tmp_path_factory) -> tuple[Path, Lesson]:
    """A temporary copy of the course directory (config, source/, release/) with a gradebook
    listing every lesson, and lesson 1 in it."""
    from nbgrader.api import Gradebook

    from utils.scratch import scratch_config

    root = tmp_path_factory.mktemp("course")
    scratch_config(root)  # the course's settings, but a gradebook of its own, never the instructor's
    skip = shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__")
    for folder in ("source", "release"):
        if (REPO / folder).is_dir():
            shutil.copytree(REPO / folder, root / folder, ignore=skip)

    sources = sorted((root / "source" / LESSON_1).glob("*.ipynb"))
    assert len(sources) == 1, f"source/{LESSON_1} should hold one notebook, not {len(sources)}"
    release_nb = root / "release" / LESSON_1 / sources[0].name
    assert release_nb.exists(), f"release/{LESSON_1}/{release_nb.name} is missing: run `make build`"

    lessons = sorted(d.name for d in (root / "source").iterdir() if d.is_dir() and any(d.glob("*.ipynb")))
    # The formgrader lists the gradebook's assignments. nbgrader runs `alembic` from PATH when it
    # creates a gradebook: put this interpreter's bin folder first while it does.
    path = os.environ.get("PATH", "")
    os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), path])
    try:
        with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
            for lesson in lessons:
                gb.update_or_create_assignment(lesson)
    finally:
        os.environ["PATH"] = path
    return root, Lesson(LESSON_1, release_nb, sources[0])


@pytest.fixture(scope="session")
def course_lessons(course_copy) -> list[str]:
    root, _ = course_copy
    return sorted(d.name for d in (root / "source").iterdir() if d.is_dir() and any(d.glob("*.ipynb")))


# --- JupyterLab servers ----------------------------------------------------------------------

LAB_SETTINGS = {
    # every cell stays in the DOM, so a test can find any cell and its outputs
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": '{"windowingMode": "none"}',
    # no news or update checks: this network is closed and the toasts would cover the screenshots
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings":
        '{"fetchNews": "false", "checkForUpdates": false}',
}

SERVER_CONFIG = """\
c.LabApp.check_for_updates_class = "jupyterlab.NeverCheckForUpdate"
c.LabApp.news_url = None
c.LanguageServerManager.autodetect = False
"""


@dataclass
class LabServer:
    url: str  # http://127.0.0.1:PORT
    token: str
    root: Path
    log_path: Path
    proc: subprocess.Popen
    env: dict  # the server's environment (temporary HOME, Jupyter dirs): for a terminal beside it

    def lab_url(self, path: str = "") -> str:
        """JupyterLab, opening `path` if given; `reset` starts from an empty workspace, not the
        tabs an earlier test left open."""
        return f"{self.url}/lab{'/tree/' + path if path else ''}?reset&token={self.token}"


def _isolated_env(base: Path, nbgrader_config: str) -> dict:
    """Environment for a server whose Jupyter and IPython dirs all live under `base`."""
    home = base / "home"
    dirs = {
        "HOME": home,
        "JUPYTER_CONFIG_DIR": home / ".jupyter",
        "JUPYTER_DATA_DIR": home / ".local" / "share" / "jupyter",
        "JUPYTER_RUNTIME_DIR": base / "runtime",
        "IPYTHONDIR": home / ".ipython",
        "JUPYTERLAB_SETTINGS_DIR": home / ".jupyter" / "lab" / "user-settings",
        "JUPYTERLAB_WORKSPACES_DIR": home / ".jupyter" / "lab" / "workspaces",
        "MPLCONFIGDIR": home / ".config" / "matplotlib",
        "XDG_CACHE_HOME": home / ".cache",
    }
    for d in dirs.values():
        d.mkdir(parents=True, exist_ok=True)
    for rel, text in LAB_SETTINGS.items():
        path = dirs["JUPYTERLAB_SETTINGS_DIR"] / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (dirs["JUPYTER_CONFIG_DIR"] / "jupyter_server_config.py").write_text(SERVER_CONFIG)
    (dirs["JUPYTER_CONFIG_DIR"] / "nbgrader_config.py").write_text(nbgrader_config)

    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("JUPYTER", "JPY", "IPYTHON", "MPL", "NBGRADER", "PYTEST_"))}
    env.update({k: str(v) for k, v in dirs.items()})
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


def start_lab(base: Path, root: Path, nbgrader_config: str, *, make: list[str] | None = None,
              cwd: Path | None = None) -> LabServer:
    """A JupyterLab serving `root`. With `make` (a command line, `make lab`), that command starts it
    in `cwd` (the course directory), with the system's PATH and pip's own cache: where it listens
    and no browser come from the temporary Jupyter config, so the command is as a student types
    it, and its token is the one it makes and prints."""
    env = _isolated_env(base, nbgrader_config)
    log_path = base / "server.log"
    token = secrets.token_hex(24)
    last_error = ""
    if make:
        env["PATH"] = os.environ.get("PATH", "")  # python3 for the new environment: the system's, as a student's
        env["PIP_CACHE_DIR"] = os.environ.get("PIP_CACHE_DIR") or str(
            Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pip")  # pip's own, not the temporary HOME's
    for _ in range(3):  # a free port may be taken between looking and binding
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        if make:
            (Path(env["JUPYTER_CONFIG_DIR"]) / "jupyter_server_config.py").write_text(
                SERVER_CONFIG + f"c.ServerApp.ip = '127.0.0.1'\nc.ServerApp.port = {port}\n"
                "c.ServerApp.port_retries = 0\nc.ServerApp.open_browser = False\n")
            token = ""  # until the server prints it
            command, start_s = make, MAKE_LAB_S
        else:
            command, start_s = [
                sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1",
                f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
                f"--IdentityProvider.token={token}", "--ServerApp.allow_root=True",  # CI and this machine run as root
                f"--ServerApp.root_dir={root}"], SERVER_START_S
        log = open(log_path, "a")
        proc = subprocess.Popen(command, cwd=cwd or root, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        log.close()
        deadline = time.monotonic() + start_s
        while time.monotonic() < deadline and proc.poll() is None:
            if not token:
                printed = re.search(rf"http://127\.0\.0\.1:{port}/\S*\?token=(\w+)", log_path.read_text())
                if not printed:
                    time.sleep(0.5)
                    continue
                token = printed[1]
            try:
                with urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=5) as r:
                    if r.status == 200:
                        return LabServer(url, token, root, log_path, proc, env)
            except OSError:
                time.sleep(0.5)
        last_error = f"exit code {proc.poll()}" if proc.poll() is not None else f"no answer in {start_s} s"
        stop_lab(proc)
        if make and proc.returncode not in (None, 0) and "Address already in use" not in log_path.read_text():
            break  # make failed: its log says why
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shutil.copy2(log_path, ARTIFACTS / "server-start-FAILED.log")
    raise RuntimeError(f"JupyterLab did not start ({last_error}); log: {ARTIFACTS / 'server-start-FAILED.log'}")


def stop_lab(proc: subprocess.Popen) -> None:
    """SIGTERM to the server's process group (make and the server it started, or the server alone:
    it shuts its kernels down on SIGTERM); SIGKILL after 20 s."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _course_nbgrader_config(base: Path, exchange: Path) -> str:
    """What a deployment installs for everyone: the course's nbgrader settings and its exchange
    (with a throwaway gradebook, so that a test never reaches the instructor's)."""
    from utils.scratch import scratch_config

    return scratch_config(base / "course-config", extra=f"c.Exchange.root = {str(exchange)!r}\n").read_text()


@pytest.fixture(scope="module")
def student_lab(course_copy, tmp_path_factory):
    """A student's JupyterLab: home folder holding lesson 1 as fetched, the lesson in the exchange."""
    course_root, lesson = course_copy
    base = tmp_path_factory.mktemp("student")
    exchange = base / "exchange"
    # As `nbgrader release_assignment` lays it out (the Assignments panel lists it as released).
    shutil.copytree(lesson.release_nb.parent, exchange / COURSE_ID / "outbound" / lesson.name)
    home_root = base / "work"
    shutil.copytree(lesson.release_nb.parent, home_root / lesson.name)
    server = start_lab(base, home_root, _course_nbgrader_config(base, exchange))
    yield server
    stop_lab(server.proc)


@dataclass
class StudentCheckout:
    root: Path      # a fresh checkout of the course, a git repository of its own
    lessons: Path   # the working copy `make lab` made in it
    index: str      # torch's CPU index as make lab was told it: a closed port
    install_s: float  # from `make lab` to its environment installed
    output: str     # what make lab printed up to the Lab's start


def _run(args: list[str], cwd: Path) -> str:
    done = subprocess.run(args, cwd=cwd, capture_output=True, text=True)
    assert done.returncode == 0, f"{' '.join(args)} failed in {cwd}:\n{done.stdout}{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def make_lab(tmp_path_factory):
    """A new student's Lab, from a fresh checkout (the repository's tracked files committed in a git
    repository of their own) by `make lab` as the README says, with torch's CPU index unreachable
    (TORCH_INDEX on a loopback port where nothing listens): the student environment installed from
    nothing (pip's cache warm), the working copy made, JupyterLab started. No nbgrader configuration
    of the student's own, no exchange."""
    base = tmp_path_factory.mktemp("make-lab")
    root = base / "course"
    for name in _run(["git", "ls-files", "-z"], REPO).split("\0"):
        if name and (REPO / name).is_file():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, root / name)
    for args in (["git", "init", "-q"], ["git", "add", "-A"],
                 ["git", "-c", "user.name=student", "-c", "user.email=student@localhost", "commit", "-qm", "course"]):
        _run(args, root)
    index = f"http://127.0.0.1:{free_port()}/whl/cpu"  # refused at once, as an unreachable index fails
    # --no-print-directory: under `make test` this make is a sub-make, which would otherwise end
    # its output with "make[1]: Leaving directory ..."
    started = time.time()
    server = start_lab(base, root / "lessons", "", cwd=root,
                       make=["make", "--no-print-directory", "lab", f"TORCH_INDEX={index}"])
    installed = root / ".venv-student" / ".installed"
    install_s = installed.stat().st_mtime - started
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / "make-lab-install.txt").write_text(
        f"make lab from a fresh checkout, torch's CPU index unreachable: environment installed in "
        f"{install_s:.0f} s, Lab answering after {time.time() - started:.0f} s\n")
    yield StudentCheckout(root, root / "lessons", index, install_s, server.log_path.read_text()), server
    stop_lab(server.proc)


@pytest.fixture(scope="module")
def instructor_lab(course_copy, tmp_path_factory):
    """An instructor's JupyterLab rooted at the temporary course copy (formgrader, Create Assignment)."""
    course_root, _ = course_copy
    base = tmp_path_factory.mktemp("instructor")
    (base / "exchange").mkdir()
    server = start_lab(base, course_root, f"c.Exchange.root = {str(base / 'exchange')!r}\n")
    yield server
    stop_lab(server.proc)


# --- the browser -----------------------------------------------------------------------------

# One browser per test module, not per session: while Playwright's sync API is open it leaves its
# event loop marked as running in this thread, so a later test in the same process that calls
# asyncio.run (test_workflow's kernel-start test, under pytest-xdist) would fail.
@pytest.fixture(scope="module")
def chromium():
    reason = missing_browser()
    if reason:
        pytest.skip(reason)
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=UI_TIMEOUT_MS)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(chromium):
    context = chromium.new_context(viewport={"width": 1400, "height": 900})
    context.set_default_timeout(UI_TIMEOUT_MS)
    page = context.new_page()
    yield page
    context.close()


class Browsing:
    """One test's walk through JupyterLab: named steps, screenshots, failure evidence."""

    def __init__(self, page, server: LabServer, test_name: str):
        self.page, self.server, self.test_name = page, server, test_name
        self.shots: list[Path] = []
        self.console: list[str] = []  # the page's errors and warnings, kept for a failure report
        page.on("console", lambda m: self.console.append(f"console.{m.type}: {m.text}")
                if m.type in ("error", "warning") else None)
        page.on("pageerror", lambda e: self.console.append(f"uncaught: {e}"))
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        for old in ARTIFACTS.glob(f"{test_name}*"):
            old.unlink()

    @contextlib.contextmanager
    def step(self, name: str):
        """Run a step; on failure keep a screenshot and the server log, and say which step failed."""
        __tracebackhide__ = True
        try:
            yield
        except BaseException as err:
            if isinstance(err, (KeyboardInterrupt, pytest.skip.Exception)):
                raise
            shot = ARTIFACTS / f"{self.test_name}-FAILED.png"
            log = ARTIFACTS / f"{self.test_name}-server.log"
            with contextlib.suppress(Exception):
                self.page.screenshot(path=str(shot), timeout=15_000)
            with contextlib.suppress(Exception):
                shutil.copy2(self.server.log_path, log)
                # A JupyterLab extension that fails to load says so only in the browser console.
                with open(log, "a") as f:
                    f.write("\n--- browser console (errors and warnings) ---\n" + "\n".join(self.console) + "\n")
            first_line = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            console = "\n".join(self.console[-10:]) or "(no errors or warnings)"
            raise AssertionError(f"step {name!r} failed: {first_line}\n"
                                 f"screenshot: {shot}\nserver log and browser console: {log}\n"
                                 f"browser console, last lines:\n{console}\n\n{err}") from None

    def screenshot(self, name: str | None = None) -> Path:
        path = ARTIFACTS / f"{name or self.test_name}.png"
        self.page.screenshot(path=str(path))
        self.shots.append(path)
        return path

    def open_lab(self, path: str = "", nbgrader_menu: bool = True, url: str | None = None) -> None:
        """Open JupyterLab (on a document when `path` is given, or at `url`, an address the server
        printed) and wait until it has started; `nbgrader_menu=False` for a student's Lab from make
        lab, which has none."""
        self.page.goto(url or self.server.lab_url(path), wait_until="domcontentloaded")
        self.page.wait_for_selector("#jp-main-dock-panel", state="visible")
        if nbgrader_menu:  # the nbgrader lab extension adds its menu once it has loaded
            self.page.wait_for_selector("#jp-MainMenu >> text=Nbgrader", state="visible")

    def menu(self, *labels: str) -> None:
        """Click through the main menu by exact labels: menu("Nbgrader", "Formgrader")."""
        self.page.locator(f"#jp-MainMenu .lm-MenuBar-itemLabel:text-is({labels[0]!r})").click()
        for label in labels[1:]:
            self.page.locator(f".lm-Menu:visible .lm-Menu-itemLabel:text-is({label!r})").click()

    def wait_for_kernel_idle(self, timeout_ms: int = UI_TIMEOUT_MS) -> None:
        self.page.wait_for_selector(".jp-NotebookPanel:not(.lm-mod-hidden) "
                                    ".jp-Notebook-ExecutionIndicator[data-status='idle']",
                                    state="attached", timeout=timeout_ms)


@pytest.fixture
def student(chromium, student_lab, page, request) -> Browsing:
    return Browsing(page, student_lab, request.node.name)


@pytest.fixture
def new_student(chromium, make_lab, page, request) -> Browsing:
    return Browsing(page, make_lab[1], request.node.name)


@pytest.fixture
def instructor(chromium, instructor_lab, page, request) -> Browsing:
    return Browsing(page, instructor_lab, request.node.name)


NB_PANEL = ".jp-NotebookPanel:not(.lm-mod-hidden)"  # the notebook in front

# Every code cell shows an execution count, or the run stopped; and none is still queued/running.
RUN_FINISHED_JS = """(panel) => {
  const prompts = [...document.querySelectorAll(panel + ' .jp-CodeCell .jp-InputArea-prompt')]
      .map(e => e.textContent.trim());
  if (prompts.some(p => p.includes('*'))) return false;
  const errors = document.querySelectorAll(panel + ' .jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]');
  const allDone = prompts.length > 0 && prompts.every(p => /^\\[\\d+\\]:$/.test(p));
  return allDone || [...errors].some(e => e.textContent.includes('Traceback'));
}"""


def open_notebook(student, nb_rel: str, nbgrader_menu: bool = True, url: str | None = None) -> None:
    """Open `nb_rel` in JupyterLab (or the address `url`, which should open it) and wait for an idle
    Python kernel and the Validate button."""
    from playwright.sync_api import expect

    page = student.page
    student.open_lab(nb_rel, nbgrader_menu, url)
    page.wait_for_function(
        """(panel) => {
             const name = document.querySelector(panel + ' .jp-KernelName');
             const state = document.querySelector(panel + ' .jp-Notebook-ExecutionIndicator');
             return name && name.textContent.includes('Python 3') && state && state.dataset.status === 'idle';
           }""", arg=NB_PANEL)
    expect(page.locator(f"{NB_PANEL} .validate-button")).to_be_visible()
