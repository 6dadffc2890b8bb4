"""What of this interpreter the kernel's Python needs: the interpreter, site-packages and the folders
.pth files add (none holding a course root), and of the course only the `course` package, at the
path the editable-install finder or .pth file expects (`python_paths`, `kernel_python`); and the
packages of that environment a graded kernel never uses, shown to it as empty folders (`unused_packages`).

Found by reading the environment (finders are parsed, not imported), so that `mounts` can bind
exactly these read-only.
"""

from __future__ import annotations

import ast
import functools
import glob
import importlib.util
import os
import site
import sys
import sysconfig
from pathlib import Path

from utils.lessons import REPO


# Installed beside ipykernel, never used by a graded kernel: ipykernel imports its debugger (debugpy,
# with pydevd) at every start where it can, about 0.08 CPU-s a kernel, and nothing debugs a kernel
# that grades a submission. Hidden, ipykernel starts without a debugger, as it does where debugpy
# is not installed.
UNUSED = ("debugpy",)


def _site_dirs() -> list[str]:
    dirs = list(site.getsitepackages())
    user_site = site.getusersitepackages()
    if isinstance(user_site, str):
        dirs.append(user_site)
    return [d for d in dirs if os.path.isdir(d)]


def _finder_mappings(site_dir: str) -> dict[str, str]:
    """{package: folder} of the setuptools editable-install finders in `site_dir` (read, not imported)."""
    found = {}
    for path in glob.glob(os.path.join(site_dir, "__editable__*finder.py")):
        try:
            tree = ast.parse(Path(path).read_text())
        except (OSError, SyntaxError, ValueError):
            continue
        for node in tree.body:
            target = node.target if isinstance(node, ast.AnnAssign) else (
                node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None)
            if isinstance(target, ast.Name) and target.id == "MAPPING" and node.value is not None:
                try:
                    found.update({str(k): str(v) for k, v in ast.literal_eval(node.value).items()})
                except ValueError:
                    pass
    return found


def _pth_folders(site_dir: str) -> list[str]:
    """The folders that the .pth files in `site_dir` add to sys.path (lines that are not imports)."""
    found = []
    for path in glob.glob(os.path.join(site_dir, "*.pth")):
        try:
            lines = Path(path).read_text().splitlines()
        except (OSError, UnicodeDecodeError):
            continue
        for line in lines:
            line = line.strip()
            if line and not line.startswith(("#", "import ", "import\t")):
                folder = os.path.join(site_dir, line)
                if os.path.isdir(folder):
                    found.append(os.path.normpath(folder))
    return found


def course_package_paths() -> list[str]:
    """Where the kernel's Python will import `course` from: the editable-install finders' mapping,
    `course/` under a .pth folder, else where this Python finds it."""
    found = []
    for site_dir in _site_dirs():
        mapped = _finder_mappings(site_dir).get("course")
        if mapped and os.path.isdir(mapped):
            found.append(mapped)
        found += [os.path.join(f, "course") for f in _pth_folders(site_dir)
                  if os.path.isfile(os.path.join(f, "course", "__init__.py"))]
    if not found:
        spec = importlib.util.find_spec("course")
        if spec is not None and spec.submodule_search_locations:
            found += list(spec.submodule_search_locations)
    return sorted({os.path.normpath(p) for p in found})


def _holds_a_course(folder: str) -> bool:
    return any(os.path.exists(os.path.join(folder, name))
               for name in ("course/__init__.py", "nbgrader_config.py", "source", "gradebook.db", "utils"))


def _link_chain(path: str) -> list[str]:
    """`path` and every link it goes through to the file (each is shown, a link as the same link)."""
    chain = [os.path.abspath(path)]
    while os.path.islink(chain[-1]) and len(chain) < 40:
        chain.append(os.path.normpath(os.path.join(os.path.dirname(chain[-1]), os.readlink(chain[-1]))))
    return chain


def _interpreter_files() -> set[str]:
    """The interpreter itself: its standard library, its executable and its shared library (not the
    rest of its prefix, which may be /usr/local, holding the nbgrader exchange)."""
    found = {sysconfig.get_path("stdlib"), sysconfig.get_path("platstdlib"), *_link_chain(sys.executable)}
    libdir, soname = sysconfig.get_config_var("LIBDIR"), sysconfig.get_config_var("INSTSONAME")
    if libdir and soname and sysconfig.get_config_var("Py_ENABLE_SHARED"):
        found.add(os.path.join(libdir, soname))
    if libdir and os.path.realpath(sys.base_prefix) != "/usr":
        # an interpreter of its own prefix (conda, /usr/local, pyenv): its extension modules link
        # the prefix's own shared libraries (libffi for ctypes, libssl, libz, libsqlite3)
        found.update(glob.glob(os.path.join(libdir, "lib*.so*")))
    if sys.prefix != sys.base_prefix:   # a virtual environment: its bin/python, pyvenv.cfg, packages
        found.add(sys.prefix)
    return {p for p in found if p and os.path.exists(p)}


def python_paths(*course_roots: str) -> list[str]:
    """What the kernel's Python needs (bound read-only): the interpreter, site-packages, the folders
    the .pth files add (never one holding a course root: of that only the `course` package) and the
    `course` package. Nothing that is or holds a course root."""
    paths = _interpreter_files()
    for site_dir in _site_dirs():
        paths.add(site_dir)
        paths.update(f for f in _pth_folders(site_dir) if not _holds_a_course(f))
    roots = [os.path.realpath(r) for r in course_roots]
    safe = set()
    for p in paths | {os.path.realpath(p) for p in paths}:
        real = os.path.realpath(p)
        if os.path.exists(p) and not any(real == r or r.startswith(real.rstrip("/") + "/") for r in roots):
            safe.add(p)
    return _outermost(safe | set(course_package_paths()))


def _outermost(paths) -> list[str]:
    """`paths` less those inside another of them (already shown), sorted."""
    kept: list[str] = []
    for p in sorted(paths):
        if not any(p.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(p)
    return kept


def kernel_python(*folders: str) -> list[str]:
    """`python_paths` of this interpreter, never showing the checkout, nbgrader's folder or
    `folders` (the kernel's own, and SandboxKernelManager.hidden)."""
    roots = [r for r in (str(REPO), os.getcwd(), *folders) if r]
    return python_paths(*roots)


@functools.cache
def unused_packages() -> tuple[str, ...]:
    """The folders of the UNUSED packages this interpreter would import (found, not imported)."""
    found = []
    for name in UNUSED:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        if spec is not None and spec.submodule_search_locations:
            found += [os.path.normpath(p) for p in spec.submodule_search_locations if os.path.isdir(p)]
    return tuple(found)
