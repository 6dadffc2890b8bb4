"""One command for the instructor's tools: `prefill-decode TOOL` (utils/commands.py, installed by
pyproject.toml's [project.scripts]). Its --help lists every tool the README's table documents and no
other, so a new tool is added to both; each tool answers --help with its own options, through the
same main() that `python -m` runs."""

from __future__ import annotations

import re
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from utils import commands
from utils.lessons import REPO


def readme_tools(text: str) -> list[str]:
    """The tools named first in a row of the README's table of commands: | `prefill-decode NAME ...` |"""
    return re.findall(r"^\| `prefill-decode ([a-z][a-z-]*)\b", text, flags=re.MULTILINE)


def test_help_lists_every_tool_the_readme_documents(capsys):
    documented = readme_tools((REPO / "README.md").read_text())
    assert commands.main(["--help"]) == 0
    listed = re.findall(r"^  ([a-z][a-z-]*) ", capsys.readouterr().out, flags=re.MULTILINE)
    assert sorted(documented) == sorted(listed) == sorted(commands.TOOLS), (documented, listed)


def test_a_tool_missing_from_the_readme_is_caught():
    """The control: the README's table without a row is told apart."""
    text = (REPO / "README.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith("| `prefill-decode report"))
    assert "report" in readme_tools(text) and "report" not in readme_tools(text.replace(row + "\n", ""))


@pytest.mark.parametrize("name", sorted(commands.TOOLS))
def test_each_tool_answers_help_with_its_own_options(name, capsys):
    assert commands.main([name, "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: ") and "-h, --help" in out, out[:500]


def test_an_unknown_tool_is_named(capsys):
    assert commands.main(["gradee"]) == 2
    assert "no tool 'gradee'" in capsys.readouterr().err


def test_the_console_script_is_installed_from_pyproject():
    (script,) = [e for e in entry_points(group="console_scripts") if e.name == "prefill-decode"]
    assert script.value == "prefill_decode:main"


@pytest.mark.slow   # a Python process
def test_the_console_script_runs_from_any_folder(tmp_path):
    script = Path(sys.executable).parent / "prefill-decode"
    res = subprocess.run([str(script), "term", "--help"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and "zip-collect" in res.stdout, res.stderr[-2000:]


def test_the_class_servers_copy_of_the_package_has_no_script():
    """The class server's environment installs `course` alone (utils/ stays in the course
    directory), so its pyproject.toml leaves the script out: no command there that cannot import."""
    from utils.classroom.environment import without_scripts

    text = (REPO / "pyproject.toml").read_text()
    assert 'prefill-decode = "prefill_decode:main"' in text   # the control
    copy = without_scripts(text)
    assert "prefill_decode:main" not in copy and "py-modules" not in copy and "[project.scripts]" not in copy
    assert "[project]" in copy and "[tool.setuptools]" in copy and 'name = "prefill-decode-course"' in copy


@pytest.mark.slow   # a Python process
def test_the_tools_are_not_importable_outside_the_checkout(tmp_path):
    """Only the command's starter is installed: a Python of this environment in another folder (a
    Dask scheduler's, a worker's own clone's) does not find utils/; the control: `course` it does."""
    code = "import importlib.util as u; print(u.find_spec('utils') is None, u.find_spec('course') is not None)"
    res = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert res.stdout.split() == ["True", "True"], res.stdout + res.stderr[-2000:]


def test_grade_forks_its_workers_while_it_runs_and_only_then(monkeypatch):
    """`prefill-decode grade` is the grading command as `python -m utils.grading` is: its workers
    forked from it (utils/nbgrader_client.py) while it runs; the process that called it is left as
    it was (a test process never forks its workers)."""
    from utils import nbgrader_client
    from utils.grading import cli

    seen = []
    monkeypatch.setattr(cli, "main", lambda argv=None: seen.append(nbgrader_client._serve) or 0)
    assert nbgrader_client._serve is None
    assert commands.main(["grade", "01_two_phases"]) == 0
    assert seen and seen[0] is not None
    assert nbgrader_client._serve is None
