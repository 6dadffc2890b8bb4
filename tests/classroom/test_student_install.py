"""make lab's install step (utils/classroom/student-lab/install.py) where torch's CPU index cannot be
reached: one request, refused at once, one line saying so and what it costs, then pip with
requirements.txt less its index line; where the index answers, requirements.txt as it is (quick: pip
is not run, its command is read). The whole install, from a fresh checkout, is in
tests/browser/test_student.py."""

from __future__ import annotations

import importlib.util
import time

import pytest

from helpers import free_port
from utils.lessons import REPO

SCRIPT = REPO / "utils" / "classroom" / "student-lab" / "install.py"


@pytest.fixture
def install(monkeypatch):
    spec = importlib.util.spec_from_file_location("student_install", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    calls = []

    def pip(command):
        calls.append((command, open(command[command.index("-r") + 1]).read()))
        return 0

    monkeypatch.setattr(module.subprocess, "call", pip)
    monkeypatch.chdir(REPO)
    return module, calls


def test_an_unreachable_index_is_asked_once_and_pypi_takes_over(install, capsys):
    module, calls = install
    index = f"http://127.0.0.1:{free_port()}/whl/cpu"
    started = time.monotonic()
    assert module.main(["requirements.txt", "--index", index]) == 0
    assert time.monotonic() - started < 5
    said = capsys.readouterr().out.strip().splitlines()
    assert len(said) == 1 and said[0].startswith(f"torch's CPU index {index} cannot be reached (")
    assert "installing torch==2.13.0 from PyPI instead" in said[0]
    (command, requirements), = calls
    assert "--extra-index-url" not in requirements and "--extra-index-url" not in command
    assert f"-r {REPO / 'requirements-pins.txt'}" in requirements.splitlines()
    assert command[-2:] == ["-e", "."]


def test_where_the_index_answers_requirements_txt_is_installed_as_it_is(install, monkeypatch, capsys):
    module, calls = install
    monkeypatch.setattr(module, "unreachable", lambda index, timeout_s=10: None)
    assert module.main(["requirements.txt"]) == 0
    (command, requirements), = calls
    assert command[command.index("-r") + 1] == "requirements.txt" and capsys.readouterr().out == ""
    monkeypatch.setattr(module, "unreachable", lambda index, timeout_s=10: pytest.fail(f"asked {index}"))
    assert module.main(["requirements-pins.txt"]) == 0  # make lab TORCH=gpu: no index to ask
    assert calls[1][0][calls[1][0].index("-r") + 1] == "requirements-pins.txt"
