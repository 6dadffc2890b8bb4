"""Where the class's kernels listen: Unix sockets in each user's own runtime folder, never loopback
TCP (where any user on the server could connect to a kernel's ports), and no debugger port."""

from __future__ import annotations

import json
import pwd
from pathlib import Path

from utils.classroom.owned import folder, root_file
from utils.classroom.room import MARK, Classroom, ToolError

# A Unix socket's path must stay under 108 bytes: kernel-UUID-ipc-N is 49.
SOCKET_PATH_MAX = 107

# The kernels' transport for every Jupyter program in the shared environment (its etc/jupyter,
# root's, read before each user's own ~/.jupyter): Unix sockets in the user's runtime folder. A
# user's own configuration can change it for her own kernels only. The files are the student Lab's
# (utils/classroom/student-lab: jupyter_config.py for every program; nbgrader's and nbconvert's, which
# name no connection file, give their sockets a path in the runtime folder).
KERNEL_CONFIG_DIR = Path(__file__).with_name("student-lab")
KERNEL_CONFIG = {name: f"{MARK} from utils/classroom/student-lab/{name}\n" + (KERNEL_CONFIG_DIR / name).read_text()
                 for name in ("jupyter_config.py", "nbgrader_config.py", "jupyter_nbconvert_config.py")}

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


def kernel_config(room: Classroom) -> None:
    """KERNEL_CONFIG in the environment's etc/jupyter, root's, 0644."""
    where = Path(room.env) / "etc" / "jupyter"
    for name, text in KERNEL_CONFIG.items():
        root_file(room, where / name, text, "kernels on Unix sockets in each user's runtime folder")


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
    run.parent.mkdir(parents=True, exist_ok=True)
    folder(room, run, uid=0, mode=0o711, what="each user's Jupyter runtime folder; nobody lists it")
    for name in names:
        pw = pwd.getpwnam(name)
        folder(room, run / str(pw.pw_uid), uid=pw.pw_uid, gid=pw.pw_gid, mode=0o700,
               what=f"{name}'s Jupyter runtime folder: kernels' connection files and sockets")
