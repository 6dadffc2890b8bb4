"""Hardware detection (course/detect.py), the device and its dtype (course/device.py), CPU threads
(course/threads.py), timing in turns (course/timing.py) and the probes (course/probes.py), with
tiny measurements so the suite stays fast."""

from __future__ import annotations

import json
import math
import re
import time

import pytest
import torch

from course import detect, device, probes, threads, timing


def test_cpu_detection_is_measured_afresh_and_reused_only_when_asked(tmp_path, capsys):
    kw = dict(device="cpu", cache_dir=tmp_path, read_bytes=8 * 2**20, matmul_n=128, min_run_time=0.05)
    acc = detect.detect_hardware(**kw)
    assert acc.measured and "measured" in acc.name and "measured" in acc.source
    assert 0 < acc.bandwidth_bytes_per_s < math.inf and 0 < acc.peak("fp32") < math.inf  # a rate, at any load
    assert acc.memory_bytes > 2**28
    files = list(tmp_path.glob("hardware-*.json"))
    assert len(files) == 1
    data = json.loads(files[0].read_text())
    assert data["bandwidth_bytes_per_s"] == acc.bandwidth_bytes_per_s and "load_average" in data
    data["bandwidth_bytes_per_s"] = 123.0  # a stale record, e.g. written while the machine was busy
    files[0].write_text(json.dumps(data))
    capsys.readouterr()
    assert detect.detect_hardware(**kw).bandwidth_bytes_per_s != 123.0  # never reused silently
    files[0].write_text(json.dumps(data))
    reused = detect.detect_hardware(reuse=True, **kw)  # only when asked, saying how old it is
    assert reused.bandwidth_bytes_per_s == 123.0
    out = capsys.readouterr().out
    assert "reusing figures measured" in out and str(files[0]) in out


def test_refresh_is_the_old_spelling_and_no_cache(tmp_path):
    kw = dict(device="cpu", read_bytes=4 * 2**20, matmul_n=64, min_run_time=0.02, verbose=False)
    detect.detect_hardware(cache_dir=tmp_path, **kw)
    path = next(tmp_path.glob("hardware-*.json"))
    data = json.loads(path.read_text())
    data["bandwidth_bytes_per_s"] = 123.0
    path.write_text(json.dumps(data))
    assert detect.detect_hardware(cache_dir=tmp_path, refresh=False, **kw).bandwidth_bytes_per_s == 123.0
    assert detect.detect_hardware(cache_dir=tmp_path, refresh=True, **kw).bandwidth_bytes_per_s != 123.0
    assert detect.detect_hardware(use_cache=False, cache_dir=tmp_path / "unused", **kw).measured
    assert not (tmp_path / "unused").exists()


def test_corrupt_cache_is_measured_again(tmp_path):
    kw = dict(device="cpu", read_bytes=4 * 2**20, matmul_n=64, min_run_time=0.02, verbose=False)
    detect.detect_hardware(cache_dir=tmp_path, **kw)
    path = next(tmp_path.glob("hardware-*.json"))
    path.write_text("not json")
    assert 0 < detect.detect_hardware(cache_dir=tmp_path, reuse=True, **kw).bandwidth_bytes_per_s < math.inf


def test_cpu_defaults():
    assert device.model_dtype("cpu") == torch.float32
    assert device.dtype_name(torch.float32) == "fp32" and device.dtype_name(torch.bfloat16) == "bf16"
    device.synchronize("cpu")  # nothing to wait for, must not fail
    before = torch.get_num_threads()
    try:
        assert threads.set_cpu_threads() == torch.get_num_threads()
        assert 1 <= torch.get_num_threads() <= threads.cpu_threads()
        with pytest.raises(ValueError, match="threads"):
            threads.set_cpu_threads(0)
    finally:
        threads.set_cpu_threads(before)  # a number: fixed again, as the other tests expect


def test_cache_dir_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("COURSE_CACHE_DIR", str(tmp_path))
    assert detect.default_cache_dir() == tmp_path
    monkeypatch.delenv("COURSE_CACHE_DIR")
    assert detect.default_cache_dir().name in (".course_cache", "prefill-decode-course")


class _FakeCuda:
    """Enough of torch.cuda for detect_hardware's GPU branch, without a GPU."""

    def __init__(self, name, capability=(9, 0)):
        self.name, self.capability = name, capability

    def get_device_name(self, device=None):
        return self.name

    def get_device_capability(self, device=None):
        return self.capability

    def is_bf16_supported(self):
        return True  # as torch says on a T4 or V100 too: emulated bf16 counts


@pytest.mark.parametrize("name, expected", [("NVIDIA H100 80GB HBM3", "H100 SXM"), ("NVIDIA H200", "H200 SXM"),
                                            ("NVIDIA GH200 480GB", "GH200 96GB HBM3"),
                                            ("NVIDIA GH200 144G HBM3e", "GH200 144GB HBM3e"),
                                            ("NVIDIA A100-SXM4-80GB", "A100 80GB SXM")])
def test_known_gpu_comes_from_the_catalog(monkeypatch, name, expected):
    monkeypatch.setattr(detect.torch, "cuda", _FakeCuda(name))
    acc = detect.detect_hardware("cuda", verbose=False)
    assert acc.name == expected and not acc.measured


def test_gh200_is_not_the_h200():
    """NVIDIA's GH200 datasheet: 96 GB of HBM3 at 4.0 TB/s, or 144 GB of HBM3e at 4.9 TB/s; the
    H200 has 141 GB at 4.8 TB/s. The tensor-core rates are Hopper's (dense bf16 989 TFLOP/s)."""
    from course.hardware import get_accelerator
    hbm3, hbm3e, h200 = (get_accelerator(n) for n in ("GH200 96GB HBM3", "GH200 144GB HBM3e", "H200 SXM"))
    assert (hbm3.bandwidth_bytes_per_s, hbm3.memory_bytes) == (4.0e12, 96 * 2**30)
    assert (hbm3e.bandwidth_bytes_per_s, hbm3e.memory_bytes) == (4.9e12, 144 * 2**30)
    assert hbm3.peak("bf16") == hbm3e.peak("bf16") == h200.peak("bf16") == 989e12
    assert "96GB HBM3" in hbm3.source and "144GB HBM3e" in hbm3e.source
    assert h200.bandwidth_bytes_per_s == 4.8e12


def test_unknown_gpu_is_said_so_and_measured(monkeypatch, tmp_path, capsys):
    class Props:
        total_memory = 16 * 2**30
        L2_cache_size = 4 * 2**20

    fake = _FakeCuda("Mystery GPU 9000")
    fake.get_device_properties = lambda device=None: Props()
    fake.is_bf16_supported = lambda: True
    monkeypatch.setattr(detect.torch, "cuda", fake)
    monkeypatch.setattr(detect, "measure_read_bandwidth", lambda device, nbytes, t: 1e12)
    monkeypatch.setattr(detect, "measure_peak_flops", lambda device, dtype, sizes, t: 1e14)
    acc = detect.detect_hardware("cuda", cache_dir=tmp_path)
    out = capsys.readouterr().out
    assert "not in the course catalog" in out and "measuring" in out
    assert acc.measured and acc.bandwidth_bytes_per_s == 1e12 and acc.peak("bf16") == 1e14
    assert acc.l2_cache_bytes == 4 * 2**20


@pytest.mark.parametrize("name, capability, hip, dtype", [
    ("NVIDIA H100 80GB HBM3", (9, 0), None, torch.bfloat16),
    ("NVIDIA A100-SXM4-80GB", (8, 0), None, torch.bfloat16),
    ("NVIDIA L4", (8, 9), None, torch.bfloat16),
    ("Tesla T4", (7, 5), None, torch.float16),  # is_bf16_supported() says True; it is emulated
    ("Tesla V100-SXM2-16GB", (7, 0), None, torch.float16),
    ("AMD Instinct MI300X", (9, 4), "6.2", torch.bfloat16),
])
def test_bf16_only_where_the_gpu_computes_it_natively(monkeypatch, name, capability, hip, dtype):
    monkeypatch.setattr(device.torch, "cuda", _FakeCuda(name, capability))
    monkeypatch.setattr(device.torch.version, "hip", hip, raising=False)
    assert device.model_dtype("cuda") == dtype
    assert device.native_bf16("cuda") == (dtype == torch.bfloat16)
    assert not device.native_bf16("cpu")


def test_threads_follow_the_free_cores(monkeypatch):
    monkeypatch.setattr(threads, "cpu_threads", lambda: 2)
    monkeypatch.setattr(threads.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(threads, "busy_cores", lambda *a, **k: 0.0)
    assert threads.free_cpu_cores() == 2
    monkeypatch.setattr(threads, "busy_cores", lambda *a, **k: 1.0)
    assert threads.free_cpu_cores() == 1
    monkeypatch.setattr(threads, "busy_cores", lambda *a, **k: 7.0)  # load 8 on 2 cores: still one thread
    assert threads.free_cpu_cores() == 1
    assert threads.busy_cores() == 7.0
    # 4 of a 64-core host's cores, 32 tasks running elsewhere on it: about 2 of ours are busy
    monkeypatch.setattr(threads, "cpu_threads", lambda: 4)
    monkeypatch.setattr(threads.os, "cpu_count", lambda: 64)
    monkeypatch.setattr(threads, "busy_cores", lambda *a, **k: 32.0)
    assert threads.free_cpu_cores() == 2


def test_busy_cores_reads_the_running_tasks():
    assert 0.0 <= threads.busy_cores(samples=2, interval_s=0.0) < 1000


def test_interleave_alternates_and_warms_up_each_function():
    calls = []
    fns = {name: (lambda name=name: calls.append(name)) for name in "abc"}
    result = timing.interleave(fns, rounds=3, warmup=1, timer=lambda fn: (fn(), 0.5)[1])
    assert calls == list("abc") + list("abc") + list("cba") + list("abc")
    assert set(result) == set("abc") and result["a"].samples == [0.5] * 3
    assert result["b"].median == 0.5 and result["b"].rel_spread == 0.0
    with pytest.raises(ValueError, match="rounds"):
        timing.interleave(fns, rounds=0)
    with pytest.raises(ValueError, match="fns"):
        timing.interleave({})


def test_sampled_statistics():
    s = timing.Sampled("x", [0.3, 0.1, 0.2, 0.4])
    assert s.median == pytest.approx(0.25) and s.low == 0.1 and s.high == 0.4
    assert s.rel_spread == pytest.approx(0.3 / 0.25)


def test_a_utilisation_above_100_percent_is_never_shown():
    ok = probes.held_against(18e9, 40e9, what="the read bandwidth")
    assert ok.fraction == pytest.approx(0.45) and ok.percent() == "45%"
    fresh = iter([30e9, 60e9])  # the first bound was measured under load: measured again, the best kept
    again = probes.held_against(50e9, 20e9, remeasure=lambda: next(fresh))
    assert again.fraction == pytest.approx(50 / 60) and "measured again 2" in again.note
    stuck = probes.held_against(50e9, 20e9, remeasure=lambda: 21e9)
    assert stuck.fraction is None and stuck.percent() == "not shown" and "%" not in stuck.note
    assert "was measured under other load than this figure" in stuck.note
    assert probes.held_against(50e9, 20e9).fraction is None
    with pytest.raises(ValueError, match="bound"):
        probes.held_against(1.0, float("nan"))


def test_probes_read_and_multiply_the_bytes_they_claim():
    from course.models import ModelConfig
    from course.toy_model import build_model
    model = build_model(ModelConfig("tiny", n_layers=1, d_model=32, n_heads=2, n_kv_heads=2, d_ff=48, vocab_size=50))
    run, nbytes = probes.matvec_probe(model)
    run()
    assert nbytes == model.decode_weight_bytes() - sum(p.nbytes for n, p in model.named_parameters() if p.ndim == 1)
    assert float(probes.read_probe(4096)()) == 1024.0
    mm, flops = probes.matmul_probe(16)
    assert mm().shape == (16, 16) and flops == 2 * 16**3
    assert 0 < probes.measure_read_bandwidth("cpu", 4 * 2**20, 0.02) < math.inf


def test_in_turns_keeps_the_runs_after_warm_up_and_shows_progress(capsys):
    seen = []
    runs = timing.in_turns([1, 2], lambda p: seen.append(p) or 10 * p + len(seen), rounds=2, warmup=1, label="sweep")
    assert seen == [1, 2, 1, 2, 2, 1]  # warm-up of each point, then forwards and backwards
    assert runs == {1: [13, 16], 2: [24, 25]}
    assert [s.median for s in timing.sampled(runs)] == [14.5, 24.5]
    out = capsys.readouterr().out
    assert "sweep [" in out and "6/6 runs" in out and "left" in out and out.endswith("\n")
    med, (below, above) = timing.error_bars(timing.sampled(runs), scale=2.0)
    assert med == [29.0, 49.0] and below == [3.0, 1.0] and above == [3.0, 1.0]
    a, b, c = timing.Sampled("a", [1.0, 2.0]), timing.Sampled("b", [1.5, 3.0]), timing.Sampled("c", [5.0, 9.0])
    assert timing.overlap(a, b) and not timing.overlap(a, c)
    assert timing.too_noisy([a, timing.Sampled("d", [1.0, 1.1])]) == [0]


def as_a_terminal_shows(text: str) -> list[str]:
    """The lines a terminal (or JupyterLab's output area) shows for `text`: a carriage return goes
    back to the start of the line and what follows overwrites it, character by character."""
    shown = []
    for line in text.split("\n"):
        screen: list[str] = []
        for part in line.split("\r"):
            screen[:len(part)] = part
        shown.append("".join(screen).rstrip())
    return shown


def test_every_bar_ends_on_its_last_line_alone(capsys, monkeypatch):
    """The last redraw is shorter than the ones before (no "about N s left"): nothing of a longer
    line may stay after it, for the bars of progress(), in_turns and the sweeps alike."""
    from course.progress import Progress, progress

    clock = iter(range(0, 1000, 3))
    monkeypatch.setattr(time, "perf_counter", lambda: float(next(clock)))
    bar = Progress(10, "prompt length", unit="calls")
    for _ in range(9):
        bar.advance()
    bar.close()
    lines = as_a_terminal_shows(capsys.readouterr().out)
    assert lines[-1] == "" and re.fullmatch(r"prompt length \[#{30}\] 10/10 calls, \d+\.0 s", lines[0]), lines
    list(progress(range(3), "counting FLOPs"))
    timing.in_turns([1, 2], lambda p: p, rounds=2, warmup=1, label="sweep")
    for line in as_a_terminal_shows(capsys.readouterr().out)[:-1]:
        assert line.endswith(" s") and "left" not in line, line


def test_progress_rejects_a_bad_total():
    from course.progress import Progress
    with pytest.raises(ValueError, match="total"):
        Progress(-1)


def test_threads_chosen_without_a_number_follow_the_load_every_round(monkeypatch):
    """set_cpu_threads() re-reads the free cores before every round of interleave; a number fixes them."""
    before = torch.get_num_threads()
    free = iter([2, 1, 1, 2, 2, 2])
    monkeypatch.setattr(threads, "free_cpu_cores", lambda *a, **k: next(free))
    seen = []
    try:
        assert threads.set_cpu_threads() == 2
        timing.interleave({"a": lambda: seen.append(torch.get_num_threads())}, rounds=3, warmup=1)
        assert seen == [1, 1, 2, 2]  # warm-up and round 0 on the first re-read, rounds 1 and 2 on the next
        threads.set_cpu_threads(2)
        seen.clear()
        timing.interleave({"a": lambda: seen.append(torch.get_num_threads())}, rounds=2, warmup=0)
        assert seen == [2, 2] and next(free) == 2  # fixed: the load was not read again
    finally:
        threads.set_cpu_threads(before)


def test_busy_cores_leaves_out_this_process_own_threads(monkeypatch):
    monkeypatch.setattr(threads, "_own_running_threads", lambda: 3)
    real_read = threads.Path.read_text
    monkeypatch.setattr(threads.Path, "read_text",
                        lambda self, *a, **k: "1.0 1.0 1.0 4/100 7" if str(self) == "/proc/loadavg" else real_read(self, *a, **k))
    assert threads.busy_cores(samples=1) == 1.0  # 4 running, 3 of them ours
    monkeypatch.undo()
    assert threads._own_running_threads() >= 1  # at least the thread that reads


def test_course_asks_for_sleeping_openmp_workers():
    import os
    import course
    assert os.environ.get("OMP_WAIT_POLICY")  # set by the course (or by whoever ran the tests) before torch loaded
    assert "OMP_WAIT_POLICY" in course.__doc__


def test_an_unknown_gpus_peak_is_measured_as_a_bench_measures_it(monkeypatch, tmp_path):
    """An unknown GPU's peak: bf16 square matmuls of several sizes, the best of repeated runs (a
    single matmul between two synchronisations undershoots), not the CPU's median of one size."""
    seen = []
    monkeypatch.setattr(detect, "measure_peak_flops", lambda dev, dtype, sizes, t: seen.append((dev.type, dtype, sizes))
                        or 7e14)
    monkeypatch.setattr(detect, "measure_read_bandwidth", lambda dev, nbytes, t: 3e12)
    monkeypatch.setattr(detect, "measure_matmul_flops", lambda *a: pytest.fail("one size's median for a GPU"))
    data = detect._measure(torch.device("cuda"), "gpu", tmp_path, False, False, 2**30, 8192, torch.bfloat16, 0.1)
    assert seen == [("cuda", torch.bfloat16, probes.PEAK_SIZES)] and len(probes.PEAK_SIZES) >= 3
    assert data["matmul_flops_per_s"] == 7e14
    assert "best of 2048^3, 4096^3, 8192^3 bf16 matmuls" in detect._measured_source(data, torch.bfloat16)
    times = {64: 1e-3, 128: 2e-3, 256: 40e-3}  # the best size wins: 2 * 128^3 / 2 ms
    best = probes.measure_peak_flops("cpu", torch.float32, (64, 128, 256),
                                     seconds=lambda stmt, env, t: times[env["a"].shape[0]])
    assert best == pytest.approx(2 * 128**3 / 2e-3)
