"""What the prose names exists: every dotted module name (utils.grading.pipeline, and
utils.grading.pipeline.install for a name in it) and every .py path (utils/grading/pipeline.py,
tests/conftest.py) in the docs, the README, the Makefile and the scripts, and in the docstrings and
comments of the code and tests, is a module or file of this repository and, where a name follows the
module, a name defined at the top of it. A module moved or renamed fails here until the prose
follows it. Strings in code are not prose (a variable called course has a .mkdir)."""

from __future__ import annotations

import ast
import io
import os
import re
import tokenize
from functools import cache
from pathlib import Path

from test_layers import sources
from utils.lessons import REPO

DOTTED = re.compile(r"(?<![\w./:-])((?:utils|course)(?:\.[A-Za-z_]\w*)+)")
PATH = re.compile(r"(?<![\w./-])((?:utils|course|tests)/[\w./-]*\.py)\b")
SUFFIXES = {"py", "ipynb", "md", "txt", "sh", "json", "csv", "html", "toml", "db"}
# placeholders, each with where it stands
ALLOWED = {"utils.x.y": "tests/test_requirements.py: a module name, for the shape of one",
           "tests/test_x.py": "tests/test_fast_layer.py: a test file, for the shape of one"}
SKIP = {".git", ".venv", ".venv-student", "release", "autograded", "node_modules", "lessons", "submitted",
        "feedback", ".grading-cache", ".pytest_cache", "__pycache__"}
TEXT = {".md", ".sh", ".toml", ".txt", ".cfg", ".yml", ".yaml"}


def prose_of_python(source: str) -> str:
    """The comments and docstrings (any string standing alone as a statement) of a module."""
    parts = [node.value.value for node in ast.walk(ast.parse(source))
             if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)]
    parts += [tok.string for tok in tokenize.generate_tokens(io.StringIO(source).readline) if tok.type == tokenize.COMMENT]
    return "\n".join(parts)


def prose_files(root: Path = REPO) -> dict[str, str]:
    found = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIP and not d.startswith(".venv") and not d.endswith(".egg-info"))
        for name in sorted(files):
            path = Path(folder) / name
            rel = path.relative_to(root).as_posix()
            if path.suffix == ".py":
                found[rel] = prose_of_python(path.read_text())
            elif path.suffix in TEXT or name in ("Makefile", "run"):
                found[rel] = path.read_text(errors="replace")
    return found


@cache
def _modules() -> dict[str, str]:
    return sources()


@cache
def top_level_names(module: str) -> frozenset[str]:
    names = set()
    for node in ast.parse(_modules()[module]).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return frozenset(names)


def unknown_names(text: str) -> list[str]:
    """The dotted names and .py paths in `text` that name nothing here."""
    modules = _modules()
    bad = []
    for match in DOTTED.finditer(text):
        name = match.group(1)
        parts = name.split(".")
        known = max((i for i in range(1, len(parts) + 1) if ".".join(parts[:i]) in modules), default=0)
        rest = parts[known:]
        if name in ALLOWED or (rest and rest[0] in SUFFIXES):
            continue
        if not known or (rest and rest[0] not in top_level_names(".".join(parts[:known]))):
            bad.append(name)
    bad += [p for p in (m.group(1) for m in PATH.finditer(text)) if p not in ALLOWED and not (REPO / p).exists()]
    return bad


def test_every_module_named_in_prose_exists():
    found = {rel: sorted(set(unknown_names(text))) for rel, text in prose_files().items()}
    found = {rel: names for rel, names in found.items() if names}
    assert not found, "names of modules, files or functions that do not exist: " + "; ".join(
        f"{rel}: {', '.join(names)}" for rel, names in sorted(found.items()))


def test_a_name_that_is_gone_is_caught():
    """The control: the name this test first found (a function that had moved), a module that never
    was, a file path, and names that do exist."""
    text = ("installed by utils.grading.install; see utils.grading.gone and utils/grading/install.py.\n"
            "Fine: utils.grading.pipeline.install, utils/grading/pipeline.py, course.observe's, "
            "course.toy_model.py, `python -m utils.grading`.")
    assert unknown_names(text) == ["utils.grading.install", "utils.grading.gone", "utils/grading/install.py"]


def test_prose_is_read_from_comments_and_docstrings_only():
    source = '"""Uses utils.a."""\nimport os  # and utils.b\nx = "utils.c"\ndef f():\n    "utils.d"\n'
    prose = prose_of_python(source)
    assert "utils.a" in prose and "utils.b" in prose and "utils.d" in prose and "utils.c" not in prose
