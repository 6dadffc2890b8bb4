"""The instructor's tools import one another without a cycle: the imports at the top of the modules
of utils/ form no circle, so any of them can be imported first in a fresh interpreter (a worker
imports utils.grading.dask.tasks first, the grader utils.grading.run: tests/test_dask.py runs both). The one
project import left inside a function to break a circle is named in DEFERRED, with why."""

from __future__ import annotations

import ast

from utils.coursedir import REPO

# (importer, imported) edges made inside a function on purpose, each with why
DEFERRED = {("utils.grading.run", "utils.grading.dask.runner"): "the runner plans and records with utils.grading.run's steps"}


def _modules() -> dict[str, ast.Module]:
    found = {}
    for path in sorted((REPO / "utils").rglob("*.py")):
        rel = path.relative_to(REPO).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        found[".".join(parts)] = ast.parse(path.read_text(), str(path))
    return found


def _top_imports(name: str, tree: ast.Module, known: set[str]) -> set[str]:
    """The project modules `name` imports at its top level (a package's __init__ included)."""
    got = set()
    for node in tree.body:
        if isinstance(node, ast.Try):
            nodes = node.body
        else:
            nodes = [node]
        for n in nodes:
            if isinstance(n, ast.Import):
                got |= {a.name for a in n.names}
            elif isinstance(n, ast.ImportFrom) and n.module and n.level == 0:
                got.add(n.module)
                got |= {f"{n.module}.{a.name}" for a in n.names}
    edges = set()
    for mod in got:
        parts = mod.split(".")
        for i in range(1, len(parts) + 1):   # importing a.b.c runs a and a.b first
            prefix = ".".join(parts[:i])
            if prefix in known and prefix != name:
                edges.add(prefix)
    return edges


def test_no_import_cycle_among_the_tools():
    modules = _modules()
    graph = {name: _top_imports(name, tree, set(modules)) for name, tree in modules.items()}
    for (a, b), why in DEFERRED.items():
        assert b not in graph[a], f"{a} imports {b} at its top now; drop it from DEFERRED ({why})"
    state, cycles = {}, []

    def visit(node, path):
        state[node] = "open"
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                cycles.append(path[path.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = "done"

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)

