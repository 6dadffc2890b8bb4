"""The class: who is in it, where its parts live (the record PREFIX/classroom.json), and the
checks of names and of running as root that every command makes first.

Only the standard library here and in every module of the set-up: on a bare server it runs before
the environment that holds nbformat and the rest exists (utils/classroom/setup.sh makes an empty
one and runs the set-up in it)."""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

# Only the standard library here and in what it imports: on a bare server the set-up runs before
# the environment that holds nbformat and the rest exists (tests/classroom/test_classroom.py).
from utils.errors import ToolError
from utils.lessons import REPO as REPO   # the class's modules take it from here

COURSE_ID = "prefill-decode"
DEFAULT_PREFIX = Path("/opt/prefill-decode")
DEFAULT_EXCHANGE = Path("/usr/local/share/nbgrader/exchange")   # nbgrader 0.9.6's Exchange.root
# Every port the hub's side listens on is privileged (below 1024: only root may take it), so that
# no student can hold one while the hub or its proxy restarts: the public port (the login form
# carries passwords), the hub's own port (the proxy forwards logins to it) and the proxy's API
# (the hub sends it the proxy's token).
DEFAULT_BIND_URL = "http://127.0.0.1:880"
# A class on loopback gets an origin per user by default: the hub at http://class.localhost:PORT,
# each user's server at http://NAME.class.localhost:PORT (browsers resolve every *.localhost name
# to this machine, so no DNS is needed), and a page of a student's server cannot read the
# instructor's with his cookies. setup --one-origin opts out.
LOCAL_ORIGINS = "class.localhost"
DEFAULT_HUB_PORT, DEFAULT_PROXY_API_PORT = 881, 882
# Each user's Jupyter runtime folder (connection files and kernel sockets): PREFIX/run/UID, the
# user's own, 0700.
RUN_DIR = "run"
DEFAULT_PROFILE_SCRIPT = Path("/etc/profile.d/prefill-decode.sh")
# Unix names that are also valid nbgrader student ids (nbgrader separates fields with '+').
NAME_RE = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")
MARK = "# written by python -m utils.classroom"


@dataclass
class Classroom:
    instructor: str
    students: list[str]
    prefix: str = str(DEFAULT_PREFIX)
    env: str = ""
    exchange: str = str(DEFAULT_EXCHANGE)
    course_dir: str = ""
    course_id: str = COURSE_ID
    hub_state: str = ""               # the hub's database, cookie secret and proxy token (root, 0700)
    bind_url: str = DEFAULT_BIND_URL  # loopback unless an address is named (then with TLS or a proxy)
    hub_port: int = DEFAULT_HUB_PORT            # the hub's own port, on loopback
    proxy_api_port: int = DEFAULT_PROXY_API_PORT  # the proxy's API, on loopback
    ssl_cert: str = ""
    ssl_key: str = ""
    behind_proxy: bool = False
    subdomain_host: str = ""          # each user's server on an origin of its own (wildcard DNS and TLS)
    profile_script: str = str(DEFAULT_PROFILE_SCRIPT)
    # each user's server as a Slurm job (batchspawner's SlurmSpawner; docs/slurm.md): partition,
    # memory, time, gres; empty: a local process on this server
    slurm: dict = field(default_factory=dict)
    # where the servers' jobs reach the hub's API on the cluster's network (--hub-address): then
    # over TLS, JupyterHub's internal_ssl; empty: the hub's API on loopback, the jobs on this node
    hub_address: str = ""
    actions: list[str] = field(default_factory=list)     # what this run changed
    todo: list[str] = field(default_factory=list)        # left to the administrator

    def __post_init__(self):
        self.env = self.env or str(Path(self.prefix) / "env")
        self.hub_state = self.hub_state or str(Path(self.prefix) / "hub")

    @property
    def record(self) -> Path:
        return Path(self.prefix) / "classroom.json"

    @property
    def run_dir(self) -> Path:
        return Path(self.prefix) / RUN_DIR

    def state(self) -> dict:
        d = asdict(self)
        d.pop("actions"), d.pop("todo")
        return d

    def did(self, what: str) -> None:
        self.actions.append(what)
        print(f"  {what}", flush=True)


def load_record(prefix: Path) -> dict:
    path = Path(prefix) / "classroom.json"
    if not path.exists():
        raise ToolError(f"no class record {path}: run `python -m utils.classroom setup` first (or pass --prefix)")
    return json.loads(path.read_text())


def require_root() -> None:
    if not sys.platform.startswith("linux"):
        raise ToolError("the classroom setup is for a Linux server (Unix users, PAM)")
    if os.geteuid() != 0:
        raise ToolError("run it as root (it sets owners and modes of other users' folders)")


def read_students(path: Path) -> list[str]:
    """User names from a file: one per line, or nbgrader's roster CSV (id,first_name,last_name,email)."""
    lines = [l.strip() for l in Path(path).read_text().splitlines()]
    lines = [l for l in lines if l and not l.startswith("#")]
    if lines and lines[0].lower().startswith("id,"):
        lines = [l.split(",", 1)[0].strip() for l in lines[1:]]
    check_names(lines, f"in {path}")
    return list(dict.fromkeys(lines))


def check_names(names: list[str], where: str = "") -> None:
    bad = [n for n in names if not NAME_RE.match(n)]
    if bad:
        raise ToolError(f"not a usable user name {where}: {', '.join(map(repr, bad))} (lower-case letters, "
                        "digits, '_' and '-', starting with a letter or '_'; the name is also the nbgrader student id)")
