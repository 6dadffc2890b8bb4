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


@functools.lru_cache(maxsize=1)
def library_versions() -> str:
    """Python's and every installed distribution's version (read once per process: 0.2 s)."""
    return "\n".join([sys.version, *sorted(f"{d.metadata['Name']}=={d.version}" for d in metadata.distributions())])
