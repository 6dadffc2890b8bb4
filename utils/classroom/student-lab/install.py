"""The students' environment (make lab): a requirements file, torch's CPU index asked once first.

requirements.txt adds torch's CPU index to pip's. Where that index cannot be reached (a campus
proxy, an offline mirror, a firewall), pip tries it again five times for every package it
resolves, with a `Retrying ...` line for each try: a quarter of an hour before anything is
installed. So one request asks the index first, with a short timeout and no retry. Where it does
not answer, one line says so and what it costs, and pip installs the same requirements without
that index: torch from PyPI, whose Linux x86_64 build carries NVIDIA's CUDA libraries.

    PYTHON utils/classroom/student-lab/install.py REQUIREMENTS [--index URL]

PYTHON is the student environment's own (pip installs into it, the course editable beside the
requirements); a requirements file without an index line (requirements-pins.txt, make lab
TORCH=gpu) is installed as it is. --index asks another CPU index in place of the file's (a
mirror; the tests, a closed port). Standard library only: it runs before anything is installed.
"""

from __future__ import annotations

import argparse
import platform
import re
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

ASK_TIMEOUT_S = 10
INDEX_LINE = re.compile(r"^\s*--extra-index-url[ =]\s*(\S+)\s*$")
INCLUDE_LINE = re.compile(r"^\s*(-r|-c|--requirement|--constraint)[ =]\s*(\S+)\s*$")
# --no-compile: pip byte-compiles every file it installs on one core (about 22 s of a 45 s install
# here, most of it torch modules a lesson never imports); Python compiles what a kernel imports the
# first time, into this environment, which is the student's own and writable.
PIP = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-compile"]


def unreachable(index: str, timeout_s: float = ASK_TIMEOUT_S) -> str | None:
    """Why the index's torch page cannot be read (one try, `timeout_s`), or None where it answers.
    Proxies come from the environment (HTTPS_PROXY, ...), as for pip."""
    url = index.rstrip("/") + "/torch/"
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as reply:
            reply.read(1)
        return None
    except urllib.error.HTTPError as err:
        return f"it answered HTTP {err.code}"
    except (urllib.error.URLError, OSError) as err:
        reason = getattr(err, "reason", err)
        if isinstance(reason, TimeoutError) or "timed out" in str(reason):
            return f"no answer in {timeout_s:g} s"
        return re.sub(r"^\[Errno -?\d+\] ", "", str(reason).strip()) or type(reason).__name__


def rewritten(requirements: Path, index: str | None, folder: Path) -> Path:
    """`requirements` with its index line replaced by `index` (None: left out), its includes made
    absolute, written into `folder`."""
    lines = []
    for line in requirements.read_text().splitlines():
        if INDEX_LINE.match(line):
            if index:
                lines.append(f"--extra-index-url {index}")
            continue
        include = INCLUDE_LINE.match(line)
        if include:
            line = f"{include[1]} {(requirements.parent / include[2]).resolve()}"
        lines.append(line)
    out = folder / requirements.name
    out.write_text("\n".join(lines) + "\n")
    return out


def torch_version(requirements: Path) -> str:
    """The torch pin the requirements reach (through their -r includes), or plain "torch"."""
    for line in requirements.read_text().splitlines():
        if re.match(r"^\s*torch==\S+", line):
            return line.split("#")[0].strip()
        include = INCLUDE_LINE.match(line)
        if include and include[1] in ("-r", "--requirement"):
            found = torch_version(requirements.parent / include[2])
            if found != "torch":
                return found
    return "torch"


def pypi_cost() -> str:
    if sys.platform == "linux" and platform.machine() == "x86_64":
        return "whose Linux x86_64 build carries NVIDIA's CUDA libraries (several GB more; the lessons run the same)"
    return "the same CPU build on this platform"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("requirements", type=Path)
    parser.add_argument("--index", default="", help="torch's CPU index in place of the file's (a mirror)")
    args = parser.parse_args(argv)
    req: Path = args.requirements
    if not req.is_file():
        print(f"{req}: no such requirements file", file=sys.stderr)
        return 2

    named = [m[1] for m in map(INDEX_LINE.match, req.read_text().splitlines()) if m]
    if len(named) > 1:
        print(f"{req}: more than one --extra-index-url line; expected torch's CPU index alone", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="student-env-") as folder:
        install = req
        if named:
            index = args.index or named[0]
            why = unreachable(index)
            if why is not None:
                print(f"torch's CPU index {index} cannot be reached ({why}): installing "
                      f"{torch_version(req)} from PyPI instead, {pypi_cost()}.", flush=True)
                install = rewritten(req, None, Path(folder))
            elif args.index:
                install = rewritten(req, index, Path(folder))
        # a requirements file's index is added to those of pip's own configuration
        return subprocess.call([*PIP, "-r", str(install), "-e", "."])


if __name__ == "__main__":
    sys.exit(main())
