"""The instructor's tools import one another without a cycle: the imports at the top of the modules
of utils/ form no circle, so any of them can be imported first in a fresh interpreter (a worker
imports utils.grading.dask.tasks first, the grader utils.grading.grade_course: tests/grading/test_dask.py runs both). No
project import sits inside a function to break a circle; the few inside functions for another reason
are named in LAZY, with why."""

from __future__ import annotations

import ast

from utils.lessons import REPO

# modules that import project modules inside functions on purpose, each with why (never to break a cycle)
LAZY = {"utils.bench.gpu_check": "it runs in a bare Python that may lack torch, nbformat or nbclient, and names "
                                 "what is missing before importing course modules that need them",
        "utils.bench.timing_path": "utils.bench.gpu_check imports it at its top, in that bare Python: the same reason",
        "utils.grading.grade_course": "the Dask runner (distributed, dask-jobqueue) only when a scheduler or --slurm is named: the class server's "
                             "environment (requirements-classroom.txt) grades locally without Dask"}


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



def test_no_project_import_hides_inside_a_function():
    found = []
    for name, tree in _modules().items():
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                mods = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                    [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else []
                found += [f"{name}.{fn.name}: {m}" for m in mods if m.split(".")[0] in ("utils", "course")]
    assert {f.split(".")[0] for f in found} <= {"utils"}
    assert all(any(f.startswith(f"{lazy}.") for lazy in LAZY) for f in found), \
        "project imports inside functions: " + "; ".join(f for f in found if not any(f.startswith(f"{l}.") for l in LAZY))
