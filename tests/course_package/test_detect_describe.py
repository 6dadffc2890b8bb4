"""describe() names where the figures come from once: a measured source must not read "(measured: measured ...)"."""
import torch

from course.detect import _measured_source, describe
from course.hardware import Accelerator


def _data() -> dict:
    return {"measured_at": 0, "load_average": 0.5, "read_bytes": 256 * 2**20, "matmul_n": 2048,
            "matmul_flops_per_s": 1e11, "bandwidth_bytes_per_s": 2e10}


def test_measured_source_is_not_prefixed_twice():
    acc = Accelerator("CPU: test, 2 threads (measured)", {"fp32": 1e11}, 2e10, 2**34,
                      source=_measured_source(_data(), torch.float32), measured=True)
    line = " ".join(describe(acc, torch.float32).split())  # as one line, however the page wraps it
    assert "measured: measured" not in line
    assert "(measured on this machine at" in line


def test_spec_sheet_source_keeps_its_label():
    acc = Accelerator("GPU: test", {"bf16": 1e15}, 3e12, 2**36, source="vendor datasheet")
    assert "(spec sheet: vendor datasheet)" in describe(acc, torch.bfloat16)
