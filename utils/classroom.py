"""Set up a class on one Linux server (JupyterHub with Unix users and nbgrader's exchange), as root.

    python -m utils.classroom setup --instructor NAME --students FILE [options]
    python -m utils.classroom add-student NAME... [options]
    python -m utils.classroom teardown [--delete-exchange] [--delete-env] [options]

`setup` is safe to run again (it changes only what is not yet as it should be) and does, in order:

  1. the accounts: every student and the instructor must exist (--create-users makes the
     missing ones with a locked password; set passwords with passwd or chpasswd);
  2. every home folder mode 0700, so no student can read another's work, nbgrader's submission
     cache (the secret that names their feedback) or the instructor's course;
  3. one Python environment for everyone outside any private home (default
     /opt/prefill-decode/env): the course's pins (requirements.txt), JupyterHub's pin
     (requirements-dev.txt) and the course package, built from a Python every user can run;
  4. nbgrader's exchange (default /usr/local/share/nbgrader/exchange, nbgrader 0.9.6's
     Exchange.root): the root root-owned, mode 1777, and the course's folder in it (with inbound,
     outbound, feedback) created and owned by the instructor before any student can take the name;
  5. the instructor's course directory (default ~INSTRUCTOR/prefill-decode, a copy of this
     repository when missing), owned by the instructor, mode 0700;
  6. each user's own Jupyter configuration (~/.jupyter, written as that user): nbgrader's course
     id and exchange root; students without the instructor extensions (formgrader, Create
     Assignment, course list), the instructor with them and with the course directory;
  7. the class record (PREFIX/classroom.json) and the example JupyterHub configuration
     (PREFIX/jupyterhub_config.py, PAM logins and one local process per user);

then prints what it did and what is left to the administrator. `add-student` adds accounts to an
existing class; `teardown` removes what setup wrote in the users' configuration and, when asked,
the exchange and the environment (never homes, accounts or the course directory).
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import re
import shutil
import stat
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

from utils.coursedir import REPO, ToolError

COURSE_ID = "prefill-decode"
DEFAULT_PREFIX = Path("/opt/prefill-decode")
DEFAULT_EXCHANGE = Path("/usr/local/share/nbgrader/exchange")   # nbgrader 0.9.6's Exchange.root
HUB_CONFIG_EXAMPLE = Path(__file__).with_name("classroom_jupyterhub_config.py")

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
    actions: list[str] = field(default_factory=list)     # what this run changed
    todo: list[str] = field(default_factory=list)        # left to the administrator

    def __post_init__(self):
        self.env = self.env or str(Path(self.prefix) / "env")

    @property
    def record(self) -> Path:
        return Path(self.prefix) / "classroom.json"

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


def pinned_requirements() -> list[str]:
    """The course's pins (requirements.txt) and JupyterHub's (requirements-dev.txt)."""
    pins = [l.split("#")[0].strip() for l in (REPO / "requirements.txt").read_text().splitlines()]
    dev = [l.split("#")[0].strip() for l in (REPO / "requirements-dev.txt").read_text().splitlines()]
    return [p for p in pins if "==" in p] + [p for p in dev if p.startswith("jupyterhub==")]


def missing_pins(python: Path, pins: list[str]) -> list[str]:
    code = ("import json, sys\nfrom importlib.metadata import version, PackageNotFoundError\n"
            "out = []\nfor pin in json.loads(sys.argv[1]):\n    name, want = pin.split('==')\n"
            "    try:\n        ok = version(name).split('+')[0] == want\n    except PackageNotFoundError:\n        ok = False\n"
            "    out.append(None if ok else pin)\n"
            "try:\n    import course\nexcept ImportError:\n    out.append('the course package')\n"
            "print(json.dumps([p for p in out if p]))")
    res = subprocess.run([str(python), "-c", code, json.dumps(pins)], capture_output=True, text=True)
    if res.returncode != 0:
        raise ToolError(f"{python} does not run: {res.stderr.strip()[-500:]}")
    return json.loads(res.stdout)


def shared_env(room: Classroom, base_python: Path) -> Path:
    """The environment every user's server and kernels run in: created when missing, completed
    when a pin is missing, left alone otherwise."""
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
        res = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                              "-r", str(REPO / "requirements.txt"), *[p for p in pins if p.startswith("jupyterhub==")],
                              str(REPO)], capture_output=True, text=True)
        if res.returncode != 0:
            raise ToolError(f"pip install into {env} failed:\n{res.stdout[-1500:]}{res.stderr[-1500:]}")
        room.did(f"{env}: installed the course's pins and the course package")
    blocked = runnable_by_everyone(python)
    if blocked:
        raise ToolError(f"the environment {env} cannot be run by other users ({blocked} is closed to them)")
    return python


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
                                        "autograded", "submitted", "feedback", "gradebook.db", "grades.csv")
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
    if room.instructor in room.students:
        raise ToolError(f"{room.instructor} is both the instructor and a student")
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
    hub = hub_files(room)
    room.todo[:0] = [
        f"start the hub as root: {Path(room.env) / 'bin' / 'jupyterhub'} -f {hub} (from a folder only root "
        "can read: it keeps its cookie secret and database there), e.g. as a systemd service",
        "put TLS in front of the hub (a reverse proxy with a certificate, or JupyterHub.ssl_cert and ssl_key); "
        "never serve PAM passwords over plain HTTP",
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
    print(f"  hub config   {Path(room.prefix) / 'jupyterhub_config.py'}")
    print(f"changed this run: {len(room.actions)} (nothing means everything was already in place)")
    print("left to you:")
    for item in room.todo:
        print(f"  - {item}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prefix", type=Path, default=DEFAULT_PREFIX,
                        help=f"where the environment, the class record and the hub config live (default {DEFAULT_PREFIX})")
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("setup", help="set up (or check and repair) the class")
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
    a = sub.add_parser("add-student", help="add students to the class set up under --prefix")
    a.add_argument("names", nargs="+")
    a.add_argument("--create-users", action="store_true")
    t = sub.add_parser("teardown", help="remove what setup wrote into users' configuration")
    t.add_argument("--delete-exchange", action="store_true", help="also remove the course's exchange folder")
    t.add_argument("--delete-env", action="store_true", help="also remove the shared environment")
    args = parser.parse_args(argv)
    try:
        if args.command == "setup":
            python = args.python or Path(sys.executable)
            if args.python is None and runnable_by_everyone(python):
                python = Path("/usr/bin/python3")
            room = Classroom(args.instructor, read_students(args.students), prefix=str(args.prefix.resolve()),
                             env=str(args.env.resolve()) if args.env else "", exchange=str(args.exchange.resolve()),
                             course_dir=str(args.course_dir.resolve()) if args.course_dir else "",
                             course_id=args.course_id)
            print_summary(setup(room, python, args.create_users))
        elif args.command == "add-student":
            state = load_record(args.prefix)
            check_names(args.names)
            room = Classroom(**{**state, "students": [*state["students"], *args.names]})
            env_python = Path(room.env) / "bin" / "python"
            require_root()
            ensure_users(room, args.create_users)
            private_homes(room)
            for name in args.names:
                user_config(room, env_python, name, instructor=False)
            hub_files(room)
            room.todo.append("restart the hub (or add the users in its admin page) so that it lets them in")
            print_summary(room)
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
