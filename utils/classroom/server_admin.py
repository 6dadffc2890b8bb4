"""python -m utils.classroom setup|add-student|teardown: a class on one Linux server, as root.

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
     tools, JupyterHub; pip's own settings, PIP_FIND_LINKS and the like, apply), its own copy of
     the course package (not an editable install: the clone may be private, moved or deleted;
     built from a temporary copy, so nothing is written into the clone), the students' private
     submit (exchange.py) and the users' configuration writer (user_jupyter.py);
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
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

from utils.classroom.environment import runnable_by_everyone
from utils.classroom.room import (COURSE_ID, DEFAULT_BIND_URL, DEFAULT_EXCHANGE, DEFAULT_HUB_PORT, DEFAULT_PREFIX,
                                  DEFAULT_PROFILE_SCRIPT, DEFAULT_PROXY_API_PORT, Classroom, ToolError, read_students)
from utils.classroom.hub import default_subdomain_host
from utils.classroom.provision import add_student, setup
from utils.classroom.teardown import teardown


def print_summary(room: Classroom) -> None:
    print()
    print(f"class {room.course_id}: instructor {room.instructor}, {len(room.students)} student(s)")
    print(f"  environment  {room.env}")
    print(f"  exchange     {room.exchange} (course folder {Path(room.exchange) / room.course_id})")
    print(f"  course       {room.course_dir}")
    print(f"  hub config   {Path(room.prefix) / 'jupyterhub_config.py'} (state in {room.hub_state})")
    url = room.subdomain_host if room.subdomain_host and not room.behind_proxy else room.bind_url
    print(f"  hub URL      {url}/" + ("  (through the reverse proxy)" if room.behind_proxy else "")
          + (f"  (each user at {urlsplit(url).scheme}://NAME.{urlsplit(url).netloc}/)" if room.subdomain_host else ""))
    inside = f"{room.hub_address}:{room.hub_port} (the hub, TLS)" if room.hub_address else f"127.0.0.1:{room.hub_port} (the hub)"
    print(f"  hub inside   {inside}, 127.0.0.1:{room.proxy_api_port} (the proxy's API)")
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
                        "TLS certificate (docs/instructors.md); on loopback the default is http://class.localhost:PORT")
    s.add_argument("--one-origin", action="store_true",
                   help="serve every user's server on the hub's origin (paths /user/NAME/): a student's page opened "
                        "by the instructor could then read his pages (docs/threat-model-doors.md)")
    s.add_argument("--behind-proxy", action="store_true",
                   help="a reverse proxy with TLS on this server serves the hub, which stays on loopback")
    slurm = s.add_argument_group("each user's server as a Slurm job (docs/slurm.md)")
    slurm.add_argument("--slurm-partition", default=None,
                       help="spawn every user's server as a Slurm job on this partition (batchspawner's SlurmSpawner)")
    slurm.add_argument("--slurm-memory", default="4G", help="memory per server job (default 4G)")
    slurm.add_argument("--slurm-time", default="04:00:00", help="time limit per server job (default 04:00:00)")
    slurm.add_argument("--slurm-gres", default="", help="generic resources per server job, e.g. gpu:1 on a GPU partition")
    slurm.add_argument("--hub-address", default="",
                       help="this server's address on the cluster's network (an IP address or a name the compute nodes "
                            "resolve): the hub's API listens there, the servers on their nodes' addresses, all over TLS "
                            "with JupyterHub's own certificates (internal_ssl), so that servers run on other nodes; "
                            "default: the hub's API on loopback, every server's job on this node")
    slurm.add_argument("--shared-dir", type=Path, default=None,
                       help="the cluster's shared file system, mounted at the same path on every node: the exchange "
                            "defaults to DIR/exchange and --create-users makes homes under DIR/home")
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
    shared = args.shared_dir.resolve() if args.shared_dir else None
    exchange = args.exchange if shared is None or args.exchange != DEFAULT_EXCHANGE else shared / "exchange"
    slurm = {"partition": args.slurm_partition, "memory": args.slurm_memory, "time": args.slurm_time,
             "gres": args.slurm_gres} if args.slurm_partition else {}
    if args.python is None and runnable_by_everyone(python):
        python = Path("/usr/bin/python3")
    room = Classroom(args.instructor, read_students(args.students), prefix=str(args.prefix.resolve()),
                     env=str(args.env.resolve()) if args.env else "", exchange=str(exchange.resolve()),
                     course_dir=str(args.course_dir.resolve()) if args.course_dir else "",
                     course_id=args.course_id,
                     hub_state=str(args.hub_state.resolve()) if args.hub_state else "",
                     bind_url=_bind_url(args.address), behind_proxy=args.behind_proxy,
                     hub_port=args.hub_port, proxy_api_port=args.proxy_api_port,
                     subdomain_host=args.subdomain_host or default_subdomain_host(
                         _bind_url(args.address), args.behind_proxy, str(args.ssl_cert or ""), args.one_origin),
                     ssl_cert=str(args.ssl_cert.resolve()) if args.ssl_cert else "",
                     ssl_key=str(args.ssl_key.resolve()) if args.ssl_key else "",
                     profile_script=str(args.profile_script), slurm=slurm, hub_address=args.hub_address)
    return setup(room, python, args.create_users, shared / "home" if shared else None)


def main(argv: list[str] | None = None) -> int:
    """Run one command; exit status 1 (the problem on stderr) when it fails."""
    args = parse_args(argv)
    try:
        if args.command == "setup":
            print_summary(setup_command(args))
        elif args.command == "add-student":
            print_summary(add_student(args.prefix, args.names, args.create_users))
        elif args.command == "teardown":
            for line in teardown(args.prefix, args.delete_exchange, args.delete_env):
                print(line)
            print("accounts, homes and the course directory were kept")
    except (ToolError, subprocess.CalledProcessError) as err:
        detail = getattr(err, "stderr", "") or ""
        print(f"{args.command} failed: {err} {detail}".strip(), file=sys.stderr)
        return 1
    return 0
