"""utils/bench/model.py's parts on a tiny model (the benchmark itself runs with `python -m utils.bench.model`)."""

from __future__ import annotations

import time

import pytest
import torch

from course.threads import set_cpu_threads
from course.models import ModelConfig
from course.toy_model import build_model
from utils.bench import model as bench
from utils.bench import neighbour

TINY = ModelConfig("tiny", n_layers=1, d_model=32, n_heads=2, n_kv_heads=2, d_ff=48, vocab_size=50)


@pytest.fixture(autouse=True)
def _keep_threads():
    """bench.main sets PyTorch's thread count; leave it as the other tests found it."""
    before = torch.get_num_threads()
    yield
    set_cpu_threads(before)  # a number: fixed, not following the load


def test_measure_reports_the_median_per_call():
    t = bench.measure(lambda: time.sleep(0.002), torch.device("cpu"), warmup=1, repeats=3, calls=2, label="sleep")
    assert t.label == "sleep" and 0.0015 < t.seconds < 0.1 and t.spread >= 0


def test_decode_and_prefill_pieces_run_and_count():
    model = build_model(TINY)
    cache, token, position = bench._decode_setup(model, context=5, batch=2)
    assert token.shape == (2, 1) and position.tolist() == [5] and cache.max_seq_len == 6
    step = bench.decode_eager(model, cache, token, position)
    before = [k.clone() for k in cache.k]
    step()
    assert all(not torch.equal(b, k) for b, k in zip(before, cache.k))  # the step wrote slot 5 of every layer
    run, flops = bench.prefill_fn(model, 8, compiled=False)
    run()
    linear = sum(p.numel() for n, p in model.named_parameters() if n.endswith("weight") and "norm" not in n
                 and "embeddings" not in n)
    head = model.output.weight.numel()
    assert flops == 2 * (linear - head) * 8 + 2 * head + 4 * TINY.d_model * 8 * 9 // 2  # the head for the last token; causal attention


def test_targets_match_h100_h200_and_gh200_not_measured_gpus():
    from course.detect import catalog_accelerator
    for name in ("NVIDIA H100 80GB HBM3", "NVIDIA H200", "NVIDIA GH200 480GB"):
        assert bench.is_target_gpu(catalog_accelerator(name).name), name
    assert catalog_accelerator("NVIDIA GH200 480GB").name == "GH200 96GB HBM3"  # its own entry, not the H200's
    assert not bench.is_target_gpu("NVIDIA A100-SXM4-80GB")
    assert not bench.is_target_gpu("NVIDIA H100 NVL (measured)")
    assert not bench.is_target_gpu("CPU: AMD EPYC, 2 threads (measured)")


def test_cpu_timer_synchronises_and_divides_by_calls():
    t = bench.timer_for(torch.device("cpu"), calls=2)(lambda: time.sleep(0.002))
    assert 0.0015 < t < 0.1


def test_bench_runs_end_to_end_on_a_tiny_model(tmp_path, monkeypatch, capsys):
    import json
    from course import models
    monkeypatch.setitem(models.PRESETS, "tiny", TINY)
    monkeypatch.setenv("COURSE_CACHE_DIR", str(tmp_path))
    out = tmp_path / "figures.json"
    assert bench.main(["--device", "cpu", "--preset", "tiny", "--prompt", "16", "--context", "8",
                       "--repeats", "3", "--rounds", "3", "--no-compile", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "bounds, same run" in text and "bare matrix-vector" in text
    record = json.loads(out.read_text())
    for mode in record["decode"]["modes"].values():  # never above 100 %: a number below 1, or None
        assert mode["utilisation"] is None or 0 < mode["utilisation"] <= 1
    for mode in record["prefill"]["modes"].values():
        assert mode["mfu"] is None or 0 < mode["mfu"] <= 1


@pytest.mark.slow
def test_gpu_check_refuses_without_a_gpu_and_renders_a_record(capsys, monkeypatch):
    from utils.bench import gpu_check
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert gpu_check.main([]) == 2
    assert "no CUDA GPU" in capsys.readouterr().err
    facts = {"device": "NVIDIA GH200 480GB", "compute_capability": "9.0", "driver": "560.35", "cuda": "12.6",
             "torch": "2.13.0", "python": "3.11", "load_average": "0.1 0.1 0.1", "date": "2026-12-01 10:00 UTC"}
    cells = [{"cell": 1, "seconds": 2.5, "text": "setup", "error": None},
             {"cell": 9, "seconds": 1.0, "text": "", "error": "RuntimeError: boom"}]
    text = gpu_check.render(facts, cells, 0, "decode ... MBU 61%", {"decode": {"modes": {}}})
    for needle in ("NVIDIA GH200 480GB", "560.35", "2.13.0", "**1 failed**", "cell 9 (RuntimeError: boom)",
                   "decode ... MBU 61%", '"decode"'):
        assert needle in text, needle
    path = gpu_check.record_path(facts)
    assert path.parent.name == "gpu-runs" and path.name.endswith("-nvidia-gh200-480gb.md")


@pytest.mark.parametrize("stale_scale", [1e-3, 1e3])
def test_a_stale_record_never_yields_a_utilisation_above_100_percent(tmp_path, monkeypatch, capsys, stale_scale):
    """A record written under load then reused on a quiet machine (figures far too low), and the
    reverse (far too high): the utilisations come from bounds measured in the same run."""
    import json
    from course import models
    monkeypatch.setitem(models.PRESETS, "tiny", TINY)
    monkeypatch.setenv("COURSE_CACHE_DIR", str(tmp_path))
    assert bench.main(["--device", "cpu", "--preset", "tiny", "--prompt", "16", "--context", "8", "--repeats", "3", "--rounds", "3", "--no-compile",
                       "--threads", "1"]) == 0  # the record is kept per thread count
    record = next(tmp_path.glob("hardware-*.json"))
    data = json.loads(record.read_text())
    data["bandwidth_bytes_per_s"] *= stale_scale
    data["matmul_flops_per_s"] *= stale_scale
    record.write_text(json.dumps(data))
    out = tmp_path / "figures.json"
    assert bench.main(["--device", "cpu", "--preset", "tiny", "--prompt", "16", "--context", "8", "--repeats", "3", "--rounds", "3", "--no-compile",
                       "--threads", "1", "--reuse", "--json", str(out)]) == 0
    assert "reusing figures measured" in capsys.readouterr().out
    figures = json.loads(out.read_text())
    for mode in figures["decode"]["modes"].values():
        assert mode["utilisation"] is None or 0 < mode["utilisation"] <= 1
    for mode in figures["prefill"]["modes"].values():
        assert mode["mfu"] is None or 0 < mode["mfu"] <= 1


def test_compiled_cpu_decode_generates_its_kernels_for_one_thread(monkeypatch):
    """The compiled CPU step's generated kernels (norms, rotary positions, SiLU times the gate:
    a few kilobytes each) are made for one thread, not split over every core; the setting holds
    while the step compiles, on its first call, and is given back."""
    import torch._inductor.config as inductor_config
    seen = []

    def fake_compile(fn, **kwargs):
        assert kwargs == {"fullgraph": True, "dynamic": False}
        return lambda *a, **kw: seen.append(inductor_config.cpp.threads)

    monkeypatch.setattr(bench.torch, "compile", fake_compile)
    before = inductor_config.cpp.threads
    model = build_model(TINY)
    cache, token, position = bench._decode_setup(model, context=5, batch=1)
    step = bench.decode_compiled_cpu(model, cache, token, position)
    assert seen == [1] and inductor_config.cpp.threads == before
    step()
    assert seen == [1, before]


def test_share_of_products_pairs_each_round_and_takes_the_median():
    """Each round's step is held against the products of the same round: a round where both were
    slowed (a neighbour, a page-in) counts at its own ratio, not against another round's best."""
    from course.timing import Sampled
    step = Sampled("decode", [0.040, 0.080, 0.041, 0.039, 0.100])
    products = Sampled("matvec", [0.032, 0.064, 0.0328, 0.0312, 0.030])
    assert neighbour.share_of_products(step, products) == pytest.approx(0.8)  # the step's median against
    # the products' best run (0.041 s against 0.030 s) would have said 73 %
    assert neighbour.share_of_products(step, products, weight_ratio=1.01) == pytest.approx(0.808)
    with pytest.raises(ValueError, match="one sample per round"):
        neighbour.share_of_products(step, Sampled("matvec", [0.03]))


@pytest.mark.slow
def test_neighbour_benchmark_compares_decode_with_bare_products_in_both_conditions(monkeypatch):
    from course import models
    monkeypatch.setitem(models.PRESETS, "tiny", TINY)
    monkeypatch.setattr(neighbour, "decode_compiled_cpu", bench.decode_eager)  # Inductor is tested on its own
    figures = neighbour.neighbour_run("tiny", context=8, rounds=2, threads=1, label="test")
    assert set(figures["conditions"]) == {"quiet", "neighbour"}
    for f in figures["conditions"].values():
        assert f["share"] > 0 and f["threads"] == [1] and f["decode_ms"] > 0 and f["matvec_ms"] > 0
        assert set(f["ways"]) == {"eager", "torch.compile"}
        assert f["share"] == max(w["share"] for w in f["ways"].values()) == f["ways"][f["way"]]["share"]
    assert neighbour.print_neighbour(figures) in ([], ["quiet"], ["neighbour"], ["quiet", "neighbour"])


# --- attention restricted as lesson 3 restricts it; the timed passes' logits checked ------------

def _fake_gpu_build(monkeypatch, verdicts):
    """bench.build on "cuda" with a model on the CPU: an H100's figures, fp32, and each fused
    kernel's agreement with the math kernel given (course.device_attention.agrees)."""
    from course import device_attention
    from course.detect import catalog_accelerator

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(bench, "detect_hardware", lambda device, reuse=False: catalog_accelerator("NVIDIA H100 80GB HBM3"))
    monkeypatch.setattr(bench, "model_dtype", lambda device: torch.float32)
    monkeypatch.setattr(bench, "build_model", lambda preset, device, dtype: build_model(TINY, seed=3))
    monkeypatch.setattr(device_attention, "agrees", lambda model, name: verdicts[name])


def test_on_a_gpu_the_bench_restricts_attention_to_the_first_kernel_that_agrees(monkeypatch, capsys):
    from torch.nn.attention import SDPBackend

    _fake_gpu_build(monkeypatch, {"FLASH_ATTENTION": (False, 0.7), "EFFICIENT_ATTENTION": (True, 1e-3),
                                  "CUDNN_ATTENTION": (True, 0.0)})
    record: dict = {}
    built = bench.build(bench.parse_args(["--preset", "tiny"]), torch.device("cuda"), record)
    assert all(layer.attention.backends == [SDPBackend.EFFICIENT_ATTENTION] for layer in built.model.layers)
    assert "efficient_attention only" in record["attention"] and record["attention"] in capsys.readouterr().out


def test_where_no_kernel_agrees_the_bench_stops_with_a_sentence(monkeypatch, capsys):
    _fake_gpu_build(monkeypatch, {"FLASH_ATTENTION": (False, 0.7), "EFFICIENT_ATTENTION": (False, 0.2),
                                  "CUDNN_ATTENTION": (False, 0.4)})
    assert bench.main(["--device", "cuda", "--preset", "tiny"]) == 1
    said = capsys.readouterr()
    assert "no fused attention kernel" in said.err and "the benchmark stops here rather than time wrong results" in said.err
    assert "decode, batch 1" not in said.out  # nothing was timed


@pytest.fixture
def tiny_cpu(monkeypatch):
    """The tiny preset on the CPU, with fixed figures in place of the second of measurement
    detect_hardware takes (the bounds the bench holds a pass to are measured in its own run)."""
    from course import models
    from course.hardware import Accelerator

    monkeypatch.setitem(models.PRESETS, "tiny", TINY)
    figures = Accelerator("CPU (figures of the test)", {"fp32": 1e11}, 1e10, 1e10, "the test", measured=True)
    monkeypatch.setattr(bench, "detect_hardware", lambda device, reuse=False: figures)


def test_attention_named_on_the_command_line_is_checked_too(tiny_cpu, capsys):
    args = ["--device", "cpu", "--preset", "tiny", "--prompt", "16", "--context", "8", "--repeats", "3",
            "--rounds", "3", "--no-compile", "--threads", "1"]
    assert bench.main(args + ["--attention", "efficient"]) == 1  # no such kernel on a CPU
    assert "efficient_attention: does not run here" in capsys.readouterr().err
    assert bench.main(args + ["--attention", "flash"]) == 0
    assert "attention: flash_attention only" in capsys.readouterr().out


@pytest.mark.parametrize("wrong", ["decode", "prefill"])
def test_a_timed_pass_with_wrong_logits_stops_the_bench(tiny_cpu, monkeypatch, capsys, wrong):
    """A way of decoding (the compiled one, here made wrong) or a prefill whose logits are not those of
    eager attention in the math kernel is never timed: a sentence, exit status 1."""

    def off(make):
        def made(*args, **kwargs):
            made_fn = make(*args, **kwargs)
            fn = made_fn[0] if isinstance(made_fn, tuple) else made_fn

            def shifted():
                return fn() + 1.0
            return (shifted, made_fn[1]) if isinstance(made_fn, tuple) else shifted
        return made

    if wrong == "decode":
        monkeypatch.setattr(bench, "decode_compiled_cpu", off(bench.decode_eager))  # Inductor is tested on its own
    else:
        monkeypatch.setattr(bench, "prefill_fn", off(bench.prefill_fn))
    assert bench.main(["--device", "cpu", "--preset", "tiny", "--prompt", "16", "--context", "8", "--repeats", "3",
                       "--rounds", "3", "--threads", "1"] + (["--no-compile"] if wrong == "prefill" else [])) == 1
    said = capsys.readouterr()
    what = "decode (torch.compile)" if wrong == "decode" else "prefill (eager)"
    assert f"{what} gives logits that differ from eager attention in the math kernel" in said.err, said.err
