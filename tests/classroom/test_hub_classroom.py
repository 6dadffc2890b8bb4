"""A class on one Linux server, end to end, as docs/class-server.md tells the administrator to run it.

Every command of docs/class-server.md's class blocks (read from the page: a command added there that
the test does not run fails it), as the user the block names. The one command (`bash
utils/classroom/setup.sh`, twice: the second run changes nothing) into this test's own folders,
with real Unix users of random names and passwords; its first run builds the class's environment
as on a new server (a venv, pip install -r requirements-classroom.txt), pip reading only the
wheels `make env` keeps in .venv/wheels (HUB_TEST_ENV=DIR reuses an environment an earlier run
built). A real JupyterHub (PAM logins, one local process per user, configurable-http-proxy) on free
privileged loopback ports. One student works through her server's REST API (what the Assignments
tab sends); the other student and the instructor type the docs' commands into JupyterLab terminals
of their servers (terminado websockets, login shells): roster, release, fetch, validate, submit,
collect, grade in the sandbox (in an environment without Dask), feedback, fetch feedback, the class
report; the formgrader lists the scores; add-student adds a fourth user; teardown ends it. Then what one student must not do to another, each check beside a control that shows it
can fail: the same probe run by the owner (or against a submission made by nbgrader's own submit)
succeeds. And the class server's attacks of docs/threat-model.md, as a student, each
with its control: a classmate's kernel heard through loopback TCP, modules and a config planted in
a submission, a script on a student's page with the instructor's cookies, the hub's ports taken
while it is stopped, the checkout the class was set up from, sandbox folders left in /tmp, the
debugger's port; each server on its own origin (the default on loopback: NAME.class.localhost),
host-only login cookies, no cross-origin read, a kernel run there. Last, the same class set up
again with --one-origin and the hub restarted: what one origin still refuses.

Then the same class (its environment built once for both) on a cluster: the one command again with
--slurm-partition and --hub-address, a real one-node Slurm (tests/slurm_common.py) whose node is
known at an address added to this machine for the test (10.77.0.1 on the loopback interface,
removed after), the hub's API bound there, each user's server a Slurm job listening on that
address, everything among them over TLS with JupyterHub's internal_ssl; the round trip of the
second tiny lesson through those servers; and what the address refuses: plain HTTP, a client
without the class's CA or without a certificate it signed, a user reading another user's key.

Everything lives under one temporary folder, apart from the users' entries in /etc/passwd,
/etc/shadow and /etc/group and one /etc/profile.d script named for this run, all removed at the
end with every process the users ran, even when the test fails. Skips, saying why, where it
cannot run. The hostile entries in inbound/ and the size cap are tested without a hub in
tests/classroom/test_workflow.py, the setup's parts without users in tests/classroom/test_classroom.py.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import secrets
import shlex
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

from utils.classroom.environment import runnable_by_everyone
from utils.authoring import nbauthor as A
from utils.lessons import REPO
from utils.notebooks import submission_from
from utils.scratch import scratch_config
from utils.classroom.rehearsal import rehearsal_lessons
from utils.classroom.room import LOCAL_ORIGINS
from slurm_common import address_problem, one_node_slurm, secondary_address, slurm_problem

# a class's round trip through a real hub: 143 s in make test, 373 s at load 8 to 11 (docs/benchmarks.md)
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]
LESSON, NB, COURSE_ID = "01_tiny", "tiny.ipynb", "prefill-decode"
ONLY_VISIBLE = "def mul(a, b):\n    return 6 if (a, b) == (2, 3) else 0"   # 3/6: the hidden mul check fails
TIMINGS: dict[str, float] = {}
OTHER, OTHER_NB = "02_other", "other.ipynb"   # the lesson the class's round trip on Slurm releases
WRONG_HALF = "def half(x):\n    return 2.0 if x == 4 else 0.0"   # 0/1: the visible check passes, the hidden fails
SLURM_ARGS = ["--slurm-partition", "debug", "--slurm-memory", "600M", "--slurm-time", "00:30:00"]
CLUSTER_ADDRESS = "10.77.0.1"   # the hub's and the node's address on the test's "cluster network"


DEBIAN_PYTHON = Path("/usr/bin/python3")   # what utils/classroom/setup.sh picks by itself


def _base_python() -> Path | None:
    """A Python every user can run, of this interpreter's version (the project's .venv may be
    built from a Python under a private home): first the one the set-up picks when given none,
    Debian's /usr/bin/python3, as the link it is (-> python3.X), so that the class's environment has
    the interpreter chain a real server's has."""
    ver = f"{sys.version_info.major}.{sys.version_info.minor}"
    for cand in (DEBIAN_PYTHON, Path(f"/usr/bin/python{ver}"), Path(sys.base_prefix) / "bin" / f"python{ver}"):
        if not cand.exists() or runnable_by_everyone(cand) is not None:
            continue
        there = subprocess.run([str(cand), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                               capture_output=True, text=True).stdout.strip()
        if there == ver:
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
    wanted = [l.split("#")[0].strip() for l in (REPO / "utils" / "classroom" / "packages.txt").read_text().splitlines()]
    missing = [p for p in wanted if p and subprocess.run(["dpkg-query", "-W", "-f=${Status}", p], capture_output=True,
                                                         text=True).stdout != "install ok installed"]
    if missing:
        return f"needs the class server's packages {missing} (make system-deps installs them)"
    try:
        import jupyterhub  # noqa: F401 - only whether it imports
        import pamela  # noqa: F401 - only whether it imports
    except ImportError as err:
        return f"needs jupyterhub (requirements-dev.txt): {err}"
    if _base_python() is None:
        return f"no Python {sys.version_info.major}.{sys.version_info.minor} that every user can run"
    return None


def _free_privileged_ports(n: int) -> list[int]:
    """Free loopback ports below 1024 (only root may listen there), picked at random so that two
    runs on one machine rarely meet."""
    import random
    ports: list[int] = []
    for port in random.sample(range(600, 1000), 400):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        ports.append(port)
        if len(ports) == n:
            return ports
    raise AssertionError("no free privileged ports on loopback")


# The class server's packages as wheel files, filled by `make env` (the Makefile's WHEELS): the one
# command's pip reads them alone (no index), as an administrator's pip would read an index.
WHEELS = REPO / ".venv" / "wheels"


def _pip_from_wheels() -> dict[str, str]:
    """pip's own settings that point the setup's `pip install` at WHEELS and nothing else; none
    (pip's configured indexes, minutes) where `make env` has not filled it."""
    if WHEELS.is_dir() and any(WHEELS.glob("*.whl")):
        return {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(WHEELS)}
    return {}


# --- the docs' commands ---------------------------------------------------------------------------

DOC = REPO / "docs" / "class-server.md"
# docs/class-server.md's blocks of class commands, each opened by a line saying who runs them
ROLES = {"root": "# as root, in the clone", "instructor": "# as the instructor, in a terminal of their JupyterLab",
         "student": "# as a student, in a terminal of their JupyterLab"}


def doc_commands() -> dict[str, list[str]]:
    """The commands of each role's blocks in docs/class-server.md, in order, comments left out."""
    text = DOC.read_text()
    found: dict[str, list[str]] = {}
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        first = block.splitlines()[0].strip()
        for role, opening in ROLES.items():
            if first.startswith(opening):
                lines = [l.strip() for l in block.splitlines()[1:]]
                found.setdefault(role, []).extend(l.split(" #")[0].strip() for l in lines if l and not l.startswith("#"))
    return found


class Docs:
    """The docs' commands as the test runs them: the real lesson's name replaced by the tiny
    lesson's, the example names by the test's users and files, and the options that keep the
    class in this test's folders added; each command taken once, and `unused` says which of the
    docs' commands the test never ran."""

    def __init__(self, names: dict[str, str]):
        self.commands = doc_commands()
        self.names = names
        self.used: set[tuple[str, str]] = set()

    def __call__(self, role: str, containing: str) -> str:
        hits = [c for c in self.commands.get(role, []) if containing in c]
        assert len(hits) == 1, f"docs/class-server.md: one command with {containing!r} for {role} expected, found {hits}"
        self.used.add((role, hits[0]))
        line = hits[0]
        for old, new in self.names.items():
            line = re.sub(rf"(?<![\w./-]){re.escape(old)}(?![\w-])", new, line)
        return line

    def unused(self) -> list[str]:
        return [f"{role}: {c}" for role, cs in self.commands.items() for c in cs if (role, c) not in self.used]


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
    """The hub as the docs start it (in its state folder, with the setup's config), plus what the
    test needs on free ports: the hub's internal and the proxy's API address, and an admin
    service token to drive it."""

    def __init__(self, room: "Class"):
        import requests
        self.requests = requests
        self.room = room
        # the hub's public URL: the record's origin per user (the default: class.localhost) or loopback
        self.sub = json.loads((room.prefix / "classroom.json").read_text()).get("subdomain_host") or ""
        self.url = self.sub or f"http://127.0.0.1:{room.port}"
        self.token = secrets.token_hex(32)
        self.test_config = room.base / "hub_test_config.py"
        self.test_config.write_text(f"""
c = get_config()  # noqa
load_subconfig({str(room.prefix / 'jupyterhub_config.py')!r})
c.JupyterHub.pid_file = {str(room.hub_state / 'hub.pid')!r}
c.JupyterHub.services = [{{"name": "class-test", "api_token": {self.token!r}}}]
c.JupyterHub.load_roles = [{{"name": "admin", "services": ["class-test"]}}]
# a loaded test machine starts three servers at once more slowly than a class's server starts one
c.Spawner.start_timeout = 300
c.Spawner.http_timeout = 300
""")
        self.log_path = room.base / "hub.log"
        self.log = open(self.log_path, "w")
        t0 = time.monotonic()
        self.proc = subprocess.Popen([str(room.env / "bin" / "jupyterhub"), "-f", str(self.test_config)],
                                     cwd=room.hub_state, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        self.wait(lambda: self.api("GET", "/").status_code == 200, 90, "the hub to answer")
        TIMINGS["hub answering"] = time.monotonic() - t0

    def origin(self, user: str) -> str:
        """Where `user`'s server is served: NAME.HOST with an origin per user, else the hub's."""
        return self.url.replace("://", f"://{user}.", 1) if self.sub else self.url

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
        """The hub's log, without the test's own polling."""
        self.log.flush()
        lines = [l for l in self.log_path.read_text().splitlines()
                 if not re.search(r"200 GET /hub/api/users/\S+ \(class-test@", l)]
        return "\n".join(lines)[-6000:]

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
        self.base = f"{hub.origin(user)}/user/{user}"

    def call(self, method: str, path: str, **kw):
        return self.hub.requests.request(method, self.base + path, timeout=120,
                                         headers={"Authorization": f"token {self.token}"}, **kw)

    def nbgrader(self, action: str) -> dict:
        """What the Assignments tab's Fetch, Submit and Fetch Feedback buttons send."""
        r = self.call("POST", f"/assignments/{action}", json={"course_id": COURSE_ID, "assignment_id": LESSON})
        assert r.status_code == 200 and r.json().get("success") is True, f"{action}: {r.text[:2000]}"
        return r.json()

    def terminal(self, *commands: str, timeout: float = 300) -> list[str]:
        """Type each command into a new JupyterLab terminal (a login shell, through the hub's
        proxy and terminado's websocket) and return what each printed; each must exit 0."""
        import asyncio
        import concurrent.futures

        from tornado.httpclient import HTTPRequest
        from tornado.websocket import websocket_connect
        r = self.call("POST", "/api/terminals")
        assert r.status_code == 200, r.text
        name = r.json()["name"]
        url = "ws" + self.base[4:] + f"/terminals/websocket/{name}"

        async def run() -> list[str]:
            ws = await websocket_connect(HTTPRequest(url, headers={"Authorization": f"token {self.token}"}))
            outputs = []
            try:
                for command in commands:
                    tag = f"done{secrets.token_hex(4)}"
                    await ws.write_message(json.dumps(["stdin", f"{command}; echo {tag}:$?:{tag}\r"]))
                    out, end = "", time.monotonic() + timeout
                    while not (m := re.search(rf"{tag}:(\d+):{tag}", out)):
                        msg = await asyncio.wait_for(ws.read_message(), max(1.0, end - time.monotonic()))
                        assert msg is not None, f"the terminal closed during {command!r}:\n{out[-3000:]}"
                        kind, *rest = json.loads(msg)
                        if kind == "stdout":
                            out += rest[0]
                    assert m.group(1) == "0", f"{self.user}'s terminal: {command!r} exited {m.group(1)}:\n{out[-4000:]}"
                    outputs.append(out)
            finally:
                ws.close()
            return outputs

        try:
            # a thread of its own: an earlier test of the session (Playwright's sync API) may hold a
            # running event loop in this one, where asyncio.run refuses to start
            with concurrent.futures.ThreadPoolExecutor(1) as pool:
                return pool.submit(asyncio.run, run()).result()
        finally:
            self.call("DELETE", f"/api/terminals/{name}")


# --- the class ----------------------------------------------------------------------------------

class Class:
    def __init__(self, base: Path):
        self.base = base
        self.tag = secrets.token_hex(3)
        self.users = Users(base / "homes")
        self.instructor, self.alice, self.bob = f"hc{self.tag}i", f"hc{self.tag}a", f"hc{self.tag}b"
        self.carol = f"hc{self.tag}c"   # added to the class later, by add-student
        self.prefix = base / "prefix"
        self.exchange = base / "exchange"
        self.env = base / "prefix" / "env"
        self.hub_state = base / "prefix" / "hub"
        self.profile = Path(f"/etc/profile.d/hubtest-{self.tag}.sh")
        # the public port, the hub's own and the proxy's API: privileged, as the setup insists
        self.port, self.hub_port, self.api_port = _free_privileged_ports(3)
        self.checkout = base / "checkout"   # the clone the class is set up from, as an admin leaves it
        self.markers = base / "markers"     # what a student's planted code would leave if it ran
        self.hub: Hub | None = None

    def home(self, name: str) -> Path:
        return Path(pwd.getpwnam(name).pw_dir)

    @property
    def course(self) -> Path:
        return self.home(self.instructor) / COURSE_ID

    def build(self) -> tuple[str, str]:
        """The users (homes as the distribution makes them, 0755), the instructor's course (the
        tiny rehearsal lessons with this repository's tools), then the one command as the docs
        write it, twice: the first run builds the shared environment as on a new server (a venv,
        pip install -r requirements-classroom.txt, here from the wheels `make env` keeps). Its two
        outputs."""
        (self.base / "homes").mkdir(mode=0o755)
        self.prefix.mkdir(mode=0o755)
        for name in (self.instructor, self.alice, self.bob, self.carol):
            self.users.add(name)
        # a clone readable by everyone (git's default modes), with every lesson's source/
        self.checkout.mkdir(mode=0o755)
        for part in ("utils", "course", "source"):
            shutil.copytree(REPO / part, self.checkout / part, ignore=shutil.ignore_patterns("__pycache__"))
        for f in ("pyproject.toml", *(p.name for p in REPO.glob("requirements*.txt"))):
            shutil.copy2(REPO / f, self.checkout / f)
        self.markers.mkdir(mode=0o777)
        self.markers.chmod(0o1777)
        given = os.environ.get("HUB_TEST_ENV")   # an environment the one command built in an earlier run
        if given:
            self.env = Path(given)
        # the tiny lesson's source and the course's configuration; the instructor's release builds it
        scratch_config(self.course, REPO, "")
        for lesson in (LESSON, OTHER):
            name, cells = rehearsal_lessons()[lesson]
            A.write(self.course / "source" / lesson / name, cells)
        shutil.copytree(REPO / "utils", self.course / "utils", ignore=shutil.ignore_patterns("__pycache__"))
        roster = self.base / "students.csv"
        roster.write_text(f"id,first_name,last_name,email\n{self.alice},Alice,A,\n{self.bob},Bob,B,\n")
        self.docs = Docs({"teacher": self.instructor, "students.csv": str(roster), "NAME": self.carol,
                          "01_two_phases/two_phases.ipynb": f"{LESSON}/{NB}", "01_two_phases": LESSON})
        # the docs' command, and the options that keep the class in this test's folders and ports
        args = [*shlex.split(self.docs("root", "setup.sh")), "--prefix", str(self.prefix), "--exchange", str(self.exchange),
                "--env", str(self.env), *([] if _base_python() == DEBIAN_PYTHON else ["--python", str(_base_python())]),
                "--course-dir", str(self.course),
                "--profile-script", str(self.profile), "--address", f"127.0.0.1:{self.port}",
                "--hub-port", str(self.hub_port), "--proxy-api-port", str(self.api_port)]
        self.setup_args = args
        source = next(self.checkout.glob("source/*/*.ipynb"))
        assert _can(self.bob, f"cat {source} >/dev/null"), "the control: the clone was expected readable before the setup"
        t0 = time.monotonic()
        first = self.as_root(args, "the one command", {} if given else _pip_from_wheels())
        TIMINGS["the one command, first run" + ("" if given else ": the environment built by pip" +
                                                   (" from the wheels" if _pip_from_wheels() else ""))] = time.monotonic() - t0
        t0 = time.monotonic()
        again = self.as_root(args, "the one command, again")
        TIMINGS["the one command, again"] = time.monotonic() - t0
        return first, again

    def as_root(self, args: list[str], what: str, env: dict[str, str] | None = None) -> str:
        """A command of the administrator's, as root in the clone."""
        return _check(subprocess.run(args, capture_output=True, text=True, cwd=self.checkout,
                                     env={**os.environ, **(env or {})}), what)

    def root_doc(self, containing: str) -> list[str]:
        """The docs' root command with `containing`, given this class's --prefix."""
        line = self.docs("root", containing)
        return shlex.split(line.replace("-m utils.classroom ", f"-m utils.classroom --prefix {self.prefix} "))

    def inbound(self, student: str) -> list[Path]:
        """The student's own submission folders in the exchange, oldest first."""
        return sorted(p for p in (self.exchange / COURSE_ID / "inbound").glob(f"{student}+{LESSON}+*")
                      if p.lstat().st_uid == self.users.uid(student) and p.is_dir() and not p.is_symlink())

    def answered(self, overrides: dict[str, str], lesson: str = LESSON, nb: str = NB) -> dict:
        release_nb = nbformat.read(str(self.course / "release" / lesson / nb), as_version=4)
        ref = nbformat.read(str(self.course / "source" / lesson / nb), as_version=4)
        return json.loads(nbformat.writes(submission_from(release_nb, ref, overrides)))


def _can(user: str, script: str) -> bool:
    return _sh(user, script).returncode == 0


# Run as a user: find `home`'s submission secret in its nbgrader cache, compute the name of the
# feedback file from it (as nbgrader's fetch_feedback does) and read the score in the exchange.
_READ_FEEDBACK = r'''
import glob, hashlib, re, sys
home, exchange, course, lesson, nb = sys.argv[1:6]
for secret in glob.glob(f"{home}/.local/share/jupyter/nbgrader_cache/{course}/*+{lesson}+*/submission_secret.txt"):
    # nbgrader.utils.notebook_hash(secret=..., notebook_id=...)
    name = hashlib.md5(open(secret).read().encode() + nb.rsplit(".", 1)[0].encode()).hexdigest()
    html = open(f"{exchange}/{course}/feedback/{name}.html").read()
    print(re.search(r"Score: [0-9.]+ / [0-9.]+", html).group(0))
    break
else:
    sys.exit(1)
'''


def _probes(room: Class, victim: str, submission: Path) -> dict[str, str]:
    """What a classmate must not do to `victim`, as shell commands."""
    home = room.home(victim)
    course_ex = room.exchange / COURSE_ID
    return {
        "read her work": f"cat {home}/{LESSON}/{NB} >/dev/null",
        "read her submission secret": f"cat {home}/.local/share/jupyter/nbgrader_cache/{COURSE_ID}/*/submission_secret.txt >/dev/null",
        "read her fetched feedback": f"ls {home}/{LESSON}/feedback/*/ >/dev/null",
        "read her feedback in the exchange": f"{room.env}/bin/python - {home} {room.exchange} {COURSE_ID} {LESSON} {NB} <<'EOF'\n{_READ_FEEDBACK}\nEOF",
        "list her submission": f"ls '{submission}' >/dev/null",
        "read her submission": f"cat '{submission}/{NB}' >/dev/null",
        "change her submission": f"echo x >> '{submission}/{NB}'",
        "add to her submission": f"echo x > '{submission}/planted.txt'",
        "delete from her submission": f"rm '{submission}/timestamp.txt'",
        "move her submission away": f"mv '{submission}' '{course_ex}/inbound/moved'",
    }


# --- the tests ------------------------------------------------------------------------------------
# One class, set up once for the module (its fixture), then one test per check, in order; a check
# that needs an earlier step skips, naming it, when that step failed, and every independent check
# still runs. Cleaning up is the fixture's teardown.

def _remove_env_later(room: Class, base: Path) -> None:
    """The class's environment (some 45,000 files) moved out of the test's folder and removed by a
    process of its own: deleting it takes minutes of waiting on some disks and almost no CPU, which
    the test need not wait for."""
    env = base / "prefix" / "env"
    if env.is_dir() and not env.is_symlink():
        trash = Path(tempfile.mkdtemp(prefix="hub-class-env-", dir=base.parent))
        env.rename(trash / "env")
        subprocess.Popen(["rm", "-rf", str(trash)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)


def _scores(grade_output: str, lesson: str = LESSON) -> dict[str, str]:
    return dict(re.findall(rf"^{lesson}\s+(\S+): (\d+(?:\.\d+)?/\d+)", grade_output, flags=re.M))


@pytest.fixture(scope="module")
def room():
    """The class, built once (users, environment, course, the one command twice); removed after the
    module's last test, whatever failed."""
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    base = Path(tempfile.mkdtemp(prefix="hub-class-", dir="/tmp"))
    base.chmod(0o755)
    TIMINGS.clear()
    t_start = time.monotonic()
    room = Class(base)
    resolver = _LocalhostNames(LOCAL_ORIGINS)   # the class's default origins, *.class.localhost, as a browser finds them
    resolver.__enter__()
    room.done = set()   # the steps that succeeded, for the checks that need them
    try:
        t0 = time.monotonic()
        room.first, room.again = room.build()
        TIMINGS["users, environment, course, the one command twice"] = time.monotonic() - t0
        if not _can(room.instructor, "bwrap --unshare-all --ro-bind / / --proc /proc --dev /dev true"):
            pytest.skip("bubblewrap cannot start a sandbox as an unprivileged user here (user namespaces)")
        yield room
    finally:
        resolver.__exit__()
        if room.hub is not None:
            room.hub.stop()
        t0 = time.monotonic()
        problems = room.users.remove_all()
        room.profile.unlink(missing_ok=True)
        _remove_env_later(room, base)
        shutil.rmtree(base, ignore_errors=True)
        TIMINGS["cleaning up: users, processes, folders"] = time.monotonic() - t0
        TIMINGS["whole module"] = time.monotonic() - t_start
        print("timings (s):", json.dumps({k: round(v, 1) for k, v in TIMINGS.items()}),
              "load average:", Path("/proc/loadavg").read_text().split()[:3])
    assert not problems, problems
    assert not base.exists()


def _needs(room: Class, *steps: str) -> None:
    missing = [s for s in steps if s not in room.done]
    if missing:
        pytest.skip(f"needs {', '.join(missing)}, which failed earlier in this module")


class TestAClassOnOneServer:
    def test_the_one_command_sets_up_and_a_second_run_changes_nothing(self, room):
        first, again = room.first, room.again
        assert f"hub URL      http://{LOCAL_ORIGINS}:{room.port}/" in first and "left to you" in first, first
        # loopback: an origin per user by default (no DNS: *.localhost)
        assert "an origin of its own" in first and "shares the hub's origin" not in first and "WARNING" not in first, first
        assert "changed this run: 0" in again and "installing" not in again, f"a second run changed things:\n{again}"

    def test_the_layout(self, room):
        t0 = time.monotonic()
        _check_layout(room)
        _check_checkout(room)
        TIMINGS["the layout's checks"] = time.monotonic() - t0

    def test_the_hub_logs_in_only_with_the_users_password(self, room):
        hub = room.hub = Hub(room)
        room.done.add("the hub")
        _check_hub_face(room)
        pw = room.users.passwords
        assert hub.login(room.alice, pw[room.alice]) == 302
        assert hub.login(room.alice, pw[room.bob]) == 403 and hub.login("nobody", "nobody") == 403

    def test_three_servers_start_together(self, room):
        _needs(room, "the hub")
        t0 = time.monotonic()
        names = (room.instructor, room.alice, room.bob)
        for name in names:
            room.hub.start_server(name)
        for name in names:
            room.hub.wait(lambda name=name: room.hub.ready(name), 300, f"{name}'s server")
        TIMINGS["three servers started together, all ready"] = time.monotonic() - t0
        room.teacher, room.alice_server, room.bob_server = (Server(room.hub, n) for n in names)
        room.done.add("the servers")

    def test_the_servers_and_their_kernels(self, room):
        _needs(room, "the servers")
        t0 = time.monotonic()
        _check_servers(room, room.alice_server, room.teacher)
        _check_kernels(room, room.alice_server)
        TIMINGS["the servers' and kernels' checks"] = time.monotonic() - t0

    # the round trip: the instructor and bob in terminals, typing the docs' commands; alice
    # through the REST API (what the Assignments tab's buttons send)
    def test_the_instructor_imports_the_roster_and_releases(self, room):
        _needs(room, "the servers")
        room.t_trip = time.monotonic()
        docs = room.docs
        room.cd = docs("instructor", "cd ")
        found = room.teacher.terminal("command -v python nbgrader jupyter",
                                      "python -c 'import distributed'; test $? = 1",
                                      room.cd, docs("instructor", "term roster"), docs("instructor", "term release"))
        assert found[0].count(f"{room.env}/bin/") >= 3, found[0]
        assert "No module named 'distributed'" in found[1], found[1]   # the class grades without Dask
        assert "imported 2 student(s) from" in found[3], found[3]
        room.done.add("the release")

    def test_two_students_fetch_validate_and_submit(self, room):
        _needs(room, "the release")
        alice, bob, docs = room.alice_server, room.bob_server, room.docs
        alice.nbgrader("fetch")
        r = alice.call("PUT", f"/api/contents/{LESSON}/{NB}", json={"type": "notebook", "format": "json",
                                                                   "content": room.answered({})})
        assert r.status_code in (200, 201), r.text
        alice.nbgrader("submit")
        bob.terminal(docs("student", "fetch_assignment"))
        r = bob.call("PUT", f"/api/contents/{LESSON}/{NB}", json={"type": "notebook", "format": "json",
                                                                 "content": room.answered({"mul": ONLY_VISIBLE})})
        assert r.status_code in (200, 201), r.text
        # validate in a terminal: its kernel on Unix sockets, so no warning about TCP; the control:
        # the same validate over TCP (bob weakening his own kernel) prints it
        validate = docs("student", "nbgrader validate")
        ipc, tcp = bob.terminal(validate, f"{validate} --KernelManager.transport=tcp --KernelManager.ip=127.0.0.1")
        assert "Success" in ipc and "without encryption" not in ipc, ipc
        assert "without encryption" in tcp, tcp
        # modules and configuration planted beside the notebook, to run as whoever opens the folder
        _check(_sh(room.bob, _plant(room, f"~/{LESSON}")), "bob plants modules")
        bob.terminal(docs("student", "nbgrader submit"))
        room.a_sub, room.b_sub = room.inbound(room.alice)[-1], room.inbound(room.bob)[-1]
        room.done.add("the submissions")
        for sub in (room.a_sub, room.b_sub):
            assert sub.stat().st_mode & 0o7777 in (0o750, 0o2750) and sub.stat().st_gid == pwd.getpwnam(room.instructor).pw_gid

    def test_a_classmate_cannot_touch_a_submission(self, room):
        """bob, knowing the name of alice's submission, tries it."""
        _needs(room, "the submissions")
        room.probes = _probes(room, room.alice, room.a_sub)
        sub_probes = {k: v for k, v in room.probes.items() if "submission" in k and "secret" not in k}
        leaks = [what for what, script in sub_probes.items() if _can(room.bob, script)]
        assert leaks == [], f"a classmate can: {leaks}"

    def test_collect_refuses_forgeries_and_collects_both(self, room):
        """bob forges a submission in alice's name and drops junk into inbound/: collect refuses
        each and collects both students."""
        _needs(room, "the submissions")
        inbound = room.exchange / COURSE_ID / "inbound"
        ts = room.a_sub.name.split("+")[2]
        _check(_sh(room.bob, f"cd '{inbound}' && mkdir '{room.alice}+{LESSON}+2099-01-01 00:00:00.000000 UTC+forged' && "
                             f"mkdir '{room.alice}+{LESSON}+not a date+x' && echo junk > '{room.bob}+{LESSON}+{ts}+file' && "
                             f"ln -s / '{room.bob}+{LESSON}+2099-01-01 00:00:00.000000 UTC+link'"), "bob's junk in inbound/")
        collected = room.teacher.terminal(room.cd, room.docs("instructor", "term collect"))[1]
        assert f"2 submission(s) in submitted/: {room.alice}, {room.bob}" in collected, collected
        room.done.add("the collect")
        notes = (room.course / "refused" / f"{LESSON}.txt").read_text()
        assert f"named for {room.alice} but owned by {room.bob}" in notes and notes.count("\n") == 4, notes

    def test_grading_in_the_sandbox_from_the_instructors_terminal(self, room):
        _needs(room, "the collect")
        t0 = time.monotonic()
        graded = room.teacher.terminal(room.cd, room.docs("instructor", "utils.grading 0"), timeout=400)[1]
        TIMINGS["grading two submissions in the sandbox, from the instructor's terminal"] = time.monotonic() - t0
        assert _scores(graded.replace("\r", "")) == {room.alice: "6/6", room.bob: "3/6"}, graded
        room.done.add("the grading")
        uid = room.users.uid(room.instructor)
        left = [p.name for p in Path(tempfile.gettempdir()).glob("k[bc]-*") if p.lstat().st_uid == uid]
        assert left == [], f"grading left its sandboxes' folders in /tmp: {left}"

    def test_each_student_fetches_their_own_feedback(self, room):
        _needs(room, "the grading")
        room.teacher.terminal(room.cd, room.docs("instructor", "term feedback"))
        room.alice_server.nbgrader("fetch_feedback")
        fb = sorted(room.home(room.alice).glob(f"{LESSON}/feedback/*/tiny.html"))
        assert fb and "Score: 6.0 / 6.0" in fb[-1].read_text() and fb[-1].stat().st_uid == room.users.uid(room.alice)
        room.bob_server.terminal(room.docs("student", "fetch_feedback"))
        fb = sorted(room.home(room.bob).glob(f"{LESSON}/feedback/*/tiny.html"))
        assert fb and "Score: 3.0 / 6.0" in fb[-1].read_text() and "HIDDEN-CHECK" not in fb[-1].read_text()
        TIMINGS["round trip (release to fetched feedback)"] = time.monotonic() - room.t_trip

    def test_planted_modules_never_ran(self, room):
        _needs(room, "the grading")
        _check_planted(room)

    def test_the_class_report_in_the_terminal(self, room):
        """What the class got wrong: the report in the terminal."""
        _needs(room, "the grading")
        t0 = time.monotonic()
        report = room.teacher.terminal(room.cd, room.docs("instructor", "utils.grading.report"))[1]
        assert f"{LESSON}/mul_test" in report, report
        TIMINGS["the class report, from the instructor's terminal"] = time.monotonic() - t0

    def test_the_formgrader_shows_the_submissions(self, room):
        _needs(room, "the grading")
        _check_formgrader(room, room.teacher)

    def test_add_student(self, room):
        _check_add_student(room)

    def test_every_probe_is_refused_to_a_classmate_and_works_for_the_owner(self, room):
        """Every probe: refused to bob; the control, alice on her own, succeeds (the probe can succeed)."""
        _needs(room, "the submissions")
        probes = getattr(room, "probes", None) or _probes(room, room.alice, room.a_sub)
        leaks = [what for what, script in probes.items() if "move" not in what and _can(room.bob, script)]
        assert leaks == [], f"a classmate can: {leaks}"
        owner = {k: v for k, v in probes.items() if k not in ("move her submission away", "delete from her submission")}
        cannot = [what for what, script in owner.items() if not _can(room.alice, script)]
        assert cannot == [], f"the controls failed: alice cannot {cannot} herself"

    def test_the_control_nbgraders_own_submit_leaves_a_submission_open(self, room):
        _needs(room, "the release")
        _check(_sh(room.bob, f"cd ~ && nbgrader submit {LESSON} "
                             "--ExchangeFactory.submit=nbgrader.exchange.default.submit.ExchangeSubmit"), "bob, nbgrader's submit")
        plain = room.inbound(room.bob)[-1]
        opened = [what for what, script in _probes(room, room.bob, plain).items()
                  if "submission" in what and "secret" not in what and "move" not in what and _can(room.alice, script)]
        assert len(opened) >= 4, f"the control: nbgrader's own submission was expected to be open, {opened}"

    def test_the_instructors_side_is_the_instructors_alone(self, room):
        _check_instructor_only(room)

    def test_an_origin_per_user(self, room):
        _needs(room, "the servers")
        _check_own_origins(room)

    def test_the_ports_after_the_hub(self, room):
        _needs(room, "the hub")
        _check_ports_after_the_hub(room)

    def test_the_class_again_with_one_origin(self, room):
        t0 = time.monotonic()
        _check_one_origin_opt_out(room)
        TIMINGS["the class again with --one-origin: setup, hub, a server, checks"] = time.monotonic() - t0

    def test_teardown(self, room):
        t0 = time.monotonic()
        _check_teardown(room)
        TIMINGS["teardown"] = time.monotonic() - t0

    def test_every_command_of_the_docs_ran(self, room):
        assert room.docs.unused() == [], f"commands of docs/class-server.md this test does not run: {room.docs.unused()}"


# --- the same class on a cluster ------------------------------------------------------------------
# The class set up again by the one command with the Slurm options and --hub-address, its
# environment the one built above; its hub started on a one-node Slurm whose node is known at
# CLUSTER_ADDRESS, an address given to this machine for the module. Independent of the checks
# above but for the class itself.

@pytest.fixture(scope="module")
def slurm(room):
    """The one-node Slurm, its node at CLUSTER_ADDRESS (added to the loopback interface and removed
    after), SLURM_CONF in the hub's environment as a site sets it; the hub stopped, jobs cancelled
    and the daemons stopped at the end."""
    reason = slurm_problem() or address_problem(CLUSTER_ADDRESS)
    if reason:
        pytest.skip(reason)
    try:
        import batchspawner  # noqa: F401 - only whether it imports
    except ImportError as err:
        pytest.skip(f"needs batchspawner (requirements-classroom.txt): {err}")
    # three servers at once on this machine's cores: the node offers more CPUs than it has
    with secondary_address(CLUSTER_ADDRESS) as address, \
            one_node_slurm(cpus=max(4, os.cpu_count() or 1), node_addr=address) as cluster, \
            pytest.MonkeyPatch.context() as env:
        env.setenv("SLURM_CONF", str(cluster.conf))
        try:
            yield cluster
        finally:
            if room.hub is not None:
                room.hub.stop()


def _jobs_of(cluster) -> dict[str, tuple[str, str]]:
    """{user: (state, job name)} of every job Slurm lists."""
    out = cluster.command("squeue", "-h", "-o", "%u %T %j").stdout
    return {line.split()[0]: tuple(line.split()[1:3]) for line in out.splitlines() if len(line.split()) == 3}


def _tls_files(room: Class) -> dict[str, Path]:
    """The hub's own key pair and the bundle of every CA of the class (internal_ssl's store in the
    hub's state folder, root's): a client the hub and every server accept."""
    store = room.hub_state / "internal-ssl"
    found = {k: next(store.glob(f"**/{name}"), None) for k, name in
             (("cert", "hub-internal.crt"), ("key", "hub-internal.key"), ("ca", "hub-ca_trust.crt"))}
    assert all(found.values()), (found, sorted(str(p.relative_to(store)) for p in store.rglob("*")))
    return found


def _refused(requests, url: str, **kw) -> bool:
    """True when the request gets no HTTP answer at all (refused in the TLS handshake, or plain
    HTTP on a TLS port)."""
    try:
        requests.get(url, timeout=20, allow_redirects=False, **kw)
    except requests.RequestException:
        return True
    return False


class TestTheSameClassOnSlurm:
    def test_the_one_command_with_the_slurm_options_and_the_hub_address(self, room, slurm):
        t0 = time.monotonic()
        out = room.as_root([*room.setup_args, *SLURM_ARGS, "--hub-address", CLUSTER_ADDRESS],
                           "the one command with the Slurm options")
        assert "each user's server is a Slurm job (partition debug, 600M, 00:30:00)" in out, out
        assert f"hub inside   {CLUSTER_ADDRESS}:{room.hub_port} (the hub, TLS)" in out, out
        record = json.loads((room.prefix / "classroom.json").read_text())
        assert record["slurm"]["partition"] == "debug" and record["hub_address"] == CLUSTER_ADDRESS, record
        _check_layout(room)   # private homes, the exchange's modes: as on one server
        room.hub = Hub(room)
        TIMINGS["Slurm: the one command again, the hub answering"] = time.monotonic() - t0
        room.done.add("the cluster's hub")

    def test_three_servers_as_slurm_jobs_on_the_nodes_address_over_tls(self, room, slurm):
        _needs(room, "the cluster's hub")
        hub, t0 = room.hub, time.monotonic()
        names = (room.instructor, room.alice, room.bob)
        for name in names:
            hub.start_server(name)
        for name in names:
            hub.wait(lambda name=name: hub.ready(name), 300, f"{name}'s server")
        TIMINGS["Slurm: three servers as jobs, all ready"] = time.monotonic() - t0
        jobs = _jobs_of(slurm)
        assert all(jobs.get(n) == ("RUNNING", "spawner-jupyterhub") for n in names), jobs
        room.slurm_servers = {n: Server(hub, n) for n in names}
        room.done.add("the servers as jobs")
        # the proxy reaches each server on the node's address, over TLS
        targets = {k: v["target"] for k, v in hub.api("GET", "/proxy").json().items() if "/user/" in k}
        assert len(targets) == 3 and all(t.startswith(f"https://{CLUSTER_ADDRESS}:") for t in targets.values()), targets
        # each server reaches the hub's API at the cluster address, over TLS, from its job
        line = room.slurm_servers[room.instructor].terminal(
            "echo api=$JUPYTERHUB_API_URL job=$SLURM_JOB_ID user=$(id -un) key=$JUPYTERHUB_SSL_KEYFILE")[0]
        assert f"api=https://{CLUSTER_ADDRESS}:{room.hub_port}/hub/api" in line and f"user={room.instructor}" in line, line
        assert "job=" in line and "job=\r" not in line and "job= " not in line, line
        run = room.prefix / "run" / str(room.users.uid(room.instructor))
        assert f"key={run}/jupyterhub-user-{room.instructor}.key" in line, line

    def test_the_cluster_address_answers_only_tls_with_the_class_ca(self, room, slurm):
        """Every port on the cluster address (the hub's and the three servers'): plain HTTP gets no
        answer, nor does a client without the class's CA, nor one with the CA but no certificate
        it signed. The control: the hub's own key pair and the CA get an HTTP answer from each."""
        _needs(room, "the servers as jobs")
        import psutil
        requests = room.hub.requests
        ports = {c.laddr.port for c in psutil.net_connections("tcp") if c.status == "LISTEN" and c.laddr.ip == CLUSTER_ADDRESS}
        servers = {int(t.rsplit(":", 1)[1].split("/")[0]) for t in
                   (v["target"] for k, v in room.hub.api("GET", "/proxy").json().items() if "/user/" in k)}
        assert room.hub_port in ports and servers <= ports and len(ports) == 4, (ports, servers, [
            (c.laddr, c.status, c.pid) for c in psutil.net_connections("inet") if c.laddr and c.laddr.port in servers])
        assert room.hub_port not in {c.laddr.port for c in psutil.net_connections("tcp")
                                     if c.status == "LISTEN" and c.laddr.ip in ("127.0.0.1", "0.0.0.0", "::")}
        urls = {port: f"https://{CLUSTER_ADDRESS}:{port}/hub/api/" if port == room.hub_port else f"https://{CLUSTER_ADDRESS}:{port}/"
                for port in sorted(ports)}
        for port, url in urls.items():
            assert _refused(requests, url.replace("https://", "http://", 1)), f"plain HTTP answered on port {port}"
        tls = _tls_files(room)
        for port, url in urls.items():
            assert _refused(requests, url), f"a client without the class's CA got an answer on port {port}"
            assert _refused(requests, url, verify=str(tls["ca"])), f"a client without a certificate got an answer on {port}"
            r = requests.get(url, timeout=30, allow_redirects=False, verify=str(tls["ca"]), cert=(str(tls["cert"]), str(tls["key"])))
            assert r.status_code < 500, (port, r.status_code)   # the control: the CA's client is answered
            if port == room.hub_port:
                assert "version" in r.json(), r.text[:300]

    def test_a_users_key_is_hers_alone(self, room, slurm):
        _needs(room, "the servers as jobs")
        key = room.prefix / "run" / str(room.users.uid(room.alice)) / f"jupyterhub-user-{room.alice}.key"
        assert key.stat().st_uid == room.users.uid(room.alice) and _mode(key) == 0o600, oct(_mode(key))
        assert not _can(room.bob, f"cat {key} >/dev/null"), "a classmate can read alice's server's key"
        assert not _can(room.bob, f"ls {key.parent} >/dev/null")
        assert _can(room.alice, f"cat {key} >/dev/null")   # the control

    def test_the_round_trip_through_the_jobs(self, room, slurm):
        """The second tiny lesson: release, fetch, submit (alice's full answer, bob's with a wrong
        half), collect, grade, feedback, fetch feedback, through the servers as Slurm jobs."""
        _needs(room, "the servers as jobs")
        t0 = time.monotonic()
        teacher, alice, bob = (room.slurm_servers[n] for n in (room.instructor, room.alice, room.bob))
        docs = room.docs

        def other(role: str, containing: str) -> str:
            return docs(role, containing).replace(LESSON, OTHER)

        def assignment(server: Server, action: str) -> None:   # the Assignments tab's buttons, for OTHER
            r = server.call("POST", f"/assignments/{action}", json={"course_id": COURSE_ID, "assignment_id": OTHER})
            assert r.status_code == 200 and r.json().get("success") is True, f"{action}: {r.text[:2000]}"

        cd = docs("instructor", "cd ")
        teacher.terminal(cd, other("instructor", "term release"))
        for server, answers in ((alice, {}), (bob, {"half": WRONG_HALF})):
            assignment(server, "fetch")
            r = server.call("PUT", f"/api/contents/{OTHER}/{OTHER_NB}", json={
                "type": "notebook", "format": "json", "content": room.answered(answers, OTHER, OTHER_NB)})
            assert r.status_code in (200, 201), r.text
            assignment(server, "submit")
        collected = teacher.terminal(cd, other("instructor", "term collect"))[1]
        assert f"2 submission(s) in submitted/: {room.alice}, {room.bob}" in collected, collected
        graded = teacher.terminal(cd, other("instructor", "utils.grading 0"), timeout=400)[1]
        assert _scores(graded.replace("\r", ""), OTHER) == {room.alice: "1/1", room.bob: "0/1"}, graded
        teacher.terminal(cd, other("instructor", "term feedback"))
        for server, who, score in ((alice, room.alice, "Score: 1.0 / 1.0"), (bob, room.bob, "Score: 0.0 / 1.0")):
            assignment(server, "fetch_feedback")
            fb = sorted(room.home(who).glob(f"{OTHER}/feedback/*/{OTHER_NB.replace('.ipynb', '.html')}"))
            assert fb and score in fb[-1].read_text() and fb[-1].stat().st_uid == room.users.uid(who), who
        TIMINGS["Slurm: round trip (release to fetched feedback)"] = time.monotonic() - t0

    def test_the_servers_stop_with_their_jobs(self, room, slurm):
        _needs(room, "the servers as jobs")
        t0 = time.monotonic()
        names = (room.instructor, room.alice, room.bob)
        for name in names:
            room.hub.api("DELETE", f"/users/{name}/server")
        room.hub.wait(lambda: not any(n in _jobs_of(slurm) for n in names), 120, "the servers' jobs to end")
        room.hub.stop()
        TIMINGS["Slurm: three servers stopped, their jobs gone"] = time.monotonic() - t0


def _check_formgrader(room: Class, teacher: Server) -> None:
    """The formgrader (docs: open /user/NAME/formgrader in its own tab) on the instructor's server
    lists both graded submissions with their scores, from the class's environment."""
    r = teacher.call("GET", f"/formgrader/api/submissions/{LESSON}")
    assert r.status_code == 200, (r.status_code, r.text[:500])
    scores = {s["student"]: s["score"] for s in r.json()}
    assert scores == {room.alice: 6.0, room.bob: 3.0}, r.text[:1000]


def _check_add_student(room: Class) -> None:
    """add-student, as the docs write it, for an account made beforehand: her home closed, her
    Jupyter configuration with the private submit, her runtime folder, the class record."""
    out = room.as_root(room.root_doc("add-student"), "add-student")
    assert "changed this run: 0" not in out, out
    assert _mode(room.home(room.carol)) == 0o700
    assert "PrivateSubmit" in (room.home(room.carol) / ".jupyter" / "nbgrader_config.py").read_text()
    run = room.prefix / "run" / str(room.users.uid(room.carol))
    assert _mode(run) == 0o700 and run.stat().st_uid == room.users.uid(room.carol)
    assert room.carol in json.loads((room.prefix / "classroom.json").read_text())["students"]


def _check_teardown(room: Class) -> None:
    """teardown, as the docs write it: each user's configuration that the setup wrote and the
    profile script removed; homes, accounts and the course directory kept."""
    cfg = room.home(room.alice) / ".jupyter" / "nbgrader_config.py"
    assert cfg.exists() and room.profile.exists()
    out = room.as_root(room.root_doc("teardown"), "teardown")
    assert "accounts, homes and the course directory were kept" in out, out
    assert not cfg.exists() and not room.profile.exists(), out
    assert (room.course / "gradebook.db").exists() and room.home(room.alice).is_dir()


_PLANTED = ("nbformat.py", "nbgrader_config.py", "sitecustomize.py", "utils/__init__.py")


def _plant(room: Class, folder: str) -> str:
    """A shell script that puts, beside a notebook, modules and an nbgrader config that leave a
    marker (their name) in room.markers when Python imports or nbgrader loads them."""
    lines = [f"mkdir -p {folder}/utils"]
    for rel in _PLANTED:
        tag = rel.replace("/", "_")
        lines.append(f"echo \"open('{room.markers}/{tag}', 'w').close()\" > {folder}/{rel}")
    return " && ".join(lines)


def _check_planted(room: Class) -> None:
    """Nothing but the lesson's notebook (and nbgrader's timestamp) reaches the course from bob's
    submission, which held modules and a config; none of them ran. The control: in his own folder
    the same module runs when Python starts there."""
    for step in ("submitted", "autograded"):
        got = sorted(p.name for p in (room.course / step / room.bob / LESSON).iterdir())
        assert set(got) <= {NB, "timestamp.txt", "submission_secret.txt"} and NB in got, f"{step}/ holds {got}"
    assert sorted(p.name for p in room.markers.iterdir()) == [], "code planted in a submission ran"
    _check(_sh(room.bob, f"cd ~/{LESSON} && python -c 'import nbformat'"), "bob imports his own module")
    assert [p.name for p in room.markers.iterdir()] == ["nbformat.py"], "the control: the planted module runs"


def _check_checkout(room: Class) -> None:
    """The clone the class was set up from, readable by everyone before, is closed to students."""
    source = next(room.checkout.glob("source/*/*.ipynb"))
    assert _mode(room.checkout) == 0o700, oct(_mode(room.checkout))
    assert not _can(room.bob, f"cat {source} >/dev/null"), "a student can read the checkout's source/"
    assert _can("root", f"cat {source} >/dev/null")


def _listening(uid: int) -> set[int]:
    """The TCP ports `uid` listens on, as any user reads them from /proc/net/tcp and tcp6."""
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            f = line.split()
            if f[3] == "0A" and int(f[7]) == uid:   # LISTEN
                ports.add(int(f[1].rsplit(":", 1)[1], 16))
    return ports


def _check_kernels(room: Class, alice: Server) -> None:
    """A kernel in alice's server talks over Unix sockets in her own runtime folder: a classmate
    finds no port of it in /proc/net/tcp and cannot enter the folder. The controls: the same
    reading finds alice's server's own port; alice enters her folder."""
    # JupyterLab's debugger (debugpy on a loopback TCP port, any client taken) off in the kernel
    # spec every server of the class reads; the control: ipykernel's own spec turns it on
    spec = alice.call("GET", "/api/kernelspecs").json()["kernelspecs"]["python3"]["spec"]
    assert spec["metadata"].get("debugger") is False, spec
    own = json.loads((Path(sys.prefix) / "share" / "jupyter" / "kernels" / "python3" / "kernel.json").read_text())
    assert own["metadata"]["debugger"] is True, own
    r = alice.call("POST", "/api/kernels", json={"name": "python3"})
    assert r.status_code in (200, 201), r.text
    kid = r.json()["id"]
    run = room.prefix / "run" / str(room.users.uid(room.alice))
    try:
        conn = run / f"kernel-{kid}.json"
        # the kernel has bound its sockets: the files beside its connection file
        room.hub.wait(lambda: conn.exists() and len(list(run.glob(f"kernel-{kid}-ipc-*"))) == 5, 120, "alice's kernel")
        info = json.loads(conn.read_text())
        assert info["transport"] == "ipc" and info["ip"].startswith(f"{run}/"), info
        probe = f"awk 'FNR>1 && $4==\"0A\" && $8=={room.users.uid(room.alice)} {{print $2}}' /proc/net/tcp /proc/net/tcp6"
        seen = {int(a.rsplit(":", 1)[1], 16) for a in _check(_sh(room.bob, probe), "bob reads /proc/net/tcp").split()}
        route = next(v for k, v in room.hub.api("GET", "/proxy").json().items() if k.endswith(f"/user/{room.alice}/"))["target"]
        server_port = int(route.rsplit(":", 1)[1].strip("/"))
        # the control: bob's reading finds alice's server (its HTTP port, behind the hub's login)
        assert server_port in seen and seen == _listening(room.users.uid(room.alice)), (seen, server_port)
        # besides it, only ipykernel's pipe for the output of the kernel's forked children: a zmq
        # PULL socket, which sends nothing to whoever connects and drops what lacks its random key
        import psutil
        kernel = [p for p in psutil.process_iter(["cmdline"]) if str(conn) in " ".join(p.info["cmdline"] or [])]
        assert len(kernel) == 1, kernel
        kernel_ports = {c.laddr.port for c in kernel[0].net_connections("tcp") if c.status == "LISTEN"}
        assert seen - {server_port} == kernel_ports and len(kernel_ports) <= 1, (seen, server_port, kernel_ports)
        assert not _can(room.bob, f"ls {run} >/dev/null"), "a classmate can enter alice's runtime folder"
        assert _can(room.alice, f"ls {run} >/dev/null")
    finally:
        alice.call("DELETE", f"/api/kernels/{kid}")


def _check_one_origin_opt_out(room: Class) -> None:
    """The same class set up again by the one command with --one-origin, the hub restarted: every
    server on the hub's origin (127.0.0.1), what the setup says is left open; then the checks of
    what one origin still refuses."""
    out = room.as_root([*room.setup_args, "--one-origin"], "the one command with --one-origin")
    assert json.loads((room.prefix / "classroom.json").read_text())["subdomain_host"] == ""
    assert "shares the hub's origin" in out and f"hub URL      http://127.0.0.1:{room.port}/" in out, out
    hub = room.hub = Hub(room)
    assert hub.url == f"http://127.0.0.1:{room.port}"
    hub.start_server(room.instructor)
    hub.wait(lambda: hub.ready(room.instructor), 300, "the instructor's server on one origin")
    route = hub.api("GET", "/proxy").json()
    assert f"/user/{room.instructor}/" in route, sorted(route)
    _check_one_origin(room)
    room.hub.stop()


def _check_one_origin(room: Class) -> None:
    """What the class uses with --one-origin: one origin for the hub and every user's server,
    each server's cookie scoped to its path /user/NAME/. A script on a page of bob's server, run
    in the instructor's logged-in browser, sends the instructor's cookies with fetch or XHR, as
    here (Sec-Fetch-Mode cors, same origin, no XSRF token: the token's cookie is set only on
    the instructor's own pages): the instructor's server and the hub refuse each request, read or
    write. The control: the same cookies on a page view (navigate) reach the instructor's course.
    (What a same-origin page can still do, a frame or window of the instructor's own pages, is
    the threat model's; no browser runs here.)"""
    hub, who = room.hub, room.instructor
    s = hub.requests.Session()
    s.headers.update({"Sec-Fetch-Mode": "navigate", "Sec-Fetch-Site": "same-origin", "Sec-Fetch-Dest": "document"})
    s.get(f"{hub.url}/hub/login", timeout=30)
    r = s.post(f"{hub.url}/hub/login", timeout=60, data={"username": who, "password": room.users.passwords[who],
                                                         "_xsrf": s.cookies.get("_xsrf", "")})
    assert r.status_code == 200, r.status_code
    page = s.get(f"{hub.url}/user/{who}/api/contents/{COURSE_ID}", timeout=60)
    assert page.status_code == 200 and '"source"' in page.text, (page.status_code, page.text[:300])   # the control
    script = {"Sec-Fetch-Mode": "cors", "Sec-Fetch-Site": "same-origin", "Sec-Fetch-Dest": "empty",
              "Origin": hub.url, "Referer": f"{hub.url}/user/{room.bob}/files/page.html"}
    planted = {"type": "file", "format": "text", "content": "x"}
    for method, path, kw in (("GET", f"/user/{who}/api/contents/{COURSE_ID}/source/{LESSON}/{NB}", {}),
                             ("PUT", f"/user/{who}/api/contents/{COURSE_ID}/planted.txt", {"json": planted}),
                             ("POST", f"/user/{who}/api/terminals", {}),
                             ("GET", "/hub/api/user", {}),
                             ("POST", f"/hub/api/users/{who}/tokens", {"json": {"note": "x"}})):
        r = s.request(method, hub.url + path, headers=script, allow_redirects=False, timeout=60, **kw)
        assert r.status_code == 403, f"a script on a student's page could {method} {path}: {r.status_code} {r.text[:300]}"
    assert not (room.course / "planted.txt").exists()


def _check_ports_after_the_hub(room: Class) -> None:
    """With the hub and its proxy stopped (as during a restart), a student can take none of their
    ports. The control: the same student listens on a port above 1023."""
    room.hub.stop()
    end = time.monotonic() + 30
    while room.port in _listening(0) or room.hub_port in _listening(0) or room.api_port in _listening(0):
        assert time.monotonic() < end, "the hub's ports still held after it stopped"
        time.sleep(0.5)
    take = "python3 -c 'import socket, sys; s = socket.socket(); s.bind((\"127.0.0.1\", int(sys.argv[1]))); s.listen()' {}"
    taken = [p for p in (room.port, room.hub_port, room.api_port) if _can(room.bob, take.format(p))]
    assert taken == [], f"a student can listen on the hub's ports {taken}"
    assert _can(room.bob, take.format(0)), "the control: a student listens on an unprivileged port"


class _LocalhostNames:
    """Names under `domain` (a .localhost name) resolved to 127.0.0.1 in this process, as a
    browser resolves every *.localhost name to loopback; the machine's /etc/hosts is untouched."""

    def __init__(self, domain: str):
        self.domain = domain

    def __enter__(self):
        self.real = socket.getaddrinfo

        def resolve(host, *args, **kw):
            if isinstance(host, str) and (host == self.domain or host.endswith("." + self.domain)):
                host = "127.0.0.1"
            return self.real(host, *args, **kw)
        socket.getaddrinfo = resolve
        return self

    def __exit__(self, *exc):
        socket.getaddrinfo = self.real


def _run_in_kernel(requests, base: str, token: str, code: str) -> str:
    """Start a kernel on the server at `base`, run `code` through the kernel's websocket, return
    what it printed; the kernel is shut down after."""
    import asyncio
    import concurrent.futures
    import uuid

    from tornado.httpclient import HTTPRequest
    from tornado.websocket import websocket_connect
    auth = {"Authorization": f"token {token}"}
    r = requests.post(f"{base}/api/kernels", json={"name": "python3"}, headers=auth, timeout=120)
    assert r.status_code in (200, 201), r.text
    kid = r.json()["id"]

    async def run() -> str:
        ws = await websocket_connect(HTTPRequest("ws" + base[4:] + f"/api/kernels/{kid}/channels", headers=auth))
        try:
            mid = uuid.uuid4().hex
            await ws.write_message(json.dumps({
                "header": {"msg_id": mid, "msg_type": "execute_request", "username": "", "session": uuid.uuid4().hex,
                           "date": "", "version": "5.3"},
                "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
                "content": {"code": code, "silent": False, "store_history": False, "user_expressions": {},
                            "allow_stdin": False, "stop_on_error": True}}))
            out, end = "", time.monotonic() + 120
            while True:
                msg = json.loads(await asyncio.wait_for(ws.read_message(), max(1.0, end - time.monotonic())))
                if msg.get("parent_header", {}).get("msg_id") != mid:
                    continue
                if msg["msg_type"] == "stream":
                    out += msg["content"]["text"]
                if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                    return out
        finally:
            ws.close()

    try:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            return pool.submit(asyncio.run, run()).result()
    finally:
        requests.delete(f"{base}/api/kernels/{kid}", headers=auth, timeout=60)


def _check_own_origins(room: Class) -> None:
    """The class as set up by default (on loopback, no option): each user's server on an origin
    of its own, NAME.class.localhost (names browsers resolve to loopback). Each server answers only on its own
    origin; the login cookies are host-only, so bob's origin receives none of the instructor's
    (only the session id, which JupyterHub sets on the whole domain and which logs no one in);
    a fetch from bob's origin to the instructor's server, with the instructor's cookies, gets no
    CORS grant (the browser keeps the answer from the script) and is refused. The controls: bob's
    server answers on its own origin; the same cookies reach the instructor's course on his own
    origin; with the login cookie the hub knows him. Login, spawn and a kernel run through the
    subdomain work."""
    domain = LOCAL_ORIGINS
    sub = f"http://{domain}:{room.port}"
    assert json.loads((room.prefix / "classroom.json").read_text())["subdomain_host"] == sub
    hub = room.hub
    who, bob = room.instructor, room.bob
    origin = {name: f"http://{name}.{domain}:{room.port}" for name in (who, bob)}
    route = hub.api("GET", "/proxy").json()
    assert f"{bob}.{domain}/user/{bob}/" in route and f"/user/{bob}/" not in route, sorted(route)
    requests = hub.requests
    with _LocalhostNames(domain):
        # bob's server answers on its own origin (the control) and on no other
        token = hub.user_token(bob)
        auth = {"Authorization": f"token {token}"}
        r = requests.get(f"{origin[bob]}/user/{bob}/api/status", headers=auth, timeout=60)
        assert r.status_code == 200 and "kernels" in r.json(), (r.status_code, r.text[:300])
        for elsewhere in (sub, origin[who], f"http://127.0.0.1:{room.port}"):
            r = requests.get(f"{elsewhere}/user/{bob}/api/status", headers=auth, timeout=60, allow_redirects=False)
            assert r.status_code != 200 or "kernels" not in r.text, f"bob's server answers on {elsewhere}"
        # a kernel of bob's, run through his subdomain (websocket through the proxy's host route)
        assert _run_in_kernel(requests, f"{origin[bob]}/user/{bob}", token, "print(6 * 7)").strip() == "42"

        # the instructor logs in on the hub's origin and opens his server on his own
        s = requests.Session()
        nav = {"Sec-Fetch-Mode": "navigate", "Sec-Fetch-Site": "same-origin", "Sec-Fetch-Dest": "document"}
        s.headers.update(nav)
        s.get(f"{sub}/hub/login", timeout=30)
        r = s.post(f"{sub}/hub/login", timeout=60, data={"username": who, "password": room.users.passwords[who],
                                                          "_xsrf": s.cookies.get("_xsrf", "")})
        assert r.status_code == 200, (r.status_code, r.url)
        page = s.get(f"{origin[who]}/user/{who}/api/contents/{COURSE_ID}", timeout=60)
        assert page.status_code == 200 and '"source"' in page.text, (page.status_code, page.url, page.text[:300])
        cookies = {(c.name, c.domain, c.domain_specified) for c in s.cookies}
        shared = {c for c in cookies if c[2]}
        assert {c[0] for c in shared} <= {"jupyterhub-session-id"}, f"cookies set for the whole domain: {shared}"
        assert any(c[0] == f"jupyterhub-user-{who}" and c[1] == f"{who}.{domain}" for c in cookies), cookies
        assert any(c[0] == "jupyterhub-hub-login" and c[1] == domain for c in cookies), cookies
        # what a page on bob's origin sends: none of the login cookies
        sent = requests.cookies.get_cookie_header(s.cookies, requests.Request("GET", f"{origin[bob]}/user/{bob}/").prepare()) or ""
        assert {kv.split("=", 1)[0].strip() for kv in sent.split(";") if kv.strip()} == {"jupyterhub-session-id"}, sent
        # the session id alone logs no one in; the control: with the login cookie the hub knows him
        only = {"jupyterhub-session-id": next(c.value for c in s.cookies if c.name == "jupyterhub-session-id")}
        r = requests.get(f"{sub}/hub/home", cookies=only, headers=nav, allow_redirects=False, timeout=30)
        assert r.status_code == 302 and "/hub/login" in r.headers.get("Location", ""), (r.status_code, r.headers)
        assert s.get(f"{sub}/hub/home", allow_redirects=False, timeout=30).status_code == 200
        # a script on bob's page fetches the instructor's pages with his cookies (the browser sends
        # them: the same site): no CORS grant for bob's origin, and refused
        script = {"Sec-Fetch-Mode": "cors", "Sec-Fetch-Site": "same-site", "Sec-Fetch-Dest": "empty",
                  "Origin": origin[bob], "Referer": f"{origin[bob]}/user/{bob}/files/page.html"}
        for path in (f"/user/{who}/api/contents/{COURSE_ID}/source/{LESSON}/{NB}", f"/user/{who}/lab"):
            r = s.get(origin[who] + path, headers=script, allow_redirects=False, timeout=60)
            assert "Access-Control-Allow-Origin" not in r.headers and "Access-Control-Allow-Credentials" not in r.headers, \
                (path, dict(r.headers))
            # refused: the server blocks a cross-origin API request (404), the hub's XSRF check a page (403)
            assert r.status_code in (302, 403, 404) and '"source"' not in r.text, (path, r.status_code, r.text[:300])
        r = s.options(origin[who] + f"/user/{who}/api/contents", timeout=60, headers={
            **script, "Access-Control-Request-Method": "PUT", "Access-Control-Request-Headers": "content-type"})
        assert r.headers.get("Access-Control-Allow-Origin") is None, dict(r.headers)


def _mode(path: Path) -> int:
    return path.lstat().st_mode & 0o7777


def _check_layout(room: Class) -> None:
    for name in (room.instructor, room.alice, room.bob):
        assert _mode(room.home(name)) == 0o700, name
    assert _mode(room.exchange) == 0o1777
    course_ex = room.exchange / COURSE_ID
    assert course_ex.stat().st_uid == room.users.uid(room.instructor)
    assert _mode(course_ex / "inbound") == 0o3733
    assert (course_ex / "inbound").stat().st_gid == pwd.getpwnam(room.instructor).pw_gid
    assert _mode(room.course) == 0o700
    student_cfg = room.home(room.alice) / ".jupyter"
    text = (student_cfg / "nbgrader_config.py").read_text()
    assert f"c.Exchange.root = {str(room.exchange)!r}" in text and "PrivateSubmit" in text
    off = json.loads((student_cfg / "labconfig" / "page_config.json").read_text())["disabledExtensions"]
    assert off.get("@jupyter/nbgrader:formgrader") and off.get("@jupyter/nbgrader:create-assignment")
    assert (student_cfg / "nbgrader_config.py").stat().st_uid == room.users.uid(room.alice)
    instr_cfg = room.home(room.instructor) / ".jupyter" / "nbgrader_config.py"
    assert f"c.CourseDirectory.root = {str(room.course)!r}" in instr_cfg.read_text()
    # each user's Jupyter runtime folder (kernels' sockets): theirs, 0700, in a folder nobody lists
    assert _mode(room.prefix / "run") == 0o711
    for name in (room.instructor, room.alice, room.bob):
        run = room.prefix / "run" / str(room.users.uid(name))
        assert _mode(run) == 0o700 and run.stat().st_uid == room.users.uid(name), name
    assert _sh(room.alice, "echo $JUPYTER_RUNTIME_DIR").stdout.strip() == str(room.prefix / "run" / str(room.users.uid(room.alice)))
    # the hub's state: root's, 0700; its secrets 0600
    assert _mode(room.hub_state) == 0o700 and room.hub_state.stat().st_uid == 0
    for name in ("jupyterhub_cookie_secret", "proxy_token"):
        assert _mode(room.hub_state / name) == 0o600, name
    # the environment on PATH in the class's login shells, by the profile script alone
    assert _sh(room.alice, "command -v nbgrader").stdout.strip() == f"{room.env}/bin/nbgrader"
    hidden = room.profile.with_name(room.profile.name + ".off")
    room.profile.rename(hidden)
    try:
        assert _sh(room.alice, "command -v nbgrader").returncode != 0, "nbgrader found without the profile script"
    finally:
        hidden.rename(room.profile)


def _check_hub_face(room: Class) -> None:
    """The hub's public port on loopback alone; its database readable by root alone."""
    import psutil
    listening = {c.laddr.ip for c in psutil.net_connections("tcp") if c.status == "LISTEN" and c.laddr.port == room.port}
    assert listening == {"127.0.0.1"}, listening
    db = room.hub_state / "jupyterhub.sqlite"
    assert db.exists() and db.read_bytes()[:6] == b"SQLite"
    for path in (db, room.hub_state / "jupyterhub_cookie_secret", room.hub_state / "proxy_token"):
        assert not _can(room.alice, f"cat {path} >/dev/null"), f"a student can read {path}"
    assert _can("root", f"cat {db} >/dev/null")   # the control: the probe reads what it may


def _check_instructor_only(room: Class) -> None:
    """source/ and the gradebook for the instructor alone; the course's exchange folder his."""
    course_ex = room.exchange / COURSE_ID
    for path in (room.course / "source" / LESSON / NB, room.course / "gradebook.db"):
        assert not _can(room.bob, f"cat {path} >/dev/null") and _can(room.instructor, f"cat {path} >/dev/null"), path
    for what, script in (("list the submissions", f"ls {course_ex}/inbound"), ("list the feedback", f"ls {course_ex}/feedback"),
                         ("create files in the course's exchange folder", f"touch {course_ex}/x"),
                         ("release an assignment", f"mkdir {course_ex}/outbound/99_fake"),
                         ("take the course's exchange folder", f"mv {course_ex} {room.exchange}/moved")):
        assert not _can(room.bob, script), f"a student can {what}"
    assert _can(room.instructor, f"ls {course_ex}/inbound >/dev/null && ls {course_ex}/feedback >/dev/null")


def _disabled(server: Server) -> set[str]:
    page = server.call("GET", "/lab").text
    data = re.search(r'<script id="jupyter-config-data" type="application/json">(.*?)</script>', page, re.S)
    assert data, page[:2000]
    return set(json.loads(data.group(1)).get("disabledExtensions", []))


def _check_servers(room: Class, alice: Server, instructor: Server) -> None:
    # the server runs as its user: a file it writes belongs to that user
    r = alice.call("PUT", "/api/contents/whoami.txt", json={"type": "file", "format": "text", "content": "hi"})
    assert r.status_code in (200, 201), r.text
    assert (room.home(room.alice) / "whoami.txt").stat().st_uid == room.users.uid(room.alice)
    # the formgrader answers the instructor's server only; the instructor extensions off for the student
    assert alice.call("GET", "/formgrader", allow_redirects=False).status_code == 404
    assert instructor.call("GET", "/formgrader", allow_redirects=False).status_code in (200, 302)
    assert {"@jupyter/nbgrader:formgrader", "@jupyter/nbgrader:create-assignment",
            "@jupyter/nbgrader:course-list"} <= _disabled(alice)
    assert not {e for e in _disabled(instructor) if e.startswith("@jupyter/nbgrader")}
    # a student cannot reach another user's server with her own token
    r = alice.hub.requests.get(f"{room.hub.url}/user/{room.instructor}/api/contents", timeout=30,
                               headers={"Authorization": f"token {alice.token}"}, allow_redirects=False)
    assert r.status_code in (403, 404, 302), r.status_code
