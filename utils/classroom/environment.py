"""The class's one Python environment (default PREFIX/env), outside any private home: made when
missing from a Python every user can run, the class server's requirements installed
(requirements-classroom.txt: the course's pins, the instructor's tools, the hub; pip's own
settings such as PIP_FIND_LINKS or PIP_INDEX_URL apply), its own copy of the `course` package
(not an editable install: the clone may be private, moved or deleted; built from a temporary copy,
so nothing is written into the clone), and the two modules the users run from it: the students'
private submit (exchange.py) and each user's Jupyter settings (user_jupyter.py)."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

from utils.classroom.room import REPO, Classroom, ToolError

CLASS_REQUIREMENTS = "requirements-classroom.txt"   # the class server's list (tests/test_requirements.py)
PROBE = Path(__file__).with_name("env_probe.py")
# this folder's modules that the users run from the environment, by the names they have there
ENV_MODULES = {"exchange.py": "prefill_decode_exchange", "user_jupyter.py": "prefill_decode_user_jupyter"}
EXCHANGE_MODULE_NAME = ENV_MODULES["exchange.py"]
USER_JUPYTER_MODULE = ENV_MODULES["user_jupyter.py"]


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


def probe(python: Path, pins: list[str] | None = None) -> dict:
    """env_probe.py's answer about `python`'s environment (see there)."""
    res = subprocess.run([str(python), "-I", str(PROBE), json.dumps(pins or [])], capture_output=True, text=True,
                         cwd="/")
    if res.returncode != 0:
        raise ToolError(f"{python} does not run: {res.stderr.strip()[-500:]}")
    return json.loads(res.stdout)


def missing_pins(python: Path, pins: list[str]) -> list[str]:
    return probe(python, pins)["missing"]


def _package_files(folder: Path) -> dict[str, bytes]:
    """The package's modules (what pyproject.toml installs: course/*.py), by path."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*.py"))
            if p.is_file() and "__pycache__" not in p.parts}


def course_copy_state(python: Path) -> str | None:
    """None when `python` imports `course` from its own environment, as a copy identical to this
    checkout's course/; else what is wrong (missing, an editable install pointing elsewhere, stale)."""
    found = probe(python)
    if not found["course"]:
        return "not installed"
    if not found["inside"]:
        return f"imported from {found['course']}, outside the environment (an editable install?)"
    if _package_files(Path(found["course"])) != _package_files(REPO / "course"):
        return f"the copy in {found['course']} differs from {REPO / 'course'}"
    return None


def without_scripts(pyproject: str) -> str:
    """pyproject.toml's text without its [project.scripts] table and the command's starter module."""
    text = re.sub(r"(?ms)^\[project\.scripts\]\n.*?(?=^\[)", "", pyproject)
    return re.sub(r"(?m)^py-modules = .*\n", "", text)


def install_course(python: Path) -> None:
    """Install the `course` package into `python`'s environment as a copy (not an editable install
    pointing at this checkout), built from a temporary copy so that nothing (build/, *.egg-info)
    is written into the checkout. Only `course` is (re)installed; its dependencies are the pins'."""
    with tempfile.TemporaryDirectory(prefix="course-build-") as tmp:
        src = Path(tmp) / "src"
        src.mkdir()
        # `course` alone: the command (its starter prefill_decode.py) runs utils/, which stays with
        # the course directory
        (src / "pyproject.toml").write_text(without_scripts((REPO / "pyproject.toml").read_text()))
        shutil.copytree(REPO / "course", src / "course", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        # setuptools able to build a wheel already in the environment: no download (else pip fetches it)
        args = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps",
                "--force-reinstall", "--no-cache-dir", *(["--no-build-isolation"] if probe(python)["builds"] else []),
                str(src)]
        res = subprocess.run(args, capture_output=True, text=True, cwd=tmp, env={**os.environ, "TMPDIR": tmp})
        if res.returncode != 0:
            raise ToolError(f"installing the course package into {python} failed:\n{res.stdout[-1500:]}{res.stderr[-1500:]}")


def env_modules(room: Classroom, python: Path) -> None:
    """ENV_MODULES copied into the environment's site-packages (root's, 0644) when they differ."""
    purelib = Path(probe(python)["purelib"])
    for name, module in ENV_MODULES.items():
        source, target = Path(__file__).with_name(name), purelib / f"{module}.py"
        if not target.exists() or target.read_bytes() != source.read_bytes():
            shutil.copyfile(source, target)
            os.chmod(target, 0o644)
            room.did(f"{target}: from {name}")


def shared_env(room: Classroom, base_python: Path) -> Path:
    """The environment every user's server and kernels run in: created when missing, completed
    when a pin is missing, its own copy of the course package refreshed when it differs from this
    checkout's; left alone otherwise. It does not depend on this checkout afterwards."""
    env = Path(room.env)
    python = env / "bin" / "python"
    if not python.exists():
        blocked = runnable_by_everyone(base_python)
        if blocked:
            raise ToolError(f"{base_python} cannot be run by other users ({blocked} is closed to them); "
                            "pass --python with an interpreter outside any private home, e.g. /usr/bin/python3")
        env.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([str(base_python), "-m", "venv", str(env)], check=True)
        room.did(f"created the environment {env} from {base_python}")
    missing = missing_pins(python, pinned_requirements())
    if missing:
        print(f"  installing into {env}: {', '.join(missing)} (minutes)", flush=True)
        with tempfile.TemporaryDirectory(prefix="classroom-pip-") as tmp:
            res = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                                  "--no-compile", "-r", str(REPO / CLASS_REQUIREMENTS)],
                                 capture_output=True, text=True, cwd=tmp)
        if res.returncode != 0:
            raise ToolError(f"pip install into {env} failed:\n{res.stdout[-1500:]}{res.stderr[-1500:]}")
        # The byte code, on every core at once (pip compiles one file at a time); the sandboxed
        # kernels cannot write __pycache__ into the environment. As with pip, a file this Python
        # cannot compile is left as it is.
        subprocess.run([str(python), "-m", "compileall", "-q", "-j0", str(env / "lib")], capture_output=True)
        room.did(f"{env}: installed the class server's requirements ({CLASS_REQUIREMENTS})")
    wrong = course_copy_state(python)
    if wrong:
        install_course(python)
        room.did(f"{env}: installed its own copy of the course package (was: {wrong})")
    env_modules(room, python)
    blocked = runnable_by_everyone(python)
    if blocked:
        raise ToolError(f"the environment {env} cannot be run by other users ({blocked} is closed to them)")
    return python
