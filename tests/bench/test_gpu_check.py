"""The GPU check in an environment that already has torch: it installs nothing, names what is
missing, says which torch build it found, and writes its record as it measures."""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import torch

from utils.bench import gpu_check
from utils.lessons import REPO

SMI = """+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 570.86.15              Driver Version: 570.86.15      CUDA Version: 12.8     |
|-----------------------------------------+------------------------+----------------------+
"""


# --- what is missing ----------------------------------------------------------------------------

def test_every_missing_package_is_named_and_nothing_runs(monkeypatch, capsys):
    absent = {"nbclient", "ipykernel"}
    real = gpu_check.importlib.util.find_spec
    monkeypatch.setattr(gpu_check.importlib.util, "find_spec", lambda name: None if name in absent else real(name))
    assert gpu_check.missing_packages() == ["nbclient", "ipykernel"]
    assert gpu_check.main([]) == 3
    err = capsys.readouterr().err
    assert "lacks nbclient, ipykernel" in err and "nothing was run or installed" in err
    assert "pip install nbclient ipykernel" in err and "PY=" in err


@pytest.mark.parametrize("torch_version, missing", [
    ("2.3.1+cu121", ["torch >= 2.5 (found 2.3.1+cu121)"]), ("2.4.1+cu124", ["torch >= 2.5 (found 2.4.1+cu124)"]),
    ("2.5.0", []), ("2.5.1+cu121", []), ("2.13.0+cpu", [])])
def test_a_torch_older_than_2_5_is_named_with_its_version(torch_version, missing):
    """2.5 is the first torch whose scaled_dot_product_attention takes enable_gqa (the toy model passes it)."""
    def version_of(dist):
        return torch_version if dist == "torch" else importlib.metadata.version(dist)

    assert gpu_check.missing_packages(version_of=version_of) == missing


def test_the_oldest_torch_is_stated_alike_everywhere():
    import tomllib

    oldest = ".".join(map(str, gpu_check.OLDEST_TORCH))
    assert oldest == "2.5"
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    assert f"torch>={oldest}" in deps
    for page in ("README.md", "docs/benchmarks.md", "utils/bench/gpu_check.py"):
        text = (REPO / page).read_text()
        assert f"torch ({oldest} or later" in text or f"torch of {oldest} or later" in text \
            or f"of torch ({oldest} or later" in text, page
        assert "2.4 or later" not in text, page


def test_nothing_is_missing_in_the_course_environment():
    assert gpu_check.missing_packages() == []


# --- which torch build, which driver ----------------------------------------------------------

@pytest.mark.parametrize("version, cuda, build", [
    ("2.13.0+cpu", None, "CPU-only build"), ("2.13.0", None, "CPU-only build"),
    ("2.13.0+cpu", "12.8", "CPU-only build"), ("2.13.0", "12.8", "CUDA 12.8 build"),
    ("2.4.1+cu121", "12.1", "CUDA 12.1 build")])
def test_the_torch_build_is_named(version, cuda, build):
    assert gpu_check.torch_build(version, cuda) == build


def test_the_driver_is_read_from_nvidia_smi():
    assert gpu_check.nvidia_driver(SMI) == ("570.86.15", "12.8")


@pytest.mark.parametrize("raw, text", [(90100, "9.1.0"), (91002, "9.10.2"), (8902, "8.9.2"), (None, "none")])
def test_cudnn_versions_are_written_as_text(raw, text):
    assert gpu_check.cudnn_version(raw) == text


def _no_gpu(monkeypatch, version, cuda, driver):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch, "__version__", version)
    monkeypatch.setattr(torch.version, "cuda", cuda)
    monkeypatch.setattr(gpu_check, "nvidia_driver", lambda smi=None: driver)


def test_a_cpu_build_on_an_nvidia_machine_says_so_and_how_to_get_a_cuda_build(monkeypatch, capsys):
    _no_gpu(monkeypatch, "2.13.0+cpu", None, ("570.86.15", "12.8"))
    assert gpu_check.main([]) == 2
    err = capsys.readouterr().err
    assert err.startswith(gpu_check.NO_GPU)
    for words in ("2.13.0+cpu is a CPU-only build", "torch.version.cuda is None", "570.86.15",
                  "CUDA up to 12.8", "torch==2.13.0 --index-url https://download.pytorch.org/whl/cu",
                  "make gpu-check PY=/path/to/python"):
        assert words in err, words


def test_a_cuda_build_that_cannot_start_names_the_driver(monkeypatch, capsys):
    _no_gpu(monkeypatch, "2.13.0", "12.8", ("470.1", "11.4"))
    assert gpu_check.main([]) == 2
    err = capsys.readouterr().err
    assert "CUDA 12.8 build" in err and "470.1" in err and "CUDA cannot start" in err


def test_without_any_gpu_the_message_is_the_one_line_it_always_was(monkeypatch, capsys):
    _no_gpu(monkeypatch, "2.13.0+cpu", None, (None, None))
    assert gpu_check.main([]) == 2
    assert capsys.readouterr().err == gpu_check.NO_GPU + "\n"


# --- the record ---------------------------------------------------------------------------------

def test_the_record_names_the_versions(monkeypatch):
    facts = gpu_check.device_facts(gpu=False)
    for key in ("torch", "torch_build", "cuda", "cudnn", "load_average", "device"):
        assert key in facts
    facts.update(driver="570.86.15", driver_cuda="12.8", cudnn="9.1.0")
    text = gpu_check.header(facts)
    for words in ("| driver | 570.86.15 |", "| cudnn | 9.1.0 |", f"| torch | {torch.__version__} |", "| torch build |"):
        assert words in text, words


def _tiny_notebook(path: Path, stop_at_third: bool) -> Path:
    cells = [nbformat.v4.new_code_cell("print('first figure 1.25 ms')"),
             nbformat.v4.new_code_cell("print('second figure 2.5 ms')"),
             nbformat.v4.new_code_cell("import os, signal\nos.kill(os.getppid(), signal.SIGTERM)\nimport time\n"
                                       "time.sleep(30)" if stop_at_third else "print('third')"),
             nbformat.v4.new_code_cell("print('never reached')")]
    nbformat.write(nbformat.v4.new_notebook(cells=cells), str(path))
    return path


GRAPHS = {"device": "cpu", "path": "eager", "same": {"decode": True}, "gap": {"decode": 0.0},
          "ms": {"decode": {"eager": 1.0, "replayed": 1.0}}}  # graph_check's result, without its timings


def _no_graph_check(monkeypatch):
    monkeypatch.setattr(gpu_check, "graph_check", lambda device: GRAPHS)  # it has a test of its own, below


@pytest.mark.slow
def test_a_run_stopped_by_a_time_limit_leaves_what_it_measured(tmp_path, monkeypatch):
    """SIGTERM (what `timeout` sends) in the middle of the notebook: the cells that ran are in the
    record, with a line saying that the run was stopped."""
    monkeypatch.setattr(gpu_check, "RECORDS", tmp_path / "records")
    monkeypatch.setattr(gpu_check, "NOTEBOOK", _tiny_notebook(tmp_path / "nb.ipynb", stop_at_third=True))
    monkeypatch.setattr(gpu_check, "run_bench", lambda *a, **k: pytest.fail("the benchmark ran after a stop"))
    _no_graph_check(monkeypatch)
    assert gpu_check.main(["--cpu", "--timeout", "120"]) == 1
    [record] = (tmp_path / "records").iterdir()
    text = record.read_text()
    assert "| torch build |" in text and "| cudnn |" in text
    assert text.index("first figure 1.25 ms") < text.index("second figure 2.5 ms") < text.index("was stopped (SIGTERM)")
    assert "never reached" not in text


@pytest.mark.slow
def test_a_whole_run_writes_the_cells_then_the_benchmark_then_its_figures(tmp_path, monkeypatch):
    monkeypatch.setattr(gpu_check, "RECORDS", tmp_path / "records")
    monkeypatch.setattr(gpu_check, "NOTEBOOK", _tiny_notebook(tmp_path / "nb.ipynb", stop_at_third=False))

    def bench(gpu, json_path, on_line):
        assert gpu is False
        on_line("decode eager 1.000 ms/token\n")
        json_path.write_text('{"decode": {"best": "eager"}}')
        return 0, "decode eager 1.000 ms/token\n"

    monkeypatch.setattr(gpu_check, "run_bench", bench)
    _no_graph_check(monkeypatch)
    assert gpu_check.main(["--cpu", "--timeout", "120"]) == 0
    [record] = (tmp_path / "records").iterdir()
    text = record.read_text()
    order = ["| torch build |", "first figure 1.25 ms", "never reached", "4 code cells in", "every cell ran",
             "## Lesson 3's timing path", "timing path on cpu: eager", "## `python -m utils.bench.model`", "    decode eager 1.000 ms/token", "exit status 0", '"best": "eager"',
             "Load average after the run"]
    assert [text.index(words) for words in order] == sorted(text.index(words) for words in order)
    assert "was stopped" not in text


def test_each_benchmark_line_is_on_disk_before_the_next_is_measured(tmp_path, monkeypatch):
    monkeypatch.setattr(gpu_check, "RECORDS", tmp_path / "records")
    seen_on_disk = []

    def bench(gpu, json_path, on_line):
        on_line("decode eager 1.000 ms/token\n")
        seen_on_disk.append((next((tmp_path / "records").iterdir())).read_text())
        on_line("decode graph 0.500 ms/token\n")
        raise gpu_check.Stopped("SIGTERM")

    monkeypatch.setattr(gpu_check, "run_bench", bench)
    _no_graph_check(monkeypatch)
    assert gpu_check.main(["--cpu", "--skip-notebook"]) == 1
    assert "decode eager 1.000 ms/token" in seen_on_disk[0]
    text = next((tmp_path / "records").iterdir()).read_text()
    assert "decode graph 0.500 ms/token" in text and "was stopped (SIGTERM)" in text


SIGTERM_TWICE = """
import os, signal, sys, time
from pathlib import Path
from utils.bench import gpu_check
gpu_check.RECORDS = Path(sys.argv[1])

def bench(gpu, json_path, on_line):
    on_line("decode eager 1.000 ms/token\\n")
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
    finally:   # `timeout` signals the process and then its group: the second SIGTERM comes at once
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.5)

gpu_check.run_bench = bench
gpu_check.graph_check = lambda device: {"device": "cpu", "path": "eager", "same": {}, "gap": {}, "ms": {}}
sys.exit(gpu_check.main(["--cpu", "--skip-notebook"]))
"""


@pytest.mark.slow
def test_a_second_sigterm_does_not_cut_the_note_short(tmp_path):
    proc = subprocess.run([sys.executable, "-c", SIGTERM_TWICE, str(tmp_path)], cwd=REPO, capture_output=True,
                          text=True, timeout=300, start_new_session=True)
    assert proc.returncode == 1, proc.stderr
    [record] = tmp_path.iterdir()
    text = record.read_text()
    assert "decode eager 1.000 ms/token" in text and "was stopped (SIGTERM)" in text


# --- a Python that already has torch: nothing created, nothing installed ------------------------

OFFLINE = {"PIP_NO_INDEX": "1", "http_proxy": "http://127.0.0.1:9", "https_proxy": "http://127.0.0.1:9",
           "HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9"}


def _installed() -> set[str]:
    return {f"{d.metadata['Name']}=={d.version}" for d in importlib.metadata.distributions()}


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is here: the check would run for real")
def test_gpu_check_with_a_preinstalled_torch_and_no_network_runs_to_its_end(tmp_path):
    """`python -m utils.bench.gpu_check` and `make gpu-check PY=...` with this environment's torch, the
    network unreachable: each ends with the no-GPU message (exit 2) and installs nothing."""
    before = _installed()
    records = set(gpu_check.RECORDS.glob("*")) if gpu_check.RECORDS.exists() else set()
    env = dict(os.environ, **OFFLINE)
    proc = subprocess.run([sys.executable, "-m", "utils.bench.gpu_check"], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 2 and gpu_check.NO_GPU in proc.stderr
    if shutil.which("make"):
        # a copy of the tools without .venv: the target must not create one
        copy = tmp_path / "course"
        shutil.copytree(REPO, copy, ignore=shutil.ignore_patterns(".venv", ".git", "autograded", "release",
                                                                   "__pycache__", "node_modules"))
        proc = subprocess.run(["make", "gpu-check", f"PY={sys.executable}"], cwd=copy, env=env,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 2 and gpu_check.NO_GPU in proc.stderr, proc.stdout + proc.stderr
        assert "pip" not in proc.stdout and not (copy / ".venv").exists()
    assert _installed() == before
    assert (set(gpu_check.RECORDS.glob("*")) if gpu_check.RECORDS.exists() else set()) == records


@pytest.mark.slow
def test_a_python_without_the_packages_is_told_what_it_lacks(tmp_path):
    """A bare Python (no torch, no nbclient): the check names them all and exits 3, installing nothing."""
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    python = bare / "bin" / "python"
    proc = subprocess.run([str(python), "-m", "utils.bench.gpu_check"], cwd=REPO, capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, **OFFLINE))
    assert proc.returncode == 3, proc.stderr
    assert "lacks torch, numpy, matplotlib, nbclient, nbformat, ipykernel" in proc.stderr
    assert "nothing was run or installed" in proc.stderr
    assert sorted(p.name for p in (bare / "lib").glob("python*/site-packages/*")) == []


def test_the_graph_check_on_a_cpu_says_eager_and_compares_results():
    """graph_check runs lesson 3's timing path (course.graphs); on a CPU nothing is captured, the
    path says so, and the 'replayed' step is the eager one (tests/course_package/test_graphs.py replays through a
    fake CUDA layer). On a GPU, make gpu-check writes the same block with the graphs' times."""
    result = gpu_check.graph_check("cpu", rounds=1)
    assert result["path"] == "eager" and result["same"] == {"decode": True, "prefill": True}
    block = gpu_check.graph_block(result)
    assert "timing path on cpu: eager" in block and "gives the logits and cache of eager" in block
    assert set(result["ms"]["decode"]) == {"eager", "replayed"}


def test_decode_attention_bandwidth_is_reported_kernel_by_kernel_beside_the_weights():
    """make gpu-check's attention block: decode attention (one query over the positions written, no
    mask) with each kernel alone, its bandwidth beside matrix-vector products over as many bytes; on a
    CPU the kernels a GPU has are named as not running here."""
    from utils.bench.timing_path import attention_block, attention_check

    result = attention_check("cpu", batch=1, heads=4, head_dim=16, context=64, rounds=1)
    assert set(result["GBps"]) >= {"matrix-vector products", "flash_attention", "math"}
    assert all(rate > 0 for rate in result["GBps"].values())
    assert "cudnn_attention" in result["errors"] and result["bytes"] == 2 * 4 * 64 * 16 * 4
    block = attention_block(result)
    assert "matrix-vector products over as many bytes of weights" in block and "flash_attention:" in block
    assert "x the weights' rate" in block and "cudnn_attention: does not run these shapes here" in block
