"""The packages stand in layers, each importing only from the layers below it:

    course            what the notebooks import (imports nothing of utils/)
    utils/*.py        what the tools share (errors, lessons, notebooks, processes, scratch, ...)
    utils.sandbox     the sandbox every grading kernel runs in
    utils.grading     grading: the command, its steps, its runners
    utils.authoring   build, check, demo and the samples (they grade through utils.grading)
    utils.classroom   a class on one server (its rehearsal course is written with utils.authoring)
    utils.bench       benchmarks over all of the above
    utils.commands    prefill-decode: each tool by name (it imports them by name, with importlib)

Every import counts, at the top of a module or inside a function, so that a lazy import cannot
hide a step up. Packages listed together on one line of LAYERS would be independent: neither
imports the other."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

from utils.lessons import REPO

LAYERS = (("course",), ("utils",), ("utils.sandbox",), ("utils.grading",), ("utils.authoring",),
          ("utils.classroom",), ("utils.bench",), ("utils.commands",))


def module_name(path: Path, root: Path = REPO) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def sources(root: Path = REPO) -> dict[str, str]:
    """Every module of course/ and utils/ (folders with a dash in the name hold scripts, not modules)."""
    found = {}
    for top in ("course", "utils"):
        for path in sorted((root / top).rglob("*.py")):
            if not any("-" in part for part in path.relative_to(root).parts):
                found[module_name(path, root)] = path.read_text()
    return found


def imports(name: str, source: str, is_package: bool) -> set[str]:
    """Every module name `name` imports, anywhere in it (absolute names; relative ones resolved)."""
    got = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            got |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[:len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            got.add(module)
            got |= {f"{module}.{a.name}" for a in node.names}
    return got


def layer_of(name: str) -> tuple[int, str] | None:
    """(the layer's index, the package) of a project module; None for one outside course/ and utils/."""
    best = None
    for index, packages in enumerate(LAYERS):
        for package in packages:
            if (name == package or name.startswith(package + ".")) and (best is None or len(package) > len(best[1])):
                best = (index, package)
    return best


def violations(modules: dict[str, str], packages: set[str] = frozenset()) -> list[str]:
    """Each import of `modules` (name -> source) that reaches a package in its own layer or above."""
    found = []
    for name, source in sorted(modules.items()):
        mine = layer_of(name)
        for target in sorted(imports(name, source, name in packages)):
            if target not in modules:
                continue
            theirs = layer_of(target)
            if mine is None or theirs is None or theirs[1] == mine[1]:
                continue
            if theirs[0] >= mine[0]:
                found.append(f"{name} ({mine[1]}) imports {target} ({theirs[1]})")
    return found


def _packages(root: Path = REPO) -> set[str]:
    return {module_name(p, root) for top in ("course", "utils") for p in (root / top).rglob("__init__.py")}


def test_each_package_imports_only_from_the_layers_below():
    found = violations(sources(), _packages())
    assert not found, "imports against the layers (tests/test_layers.py, LAYERS): " + "; ".join(found)


def test_every_package_has_a_layer():
    """A new package under utils/ must be placed in LAYERS, else its imports would go unchecked."""
    unplaced = sorted(p for p in _packages() if p.count(".") == 1 and layer_of(p)[1] == "utils")
    assert not unplaced, f"packages not in tests/test_layers.py's LAYERS: {unplaced}"


def test_an_upward_import_is_caught():
    """The control: one planted import from grading up to authoring, one from course up to utils,
    one relative import from the sandbox up to grading; each is named."""
    modules = {"course.timing": "from utils.lessons import REPO\n",
               "utils.lessons": "from utils.errors import ToolError\n",
               "utils.errors": "",
               "utils.sandbox.probe": "def f():\n    from ..grading import pipeline\n",
               "utils.grading.pipeline": "import utils.authoring.check\n",
               "utils.grading": "",
               "utils.authoring.check": "from utils.grading import pipeline\n"}
    assert violations(modules, {"utils.grading"}) == [
        "course.timing (course) imports utils.lessons (utils)",
        "utils.grading.pipeline (utils.grading) imports utils.authoring.check (utils.authoring)",
        "utils.sandbox.probe (utils.sandbox) imports utils.grading (utils.grading)",
        "utils.sandbox.probe (utils.sandbox) imports utils.grading.pipeline (utils.grading)"]



def test_no_two_modules_share_a_name():
    """One name, one job: two modules called processes.py (one running nbgrader, one the sandbox's
    process tree) read as one. Package markers (__init__, __main__) are exempt."""
    names = Counter(Path(*name.split(".")).name for name in sources()
                    if not (REPO / Path(*name.split(".")) / "__init__.py").exists())
    for marker in ("__main__",):
        names.pop(marker, None)
    # and the scripts in folders that are no package (utils/classroom/student-lab/), run by path
    names.update(p.stem for top in ("course", "utils") for p in (REPO / top).rglob("*.py")
                 if not (p.parent / "__init__.py").exists() and "__pycache__" not in p.parts)
    shared = sorted(n for n, count in names.items() if count > 1)
    assert not shared, f"modules sharing a name in course/ and utils/: {shared}"
