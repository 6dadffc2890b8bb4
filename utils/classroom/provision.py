"""`setup` and `add-student`: a class on one Linux server (JupyterHub with Unix users and nbgrader's
exchange), laid out as root, each step in its own module (the map: utils/classroom/__init__.py).

`setup` is safe to run again (it changes only what is not yet as it should be) and does, in order:
the checkout closed (course_folder.py); the accounts and private homes (users.py); the shared
environment (environment.py); the exchange (exchange_layout.py); the instructor's course directory
(course_folder.py); each user's Jupyter configuration (user_config.py); the kernels' sockets, spec
and runtime folders (kernels.py); the environment on PATH in login shells (user_config.py); the
hub's state, the class record and the hub's configuration (hub.py); the quotas it cannot set
(disk.py). Then it returns the class with what it changed and what is left to the administrator.
"""

from __future__ import annotations

import json
import pwd
from pathlib import Path
from urllib.parse import urlsplit

from utils.classroom.course_folder import close_checkout, course_directory
from utils.classroom.disk import quota_todo
from utils.classroom.environment import shared_env
from utils.classroom.exchange_layout import exchange
from utils.classroom.hub import check_bind, check_hub_address, check_ports, hub_files, hub_state
from utils.classroom.kernels import kernel_config, kernel_spec, runtime_dirs
from utils.classroom.room import Classroom, ToolError, check_names, load_record, require_root
from utils.classroom.user_config import profile_script, user_config
from utils.classroom.users import check_course_group, ensure_users, home_of, private_homes


def setup(room: Classroom, python: Path, create_users: bool = False, home_base: Path | None = None) -> Classroom:
    require_root()
    check_names([room.instructor, *room.students])
    check_bind(room)
    check_hub_address(room)
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
    room.todo[:0] = [*_hub_todo(room, hub), *_slurm_todo(room),
                     f"back up {room.course_dir} (source/ and the gradebook hold the answers and the grades) and "
                     f"the exchange {room.exchange}",
                     f"release, collect and grade as {room.instructor}, in {room.course_dir}: see docs/instructors.md"]
    return room


def _hub_todo(room: Classroom, hub: Path) -> list[str]:
    """What is left to do about the hub: start it, and what its address and origins leave open."""
    todo = [f"start the hub as root: cd {room.hub_state} && {Path(room.env) / 'bin' / 'jupyterhub'} -f {hub} "
            "(e.g. as a systemd service: docs/instructors.md)"]
    if not room.subdomain_host and (room.behind_proxy or room.ssl_cert):
        todo.append("WARNING: the class is on the network and every user's server shares the hub's origin (one "
                    "host, paths /user/NAME/): a page of a student's server that the instructor opens in the browser "
                    "he is logged in with can read his pages and act as him. Rerun with --subdomain-host "
                    "https://HOST (wildcard DNS *.HOST and a wildcard certificate) for an origin per user, or never "
                    "open a link into a student's server in that browser (docs/instructors.md, threat model)")
    elif not room.subdomain_host:
        todo.append("every user's server shares the hub's origin (one host, paths /user/NAME/, --one-origin): a "
                    "student's page opened by the instructor shares the instructor's browser origin; leave out "
                    "--one-origin for an origin per user (docs/threat-model-doors.md)")
    elif urlsplit(room.subdomain_host).hostname.endswith(".localhost"):
        todo.append(f"each user's server has an origin of its own, {room.subdomain_host.replace('://', '://NAME.')}/: "
                    "browsers resolve *.localhost to the machine they run on, so open the class in a browser on this "
                    "server, or through ssh -L with the same port number on the laptop")
    if room.behind_proxy:
        todo.append(f"serve the hub through the reverse proxy with TLS on this server, to {room.bind_url} "
                    "(docs/instructors.md shows nginx's configuration)")
    elif not room.ssl_cert:
        todo.append(f"the hub listens on {room.bind_url} (this server alone): to open it to the class, rerun with "
                    "--address HOST:PORT --ssl-cert FILE --ssl-key FILE, or --behind-proxy and a reverse proxy with TLS")
    return todo


def _slurm_todo(room: Classroom) -> list[str]:
    """Where every user's server is a Slurm job: what every compute node must share with this server."""
    if not room.slurm:
        return []
    gres = f", --gres={room.slurm['gres']}" if room.slurm.get("gres") else ""
    where = (f"the hub's API listens on {room.hub_address}:{room.hub_port} over TLS (JupyterHub's internal_ssl): "
             f"the compute nodes must reach it there, and this server must reach each node's address (Slurm's "
             f"NodeAddr) on any port" if room.hub_address else
             "the hub's API stays on loopback, so the servers' jobs must run on this node (--hub-address opens it "
             "to the cluster's network, over TLS)")
    return [f"each user's server is a Slurm job (partition {room.slurm['partition']}, {room.slurm['memory']}, "
            f"{room.slurm['time']}{gres}), started on this server's hub: the compute nodes must mount the homes, "
            f"{room.exchange}, {room.env} and {room.run_dir} at the same paths (docs/slurm.md); {where}"]


def add_student(prefix: Path, names: list[str], create_users: bool = False) -> Classroom:
    """The named students added to the class recorded under `prefix` (accounts, private homes,
    their Jupyter configuration, runtime folders, the profile script, the hub's files)."""
    state = load_record(prefix)
    check_names(names)
    room = Classroom(**{**state, "students": list(dict.fromkeys([*state["students"], *names]))})
    env_python = Path(room.env) / "bin" / "python"
    require_root()
    ensure_users(room, create_users)
    private_homes(room)
    check_course_group(room, pwd.getpwnam(room.instructor).pw_gid)
    for name in names:
        user_config(room, env_python, name, instructor=False)
    runtime_dirs(room, names)
    profile_script(room)
    hub_files(room)
    room.todo.append("restart the hub (or add the users in its admin page) so that it lets them in")
    return room
