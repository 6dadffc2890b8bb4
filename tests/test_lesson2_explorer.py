"""course/explorer.py: the lesson-2 roofline explorer wires the student's functions to widgets.

Fake calculator functions stand in for the student's (the explorer holds no formula itself).
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from course import explorer  # noqa: E402
from course.explorer import DTYPE_BYTES, Calculator, explorer_figure, roofline_explorer  # noqa: E402


def fake_calculator(calls: list | None = None, broken: bool = False) -> Calculator:
    calls = [] if calls is None else calls

    def param_count(cfg):
        if broken:
            raise NotImplementedError()
        return 1_000

    def kv_cache_bytes(cfg, n_tokens, batch, bytes_per_elem):
        calls.append(("kv", cfg.name, n_tokens, batch, bytes_per_elem))
        return 10.0 * n_tokens * batch

    def step(kind):
        def run(cfg, n_params, batch, length, peak, bandwidth, weight_bytes, kv_bytes):
            calls.append((kind, cfg.name, n_params, batch, length, peak, bandwidth, weight_bytes, kv_bytes))
            return {"flops": 1.0, "bytes": 1.0, "intensity": 3.0 if kind == "prefill" else 0.5,
                    "time_s": 0.002, "bound": "compute" if kind == "prefill" else "memory"}
        return run

    def plot_roofline(ax, peak, bandwidth, points):
        calls.append(("plot", peak, bandwidth, [(label, i) for label, i, _ in points]))
        ax.plot([0.1, 1.0], [1.0, 2.0])
        return ax

    return Calculator(param_count, kv_cache_bytes, step("prefill"), step("decode"), plot_roofline)


def test_dtype_bytes():
    assert DTYPE_BYTES == {"bf16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5}


def test_frame_calls_the_students_functions_with_catalog_figures():
    calls: list = []
    fig, summary = explorer_figure(fake_calculator(calls), "llama-2-7b", "H100 SXM", batch=8,
                                   prompt_len=512, context_len=2048, weight_dtype="int4", kv_dtype="int8")
    try:
        prefill = next(c for c in calls if c[0] == "prefill")
        decode = next(c for c in calls if c[0] == "decode")
        assert prefill == ("prefill", "llama-2-7b", 1_000, 8, 512, 989e12, 3.35e12, 0.5, 1.0)
        assert decode == ("decode", "llama-2-7b", 1_000, 8, 2048, 989e12, 3.35e12, 0.5, 1.0)
        assert ("kv", "llama-2-7b", 2048, 8, 1.0) in calls
        plotted = next(c for c in calls if c[0] == "plot")
        assert plotted[1:3] == (989e12, 3.35e12) and [i for _, i in plotted[3]] == [3.0, 0.5]
        assert "TTFT >= 2.00 ms" in summary and "TPOT >= 2.00 ms" in summary
        assert "fits" in summary and "NOT" not in summary  # 500 + 163,840 bytes in 80 GB
    finally:
        plt.close(fig)


def test_frame_says_when_the_model_does_not_fit():
    calc = fake_calculator()
    calc = Calculator(lambda cfg: 1e12, calc.kv_cache_bytes, calc.prefill_step, calc.decode_step, calc.plot_roofline)
    fig, summary = explorer_figure(calc, "llama-2-70b", "L4", 1, 16, 16)
    plt.close(fig)
    assert "does NOT fit" in summary


def test_skipped_under_autograding(monkeypatch, capsys):
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    assert roofline_explorer(*fake_calculator(broken=True).__dict__.values()) is None
    assert "skipped" in capsys.readouterr().out


def test_builds_widgets_and_reports_unwritten_functions(monkeypatch, capsys):
    pytest.importorskip("ipywidgets")
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    ui = roofline_explorer(*fake_calculator(broken=True).__dict__.values())
    assert ui is not None and len(ui.children) == 4
    assert "NotImplementedError" in capsys.readouterr().out
    plt.close("all")


def test_explorer_module_has_no_formula_of_its_own():
    """The explorer may only wire things up: no ridge, roofline or KV formula inside it."""
    import inspect

    source = inspect.getsource(explorer)
    for forbidden in ("np.minimum", "min(peak", "/ bandwidth", "2 * cfg.n_layers", "n_kv_heads *"):
        assert forbidden not in source, forbidden
