"""Set up a class on one Linux server (JupyterHub with Unix users and nbgrader's exchange), as root.

On a bare server start with `bash utils/classroom/setup.sh` (or `make classroom`): it installs the
class server's packages, creates the environment and runs this in it.

    python -m utils.classroom setup --instructor NAME --students FILE [options]
    python -m utils.classroom add-student NAME... [options]
    python -m utils.classroom teardown [--delete-exchange] [--delete-env] [options]

`setup` is safe to run again (it changes only what is not yet as it should be) and does, in order:

  1. the accounts: every student and the instructor must exist (--create-users makes the
     missing ones with a locked password; set passwords with passwd or chpasswd);
  2. every home folder mode 0700, so no student can read another's work, nbgrader's submission
     cache (the secret that names their feedback) or the instructor's course;
  3. one Python environment for everyone outside any private home (default
     /opt/prefill-decode/env): requirements-classroom.txt (the course's pins, the instructor's
     tools, JupyterHub; pip's own settings, PIP_FIND_LINKS and the like, apply), its own copy of the course package (not an editable install: the
     clone may be private, moved or deleted; built from a temporary copy, so nothing is written
     into the clone) and the students' private submit (classroom_exchange.py);
  4. nbgrader's exchange (default /usr/local/share/nbgrader/exchange, nbgrader 0.9.6's
     Exchange.root): the root root-owned, mode 1777, and the course's folder in it (with inbound,
     outbound, feedback) created and owned by the instructor before any student can take the name,
     inbound/ with the instructor's group and the setgid bit (submissions 0750 in that group);
  5. the instructor's course directory (default ~INSTRUCTOR/prefill-decode, a copy of this
     repository when missing), owned by the instructor, mode 0700;
  6. each user's own Jupyter configuration (~/.jupyter, written as that user): nbgrader's course
     id and exchange root; students without the instructor extensions (formgrader, Create
     Assignment, course list) and with the private submit, the instructor with the extensions
     and the course directory;
  7. the environment on PATH in the class's login shells (/etc/profile.d/prefill-decode.sh), so
     JupyterLab's terminals find python, jupyter and nbgrader;
  8. the hub's state folder (default PREFIX/hub: root's, 0700; cookie secret and proxy token
     0600), the class record (PREFIX/classroom.json) and the JupyterHub configuration
     (PREFIX/jupyterhub_config.py: PAM logins, one local process per user, on loopback unless an
     address with TLS is given);

then prints the hub's URL, what it did and what is left to the administrator. `add-student` adds
accounts to an existing class; `teardown` removes what setup wrote in the users' configuration
and the profile script and, when asked, the exchange and the environment (never homes, accounts
or the course directory).
"""

from __future__ import annotations

import argparse
import grp
import ipaddress
import json
import os
import pwd
import re
import secrets
import shutil
import stat
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

# Only the standard library here: on a bare server this runs before the environment that holds
# nbformat and the rest exists (utils/classroom/setup.sh makes an empty one and runs this in it).
try:
    from utils.coursedir import REPO, ToolError
except ImportError:   # nbformat and friends not installed yet
    REPO = Path(__file__).resolve().parents[2]

    class ToolError(Exception):
        """A problem the user can fix, explained in one message."""

COURSE_ID = "prefill-decode"
DEFAULT_PREFIX = Path("/opt/prefill-decode")
DEFAULT_EXCHANGE = Path("/usr/local/share/nbgrader/exchange")   # nbgrader 0.9.6's Exchange.root
HUB_CONFIG_EXAMPLE = Path(__file__).with_name("jupyterhub_config.py")
EXCHANGE_MODULE = Path(__file__).with_name("exchange.py")   # installed as EXCHANGE_MODULE_NAME
EXCHANGE_MODULE_NAME = "prefill_decode_exchange"
# Every port the hub's side listens on is privileged (below 1024: only root may take it), so that
# no student can hold one while the hub or its proxy restarts: the public port (the login form
# carries passwords), the hub's own port (the proxy forwards logins to it) and the proxy's API
# (the hub sends it the proxy's token).
DEFAULT_BIND_URL = "http://127.0.0.1:880"
DEFAULT_HUB_PORT, DEFAULT_PROXY_API_PORT = 881, 882
# Each user's Jupyter runtime folder (connection files and kernel sockets): PREFIX/run/UID, the
# user's own, 0700. A Unix socket's path must stay under 108 bytes: kernel-UUID-ipc-N is 49.
RUN_DIR = "run"
SOCKET_PATH_MAX = 107
DEFAULT_PROFILE_SCRIPT = Path("/etc/profile.d/prefill-decode.sh")

# nbgrader's extensions only instructors use: hidden from students in their own ~/.jupyter.
INSTRUCTOR_LAB_EXTENSIONS = ["@jupyter/nbgrader:formgrader", "@jupyter/nbgrader:create-assignment",
                             "@jupyter/nbgrader:course-list"]
INSTRUCTOR_SERVER_EXTENSIONS = ["nbgrader.server_extensions.formgrader",
                                "nbgrader.server_extensions.course_list"]
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


# --- checks -----------------------------------------------------------------------------------

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


def runnable_by_everyone(path: Path) -> str | None:
    """None when every user can run `path` (each folder above it o+x, the file o+rx after
    following links); else the path that stops them."""
    path = Path(os.path.realpath(path))
    st = path.stat()
    if not (st.st_mode & stat.S_IXOTH and st.st_mode & stat.S_IROTH):
        return str(path)
    for parent in path.parents:
        if not parent.stat().st_mode & stat.S_IXOTH:
            return str(parent)
    return None


# --- steps ------------------------------------------------------------------------------------

def ensure_users(room: Classroom, create: bool, home_base: Path | None = None) -> None:
    missing = []
    for name in [room.instructor, *room.students]:
        try:
            pwd.getpwnam(name)
        except KeyError:
            missing.append(name)
    if missing and not create:
        raise ToolError(f"no such user(s): {', '.join(missing)}; create them first (useradd -m NAME, then "
                        "passwd NAME) or pass --create-users")
    for name in missing:
        args = ["useradd", "--create-home", "--shell", "/bin/bash"]
        if home_base is not None:
            args += ["--base-dir", str(home_base)]
        subprocess.run([*args, name], check=True, capture_output=True, text=True)
        room.did(f"created user {name} (password locked: set one with passwd {name})")
    if missing:
        room.todo.append(f"set a password for the new user(s) {', '.join(missing)} (passwd NAME or chpasswd)")


def home_of(name: str) -> Path:
    return Path(pwd.getpwnam(name).pw_dir)


def private_homes(room: Classroom) -> None:
    for name in [room.instructor, *room.students]:
        home = home_of(name)
        st = os.lstat(home)
        if not stat.S_ISDIR(st.st_mode):
            raise ToolError(f"{name}'s home {home} is not a folder (a link or missing); fix it and rerun")
        if st.st_uid != pwd.getpwnam(name).pw_uid:
            raise ToolError(f"{name}'s home {home} is owned by uid {st.st_uid}, not by {name}; fix it and rerun")
        if stat.S_IMODE(st.st_mode) & 0o077:
            os.chmod(home, stat.S_IMODE(st.st_mode) & 0o700)
            room.did(f"{home}: mode 0700 (was {stat.S_IMODE(st.st_mode):04o})")


CLASS_REQUIREMENTS = "requirements-classroom.txt"   # the class server's list (tests/test_requirements.py)


def pinned_requirements(name: str = CLASS_REQUIREMENTS) -> list[str]:
    """The pins of the class server's requirements (requirements-classroom.txt: the course's pins,
    what the instructor's tools import, the hub), with the files it includes."""
    pins = []
    for line in (REPO / name).read_text().splitlines():
        line = line.split("#")[0].strip()
        if line.startswith("-r "):
            pins += pinned_requirements(line[3:].strip())
        elif "==" in line:
            pins.append(line)
    return list(dict.fromkeys(pins))


def missing_pins(python: Path, pins: list[str]) -> list[str]:
    code = ("import json, sys\nfrom importlib.metadata import version, PackageNotFoundError\n"
            "out = []\nfor pin in json.loads(sys.argv[1]):\n    name, want = pin.split('==')\n"
            "    try:\n        ok = version(name).split('+')[0] == want\n    except PackageNotFoundError:\n        ok = False\n"
            "    out.append(None if ok else pin)\n"
            "print(json.dumps([p for p in out if p]))")
    res = subprocess.run([str(python), "-c", code, json.dumps(pins)], capture_output=True, text=True)
    if res.returncode != 0:
        raise ToolError(f"{python} does not run: {res.stderr.strip()[-500:]}")
    return json.loads(res.stdout)


def _package_files(folder: Path) -> dict[str, bytes]:
    """The package's modules (what pyproject.toml installs: course/*.py), by path."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*.py"))
            if p.is_file() and "__pycache__" not in p.parts}


# Where `python` imports `course` from, and whether that is a copy inside its own environment.
_WHERE_COURSE = ("import importlib.util, json, os, sys\n"
                 "spec = importlib.util.find_spec('course')\n"
                 "where = os.path.dirname(spec.origin) if spec and spec.origin else None\n"
                 "inside = bool(where) and os.path.realpath(where).startswith(os.path.realpath(sys.prefix) + os.sep)\n"
                 "print(json.dumps({'where': where, 'inside': inside}))")


def course_copy_state(python: Path) -> str | None:
    """None when `python` imports `course` from its own environment, as a copy identical to this
    checkout's course/; else what is wrong (missing, an editable install pointing elsewhere, stale)."""
    res = subprocess.run([str(python), "-I", "-c", _WHERE_COURSE], capture_output=True, text=True, cwd="/")
    if res.returncode != 0:
        raise ToolError(f"{python} does not run: {res.stderr.strip()[-500:]}")
    found = json.loads(res.stdout)
    if not found["where"]:
        return "not installed"
    if not found["inside"]:
        return f"imported from {found['where']}, outside the environment (an editable install?)"
    if _package_files(Path(found["where"])) != _package_files(REPO / "course"):
        return f"the copy in {found['where']} differs from {REPO / 'course'}"
    return None


def install_course(python: Path) -> None:
    """Install the `course` package into `python`'s environment as a copy (not an editable install
    pointing at this checkout), built from a temporary copy so that nothing (build/, *.egg-info)
    is written into the checkout. Only `course` is (re)installed; its dependencies are the pins'."""
    with tempfile.TemporaryDirectory(prefix="course-build-") as tmp:
        src = Path(tmp) / "src"
        src.mkdir()
        shutil.copy2(REPO / "pyproject.toml", src / "pyproject.toml")
        shutil.copytree(REPO / "course", src / "course", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        # setuptools able to build a wheel already in the environment: no download (else pip fetches it)
        probe = ("import setuptools\ntry:\n    import setuptools.command.bdist_wheel\n"
                 "except ImportError:\n    import wheel.bdist_wheel")
        has_setuptools = subprocess.run([str(python), "-c", probe], capture_output=True).returncode == 0
        args = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps",
                "--force-reinstall", "--no-cache-dir", *(["--no-build-isolation"] if has_setuptools else []), str(src)]
        res = subprocess.run(args, capture_output=True, text=True, cwd=tmp, env={**os.environ, "TMPDIR": tmp})
        if res.returncode != 0:
            raise ToolError(f"installing the course package into {python} failed:\n{res.stdout[-1500:]}{res.stderr[-1500:]}")


def shared_env(room: Classroom, base_python: Path) -> Path:
    """The environment every user's server and kernels run in: created when missing, completed
    when a pin is missing, its own copy of the course package refreshed when it differs from this
    checkout's; left alone otherwise. It does not depend on this checkout afterwards."""
    env = Path(room.env)
    python = env / "bin" / "python"
    pins = pinned_requirements()
    if not python.exists():
        blocked = runnable_by_everyone(base_python)
        if blocked:
            raise ToolError(f"{base_python} cannot be run by other users ({blocked} is closed to them); "
                            "pass --python with an interpreter outside any private home, e.g. /usr/bin/python3")
        env.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([str(base_python), "-m", "venv", str(env)], check=True)
        room.did(f"created the environment {env} from {base_python}")
    missing = missing_pins(python, pins)
    if missing:
        print(f"  installing into {env}: {', '.join(missing)} (minutes)", flush=True)
        with tempfile.TemporaryDirectory(prefix="classroom-pip-") as tmp:
            res = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                                  "-r", str(REPO / CLASS_REQUIREMENTS)],
                                 capture_output=True, text=True, cwd=tmp)
        if res.returncode != 0:
            raise ToolError(f"pip install into {env} failed:\n{res.stdout[-1500:]}{res.stderr[-1500:]}")
        room.did(f"{env}: installed the course's pins")
    wrong = course_copy_state(python)
    if wrong:
        install_course(python)
        room.did(f"{env}: installed its own copy of the course package (was: {wrong})")
    purelib = Path(subprocess.run([str(python), "-I", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  capture_output=True, text=True, check=True).stdout.strip())
    module = purelib / f"{EXCHANGE_MODULE_NAME}.py"
    if not module.exists() or module.read_bytes() != EXCHANGE_MODULE.read_bytes():
        shutil.copyfile(EXCHANGE_MODULE, module)
        os.chmod(module, 0o644)
        room.did(f"{module}: the students' private submit (from {EXCHANGE_MODULE.name})")
    blocked = runnable_by_everyone(python)
    if blocked:
        raise ToolError(f"the environment {env} cannot be run by other users ({blocked} is closed to them)")
    return python


# The kernels' transport for every Jupyter program in the shared environment (its etc/jupyter,
# root's, read before each user's own ~/.jupyter): Unix sockets in the user's runtime folder,
# never loopback TCP, where any user on the server can connect to a kernel's ports. A user's own
# configuration can change it for her own kernels only. The files are the student Lab's
# (utils/classroom/student-lab: jupyter_config.py for every program; nbgrader's and nbconvert's, which
# name no connection file, give their sockets a path in the runtime folder).
KERNEL_CONFIG_DIR = Path(__file__).with_name("student-lab")
KERNEL_CONFIG = {name: f"{MARK} from utils/classroom/student-lab/{name}\n" + (KERNEL_CONFIG_DIR / name).read_text()
                 for name in ("jupyter_config.py", "nbgrader_config.py", "jupyter_nbconvert_config.py")}


def kernel_config(room: Classroom) -> None:
    """KERNEL_CONFIG in the environment's etc/jupyter, root's, 0644."""
    folder = Path(room.env) / "etc" / "jupyter"
    for name, text in KERNEL_CONFIG.items():
        root_file(room, folder / name, text, "kernels on Unix sockets in each user's runtime folder")


def root_file(room: Classroom, path: Path, text: str, why: str) -> None:
    """`text` at `path`, root's, mode 0644. A link or another file found there is removed and the
    file written anew, never written through (it may be shared with another environment)."""
    if path.is_symlink() or not path.is_file() or path.read_text() != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.unlink(missing_ok=True)
        path.write_text(text)
        room.did(f"wrote {path} ({why})")
    st = os.lstat(path)
    if st.st_uid != 0 or stat.S_IMODE(st.st_mode) != 0o644:
        os.chown(path, 0, 0)
        os.chmod(path, 0o644)
        room.did(f"{path}: root's, mode 0644")


# The Python kernel's spec in the shared environment, with JupyterLab's debugger switched off
# (JupyterLab offers it only for a kernel whose spec says "debugger": true). Turned on, it makes
# the kernel start debugpy, whose adapter listens on a loopback TCP port and takes any client
# that connects, no key asked: a classmate could attach to the kernel whenever ipykernel's own
# session is not attached (before it attaches, after the debugger is turned off) and run code
# as its owner. A user's own kernel spec (~/.local/share/jupyter/kernels) can turn it back on
# for her own kernels only.
KERNEL_SPEC = {"argv": ["python", "-m", "ipykernel_launcher", "-f", "{connection_file}"],
               "display_name": "Python 3 (ipykernel)", "language": "python",
               "metadata": {"debugger": False}, "kernel_protocol_version": "5.5"}


def kernel_spec(room: Classroom) -> None:
    """KERNEL_SPEC as the environment's python3 kernel spec, root's, 0644 (the file ipykernel
    installed is replaced, not written through: it may be a link shared with another environment)."""
    path = Path(room.env) / "share" / "jupyter" / "kernels" / "python3" / "kernel.json"
    old = {}
    try:
        old = json.loads(path.read_text())
    except (OSError, ValueError):
        pass
    want = {**KERNEL_SPEC, **old, "metadata": {**old.get("metadata", {}), "debugger": False}}
    text = json.dumps(want, indent=1, sort_keys=True) + "\n"
    root_file(room, path, text, "JupyterLab's debugger off: debugpy would listen on loopback TCP")


def runtime_dirs(room: Classroom, names: list[str]) -> None:
    """PREFIX/run (root's, 0711) and in it each user's runtime folder PREFIX/run/UID (theirs,
    0700): the hub and the login shells point JUPYTER_RUNTIME_DIR there. Short, so that a
    kernel's socket path stays under the limit of Unix sockets."""
    run = room.run_dir
    longest = len(str(run / str(2**32))) + len("/kernel-00000000-0000-0000-0000-000000000000-ipc-99")
    if longest > SOCKET_PATH_MAX:
        raise ToolError(f"--prefix {room.prefix} is too long: a kernel's socket {run}/UID/kernel-... would have "
                        f"{longest} characters, more than a Unix socket allows ({SOCKET_PATH_MAX}); choose a shorter prefix")
    if not run.exists():
        run.mkdir(parents=True)
        room.did(f"created {run} (each user's Jupyter runtime folder)")
    st = os.lstat(run)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != 0:
        raise ToolError(f"{run} is not a folder owned by root; look at it, move it away and rerun")
    if stat.S_IMODE(st.st_mode) != 0o711:
        os.chmod(run, 0o711)
        room.did(f"{run}: mode 0711 (nobody lists it)")
    for name in names:
        pw = pwd.getpwnam(name)
        folder = run / str(pw.pw_uid)
        if not folder.exists():
            folder.mkdir(mode=0o700)
            os.chown(folder, pw.pw_uid, pw.pw_gid)
            room.did(f"created {folder} ({name}'s Jupyter runtime folder: kernels' connection files and sockets)")
        st = os.lstat(folder)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != pw.pw_uid:
            raise ToolError(f"{folder} is not a folder owned by {name}; look at it, move it away and rerun")
        if stat.S_IMODE(st.st_mode) != 0o700:
            os.chmod(folder, 0o700)
            room.did(f"{folder}: mode 0700")


def close_checkout(room: Classroom, repo: Path = REPO) -> None:
    """The checkout the class is set up from holds source/ (every lesson's solutions and hidden
    tests): closed to everyone but its owner (and root), whoever cloned it, before anything else."""
    st = os.stat(repo)
    if stat.S_IMODE(st.st_mode) & 0o077:
        os.chmod(repo, stat.S_IMODE(st.st_mode) & 0o700)
        room.did(f"{repo}: mode {stat.S_IMODE(st.st_mode) & 0o700:04o} (was {stat.S_IMODE(st.st_mode):04o}): the checkout "
                 "holds source/, every lesson's hidden tests; no student may read it")


def unprivileged_port_start() -> int:
    """The lowest port an ordinary user may listen on (Linux: net.ipv4.ip_unprivileged_port_start)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_unprivileged_port_start").read_text())
    except (OSError, ValueError):
        return 1024


def check_ports(room: Classroom) -> None:
    """The public port, the hub's and the proxy API's: distinct, and each one only root may take."""
    from urllib.parse import urlsplit
    public = urlsplit(room.bind_url).port or (443 if room.bind_url.startswith("https") else 80)
    ports = {"the hub's public port (--address)": public, "the hub's own port (--hub-port)": room.hub_port,
             "the proxy's API port (--proxy-api-port)": room.proxy_api_port}
    if len(set(ports.values())) != len(ports):
        raise ToolError(f"the hub's three ports must differ: {', '.join(f'{k} {v}' for k, v in ports.items())}")
    start = unprivileged_port_start()
    for what, port in ports.items():
        if not 0 < port < 65536:
            raise ToolError(f"{what}: {port} is not a port")
        if port >= start:
            raise ToolError(f"{what} is {port}, which any user may listen on (ports from {start} up are "
                            "unprivileged here): while the hub or its proxy restarts, a student holding it would "
                            "receive passwords or the proxy's token. Choose a port below " + str(min(start, 1024)) +
                            (" (and sysctl net.ipv4.ip_unprivileged_port_start=1024)" if start < 1024 else ""))


def exchange(room: Classroom) -> None:
    """The exchange root (root-owned, 1777, as nbgrader's release insists on o+rwx) and the
    course's folder in it, owned by the instructor before any student can create it."""
    root = Path(room.exchange)
    made = [p for p in [*reversed(root.parents), root] if not p.exists()]
    for p in made:
        p.mkdir(mode=0o755)
        os.chown(p, 0, 0)
    st = os.lstat(root)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != 0:
        raise ToolError(f"the exchange root {root} is not a folder owned by root (owner uid {st.st_uid}); "
                        "check what is in it, remove it and rerun")
    if stat.S_IMODE(st.st_mode) != 0o1777:
        os.chmod(root, 0o1777)
        room.did(f"{root}: mode 1777 (everyone may create, nobody may remove another's)")
    elif made:
        room.did(f"created the exchange root {root}")
    pw = pwd.getpwnam(room.instructor)
    _check_course_group(room, pw.pw_gid)
    course = root / room.course_id
    # nbgrader's own modes (inbound write-only for students, feedback listable by nobody), and the
    # sticky bit on inbound, which nbgrader leaves out: nobody moves or removes another's submission
    for path, mode in ((course, 0o755), (course / "outbound", 0o755), (course / "inbound", 0o3733),
                       (course / "feedback", 0o711)):
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            path.mkdir()
            os.chown(path, pw.pw_uid, pw.pw_gid)
            os.chmod(path, mode)
            room.did(f"created {path} owned by {room.instructor}, mode {mode:04o}")
            continue
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != pw.pw_uid:
            who = _user_name(st.st_uid)
            raise ToolError(f"{path} exists and belongs to {who}, not to the instructor {room.instructor}: "
                            f"someone created it before the setup. Look at what is in it, move it away and rerun")
        if stat.S_IMODE(st.st_mode) != mode:
            os.chmod(path, mode)
            room.did(f"{path}: mode {mode:04o}")
        if st.st_gid != pw.pw_gid:
            os.chown(path, pw.pw_uid, pw.pw_gid)
            room.did(f"{path}: group {grp.getgrgid(pw.pw_gid).gr_name} (the instructor's)")


def _check_course_group(room: Classroom, gid: int) -> None:
    """Submissions are readable by the instructor's primary group (inbound/'s, setgid): no student
    may be in it."""
    group = grp.getgrgid(gid)
    inside = [n for n in room.students if n in group.gr_mem or pwd.getpwnam(n).pw_gid == gid]
    if inside:
        raise ToolError(f"the instructor's group {group.gr_name} holds student(s) {', '.join(inside)}: every "
                        "submission is readable by that group. Give the instructor a group of their own "
                        "(usermod -g) or take the students out of it, and rerun")


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def course_directory(room: Classroom) -> None:
    pw = pwd.getpwnam(room.instructor)
    course = Path(room.course_dir)
    if not course.exists():
        ignore = shutil.ignore_patterns(".git", ".venv", "__pycache__", ".ipynb_checkpoints", ".pytest_cache",
                                        "autograded", "submitted", "feedback", "gradebook.db", "grades.csv",
                                        "build", "*.egg-info", ".grading-cache", "refused")
        shutil.copytree(REPO, course, ignore=ignore, symlinks=True)
        room.did(f"copied the course repository to {course}")
    changed = 0
    for dirpath, dirnames, filenames in os.walk(course):
        for p in [dirpath, *(os.path.join(dirpath, n) for n in dirnames + filenames)]:
            if os.lstat(p).st_uid != pw.pw_uid:
                os.lchown(p, pw.pw_uid, pw.pw_gid)
                changed += 1
    if changed:
        room.did(f"{course}: {changed} file(s) handed to {room.instructor}")
    mode = stat.S_IMODE(os.lstat(course).st_mode)
    if mode != 0o700:
        os.chmod(course, 0o700)
        room.did(f"{course}: mode 0700 (source/ and the gradebook hold the answers)")


# Runs as the user (in the shared environment): writes their ~/.jupyter files, merging with
# what is there, so that root never writes through a link a user planted.
_WRITE_CONFIG = r'''
import json, os, sys
spec = json.loads(sys.argv[1])
jdir = os.path.join(os.path.expanduser("~"), ".jupyter")
os.makedirs(os.path.join(jdir, "labconfig"), exist_ok=True)
changed = []
def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        return {}
def save(path, data, text=None):
    new = text if text is not None else json.dumps(data, indent=2, sort_keys=True) + "\n"
    try:
        with open(path) as f:
            if f.read() == new:
                return
    except FileNotFoundError:
        pass
    tmp = path + ".tmp-classroom"
    with open(tmp, "w") as f:
        f.write(new)
    os.replace(tmp, path)
    changed.append(path)
page = os.path.join(jdir, "labconfig", "page_config.json")
data = load(page)
off = data.setdefault("disabledExtensions", {})
for ext in spec["lab"]:
    if spec["instructor"]:
        off.pop(ext, None)
    else:
        off[ext] = True
save(page, data)
server = os.path.join(jdir, "jupyter_server_config.json")
data = load(server)
exts = data.setdefault("ServerApp", {}).setdefault("jpserver_extensions", {})
for ext in spec["server"]:
    exts[ext] = bool(spec["instructor"])
save(server, data)
nbcfg = os.path.join(jdir, "nbgrader_config.py")
try:
    with open(nbcfg) as f:
        old = f.read()
except FileNotFoundError:
    old = ""
if old and spec["mark"] not in old:
    print("KEPT " + nbcfg)
else:
    save(nbcfg, None, spec["nbgrader_config"])
print(json.dumps(changed))
'''


# Runs as the user: takes out what _WRITE_CONFIG put in, leaving the user's other settings.
_UNDO_CONFIG = r'''
import json, os, sys
spec = json.loads(sys.argv[1])
jdir = os.path.join(os.path.expanduser("~"), ".jupyter")
nbcfg = os.path.join(jdir, "nbgrader_config.py")
if os.path.exists(nbcfg) and spec["mark"] in open(nbcfg).read():
    os.remove(nbcfg)
    print("removed " + nbcfg)
for path, keys in ((os.path.join(jdir, "labconfig", "page_config.json"), ("disabledExtensions",)),
                   (os.path.join(jdir, "jupyter_server_config.json"), ("ServerApp", "jpserver_extensions"))):
    try:
        with open(path) as f:
            data = json.load(f)
    except (FileNotFoundError, ValueError):
        continue
    inner = data
    for k in keys:
        inner = inner.get(k, {}) if isinstance(inner, dict) else {}
    names = spec["lab"] if keys[0] == "disabledExtensions" else spec["server"]
    if any(n in inner for n in names):
        for n in names:
            inner.pop(n, None)
        with open(path, "w") as f:
            json.dump(data, f, indent=2, sort_keys=True)
        print("restored nbgrader's extensions in " + path)
'''


def user_config(room: Classroom, python: Path, name: str, instructor: bool) -> None:
    lines = [MARK + " (setup runs again overwrite it; remove this line to keep your own)",
             "c = get_config()  # noqa: F821",
             f"c.CourseDirectory.course_id = {room.course_id!r}",
             f"c.Exchange.root = {room.exchange!r}"]
    if instructor:
        lines.append(f"c.CourseDirectory.root = {room.course_dir!r}")
    else:
        lines += ["# the submission readable by its student and the instructor's group alone (nbgrader's is 0777)",
                  f"c.ExchangeFactory.submit = '{EXCHANGE_MODULE_NAME}.PrivateSubmit'"]
    spec = {"instructor": instructor, "lab": INSTRUCTOR_LAB_EXTENSIONS, "server": INSTRUCTOR_SERVER_EXTENSIONS,
            "mark": MARK, "nbgrader_config": "\n".join(lines) + "\n"}
    res = as_user(name, [str(python), "-c", _WRITE_CONFIG, json.dumps(spec)])
    if res.returncode != 0:
        raise ToolError(f"writing {name}'s Jupyter configuration failed: {res.stderr.strip()[-800:]}")
    out = res.stdout.strip().splitlines()
    for line in out[:-1]:
        if line.startswith("KEPT "):
            room.todo.append(f"{line[5:]} was not written by this command and was kept: check that it names "
                             f"course {room.course_id} and exchange {room.exchange}")
    for path in json.loads(out[-1]):
        room.did(f"wrote {path} ({'instructor' if instructor else 'student'})")


def as_user(name: str, args: list[str], cwd: Path | None = None, **kw) -> subprocess.CompletedProcess:
    """Run `args` as user `name`: their uid, gid and groups, HOME and a plain PATH."""
    pw = pwd.getpwnam(name)
    env = {"HOME": pw.pw_dir, "USER": name, "LOGNAME": name, "PATH": "/usr/local/bin:/usr/bin:/bin",
           "LANG": os.environ.get("LANG", "C.UTF-8")}
    env.update(kw.pop("env", {}))
    return subprocess.run(args, cwd=str(cwd or pw.pw_dir), env=env, user=pw.pw_uid, group=pw.pw_gid,
                          extra_groups=os.getgrouplist(name, pw.pw_gid), capture_output=True, text=True, **kw)


def check_bind(room: Classroom) -> None:
    """The hub listens on loopback unless an address is named; then only over TLS (certificate and
    key given), or behind a reverse proxy, in which case the hub itself stays on loopback."""
    from urllib.parse import urlsplit
    url = urlsplit(room.bind_url)
    if url.scheme not in ("http", "https") or not url.hostname:
        raise ToolError(f"--address {room.bind_url!r}: give HOST:PORT or http(s)://HOST:PORT")
    host = url.hostname
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    if bool(room.ssl_cert) != bool(room.ssl_key):
        raise ToolError("give both --ssl-cert and --ssl-key, or neither")
    for f in (room.ssl_cert, room.ssl_key):
        if f and not Path(f).is_file():
            raise ToolError(f"no such file: {f}")
    if room.ssl_cert and url.scheme != "https":
        room.bind_url = url._replace(scheme="https").geturl()
    if room.subdomain_host:
        sub = urlsplit(room.subdomain_host)
        if sub.scheme not in ("http", "https") or not sub.hostname or sub.path not in ("", "/"):
            raise ToolError(f"--subdomain-host {room.subdomain_host!r}: give a URL such as https://class.example.org")
        if sub.scheme != "https" and sub.hostname != "localhost" and not sub.hostname.endswith(".localhost"):
            raise ToolError(f"--subdomain-host {room.subdomain_host}: use https (the users' servers would get cookies "
                            "and passwords over plain HTTP)")
    if loopback:
        return
    if room.behind_proxy:
        raise ToolError(f"--behind-proxy keeps the hub on loopback (the reverse proxy on this server reaches "
                        f"it there); leave out --address {host} or --behind-proxy")
    if not room.ssl_cert:
        raise ToolError(f"the hub would listen on {host} over plain HTTP, sending the class's Unix passwords in "
                        "clear: give --ssl-cert and --ssl-key, or keep it on loopback behind a reverse proxy "
                        "with TLS (--behind-proxy; docs/instructors.md shows one)")


def _secret_file(room: Classroom, path: Path, what: str) -> None:
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32) + "\n")
        room.did(f"wrote {path} ({what}, root alone)")
    st = os.lstat(path)
    if not stat.S_ISREG(st.st_mode) or st.st_uid != 0:
        raise ToolError(f"{path} is not a plain file of root's; look at it, remove it and rerun")
    if stat.S_IMODE(st.st_mode) != 0o600:
        os.chmod(path, 0o600)
        room.did(f"{path}: mode 0600 (was {stat.S_IMODE(st.st_mode):04o})")


def hub_state(room: Classroom) -> None:
    """The hub's own folder: root's, 0700, with the cookie secret and the proxy's token in it
    (0600) and, once the hub runs, its database (users, cookie ids, hashed tokens)."""
    state = Path(room.hub_state)
    if not state.exists():
        state.parent.mkdir(parents=True, exist_ok=True)
        state.mkdir(mode=0o700)
        os.chown(state, 0, 0)
        room.did(f"created the hub's state folder {state} (root alone)")
    st = os.lstat(state)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != 0:
        raise ToolError(f"the hub's state folder {state} is not a folder owned by root; look at it, move it away and rerun")
    if stat.S_IMODE(st.st_mode) != 0o700:
        os.chmod(state, 0o700)
        room.did(f"{state}: mode 0700 (was {stat.S_IMODE(st.st_mode):04o})")
    _secret_file(room, state / "jupyterhub_cookie_secret", "the hub's cookie secret")
    _secret_file(room, state / "proxy_token", "the token between the hub and its proxy")
    for name in ("jupyterhub.sqlite",):
        db = state / name
        if db.exists() and stat.S_IMODE(os.lstat(db).st_mode) & 0o077:
            os.chmod(db, 0o600)
            room.did(f"{db}: mode 0600")


def profile_script(room: Classroom) -> None:
    """The shared environment first on PATH in the class's login shells (JupyterLab's terminals
    are login shells, and /etc/profile resets PATH): python, jupyter, nbgrader and the course's
    commands are found there. Only for the class's users."""
    path = Path(room.profile_script)
    users = " | ".join([room.instructor, *room.students])
    bin_ = Path(room.env) / "bin"
    run = room.run_dir
    text = (f"{MARK}: the class's environment on PATH in its users' login shells, and their own\n"
            "# Jupyter runtime folder (the kernels' sockets of nbgrader validate)\n"
            f'case "$(id -un 2>/dev/null)" in\n'
            f"  {users})\n"
            f'    case ":$PATH:" in *":{bin_}:"*) ;; *) PATH="{bin_}:$PATH"; export PATH ;; esac\n'
            f'    if [ -O "{run}/$(id -u)" ]; then JUPYTER_RUNTIME_DIR="{run}/$(id -u)"; export JUPYTER_RUNTIME_DIR; fi ;;\n'
            "esac\n")
    if not path.exists() or path.read_text() != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        room.did(f"wrote {path} ({bin_} on PATH in the class's login shells and terminals)")
    if stat.S_IMODE(os.lstat(path).st_mode) != 0o644:
        os.chmod(path, 0o644)
        room.did(f"{path}: mode 0644")


def mount_of(path: Path) -> tuple[str, str, set[str]]:
    """(mount point, file system type, options) of the file system holding `path`."""
    best = ("/", "", set())
    real = os.path.realpath(path)
    with open("/proc/self/mounts") as f:
        for line in f:
            dev, point, fstype, opts = line.split()[:4]
            point = point.replace("\\040", " ")
            if (real == point or real.startswith(point.rstrip("/") + "/")) and len(point) >= len(best[0]):
                best = (point, fstype, set(opts.split(",")))
    return best


def quota_todo(room: Classroom) -> None:
    """Disk per student: where the homes' and the exchange's file systems have no user quotas,
    say so (the setup does not set quotas; docs/instructors.md says how)."""
    seen = set()
    for path in (Path(room.exchange), *(home_of(n) for n in room.students)):
        point, fstype, opts = mount_of(path)
        if point in seen:
            continue
        seen.add(point)
        if not opts & {"usrquota", "uquota", "quota", "usrjquota", "uqnoenforce"}:
            room.todo.append(f"{point} ({fstype}, holding {path}) has no user quotas: a student can fill it; mount "
                             "it with usrquota and set one per student (setquota), or give the exchange a file "
                             "system of its own (docs/instructors.md)")


def hub_files(room: Classroom) -> Path:
    prefix = Path(room.prefix)
    prefix.mkdir(parents=True, exist_ok=True)
    text = json.dumps(room.state(), indent=2, sort_keys=True) + "\n"
    if not room.record.exists() or room.record.read_text() != text:
        room.record.write_text(text)
        os.chmod(room.record, 0o644)
        room.did(f"wrote the class record {room.record}")
    hub = prefix / "jupyterhub_config.py"
    example = HUB_CONFIG_EXAMPLE.read_text()
    if not hub.exists():
        hub.write_text(example)
        room.did(f"wrote {hub} (JupyterHub: PAM logins, one local process per user)")
    elif hub.read_text() != example:
        room.todo.append(f"{hub} differs from {HUB_CONFIG_EXAMPLE} and was kept; compare them")
    return hub


def load_record(prefix: Path) -> dict:
    path = Path(prefix) / "classroom.json"
    if not path.exists():
        raise ToolError(f"no class record {path}: run `python -m utils.classroom setup` first (or pass --prefix)")
    return json.loads(path.read_text())


# --- commands ---------------------------------------------------------------------------------

def setup(room: Classroom, python: Path, create_users: bool = False, home_base: Path | None = None) -> Classroom:
    require_root()
    check_names([room.instructor, *room.students])
    check_bind(room)
    check_ports(room)
    if room.instructor in room.students:
        raise ToolError(f"{room.instructor} is both the instructor and a student")
    print("this checkout", flush=True)
    close_checkout(room)
    if room.record.exists():   # a rerun keeps the students added earlier
        old = json.loads(room.record.read_text())
        room.students = list(dict.fromkeys([*old.get("students", []), *room.students]))
    print("users", flush=True)
    ensure_users(room, create_users, home_base)
    room.course_dir = room.course_dir or str(home_of(room.instructor) / room.course_id)
    private_homes(room)
    print("environment", flush=True)
    env_python = shared_env(room, python)
    print("exchange", flush=True)
    exchange(room)
    print("course directory", flush=True)
    course_directory(room)
    print("Jupyter configuration per user", flush=True)
    user_config(room, env_python, room.instructor, instructor=True)
    for name in room.students:
        user_config(room, env_python, name, instructor=False)
    print("kernels, terminals and the hub's state", flush=True)
    kernel_config(room)
    kernel_spec(room)
    runtime_dirs(room, [room.instructor, *room.students])
    profile_script(room)
    hub_state(room)
    hub = hub_files(room)
    quota_todo(room)
    todo = [f"start the hub as root: cd {room.hub_state} && {Path(room.env) / 'bin' / 'jupyterhub'} -f {hub} "
            "(e.g. as a systemd service: docs/instructors.md)"]
    if not room.subdomain_host and (room.behind_proxy or room.ssl_cert):
        todo.append("WARNING: the class is on the network and every user's server shares the hub's origin (one "
                    "host, paths /user/NAME/): a page of a student's server that the instructor opens in the browser "
                    "he is logged in with can read his pages and act as him. Rerun with --subdomain-host "
                    "https://HOST (wildcard DNS *.HOST and a wildcard certificate) for an origin per user, or never "
                    "open a link into a student's server in that browser (docs/instructors.md, threat model)")
    elif not room.subdomain_host:
        todo.append("every user's server shares the hub's origin (one host, paths /user/NAME/): a student's page "
                    "opened by the instructor shares the instructor's browser origin; give --subdomain-host with "
                    "wildcard DNS and TLS for an origin per user (docs/instructors.md, threat model)")
    if room.behind_proxy:
        todo.append(f"serve the hub through the reverse proxy with TLS on this server, to {room.bind_url} "
                    "(docs/instructors.md shows nginx's configuration)")
    elif not room.ssl_cert:
        todo.append(f"the hub listens on {room.bind_url} (this server alone): to open it to the class, rerun with "
                    "--address HOST:PORT --ssl-cert FILE --ssl-key FILE, or --behind-proxy and a reverse proxy with TLS")
    room.todo[:0] = [
        *todo,
        f"back up {room.course_dir} (source/ and the gradebook hold the answers and the grades) and the "
        f"exchange {room.exchange}",
        f"release, collect and grade as {room.instructor}, in {room.course_dir}: see docs/instructors.md",
    ]
    return room


def _exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


def teardown(prefix: Path, delete_exchange: bool, delete_env: bool) -> list[str]:
    """Undo what setup wrote into the users' Jupyter configuration; optionally remove the course's
    exchange folder and the environment. Accounts, homes and the course directory are kept."""
    require_root()
    state = load_record(prefix)
    done = []
    python = Path(state["env"]) / "bin" / "python"
    for name in [state["instructor"], *state["students"]]:
        if not _exists(name) or not python.exists():
            continue
        res = as_user(name, [str(python), "-c", _UNDO_CONFIG, json.dumps(
            {"mark": MARK, "lab": INSTRUCTOR_LAB_EXTENSIONS, "server": INSTRUCTOR_SERVER_EXTENSIONS})])
        done += [f"{name}: {line}" for line in res.stdout.splitlines()]
        if res.returncode != 0:
            done.append(f"{name}: could not undo the configuration: {res.stderr.strip()[-300:]}")
    script = Path(state.get("profile_script", DEFAULT_PROFILE_SCRIPT))
    if script.is_file() and MARK in script.read_text():
        script.unlink()
        done.append(f"removed {script}")
    if delete_exchange:
        course = Path(state["exchange"]) / state["course_id"]
        if course.exists():
            shutil.rmtree(course)
            done.append(f"removed {course} (the submissions in it too)")
    if delete_env and Path(state["env"]).exists():
        shutil.rmtree(state["env"])
        done.append(f"removed {state['env']}")
    return done


def print_summary(room: Classroom) -> None:
    print()
    print(f"class {room.course_id}: instructor {room.instructor}, {len(room.students)} student(s)")
    print(f"  environment  {room.env}")
    print(f"  exchange     {room.exchange} (course folder {Path(room.exchange) / room.course_id})")
    print(f"  course       {room.course_dir}")
    print(f"  hub config   {Path(room.prefix) / 'jupyterhub_config.py'} (state in {room.hub_state})")
    print(f"  hub URL      {room.bind_url}/" + ("  (through the reverse proxy)" if room.behind_proxy else ""))
    print(f"  hub inside   127.0.0.1:{room.hub_port} (the hub), 127.0.0.1:{room.proxy_api_port} (the proxy's API)")
    print(f"changed this run: {len(room.actions)} (nothing means everything was already in place)")
    print("left to you:")
    for item in room.todo:
        print(f"  - {item}")


def _bind_url(address: str | None) -> str:
    if not address:
        return DEFAULT_BIND_URL
    return address if "://" in address else f"http://{address}"


def _setup_options(s: argparse.ArgumentParser) -> None:
    """The options of `setup`: who, where the environment, exchange, course and hub state live,
    and how the hub is reached."""
    s.add_argument("--instructor", required=True)
    s.add_argument("--students", type=Path, required=True,
                   help="a file of user names, one a line, or nbgrader's roster CSV (id,first_name,last_name,email)")
    s.add_argument("--exchange", type=Path, default=DEFAULT_EXCHANGE, help=f"exchange root (default {DEFAULT_EXCHANGE})")
    s.add_argument("--env", type=Path, default=None, help="the shared environment (default PREFIX/env)")
    s.add_argument("--python", type=Path, default=None,
                   help="interpreter the environment is made from; every user must be able to run it "
                        "(default: this one if they can, else /usr/bin/python3)")
    s.add_argument("--course-dir", type=Path, default=None, help="the instructor's course (default ~INSTRUCTOR/prefill-decode)")
    s.add_argument("--course-id", default=COURSE_ID)
    s.add_argument("--create-users", action="store_true", help="create missing accounts (password locked)")
    s.add_argument("--hub-state", type=Path, default=None,
                   help="the hub's database, cookie secret and proxy token, root alone (default PREFIX/hub)")
    s.add_argument("--address", default=None,
                   help=f"where the hub listens, HOST:PORT (default {DEFAULT_BIND_URL[7:]}, this server alone); "
                        "any other than loopback needs --ssl-cert and --ssl-key; the port must be privileged (below 1024)")
    s.add_argument("--hub-port", type=int, default=DEFAULT_HUB_PORT,
                   help=f"the hub's own port on loopback, privileged (default {DEFAULT_HUB_PORT})")
    s.add_argument("--proxy-api-port", type=int, default=DEFAULT_PROXY_API_PORT,
                   help=f"the proxy's API port on loopback, privileged (default {DEFAULT_PROXY_API_PORT})")
    s.add_argument("--ssl-cert", type=Path, default=None, help="TLS certificate (chain) for the hub")
    s.add_argument("--ssl-key", type=Path, default=None, help="its private key")
    s.add_argument("--subdomain-host", default="",
                   help="serve each user's server on a subdomain of this URL (https://class.example.org: users at "
                        "https://NAME.class.example.org), an origin of its own; needs wildcard DNS and a wildcard "
                        "TLS certificate (docs/instructors.md)")
    s.add_argument("--behind-proxy", action="store_true",
                   help="a reverse proxy with TLS on this server serves the hub, which stays on loopback")
    s.add_argument("--profile-script", type=Path, default=DEFAULT_PROFILE_SCRIPT,
                   help=f"the login-shell script putting the environment on PATH (default {DEFAULT_PROFILE_SCRIPT})")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line: setup, add-student or teardown, and its options."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prefix", type=Path, default=DEFAULT_PREFIX,
                        help=f"where the environment, the class record and the hub config live (default {DEFAULT_PREFIX})")
    sub = parser.add_subparsers(dest="command", required=True)
    _setup_options(sub.add_parser("setup", help="set up (or check and repair) the class"))
    a = sub.add_parser("add-student", help="add students to the class set up under --prefix")
    a.add_argument("names", nargs="+")
    a.add_argument("--create-users", action="store_true")
    t = sub.add_parser("teardown", help="remove what setup wrote into users' configuration")
    t.add_argument("--delete-exchange", action="store_true", help="also remove the course's exchange folder")
    t.add_argument("--delete-env", action="store_true", help="also remove the shared environment")
    return parser.parse_args(argv)


def setup_command(args: argparse.Namespace) -> Classroom:
    """`setup`: the class its options describe, set up (or checked and repaired)."""
    python = args.python or Path(sys.executable)
    if args.python is None and runnable_by_everyone(python):
        python = Path("/usr/bin/python3")
    room = Classroom(args.instructor, read_students(args.students), prefix=str(args.prefix.resolve()),
                     env=str(args.env.resolve()) if args.env else "", exchange=str(args.exchange.resolve()),
                     course_dir=str(args.course_dir.resolve()) if args.course_dir else "",
                     course_id=args.course_id,
                     hub_state=str(args.hub_state.resolve()) if args.hub_state else "",
                     bind_url=_bind_url(args.address), behind_proxy=args.behind_proxy,
                     hub_port=args.hub_port, proxy_api_port=args.proxy_api_port,
                     subdomain_host=args.subdomain_host,
                     ssl_cert=str(args.ssl_cert.resolve()) if args.ssl_cert else "",
                     ssl_key=str(args.ssl_key.resolve()) if args.ssl_key else "",
                     profile_script=str(args.profile_script))
    return setup(room, python, args.create_users)


def add_student_command(args: argparse.Namespace) -> Classroom:
    """`add-student`: the named students added to the class recorded under --prefix (accounts,
    private homes, their Jupyter configuration, runtime folders, the profile script, the hub's files)."""
    state = load_record(args.prefix)
    check_names(args.names)
    room = Classroom(**{**state, "students": [*state["students"], *args.names]})
    env_python = Path(room.env) / "bin" / "python"
    require_root()
    ensure_users(room, args.create_users)
    private_homes(room)
    _check_course_group(room, pwd.getpwnam(room.instructor).pw_gid)
    for name in args.names:
        user_config(room, env_python, name, instructor=False)
    runtime_dirs(room, args.names)
    profile_script(room)
    hub_files(room)
    room.todo.append("restart the hub (or add the users in its admin page) so that it lets them in")
    return room


def main(argv: list[str] | None = None) -> int:
    """Run one command; exit status 1 (the problem on stderr) when it fails."""
    args = parse_args(argv)
    try:
        if args.command == "setup":
            print_summary(setup_command(args))
        elif args.command == "add-student":
            print_summary(add_student_command(args))
        elif args.command == "teardown":
            for line in teardown(args.prefix, args.delete_exchange, args.delete_env):
                print(line)
            print("accounts, homes and the course directory were kept")
    except (ToolError, subprocess.CalledProcessError) as err:
        detail = getattr(err, "stderr", "") or ""
        print(f"{args.command} failed: {err} {detail}".strip(), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
