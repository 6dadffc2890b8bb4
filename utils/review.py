"""Read a submission's code before it runs and name every cell that reaches into the interpreter,
the kernel, its messages or the operating system's processes.

A kernel can forge what it reports about itself, so the grader's checks from inside the kernel
(utils.nbgrader_plugins) are backed by this static read. Nothing here changes a score: the
exercises never need these things, so a flagged cell is shown to the instructor for review.
"""

from __future__ import annotations

import ast
import re

MODULES = {"IPython", "ipykernel", "zmq", "jupyter_client", "nbclient", "nbgrader", "ctypes", "gc", "inspect",
           "importlib", "builtins", "subprocess", "multiprocessing", "signal", "pty", "socket", "threading",
           "_thread", "sysconfig", "site", "code", "codeop", "dis", "marshal", "pickle", "resource", "psutil"}
CALLS = {"get_ipython", "exec", "eval", "compile", "__import__", "globals", "vars", "setattr", "delattr",
         "breakpoint", "open"}
ATTRIBUTES = {("sys", "modules"), ("sys", "_getframe"), ("sys", "settrace"), ("sys", "setprofile"),
              ("sys", "meta_path"), ("sys", "path_hooks"), ("sys", "stdout"), ("sys", "stderr"),
              ("sys", "displayhook"), ("sys", "excepthook"), ("sys", "exit"), ("os", "environ"), ("os", "getenv"),
              ("os", "kill"), ("os", "killpg"), ("os", "fork"), ("os", "system"), ("os", "popen"),
              ("os", "setsid"), ("os", "_exit"), ("os", "chdir"), ("os", "remove"), ("os", "unlink")}
DUNDERS = {"__builtins__", "__globals__", "__code__", "__subclasses__", "__closure__", "__mro__", "__bases__",
           "f_back", "f_globals", "f_locals", "gi_frame", "tb_frame", "__loader__", "__spec__"}


HARMLESS_MAGICS = ("%%timeit", "%%time", "%timeit", "%time", "%matplotlib")


def _python(source: str) -> str:
    """The cell as IPython runs it (magics and shell escapes become get_ipython() calls). The
    timing magics and %matplotlib are read as the code they time (or nothing)."""
    lines = source.splitlines()
    for i, line in enumerate(lines):
        head = line.lstrip()
        for magic in HARMLESS_MAGICS:
            if head == magic or head.startswith(magic + " "):
                if magic.startswith("%%") or magic == "%matplotlib":
                    lines[i] = ""
                else:
                    lines[i] = line[: len(line) - len(head)] + head[len(magic):].lstrip()
                break
    source = "\n".join(lines)
    try:
        from IPython.core.inputtransformer2 import TransformerManager

        return TransformerManager().transform_cell(source)
    except Exception:  # noqa: BLE001 - fall back to the raw text
        return source


def reaches_into(source: str) -> list[str]:
    """What one cell's code reaches into, sorted; empty for ordinary exercise code."""
    code = _python(source)
    try:
        tree = ast.parse(code)
    except SyntaxError:   # IPython may still run parts of it: read the words instead
        words = set(re.findall(r"[A-Za-z_]\w*(?:\.\w+)?", code))
        return sorted(w for w in words if w in CALLS | DUNDERS or w.split(".")[0] in MODULES
                      or tuple(w.split(".")) in ATTRIBUTES)
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(f"import {a.name}" for a in node.names if a.name.split(".")[0] in MODULES)
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in MODULES:
            found.add(f"import {node.module}")
        elif isinstance(node, ast.Name) and node.id in CALLS | DUNDERS:
            found.add(node.id)
        elif isinstance(node, ast.Attribute):
            if node.attr in DUNDERS:
                found.add(node.attr)
            elif isinstance(node.value, ast.Name) and (node.value.id, node.attr) in ATTRIBUTES:
                found.add(f"{node.value.id}.{node.attr}")
            elif isinstance(node.value, ast.Name) and node.value.id in MODULES:
                found.add(f"{node.value.id}.{node.attr}")
    return sorted(found)


def review(nb, release=None) -> list[str]:
    """One line per code cell of `nb` that reaches into the interpreter, the kernel or processes.
    Cells identical to one of the release's (the course's own code) are not read."""
    given = {c.source.strip() for c in release.cells} if release is not None else set()
    lines = []
    for number, cell in enumerate(nb.cells, 1):
        if cell.cell_type != "code" or cell.source.strip() in given:
            continue
        found = reaches_into(cell.source)
        if found:
            gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
            where = f"cell '{gid}'" if gid else f"cell {number}"
            lines.append(f"REVIEW: {where} reaches into the interpreter, kernel or processes "
                         f"({', '.join(found)}); read its code")
    return lines
