"""The students' environment (make lab): a requirements file, torch's CPU index asked once first.

requirements.txt adds torch's CPU index to pip's. Where that index cannot be reached (a campus
proxy, an offline mirror, a firewall), pip tries it again five times for every package it
resolves, with a `Retrying ...` line for each try: a quarter of an hour before anything is
installed. So one request asks the index first, with a short timeout and no retry. Where it does
not answer, one line says so, and pip installs the same requirements without that index: torch
from PyPI, whose build depends on the platform and on pip's configuration (pypi.org's for Linux
x86_64 is a CUDA build that brings NVIDIA's CUDA libraries; a mirror may serve the CPU build). Once
it is in place, a second line says which build landed and how much it holds, read from what was
installed (torch/version.py, the nvidia-* distributions' records), not promised beforehand.

    PYTHON utils/classroom/student-lab/install.py REQUIREMENTS [--index URL]

PYTHON is the student environment's own (pip installs into it, the course editable beside the
requirements); a requirements file without an index line (requirements-pins.txt, make lab
TORCH=gpu) is installed as it is. --index asks another CPU index in place of the file's (a
mirror; the tests, a closed port). Standard library only: it runs before anything is installed.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.metadata
import re
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

ASK_TIMEOUT_S = 10
SITE: list[str] | None = None  # where installed_torch looks (None: sys.path, where pip installed)
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


def _size(dist: importlib.metadata.Distribution) -> int:
    """Bytes of a distribution's files, from its RECORD (each file's size on disk where it has none)."""
    total = 0
    for file in dist.files or []:
        if file.size is not None:
            total += file.size
        else:
            try:
                total += file.locate().stat().st_size
            except OSError:
                pass
    return total


def _gb(nbytes: int) -> str:
    return f"{nbytes / 1e9:.1f} GB" if nbytes >= 1e8 else f"{nbytes / 1e6:.0f} MB"


def _torch_cuda(dist: importlib.metadata.Distribution) -> str | None:
    """torch.version.cuda of an installed torch, read from its torch/version.py without importing it."""
    try:
        text = dist.locate_file("torch/version.py").read_text()
    except OSError:
        return None
    found = re.search(r"^cuda\b[^=\n]*=\s*(.+?)\s*$", text, flags=re.M)
    try:
        return ast.literal_eval(found[1]) if found else None
    except (ValueError, SyntaxError):
        return None


def installed_torch(path: list[str] | None = None) -> str:
    """What is now installed (in `path`; default SITE, else this Python's sys.path): torch's version and build with its size, and
    NVIDIA's CUDA libraries beside it (the nvidia-* distributions), how many and their size."""
    importlib.invalidate_caches()
    torch, nvidia = None, []
    for dist in importlib.metadata.distributions(path=path or SITE or sys.path):
        name = re.sub(r"[-_.]+", "-", dist.metadata["Name"] or "").lower()
        if name == "torch" and torch is None:
            torch = dist
        elif name.startswith("nvidia-"):
            nvidia.append(dist)
    if torch is None:
        return "torch is not installed"
    cuda = _torch_cuda(torch)
    build = f"a CUDA {cuda} build" if cuda else "a CPU-only build"
    said = f"torch {torch.version} installed, {build} ({_gb(_size(torch))})"
    if not nvidia:
        return f"{said}, without NVIDIA's CUDA libraries (no nvidia-* package)"
    return (f"{said}, with NVIDIA's CUDA libraries: {len(nvidia)} nvidia-* packages, "
            f"{_gb(sum(map(_size, nvidia)))} (the lessons run the same without them)")


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
        install, from_pypi = req, False
        if named:
            index = args.index or named[0]
            why = unreachable(index)
            if why is not None:
                print(f"torch's CPU index {index} cannot be reached ({why}): installing "
                      f"{torch_version(req)} from PyPI instead (its build is named once it is in place).",
                      flush=True)
                install, from_pypi = rewritten(req, None, Path(folder)), True
            elif args.index:
                install = rewritten(req, index, Path(folder))
        # a requirements file's index is added to those of pip's own configuration
        status = subprocess.call([*PIP, "-r", str(install), "-e", "."])
    if from_pypi and status == 0:
        print(f"From PyPI: {installed_torch()}.", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
