"""What decides a grade besides the submission: the code that grades (the `course` package the
kernels import, the course's tools in utils/) and the installed libraries. A worker whose code
differs from the grader's refuses (dask/worker_check.py); a run that stopped keeps only what was
recorded under the same code (journal.py); the reference's cache key covers the libraries
(reference_run.py)."""

from __future__ import annotations

import functools
import hashlib
import sys
from importlib import metadata, util
from pathlib import Path

import utils


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def course_files() -> list[tuple[str, Path]]:
    """(path inside the package, path) of every file of the `course` package the kernels import."""
    spec = util.find_spec("course")
    roots = [Path(r) for r in (spec.submodule_search_locations or [])] if spec else []
    return sorted((p.relative_to(r).as_posix(), p) for r in roots for p in r.rglob("*")
                  if p.is_file() and "__pycache__" not in p.parts)


def tools_files(tools: Path | None = None) -> list[tuple[str, Path]]:
    """(name, path) of every file of the course's tools that grade (`utils/`, where this Python
    imports them from, or under `tools`): the graders, the sandbox, the work folders."""
    folder = Path(tools) / "utils" if tools is not None else Path(utils.__file__).resolve().parent
    return [(f"utils/{p.relative_to(folder).as_posix()}", p) for p in sorted(folder.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"]


def fingerprint(tools: Path | None = None) -> dict[str, str]:
    """{name: sha256} of the code that grades: the files of the `course` package this Python
    imports (the one the kernels get) and the course's tools (`utils/`, tools_files). The lesson's
    files, the reference and the submissions travel with the tasks, so they cannot differ."""
    files = {f"course package: {name}": _sha(path) for name, path in course_files()}
    files.update((name, _sha(path)) for name, path in tools_files(tools))
    return files


def _site_folders() -> list[str]:
    """The library folders on the path (site-packages, and Debian's dist-packages), each once, in
    import order: not the checkout, the tests' folders or setuptools' vendored packages."""
    return list(dict.fromkeys(p for p in sys.path if Path(p).name in ("site-packages", "dist-packages")))


@functools.lru_cache(maxsize=1)
def library_versions() -> str:
    """Python's and every distribution's version installed in the library folders on the path (read
    once per process: 0.2 s), each name once. Not metadata.distributions() over sys.path: that
    counts whatever a process happens to have there (a checkout's *.egg-info once per time the
    checkout is on the path, setuptools' vendored packages once setuptools is imported), so two
    processes of the same environment keyed the same reference differently and every work folder
    ran it again."""
    seen: dict[str, str] = {}
    for dist in metadata.distributions(path=_site_folders()):
        name = dist.metadata["Name"]
        if name:
            seen.setdefault(name.lower().replace("_", "-"), f"{name}=={dist.version}")
    return "\n".join([sys.version, *sorted(seen.values())])
