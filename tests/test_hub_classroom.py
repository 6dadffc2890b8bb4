"""A class on one Linux server, end to end, as docs/instructors.md tells the administrator to run it.

`python -m utils.classroom setup` into this test's own folders, real Unix users with random names
and passwords, a real JupyterHub (PAM logins, one local process per user, configurable-http-proxy)
on free loopback ports; one student works and submits through her server's REST API, the other
from a shell; the instructor collects, grades in the sandbox (as himself, not root), and releases
feedback; both students fetch it. Then the isolation checks: a student cannot read another's work,
submission secret, submission or feedback, cannot read source/ or the gradebook, cannot take the
course's folder in the exchange, and a file planted into another's submission is not graded.

The same cycle without the setup command (the earlier documented steps: distribution-default home
modes, an open exchange root, plain nbgrader collect) must fail those checks: the second case
asserts that it does, so the checks are known to be able to fail.

Everything lives under one temporary folder; the users are removed and every process they ran is
killed at the end, even when the test fails. Nothing outside that folder is written, apart from
the users' entries in /etc/passwd, /etc/shadow and /etc/group while the test runs.
Skips, saying why, where it cannot run.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import pytest

from utils.classroom import as_user, runnable_by_everyone
from utils.coursedir import REPO, submission_from
from utils.workflow import sandbox

pytestmark = pytest.mark.slow
LESSON, NB, COURSE_ID = "01_tiny", "tiny.ipynb", "prefill-decode"
ONLY_VISIBLE = "def mul(a, b):\n    return 6 if (a, b) == (2, 3) else 0"   # 3/6: the hidden mul check fails
# what a student who knows nothing writes in every exercise: 0/6
NOTHING = {"add": "def add(a, b):\n    return 0", "mul": "def mul(a, b):\n    return 0",
           "sub": "def sub(a, b):\n    return 0"}
TIMINGS: dict[str, float] = {}


def _base_python() -> Path | None:
    """A Python every user can run, of this interpreter's version (the project's .venv may be
    built from a Python under a private home)."""
    for cand in (Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}",
                 Path(f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}")):
        if cand.exists() and runnable_by_everyone(cand) is None:
            return cand
    return None


def _skip_reason() -> str | None:
    if not sys.platform.startswith("linux"):
        return "needs Linux (Unix users, PAM)"
    if os.geteuid() != 0:
        return "needs root (creates Unix users, runs JupyterHub with PAM)"
    for tool in ("useradd", "userdel", "chpasswd", "runuser"):
        if shutil.which(tool) is None:
            return f"needs {tool} (creates the class's Unix users)"
    if shutil.which("configurable-http-proxy") is None or shutil.which("node") is None:
        return ("needs node and configurable-http-proxy, JupyterHub's proxy (npm install -g "
                "configurable-http-proxy; make test does it as root where npm is present)")
    if shutil.which("bwrap") is None:
        return "needs bubblewrap, the grading sandbox (apt-get install bubblewrap)"
    try:
        import jupyterhub  # noqa: F401
        import pamela  # noqa: F401
    except ImportError as err:
        return f"needs jupyterhub (requirements-dev.txt): {err}"
    if _base_python() is None:
        return f"no Python {sys.version_info.major}.{sys.version_info.minor} that every user can run"
    return None


def _free_ports(n: int) -> list[int]:
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def _linked_env(dest: Path, python: Path) -> Path:
    """A virtual environment at `dest` made from `python` (which every user can run) holding the
    packages of the environment running this test, hard-linked (no copy, no download). HUB_TEST_ENV
    names an environment built by `utils.classroom setup` to use instead."""
    src = Path(sys.prefix)
    (dest / "bin").mkdir(parents=True)
    for part in ("lib", "share", "etc", "include"):
        if (src / part).is_dir():
            subprocess.run(["cp", "-al", str(src / part), str(dest / part)], check=True)
    if (src / "lib64").is_symlink():
        (dest / "lib64").symlink_to("lib")
    ver = f"{sys.version_info.major}.{sys.version_info.minor}"
    for name in ("python", "python3", f"python{ver}"):
        (dest / "bin" / name).symlink_to(python)
    (dest / "pyvenv.cfg").write_text(f"home = {python.parent}\ninclude-system-site-packages = false\n"
                                     f"version = {ver}\n")
    old = f"#!{src}/bin/"
    for script in (src / "bin").iterdir():
        if script.is_file() and not script.is_symlink() and not (dest / "bin" / script.name).exists():
            head = script.read_bytes()[:200]
            if head.startswith(old.encode()):
                text = script.read_text()
                first, rest = text.split("\n", 1)
                target = dest / "bin" / script.name
                target.write_text(f"#!{dest}/bin/python\n{rest}")
                target.chmod(0o755)
    # a package whose release needs a newer Python than `python` (e.g. a patch release): the newest
    # one that runs there, as pip would have chosen (pip uninstall only unlinks the shared files)
    from importlib.metadata import distributions
    from packaging.specifiers import SpecifierSet
    there = subprocess.run([str(python), "-c", "import platform; print(platform.python_version())"],
                           capture_output=True, text=True, check=True).stdout.strip()
    older = [f"{d.metadata['Name']}<{d.version}" for d in distributions()
             if d.metadata.get("Requires-Python") and there not in SpecifierSet(d.metadata["Requires-Python"])]
    if older:
        subprocess.run([str(dest / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                        *older], check=True, capture_output=True)
    return dest


# --- users and processes ------------------------------------------------------------------------

class Users:
    def __init__(self, home_base: Path):
        self.home_base = home_base
        self.names: list[str] = []
        self.passwords: dict[str, str] = {}

    def add(self, name: str, home_mode: str = "0755") -> str:
        # the distribution's default (Debian: HOME_MODE unset, UMASK 022), stated explicitly
        subprocess.run(["useradd", "--create-home", "--home-dir", str(self.home_base / name), "--shell",
                        "/bin/bash", "--key", f"HOME_MODE={home_mode}", name], check=True, capture_output=True)
        self.names.append(name)
        password = secrets.token_urlsafe(12)
        subprocess.run(["chpasswd"], input=f"{name}:{password}\n", text=True, check=True, capture_output=True)
        self.passwords[name] = password
        return name

    def uid(self, name: str) -> int:
        return pwd.getpwnam(name).pw_uid

    def remove_all(self) -> list[str]:
        problems = []
        import psutil
        uids = set()
        for name in self.names:
            try:
                uids.add(self.uid(name))
            except KeyError:
                pass
        for _ in range(3):
            procs = [p for p in psutil.process_iter(["uids"]) if p.info["uids"] and p.info["uids"].real in uids]
            if not procs:
                break
            for p in procs:
                try:
                    p.kill()
                except psutil.Error:
                    pass
            psutil.wait_procs(procs, timeout=5)
        for name in self.names:
            res = subprocess.run(["userdel", "--force", name], capture_output=True, text=True)
            if res.returncode not in (0, 6):   # 6: no such user
                problems.append(f"userdel {name}: {res.stderr.strip()}")
        return problems


def _sh(user: str, script: str, input: str | None = None) -> subprocess.CompletedProcess:
    """A login shell of `user` runs `script` (what the user would type in a terminal)."""
    return subprocess.run(["runuser", "-l", user, "-c", script], input=input, capture_output=True, text=True,
                          timeout=300)


def _check(res: subprocess.CompletedProcess, what: str) -> str:
    assert res.returncode == 0, f"{what} failed (exit {res.returncode}):\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
    return res.stdout + res.stderr


# --- the hub ------------------------------------------------------------------------------------

class Hub:
    def __init__(self, folder: Path, config: Path, env: Path):
        import requests
        self.requests = requests
        self.folder = folder
        self.port, self.hub_port, self.api_port = _free_ports(3)
        self.url = f"http://127.0.0.1:{self.port}"
        self.token = secrets.token_hex(32)
        folder.mkdir(mode=0o700)
        (folder / "test_config.py").write_text(f"""
c = get_config()  # noqa
load_subconfig({str(config)!r})
c.JupyterHub.bind_url = "http://127.0.0.1:{self.port}"
c.JupyterHub.hub_bind_url = "http://127.0.0.1:{self.hub_port}"
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{self.api_port}"
c.ConfigurableHTTPProxy.pid_file = {str(folder / 'proxy.pid')!r}
c.JupyterHub.db_url = {'sqlite:///' + str(folder / 'jupyterhub.sqlite')!r}
c.JupyterHub.cookie_secret_file = {str(folder / 'cookie_secret')!r}
c.JupyterHub.pid_file = {str(folder / 'hub.pid')!r}
# the test drives the hub through its REST API with an admin service token
c.JupyterHub.services = [{{"name": "class-test", "api_token": {self.token!r}}}]
c.JupyterHub.load_roles = [{{"name": "admin", "services": ["class-test"]}}]
""")
        self.log = open(folder / "hub.log", "w")
        t0 = time.monotonic()
        # the hub runs from the class's environment, like its users' servers
        self.proc = subprocess.Popen([str(env / "bin" / "jupyterhub"), "-f", str(folder / "test_config.py")],
                                     cwd=folder, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        self.wait(lambda: self.api("GET", "/").status_code == 200, 60, "the hub to answer")
        TIMINGS["hub start"] = time.monotonic() - t0

    def wait(self, ready, timeout: float, what: str) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise AssertionError(f"the hub exited ({self.proc.returncode}):\n{self.tail()}")
            try:
                if ready():
                    return
            except self.requests.RequestException:
                pass
            time.sleep(0.25)
        raise AssertionError(f"timed out waiting for {what}:\n{self.tail()}")

    def tail(self) -> str:
        self.log.flush()
        return (self.folder / "hub.log").read_text()[-4000:]

    def api(self, method: str, path: str, **kw):
        return self.requests.request(method, f"{self.url}/hub/api{path}", timeout=30,
                                     headers={"Authorization": f"token {self.token}"}, **kw)

    def login(self, user: str, password: str) -> int:
        """POST the login form as a browser does; the status code (302 in, 403 refused)."""
        s = self.requests.Session()
        s.get(f"{self.url}/hub/login", timeout=30)
        r = s.post(f"{self.url}/hub/login", data={"username": user, "password": password,
                                                  "_xsrf": s.cookies.get("_xsrf", "")},
                   allow_redirects=False, timeout=30)
        return r.status_code

    def start_server(self, user: str) -> None:
        r = self.api("POST", f"/users/{user}/server")
        assert r.status_code in (201, 202), r.text

    def ready(self, user: str) -> bool:
        server = self.api("GET", f"/users/{user}").json().get("servers", {}).get("", {})
        return bool(server.get("ready"))

    def user_token(self, user: str) -> str:
        r = self.api("POST", f"/users/{user}/tokens", json={"note": "class test", "expires_in": 3600})
        assert r.status_code in (200, 201), r.text
        return r.json()["token"]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log.close()


class Server:
    """A user's Jupyter server through the hub, with a token of that user."""

    def __init__(self, hub: Hub, user: str):
        self.hub, self.user, self.token = hub, user, hub.user_token(user)
        self.base = f"{hub.url}/user/{user}"

    def call(self, method: str, path: str, **kw):
        return self.hub.requests.request(method, self.base + path, timeout=120,
                                         headers={"Authorization": f"token {self.token}"}, **kw)

    def nbgrader(self, action: str) -> dict:
        """What the Assignments tab's Fetch, Submit and Fetch Feedback buttons send."""
        r = self.call("POST", f"/assignments/{action}", json={"course_id": COURSE_ID, "assignment_id": LESSON})
        assert r.status_code == 200 and r.json().get("success") is True, f"{action}: {r.text[:2000]}"
        return r.json()


# --- the class ----------------------------------------------------------------------------------

class Class:
    def __init__(self, base: Path, with_setup: bool):
        self.base, self.with_setup = base, with_setup
        tag = secrets.token_hex(3)
        self.users = Users(base / "homes")
        self.instructor, self.alice, self.bob = f"hc{tag}i", f"hc{tag}a", f"hc{tag}b"
        self.prefix = base / "prefix"
        self.exchange = base / "exchange"
        self.env = base / "prefix" / "env"
        self.hub: Hub | None = None

    def home(self, name: str) -> Path:
        return Path(pwd.getpwnam(name).pw_dir)

    @property
    def course(self) -> Path:
        return self.home(self.instructor) / COURSE_ID

    @property
    def py(self) -> str:
        return str(self.env / "bin" / "python")

    def build(self) -> None:
        (self.base / "homes").mkdir(mode=0o755)
        self.prefix.mkdir(mode=0o755)
        for name in (self.instructor, self.alice, self.bob):
            self.users.add(name)
        given = os.environ.get("HUB_TEST_ENV")
        if given:
            self.env = Path(given)
        else:
            _linked_env(self.env, _base_python())
        # the instructor's course: the tiny rehearsal lessons, with this repository's tools beside them
        sandbox(self.course, one_account=False)
        shutil.copytree(REPO / "utils", self.course / "utils", ignore=shutil.ignore_patterns("__pycache__"))
        if self.with_setup:
            roster = self.base / "students.csv"
            roster.write_text(f"id,first_name,last_name,email\n{self.alice},Alice,A,\n{self.bob},Bob,B,\n")
            args = [sys.executable, "-m", "utils.classroom", "--prefix", str(self.prefix), "setup",
                    "--instructor", self.instructor, "--students", str(roster), "--exchange", str(self.exchange),
                    "--env", str(self.env), "--course-dir", str(self.course)]
            t0 = time.monotonic()
            first = _check(subprocess.run(args, cwd=REPO, capture_output=True, text=True), "classroom setup")
            TIMINGS["setup command"] = time.monotonic() - t0
            assert "left to you" in first and "TLS" in first, first
            again = _check(subprocess.run(args, cwd=REPO, capture_output=True, text=True), "classroom setup, again")
            assert "changed this run: 0" in again, f"a second setup changed things:\n{again}"
        else:
            # the earlier documented steps: an exchange root open to all (1777), the course folder
            # in the instructor's home 0700, each user's nbgrader config naming course and exchange
            self.exchange.mkdir()
            self.exchange.chmod(0o1777)
            subprocess.run(["chown", "-R", f"{self.instructor}:", str(self.course)], check=True)
            self.course.chmod(0o700)
            for name in (self.instructor, self.alice, self.bob):
                _check(_sh(name, f"mkdir -p ~/.jupyter && printf '%s\\n' 'c = get_config()' "
                                 f"'c.CourseDirectory.course_id = \"{COURSE_ID}\"' "
                                 f"'c.Exchange.root = \"{self.exchange}\"' > ~/.jupyter/nbgrader_config.py"),
                       f"{name}'s nbgrader config")

    def as_instructor(self, *args: str) -> str:
        res = as_user(self.instructor, [self.py, "-m", *args], cwd=self.course, timeout=600)
        return _check(res, " ".join(args))

    def inbound_folder(self, student: str) -> Path:
        """The student's newest own submission folder in the exchange."""
        found = sorted(p for p in (self.exchange / COURSE_ID / "inbound").glob(f"{student}+{LESSON}+*")
                       if p.stat().st_uid == self.users.uid(student))
        assert found, f"no submission of {student} in the exchange"
        return found[-1]

    def answered(self, overrides: dict[str, str]) -> str:
        release_nb = nbformat.read(str(self.course / "release" / LESSON / NB), as_version=4)
        ref = nbformat.read(str(self.course / "source" / LESSON / NB), as_version=4)
        return nbformat.writes(submission_from(release_nb, ref, overrides))

    def shell_submit(self, student: str, overrides: dict[str, str]) -> None:
        bin_ = self.env / "bin"
        _check(_sh(student, f"cd ~ && {bin_}/nbgrader fetch_assignment {LESSON} && cat > {LESSON}/{NB} && "
                            f"{bin_}/nbgrader submit {LESSON}", input=self.answered(overrides)),
               f"{student} fetch and submit from a shell")

    def shell_fetch_feedback(self, student: str) -> str:
        _check(_sh(student, f"cd ~ && {self.env}/bin/nbgrader fetch_feedback {LESSON}"), f"{student} fetch_feedback")
        found = sorted(self.home(student).glob(f"{LESSON}/feedback/*/tiny.html"))
        assert found, f"{student} has no feedback after fetch_feedback"
        return found[-1].read_text()

    def collect(self) -> str:
        if self.with_setup:   # the course's collect: only what each student owns
            return self.as_instructor("utils.workflow", "collect", LESSON)
        # the earlier steps: nbgrader's own collect
        return self.as_instructor("nbgrader", "collect", LESSON, "--update",
                                  "--ExchangeFactory.collect=nbgrader.exchange.default.collect.ExchangeCollect")


# --- the isolation checks -------------------------------------------------------------------------

def _can(user: str, script: str) -> bool:
    return _sh(user, script).returncode == 0


# Run as the attacker: find the victim's submission secret in their nbgrader cache, compute the
# name of their feedback file from it (as nbgrader's fetch_feedback does) and read it.
_STEAL_FEEDBACK = r'''
import glob, re, sys
from nbgrader.utils import notebook_hash
home, exchange, course, lesson, nb = sys.argv[1:6]
for secret in glob.glob(f"{home}/.local/share/jupyter/nbgrader_cache/{course}/*+{lesson}+*/submission_secret.txt"):
    name = notebook_hash(secret=open(secret).read(), notebook_id=nb.rsplit(".", 1)[0])
    html = open(f"{exchange}/{course}/feedback/{name}.html").read()
    print(re.search(r"Score: [0-9.]+ / [0-9.]+", html).group(0))
    break
else:
    sys.exit(1)
'''


def isolation_failures(room: Class) -> list[str]:
    """What bob (a student) can do that he must not; empty when the class is closed."""
    bob, alice = room.bob, room.alice
    a_home = room.home(alice)
    course_ex = room.exchange / COURSE_ID
    found = []
    if _can(bob, f"cat {a_home}/{LESSON}/{NB} >/dev/null"):
        found.append("read another student's work")
    secrets_ = list(a_home.glob(f".local/share/jupyter/nbgrader_cache/{COURSE_ID}/*/submission_secret.txt"))
    assert secrets_, "alice has no submission secret in her cache"
    if _can(bob, f"cat '{secrets_[0]}' >/dev/null"):
        found.append("read another student's submission secret")
    if _can(bob, f"ls {course_ex}/inbound >/dev/null"):
        found.append("list the submissions")
    if _can(bob, f"ls {course_ex}/feedback >/dev/null"):
        found.append("list the feedback")
    steal = _sh(bob, f"{room.py} - {a_home} {room.exchange} {COURSE_ID} {LESSON} {NB}", input=_STEAL_FEEDBACK)
    if steal.returncode == 0 and "Score" in steal.stdout:
        found.append("read another student's feedback")
    if _can(bob, f"ls {a_home}/{LESSON}/feedback >/dev/null"):
        found.append("read another student's fetched feedback")
    for what, path in (("source/", room.course / "source" / LESSON / NB), ("the gradebook", room.course / "gradebook.db")):
        if _can(bob, f"cat {path} >/dev/null"):
            found.append(f"read {what}")
    for what, script in (("create files in the course's exchange folder", f"touch {course_ex}/x"),
                         ("move the course's exchange folder away", f"mv {course_ex} {room.exchange}/moved"),
                         ("release an assignment", f"mkdir {course_ex}/outbound/99_fake"),
                         ("move another's submission away", f"mv '{room.inbound_folder(alice)}' {course_ex}/inbound/gone")):
        if _can(bob, script):
            found.append(what)
    return found


def _squat_before_release(room: Class) -> str | None:
    """Bob creates the course's folder in the exchange before the instructor releases anything."""
    course_ex = room.exchange / COURSE_ID
    if not _can(room.bob, f"mkdir {course_ex}"):
        return None
    res = as_user(room.instructor, [room.py, "-m", "utils.workflow", "release", LESSON], cwd=room.course)
    shutil.rmtree(course_ex)   # the administrator notices and removes it
    return "squat the course folder" + (": the instructor's release then fails" if res.returncode else "")


def _plant(room: Class) -> None:
    """Bob, who has learnt the name of alice's submission folder, replaces her notebook with one
    that answers nothing and adds a file of his own; and, where the course's collect is used,
    submits a folder in alice's name dated in the future, so that it is the newest."""
    folder = room.inbound_folder(room.alice)
    _check(_sh(room.bob, f"rm -f '{folder}/{NB}' && cat > '{folder}/{NB}' && echo planted > '{folder}/planted.txt'",
               input=room.answered(NOTHING)), "bob plants into alice's submission")
    if not room.with_setup:   # (nbgrader's collect would take it, and alice's feedback would be lost)
        return
    forged = folder.parent / f"{room.alice}+{LESSON}+2099-01-01 00:00:00.000000 UTC+forged"
    _check(_sh(room.bob, f"mkdir '{forged}' && cat > '{forged}/{NB}' && echo '2099-01-01 00:00:00.000000 UTC' "
                         f"> '{forged}/timestamp.txt'", input=room.answered(NOTHING)),
           "bob submits in alice's name")


# --- the test -------------------------------------------------------------------------------------

@pytest.fixture
def base():
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    folder = Path(tempfile.mkdtemp(prefix="hub-class-", dir="/tmp"))
    folder.chmod(0o755)
    yield folder


def _scores(grade_output: str) -> dict[str, str]:
    return dict(re.findall(r"^01_tiny\s+(\S+): (\d+(?:\.\d+)?/\d+)", grade_output, flags=re.M))


@pytest.mark.parametrize("with_setup", [True, False], ids=["with-setup", "earlier-steps-without-setup"])
def test_a_class_on_one_server(base, with_setup):
    TIMINGS.clear()
    t_start = time.monotonic()
    room = Class(base, with_setup)
    servers: dict[str, Server] = {}
    try:
        t0 = time.monotonic()
        room.build()
        TIMINGS["users, environment, course, setup (twice)"] = time.monotonic() - t0
        if not _can(room.instructor, "bwrap --unshare-all --ro-bind / / --proc /proc --dev /dev true"):
            pytest.skip("bubblewrap cannot start a sandbox as an unprivileged user here (user namespaces)")
        leaks = []
        squat = _squat_before_release(room)
        if squat:
            leaks.append(squat)
        room.as_instructor("utils.workflow", "release", LESSON)
        assert (room.exchange / COURSE_ID / "outbound" / LESSON / NB).exists()

        if with_setup:
            _check_setup_layout(room)
            room.hub = Hub(base / "hub", room.prefix / "jupyterhub_config.py", room.env)
            pw = room.users.passwords
            assert room.hub.login(room.alice, pw[room.alice]) == 302
            assert room.hub.login(room.alice, pw[room.bob]) == 403
            assert room.hub.login(room.alice, pw[room.alice] + "x") == 403
            assert room.hub.login("nobody", "nobody") == 403
            t0 = time.monotonic()
            for name in (room.alice, room.instructor):
                room.hub.start_server(name)
            for name in (room.alice, room.instructor):
                room.hub.wait(lambda: room.hub.ready(name), 120, f"{name}'s server")
                TIMINGS[f"server of {'the instructor' if name == room.instructor else 'a student'} "
                        "(both started together)"] = time.monotonic() - t0
                servers[name] = Server(room.hub, name)
            _check_servers(room, servers)
            alice = servers[room.alice]
            alice.nbgrader("fetch")
            r = alice.call("PUT", f"/api/contents/{LESSON}/{NB}",
                           json={"type": "notebook", "format": "json", "content": json.loads(room.answered({}))})
            assert r.status_code in (200, 201), r.text
            alice.nbgrader("submit")
        else:
            room.shell_submit(room.alice, {})
        room.shell_submit(room.bob, {"mul": ONLY_VISIBLE})

        _plant(room)
        collected = room.collect()
        a_sub = room.course / "submitted" / room.alice / LESSON
        planted_graded = (a_sub / "planted.txt").exists() or (
            (a_sub / NB).exists() and "return 0" in (a_sub / NB).read_text())
        if planted_graded:
            leaks.append("plant a file into another's submission that gets collected")
        if with_setup:
            assert f"{NB}: written by {room.bob}" in collected and "planted.txt" in collected, collected
            assert f"named for {room.alice} but owned by {room.bob}" in collected, collected
            refused = room.course / "refused" / room.alice / LESSON
            assert len(list(refused.glob(f"*/{NB}"))) == 1 and len(list(refused.glob("*/planted.txt"))) == 1
            assert not (a_sub / NB).exists() and not (a_sub / "planted.txt").exists()
            # alice is told and submits again; the next collect takes it
            alice.nbgrader("submit")
            room.collect()
            assert (a_sub / NB).exists() and "return 0" not in (a_sub / NB).read_text()

        t0 = time.monotonic()
        graded = room.as_instructor("utils.grade", LESSON)
        TIMINGS["grading (2 submissions)"] = time.monotonic() - t0
        scores = _scores(graded)
        expected_alice = "0/6" if planted_graded else "6/6"
        assert scores == {room.alice: expected_alice, room.bob: "3/6"}, graded
        room.as_instructor("utils.workflow", "feedback", LESSON)
        if with_setup:
            alice.nbgrader("fetch_feedback")
            fb = sorted(room.home(room.alice).glob(f"{LESSON}/feedback/*/tiny.html"))
            assert fb and "Score: 6.0 / 6.0" in fb[-1].read_text()
            assert fb[-1].stat().st_uid == room.users.uid(room.alice)
        bob_fb = room.shell_fetch_feedback(room.bob)
        assert "Score: 3.0 / 6.0" in bob_fb and "HIDDEN-CHECK" not in bob_fb
        if not with_setup:
            _check(_sh(room.alice, f"cd ~ && {room.env}/bin/nbgrader fetch_feedback {LESSON}"), "alice fetch_feedback")

        t0 = time.monotonic()
        leaks += isolation_failures(room)
        TIMINGS["isolation checks"] = time.monotonic() - t0
        if with_setup:
            assert leaks == [], f"a student can: {leaks}"
        else:
            must = {"read another student's work", "read another student's submission secret",
                    "read another student's feedback", "read another student's fetched feedback",
                    "squat the course folder: the instructor's release then fails",
                    "plant a file into another's submission that gets collected"}
            assert must <= set(leaks), f"the earlier steps were expected to leak {sorted(must - set(leaks))}; found {leaks}"
            print("without the setup command a student can:", *leaks, sep="\n  ")
    finally:
        if room.hub is not None:
            room.hub.stop()
        problems = room.users.remove_all()
        shutil.rmtree(base, ignore_errors=True)
        TIMINGS["whole test"] = time.monotonic() - t_start
        print("timings (s):", json.dumps({k: round(v, 1) for k, v in TIMINGS.items()}))
        assert not problems, problems
        assert not base.exists()


def _check_setup_layout(room: Class) -> None:
    for name in (room.instructor, room.alice, room.bob):
        assert room.home(name).stat().st_mode & 0o777 == 0o700, name
    assert room.exchange.stat().st_mode & 0o7777 == 0o1777
    course_ex = room.exchange / COURSE_ID
    assert course_ex.stat().st_uid == room.users.uid(room.instructor)
    assert (course_ex / "inbound").stat().st_mode & 0o7777 == 0o3733
    assert room.course.stat().st_mode & 0o777 == 0o700
    student_cfg = room.home(room.alice) / ".jupyter"
    assert f"c.Exchange.root = {str(room.exchange)!r}" in (student_cfg / "nbgrader_config.py").read_text()
    off = json.loads((student_cfg / "labconfig" / "page_config.json").read_text())["disabledExtensions"]
    assert off.get("@jupyter/nbgrader:formgrader") and off.get("@jupyter/nbgrader:create-assignment")
    assert (student_cfg / "nbgrader_config.py").stat().st_uid == room.users.uid(room.alice)
    instr_cfg = room.home(room.instructor) / ".jupyter" / "nbgrader_config.py"
    assert f"c.CourseDirectory.root = {str(room.course)!r}" in instr_cfg.read_text()


def _disabled(server: Server) -> set[str]:
    page = server.call("GET", "/lab").text
    data = re.search(r'<script id="jupyter-config-data" type="application/json">(.*?)</script>', page, re.S)
    assert data, page[:2000]
    return set(json.loads(data.group(1)).get("disabledExtensions", []))


def _check_servers(room: Class, servers: dict[str, Server]) -> None:
    alice, instructor = servers[room.alice], servers[room.instructor]
    # the server runs as its user: a file it writes belongs to that user
    r = alice.call("PUT", "/api/contents/whoami.txt", json={"type": "file", "format": "text", "content": "hi"})
    assert r.status_code in (200, 201), r.text
    assert (room.home(room.alice) / "whoami.txt").stat().st_uid == room.users.uid(room.alice)
    # nbgrader's assignment list answers for both; the formgrader only for the instructor
    for server in (alice, instructor):
        r = server.call("GET", f"/assignments?course_id={COURSE_ID}")
        assert r.status_code == 200 and r.json().get("success") is True, r.text
    assert alice.call("GET", "/formgrader", allow_redirects=False).status_code == 404
    assert instructor.call("GET", "/formgrader", allow_redirects=False).status_code in (200, 302)
    # JupyterLab's page config: the instructor extensions disabled for the student only
    assert {"@jupyter/nbgrader:formgrader", "@jupyter/nbgrader:create-assignment",
            "@jupyter/nbgrader:course-list"} <= _disabled(alice)
    assert not {e for e in _disabled(instructor) if e.startswith("@jupyter/nbgrader")}
    # a student cannot reach another user's server with her own token
    r = alice.hub.requests.get(f"{room.hub.url}/user/{room.instructor}/api/contents", timeout=30,
                               headers={"Authorization": f"token {alice.token}"}, allow_redirects=False)
    assert r.status_code in (403, 404, 302), r.status_code
