"""Hardware detection (course/device.py), with tiny measurements so the suite stays fast."""

from __future__ import annotations

import json

import pytest
import torch

from course import device as dev


def test_cpu_detection_is_measured_and_cached(tmp_path, capsys):
    kw = dict(device="cpu", cache_dir=tmp_path, copy_bytes=8 * 2**20, matmul_n=128, min_run_time=0.05)
    acc = dev.detect_hardware(**kw)
    assert acc.measured and "measured" in acc.name and "measured" in acc.source
    assert acc.bandwidth_bytes_per_s > 1e8 and acc.peak("fp32") > 1e8
    assert acc.memory_bytes > 2**28
    files = list(tmp_path.glob("hardware-*.json"))
    assert len(files) == 1
    data = json.loads(files[0].read_text())
    assert data["bandwidth_bytes_per_s"] == acc.bandwidth_bytes_per_s
    capsys.readouterr()
    again = dev.detect_hardware(**kw)  # from the cache: same figures, says where they came from
    assert again == acc
    assert str(files[0]) in capsys.readouterr().out


def test_refresh_and_no_cache(tmp_path):
    kw = dict(device="cpu", copy_bytes=4 * 2**20, matmul_n=64, min_run_time=0.02, verbose=False)
    dev.detect_hardware(cache_dir=tmp_path, **kw)
    path = next(tmp_path.glob("hardware-*.json"))
    data = json.loads(path.read_text())
    data["bandwidth_bytes_per_s"] = 123.0
    path.write_text(json.dumps(data))
    assert dev.detect_hardware(cache_dir=tmp_path, **kw).bandwidth_bytes_per_s == 123.0
    assert dev.detect_hardware(cache_dir=tmp_path, refresh=True, **kw).bandwidth_bytes_per_s != 123.0
    assert dev.detect_hardware(use_cache=False, cache_dir=tmp_path / "unused", **kw).measured
    assert not (tmp_path / "unused").exists()


def test_corrupt_cache_is_measured_again(tmp_path):
    kw = dict(device="cpu", copy_bytes=4 * 2**20, matmul_n=64, min_run_time=0.02, verbose=False)
    dev.detect_hardware(cache_dir=tmp_path, **kw)
    path = next(tmp_path.glob("hardware-*.json"))
    path.write_text("not json")
    assert dev.detect_hardware(cache_dir=tmp_path, **kw).bandwidth_bytes_per_s > 1e8


def test_cpu_defaults():
    assert dev.model_dtype("cpu") == torch.float32
    assert dev.dtype_name(torch.float32) == "fp32" and dev.dtype_name(torch.bfloat16) == "bf16"
    dev.synchronize("cpu")  # nothing to wait for, must not fail
    before = torch.get_num_threads()
    try:
        assert dev.set_cpu_threads() == dev.cpu_threads() == torch.get_num_threads()
        with pytest.raises(ValueError, match="threads"):
            dev.set_cpu_threads(0)
    finally:
        torch.set_num_threads(before)


def test_cache_dir_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("COURSE_CACHE_DIR", str(tmp_path))
    assert dev.default_cache_dir() == tmp_path
    monkeypatch.delenv("COURSE_CACHE_DIR")
    assert dev.default_cache_dir().name in (".course_cache", "prefill-decode-course")


class _FakeCuda:
    """Enough of torch.cuda for detect_hardware's GPU branch, without a GPU."""

    def __init__(self, name):
        self.name = name

    def get_device_name(self, device=None):
        return self.name


@pytest.mark.parametrize("name, expected", [("NVIDIA H100 80GB HBM3", "H100 SXM"), ("NVIDIA H200", "H200 SXM"),
                                            ("NVIDIA A100-SXM4-80GB", "A100 80GB SXM")])
def test_known_gpu_comes_from_the_catalog(monkeypatch, name, expected):
    monkeypatch.setattr(dev.torch, "cuda", _FakeCuda(name))
    acc = dev.detect_hardware("cuda", verbose=False)
    assert acc.name == expected and not acc.measured


def test_unknown_gpu_is_said_so_and_measured(monkeypatch, tmp_path, capsys):
    class Props:
        total_memory = 16 * 2**30
        L2_cache_size = 4 * 2**20

    fake = _FakeCuda("Mystery GPU 9000")
    fake.get_device_properties = lambda device=None: Props()
    fake.is_bf16_supported = lambda: True
    monkeypatch.setattr(dev.torch, "cuda", fake)
    monkeypatch.setattr(dev, "measure_copy_bandwidth", lambda device, nbytes, t: 1e12)
    monkeypatch.setattr(dev, "measure_matmul_flops", lambda device, n, dtype, t: 1e14)
    acc = dev.detect_hardware("cuda", cache_dir=tmp_path)
    out = capsys.readouterr().out
    assert "not in the course catalog" in out and "measuring" in out
    assert acc.measured and acc.bandwidth_bytes_per_s == 1e12 and acc.peak("bf16") == 1e14
    assert acc.l2_cache_bytes == 4 * 2**20
