"""Every third-party module that course/ and utils/ import is named, pinned, in the requirements of
the environment that runs it; reached only through another package's dependencies does not count
(a new release of that package may drop it). Read from the source (no import is run):

- course/, and what `make lab` runs with the students' environment (its kernel configuration,
  utils/classroom/student-lab/, and utils/grading/steps/language_info.py): requirements.txt;
- the Dask runner (utils/grading/dask/) and the cluster benchmark: requirements-instructor.txt;
- the rest of utils/ (grading, feedback, the report, the class server): requirements-classroom.txt,
  what `python -m utils.classroom setup` installs.

A file's imports count with those of every project module it imports at its top level (not
inside a function: that is how grading reaches Dask only when a scheduler is named). The module
to distribution map is importlib.metadata's, from the environment running the tests
(requirements-dev.txt, which holds all of the above)."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from functools import cache
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

from utils.lessons import REPO

STUDENTS, CLASS_SERVER, DASK = "requirements.txt", "requirements-classroom.txt", "requirements-instructor.txt"
STUDENT_RUN = ("course/", "utils/classroom/student-lab/", "utils/grading/steps/language_info.py")
DASK_RUN = ("utils/grading/dask/", "utils/bench/cluster.py")
OURS = {"course", "utils"}


def environment_of(rel: str) -> str:
    if rel.startswith(STUDENT_RUN):
        return STUDENTS
    if rel.startswith(DASK_RUN):
        return DASK
    return CLASS_SERVER


def _name(requirement: str) -> str:
    return re.sub(r"[-_.]+", "-", re.split(r"[\s\[=<>!~;@]", requirement, maxsplit=1)[0]).lower()


def declared(req_file: str, root: Path = REPO) -> set[str]:
    """The distributions a requirements file names, with the files it includes (-r), normalised."""
    names: set[str] = set()
    for line in (root / req_file).read_text().splitlines():
        line = line.split("#")[0].strip()
        if not line:
            continue
        if line.startswith(("-r ", "--requirement ")):
            names |= declared(line.split(None, 1)[1], root)
        elif not line.startswith("-"):
            names.add(_name(line))
    return names


def _module_file(module: str, root: Path) -> Path | None:
    """The project file of `module` (utils.x.y), if it is one."""
    base = root.joinpath(*module.split("."))
    for cand in (base.with_suffix(".py"), base / "__init__.py"):
        if cand.is_file():
            return cand
    return None


def _imports(path: Path, root: Path) -> tuple[set[str], set[Path]]:
    """(third-party top-level modules imported anywhere in the file, project files imported at
    its top level: with their packages' __init__.py, what Python runs to import them)."""
    tree = ast.parse(path.read_text(), str(path))
    top_level = set()
    for node in tree.body:   # module level, including inside try/if at that level
        top_level |= {id(n) for n in ast.walk(node) if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
    third, local = set(), set()
    package = path.relative_to(root).parent.parts
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package[:len(package) - node.level + 1], *([base] if base else [])])
            modules = [base, *(f"{base}.{a.name}" for a in node.names)]
        else:
            continue
        for module in modules:
            top = module.split(".")[0]
            if top in OURS:
                if id(node) in top_level:
                    parts = module.split(".")
                    for i in range(1, len(parts) + 1):
                        f = _module_file(".".join(parts[:i]), root)
                        if f is not None:
                            local.add(f)
            elif top and top not in sys.stdlib_module_names and top != "__future__":
                third.add(top)
    return third, local


def needed_by(path: Path, root: Path = REPO, parsed: dict | None = None) -> dict[str, set[str]]:
    """Third-party module -> the files (this one, or the project modules it imports at top level,
    followed) that import it. `parsed` keeps each file's imports between calls."""
    parsed = {} if parsed is None else parsed
    seen, todo, need = set(), [path], {}
    while todo:
        f = todo.pop()
        if f in seen:
            continue
        seen.add(f)
        if f not in parsed:
            parsed[f] = _imports(f, root)
        third, local = parsed[f]
        for module in third:
            need.setdefault(module, set()).add(str(f.relative_to(root)))
        todo += sorted(local - seen)
    return need


@cache
def _distributions() -> dict[str, list[str]]:
    return packages_distributions()


def problems(root: Path = REPO) -> list[str]:
    """One line per import whose distribution the running environment's requirements leave out."""
    found, parsed = [], {}
    for path in sorted([*root.glob("course/**/*.py"), *root.glob("utils/**/*.py")]):
        rel = str(path.relative_to(root))
        req = environment_of(rel)
        names = declared(req, root)
        for module, files in sorted(needed_by(path, root, parsed).items()):
            dists = {_name(d) for d in _distributions().get(module, [])}
            if not dists:
                found.append(f"{rel}: imports {module}, which no installed distribution provides "
                             f"(via {', '.join(sorted(files))})")
            elif not dists & names:
                found.append(f"{rel}: imports {module} (distribution {', '.join(sorted(dists))}; via "
                             f"{', '.join(sorted(files))}), which {req} does not name")
    return found


def test_every_import_is_in_its_environments_requirements():
    assert problems() == []


def _copy(tmp_path: Path) -> Path:
    import shutil
    for part in ("course", "utils"):
        shutil.copytree(REPO / part, tmp_path / part, ignore=shutil.ignore_patterns("__pycache__"))
    for f in REPO.glob("requirements*.txt"):
        shutil.copy2(f, tmp_path / f.name)
    return tmp_path


def test_the_control_a_requirement_taken_out_or_an_import_put_in_fails(tmp_path):
    """The controls, on a copy: nh3 taken out of the class server's list is named (feedback's
    sanitiser imports it); Dask imported at the top of the grading run is named for the class
    server (it does not install Dask); a student module importing the hub is named."""
    root = _copy(tmp_path)
    assert problems(root) == []
    cls = root / "requirements-classroom.txt"
    text = cls.read_text()
    cls.write_text(re.sub(r"(?m)^nh3==.*\n", "", text))
    assert any("safe_html.py: imports nh3" in p and "requirements-classroom.txt" in p for p in problems(root)), \
        problems(root)
    cls.write_text(text)
    run = root / "utils" / "grading" / "grade_course.py"
    run.write_text("from utils.grading.dask.cluster_runner import DaskRunner\n" + run.read_text())
    got = problems(root)
    assert any(p.startswith("utils/grading/grade_course.py: imports distributed") for p in got), got
    assert any(p.startswith("utils/grading/cli.py: imports distributed") for p in got), got   # followed
    (root / "course" / "hub_check.py").write_text("def f():\n    import jupyterhub\n")
    assert any(p.startswith("course/hub_check.py: imports jupyterhub") and "requirements.txt" in p
               for p in problems(root))


@pytest.mark.slow   # a Python process
def test_grading_runs_without_dask():
    """The class server's environment has no Dask: the grading command, feedback and the report
    import without it (a subprocess where importing dask or distributed fails); the control:
    the Dask runner itself does not; grading with a scheduler named says in one line what to
    install."""
    code = ("import sys\nsys.modules['distributed'] = None\nsys.modules['dask'] = None\n"
            "import utils.grading.cli, utils.grading.grade_course, utils.grading.report, utils.classroom.term\n"
            "try:\n    import utils.grading.dask.cluster_runner\nexcept ImportError as err:\n    print('refused:', err)\n"
            "from utils.errors import ToolError\n"
            "try:\n    utils.grading.grade_course._dask_runner('tcp://127.0.0.1:8786', None)\n"
            "except ToolError as err:\n    print('said:', err)\n")
    res = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.startswith("refused:") and "distributed" in res.stdout, res.stdout   # the control
    # --scheduler without Dask: one line naming what to install
    assert "said: grading on the Dask scheduler tcp://127.0.0.1:8786 needs Dask" in res.stdout, res.stdout
    assert "pip install -r requirements-instructor.txt" in res.stdout


@pytest.mark.parametrize("req", [STUDENTS, CLASS_SERVER, DASK])
def test_every_named_package_is_pinned(req):
    for line in (REPO / req).read_text().splitlines():
        line = line.split("#")[0].strip()
        if line and not line.startswith("-"):
            assert re.fullmatch(r"[A-Za-z0-9_.\-\[\]]+==[^\s;]+", line), f"{req}: {line!r} is not pinned with =="
