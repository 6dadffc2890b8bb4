"""The reference run: what the reference solution observes, for Verdicts to judge against
(the step ReferenceObservations, steps/reference_observations.py, puts it into nbgrader's resources).

Before Execute, the lesson's source notebook runs in a trusted kernel (no sandbox; cwd a temporary
copy of its folder; NBGRADER_EXECUTION=autograde and the variables the sandbox passes to students'
kernels, so both shrink their work alike). Its graded cells' observations go into resources; their
values never enter a student's kernel. The run is cached as JSON in `cache_dir` (default: the
course root's `.grading-cache/`, which no sandboxed kernel sees), keyed by a sha256 of the source
notebook, the `course` package's files and the library versions, under a file lock shared by
parallel graders. A reference is refused, and nothing graded, when a graded cell raises, repeats a
label or observes nothing the student cannot see, or differs from the gradebook's copy of it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import nbformat
from filelock import FileLock
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient
from nbgrader.api import Gradebook, MissingEntry

from utils.grading.fingerprint import course_files, library_versions
from utils.grading.steps.base import is_test_cell
from utils.grading.steps.observations import Observation, _as_observation, collect, visible_labels
from utils.sandbox.command import PASS_ENV

RESOURCE_KEY = "reference_observations"
# In a work folder's cache: the name of the reference its grader gave it (work.py). There, a
# reference under another key is a grader and a worker that key it differently, refused rather
# than run again in every work folder.
GIVEN = "given-reference"
_memo: dict[str, dict] = {}


class ReferenceRefused(RuntimeError):
    """The reference solution cannot be judged against; the message names the lesson and cells."""


@dataclasses.dataclass
class Reference:
    """A lesson's reference observations: grade_id -> (cell source, observations)."""
    sources: dict[str, str]
    observations: dict[str, list[Observation]]
    seconds: float            # kernel time of the run that made it
    cached: bool              # read from the cache rather than run now

    def to_json(self) -> dict:
        return {"seconds": self.seconds, "cells": {
            gid: {"source": self.sources[gid], "observations": [dataclasses.asdict(o) for o in obs]}
            for gid, obs in self.observations.items()}}

    @classmethod
    def from_json(cls, data: dict) -> "Reference":
        cells = data["cells"]
        return cls({g: c["source"] for g, c in cells.items()},
                   {g: [_as_observation(o) for o in c["observations"]] for g, c in cells.items()},
                   float(data.get("seconds", 0.0)), True)


# --- the cache key ---------------------------------------------------------------------------

def cache_key(source: Path) -> str:
    """sha256 of the source notebook, the course package's files and every installed library's version."""
    return notebook_key(Path(source).read_bytes())


def notebook_key(notebook: bytes) -> str:
    """cache_key of a source notebook given as its bytes."""
    h = hashlib.sha256(notebook)
    for name, path in course_files():
        h.update(name.encode() + b"\0" + path.read_bytes())
    h.update(library_versions().encode())
    return h.hexdigest()


# --- running the reference -------------------------------------------------------------------

def reference_env() -> dict[str, str]:
    """The environment of the reference kernel: what a student's sandboxed kernel gets of the
    grader's environment (utils.sandbox.command.PASS_ENV), so both shrink their work alike."""
    env = {k: os.environ[k] for k in PASS_ENV if k in os.environ}
    env.update(NBGRADER_EXECUTION="autograde", PATH=os.environ.get("PATH", ""),
               HOME=os.environ.get("HOME", tempfile.gettempdir()), PYTHONDONTWRITEBYTECODE="1")
    env.setdefault("LANG", "C.UTF-8")
    return env


def run_reference(source: Path, timeout: int) -> "Reference":
    """Execute the source notebook in a trusted kernel, in a copy of its folder; check what it observed."""
    nb = nbformat.read(str(source), as_version=4)
    with tempfile.TemporaryDirectory(prefix="reference-") as tmp:
        work = Path(tmp) / source.parent.name
        shutil.copytree(source.parent, work, ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
        # its sockets are Unix sockets in this private folder (0700), not loopback TCP, which anyone
        # on the machine could connect to and hear the solutions and hidden tests on
        # (a folder of its own in /tmp: a socket's path must stay under 108 bytes, and tmp may be deep)
        sockets = tempfile.mkdtemp(prefix="rk-", dir="/tmp" if os.path.isdir("/tmp") else None)
        km = KernelManager(kernel_name="python3", transport="ipc", ip=os.path.join(sockets, "k"),
                           connection_file=os.path.join(sockets, "kernel.json"))
        client = NotebookClient(nb, km=km, timeout=timeout, kernel_name="python3", allow_errors=True,
                                extra_arguments=["--HistoryManager.hist_file=:memory:"],
                                resources={"metadata": {"path": str(work)}})
        start = time.perf_counter()
        # measured figures (lesson 3's hardware detection) stay in this run's folder, not the checkout
        try:
            client.execute(env=reference_env() | {"COURSE_CACHE_DIR": str(Path(tmp) / "course-cache")})
        finally:   # a kernel manager given to nbclient is not shut down by it
            if km.has_kernel:
                km.shutdown_kernel(now=True)
            shutil.rmtree(sockets, ignore_errors=True)
        seconds = time.perf_counter() - start
    sources = {c.metadata.nbgrader.grade_id: c.source for c in nb.cells if is_test_cell(c)}
    observed = {c.metadata.nbgrader.grade_id: collect(c.get("outputs", [])) for c in nb.cells if is_test_cell(c)}
    problems = [p for c in nb.cells if is_test_cell(c) for p in _problems(c, observed[c.metadata.nbgrader.grade_id])]
    if problems:
        raise ReferenceRefused(f"the reference solution {source} cannot be graded against; nothing was graded:\n  "
                               + "\n  ".join(problems))
    return Reference(sources, observed, seconds, False)


def _problems(cell, observed: list[Observation]) -> list[str]:
    gid = cell.metadata.nbgrader.grade_id
    errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
    if errors:
        first = (str(errors[0].get("evalue", "")).splitlines() or [""])[0][:200]
        return [f"graded cell '{gid}' raised {errors[0].get('ename', 'an error')}: {first}"]
    labels = [o.label for o in observed]
    repeated = sorted({l for l in labels if labels.count(l) > 1})
    if repeated:
        return [f"graded cell '{gid}' repeats the label(s) {', '.join(map(repr, repeated))}; each must be unique"]
    shown = visible_labels(cell.source)
    if not any(o.label not in shown or o.rule == "choice" for o in observed):
        return [f"graded cell '{gid}' observes nothing hidden (observe() in its hidden tests, or a quiz "
                f"answer); a student could pass it without solving the exercise"]
    return []


def reference_for(source: Path, cache_dir: Path, timeout: int = 300) -> Reference:
    """The reference observations of `source`: from the cache, or run now (one run per key at a
    time across processes, under a file lock); always left in `cache_dir`."""
    key = cache_key(source)
    cache_dir = Path(cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    path = cache_dir / f"{key}.json"
    with FileLock(cache_dir / f"{key}.lock"):
        if path.is_file():
            return Reference.from_json(json.loads(path.read_text()))
        given = cache_dir / GIVEN
        if given.is_file():
            raise ReferenceRefused(
                f"this work folder was given the reference {given.read_text().strip()!r}, but this process keys "
                f"{source.name} as {key}.json: the grader's libraries or course package differ from this worker's "
                f"(utils/grading/fingerprint.py); not run again here")
        cached = key in _memo   # run by this process for another course folder
        data = _memo[key] if cached else run_reference(Path(source), timeout).to_json()
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data))
        tmp.replace(path)
    _memo[key] = data
    ref = Reference.from_json(data)
    ref.cached = cached
    return ref


def check_gradebook(ref: Reference, db_url: str, lesson: str, notebook: str, course_id: str) -> None:
    """Each graded cell of the reference must be the one the gradebook was built with (where it has it)."""
    differ = []
    with Gradebook(db_url, course_id) as gb:
        for gid, source in ref.sources.items():
            try:
                saved = gb.find_source_cell(gid, notebook, lesson).source
            except MissingEntry:
                continue
            if saved.strip() != source.strip():
                differ.append(gid)
    if differ:
        raise ReferenceRefused(f"{lesson}: graded cell(s) {', '.join(differ)} of the source differ from the ones "
                               f"the gradebook was built with; run `nbgrader generate_assignment {lesson} --force` "
                               f"(or `python -m utils.authoring.build`) first. Nothing was graded.")
