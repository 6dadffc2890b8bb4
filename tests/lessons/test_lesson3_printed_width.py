"""What lesson 3 prints on a GPU keeps to the page too (course.formatting.PAGE_WIDTH), though the suite
runs on a CPU: its printers are called here with what a CUDA device gives them (the driver's long
device names, the catalog's sources, a measured GPU's source with its CUDA build, GPU-scale times),
and every print in the lesson's own cells goes through page_lines or a printer that wraps itself,
whichever branch (CPU or GPU) it sits in. The reference run's lines are checked in
tests/lessons/test_printed_width.py."""

from __future__ import annotations

import ast

import pytest
import torch

from course import detect
from course.detect import catalog_accelerator, describe, detect_hardware
from course.device_attention import restrict_attention
from course.formatting import PAGE_WIDTH, page_lines
from course.graphs import path_note
from course.hardware import CATALOG
from course.probes import held_against
from course.readings import disagreement, graph_reading, share, warmup_reading
from course.timing import Sampled
from utils.lessons import REPO

GPU_NAMES = ["NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe", "NVIDIA A100-SXM4-80GB", "NVIDIA GH200 144G HBM3e",
             "NVIDIA RTX PRO 6000 Blackwell Server Edition", "NVIDIA GeForce RTX 4090 Laptop GPU"]
WRAPPED_BY_THEMSELVES = {"describe", "path_note", "restrict_attention", "page_lines"}


def _fits(text: str) -> None:
    wide = [(len(line), line) for line in text.splitlines() if len(line) > PAGE_WIDTH]
    assert not wide, wide


@pytest.fixture
def on_a_gpu(monkeypatch):
    """torch.cuda as a driver answers it, for the name given, and an unknown GPU's figures as measured
    (the measuring itself stubbed: it needs a device)."""
    def use(name: str):
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: name)
        monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device=None: type(
            "Props", (), {"total_memory": 97_000_000_000, "L2_cache_size": 128 * 2**20})())
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
        monkeypatch.setattr(torch, "__version__", "2.13.0+cu128")
        monkeypatch.setattr(detect, "measure_peak_flops", lambda *a, **k: 1.6e15)
        monkeypatch.setattr(detect, "measure_read_bandwidth", lambda *a, **k: 1.4e12)
        monkeypatch.setattr(detect, "_load_average", lambda: 12.25)
    return use


@pytest.mark.parametrize("name", GPU_NAMES)
def test_detecting_and_describing_a_gpu_prints_within_the_page(name, on_a_gpu, capsys, tmp_path):
    on_a_gpu(name)
    acc = detect_hardware("cuda", cache_dir=tmp_path)
    printed = capsys.readouterr().out
    assert name in printed.replace("\n", " ").replace("      ", "")
    said = describe(acc, torch.bfloat16)
    assert said.startswith(acc.name)
    if acc.measured:  # its source names the sizes, load and time: a line that had to be wrapped
        assert "\n" in said and "(measured)" in said
    _fits(printed + said)


def test_every_catalog_entry_is_described_within_the_page():
    for acc in CATALOG.values():
        for dtype in (torch.bfloat16, torch.float32):
            try:
                _fits(describe(acc, dtype))
            except ValueError:   # no dense peak for this dtype in the catalog
                continue
    assert "3350 GB/s" in describe(catalog_accelerator("NVIDIA H100 80GB HBM3"), torch.bfloat16)  # never 3.35e+03


def test_the_gpu_branches_of_the_printers_fit():
    from course.models import ModelConfig
    from course.toy_model import build_model

    _fits(path_note("cuda"))
    model = build_model(ModelConfig("tiny", n_layers=2, d_model=64, n_heads=4, n_kv_heads=2, d_ff=96, vocab_size=97),
                        seed=0)
    said = restrict_attention(model, "cuda", agree={"FLASH_ATTENTION": (False, 0.7),
                                                    "EFFICIENT_ATTENTION": (True, 3.1e-2)}.get)
    assert "efficient_attention only" in said
    _fits(said)
    # GPU-scale runs: a replayed step in microseconds, an eager one launching a few hundred kernels
    eager, graph = Sampled("eager", [4.25e-3, 4.5e-3, 4.75e-3]), Sampled("graph", [1.25e-4, 1.3e-4, 1.35e-4])
    printed = [graph_reading(eager, graph), graph_reading(graph, eager),
               warmup_reading([1.234, 0.0047, 0.0046], eager), warmup_reading([0.0045], eager),
               disagreement(eager, graph, "the prefill of 4096 tokens here", "the prompt sweep's TTFT"),
               held_against(3.9e12, 3.35e12, what="read bandwidth, same cell").note,
               held_against(812e12, 989e12, remeasure=lambda: 990e12, what="matmul rate, same cell").note,
               share(1.2e15, 989e12, "the peak FLOP/s")]
    for text in printed:
        _fits(page_lines(text))
        _fits(page_lines("  " + text))
    assert any(len(line) > PAGE_WIDTH for text in printed for line in text.splitlines())  # wrapping was needed


def _prints(source: str) -> list[ast.Call]:
    tree = ast.parse("\n".join("#" + line[1:] if line.startswith("%") else line for line in source.splitlines()))
    return [node for node in ast.walk(tree) if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "print"]


def test_every_print_of_the_lessons_cells_goes_through_page_lines():
    """Either branch of a cell, the GPU's included: each print's one argument is page_lines(...) or
    a printer that wraps its own lines (graded cells print through course.checks, which wraps)."""
    import nbformat

    path = REPO / "source" / "03_timing_prefill_decode" / "timing_prefill_decode.ipynb"
    unwrapped, seen = [], 0
    for cell in nbformat.read(str(path), as_version=4).cells:
        if cell.cell_type != "code" or cell.metadata.get("nbgrader", {}).get("grade"):
            continue
        for call in _prints(cell.source):
            seen += 1
            arg = call.args[0] if len(call.args) == 1 else None
            if not (isinstance(arg, ast.Call) and isinstance(arg.func, ast.Name) and arg.func.id in WRAPPED_BY_THEMSELVES):
                unwrapped.append(ast.unparse(call)[:100])
    assert seen > 30 and not unwrapped, unwrapped
