"""What each user of the class starts with: their own Jupyter configuration (~/.jupyter, written
as that user by user_jupyter.py from the environment: nbgrader's course id and exchange root;
students without the instructor extensions and with the private submit, the instructor with the
extensions and the course directory), and the environment first on PATH in the class's login
shells (/etc/profile.d), with each user's Jupyter runtime folder."""

from __future__ import annotations

import json
from pathlib import Path

from utils.classroom.environment import EXCHANGE_MODULE_NAME, USER_JUPYTER_MODULE
from utils.classroom.owned import root_file
from utils.classroom.room import MARK, Classroom, ToolError
from utils.classroom.users import as_user

# nbgrader's extensions only instructors use: hidden from students in their own ~/.jupyter.
INSTRUCTOR_LAB_EXTENSIONS = ["@jupyter/nbgrader:formgrader", "@jupyter/nbgrader:create-assignment",
                             "@jupyter/nbgrader:course-list"]
INSTRUCTOR_SERVER_EXTENSIONS = ["nbgrader.server_extensions.formgrader",
                                "nbgrader.server_extensions.course_list"]


def spec(instructor: bool, nbgrader_config: str = "") -> dict:
    return {"instructor": instructor, "lab": INSTRUCTOR_LAB_EXTENSIONS, "server": INSTRUCTOR_SERVER_EXTENSIONS,
            "mark": MARK, "nbgrader_config": nbgrader_config}


def run_as(name: str, python: Path, action: str, what: dict):
    """user_jupyter.py's `action` (write, undo) run as `name` from the environment of `python`."""
    return as_user(name, [str(python), "-I", "-m", USER_JUPYTER_MODULE, action, json.dumps(what)])


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
    res = run_as(name, python, "write", spec(instructor, "\n".join(lines) + "\n"))
    if res.returncode != 0:
        raise ToolError(f"writing {name}'s Jupyter configuration failed: {res.stderr.strip()[-800:]}")
    out = res.stdout.strip().splitlines()
    for line in out[:-1]:
        if line.startswith("KEPT "):
            room.todo.append(f"{line[5:]} was not written by this command and was kept: check that it names "
                             f"course {room.course_id} and exchange {room.exchange}")
    for path in json.loads(out[-1]):
        room.did(f"wrote {path} ({'instructor' if instructor else 'student'})")


def profile_script(room: Classroom) -> None:
    """The shared environment first on PATH in the class's login shells (JupyterLab's terminals
    are login shells, and /etc/profile resets PATH): python, jupyter, nbgrader and the course's
    commands are found there. Only for the class's users."""
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
    root_file(room, Path(room.profile_script), text, f"{bin_} on PATH in the class's login shells and terminals")
