"""make lab's install step (utils/classroom/student-lab/install.py) where torch's CPU index cannot be
reached: one request, refused at once, one line saying so, then pip with requirements.txt less its
index line, then one line naming the torch build that pip put in place and what it holds (read from
the installed distributions: a fake install here, a CPU build and a CUDA build); where the index answers, requirements.txt as it is (quick: pip
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
def install(monkeypatch, tmp_path):
    """The script, with pip replaced by a note of its command (and a call of module.put_in_place, when
    a test sets one, as pip puts packages in place); what it reads as installed is in tmp_path/site."""
    spec = importlib.util.spec_from_file_location("student_install", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    calls = []
    site = tmp_path / "site"
    site.mkdir()

    def pip(command):
        calls.append((command, open(command[command.index("-r") + 1]).read()))
        getattr(module, "put_in_place", lambda site: None)(site)
        return 0

    monkeypatch.setattr(module.subprocess, "call", pip)
    monkeypatch.setattr(module, "SITE", [str(site)], raising=False)
    monkeypatch.chdir(REPO)
    return module, calls


def fake_distribution(site, name: str, version: str, files: dict[str, int], text: dict[str, str] | None = None):
    """A distribution as pip leaves it: NAME-VERSION.dist-info with METADATA and a RECORD of `files`
    (path: size in bytes); `text` files are written with their content (the others are not)."""
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    for path, content in (text or {}).items():
        (site / path).parent.mkdir(parents=True, exist_ok=True)
        (site / path).write_text(content)
    for path, size in files.items():   # on disk at their size too (sparse: no blocks written)
        if path not in (text or {}):
            (site / path).parent.mkdir(parents=True, exist_ok=True)
            with open(site / path, "wb") as f:
                f.truncate(size)
    record = [f"{path},sha256=x,{size}" for path, size in files.items()] + [f"{info.name}/RECORD,,"]
    (info / "RECORD").write_text("\n".join(record) + "\n")


def torch_files(cuda: str | None) -> dict[str, str]:
    return {"torch/version.py": f"from typing import Optional\n__version__ = 'x'\ndebug = False\n"
                                f"cuda: Optional[str] = {cuda!r}\nhip: Optional[str] = None\n"}


def cpu_build(site):
    fake_distribution(site, "torch", "2.13.0+cpu", {"torch/version.py": 200, "torch/lib/libtorch_cpu.so": 450_000_000},
                      torch_files(None))


def cuda_build(site):
    fake_distribution(site, "torch", "2.13.0", {"torch/version.py": 200, "torch/lib/libtorch_cuda.so": 1_100_000_000},
                      torch_files("12.8"))
    fake_distribution(site, "nvidia-cublas-cu12", "12.8.4.1", {"nvidia/cublas/lib/libcublas.so.12": 800_000_000})
    fake_distribution(site, "nvidia_cudnn_cu12", "9.10.2.21", {"nvidia/cudnn/lib/libcudnn.so.9": 1_300_000_000,
                                                               "nvidia/cudnn/lib/libcudnn_ops.so.9": 400_000_000})


def test_an_unreachable_index_is_asked_once_and_pypi_takes_over(install, capsys):
    module, calls = install
    index = f"http://127.0.0.1:{free_port()}/whl/cpu"
    started = time.monotonic()
    assert module.main(["requirements.txt", "--index", index]) == 0
    assert time.monotonic() - started < 5
    said = capsys.readouterr().out.strip().splitlines()
    assert len(said) == 2 and said[0].startswith(f"torch's CPU index {index} cannot be reached (")
    assert "installing torch==2.13.0 from PyPI instead" in said[0]
    assert said[1] == "From PyPI: torch is not installed."  # the fake pip put nothing in place
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


@pytest.mark.parametrize("put_in_place, line", [
    (cpu_build, "From PyPI: torch 2.13.0+cpu installed, a CPU-only build (0.5 GB), without NVIDIA's CUDA "
                "libraries (no nvidia-* package)."),
    (cuda_build, "From PyPI: torch 2.13.0 installed, a CUDA 12.8 build (1.1 GB), with NVIDIA's CUDA libraries: "
                 "2 nvidia-* packages, 2.5 GB (the lessons run the same without them)."),
])
def test_the_fallback_says_which_build_landed_and_what_it_holds(install, capsys, put_in_place, line):
    """Nothing is promised before pip runs: what it put in place is read afterwards and said."""
    module, _ = install
    module.put_in_place = put_in_place
    assert module.main(["requirements.txt", "--index", f"http://127.0.0.1:{free_port()}/whl/cpu"]) == 0
    before, after = capsys.readouterr().out.strip().splitlines()
    assert "GB" not in before and "CUDA" not in before, before
    assert after == line
