"""course/: facts and helpers behave, and bad input gets an error naming the problem."""

from __future__ import annotations


import pytest

from course import checks, quiz
from course.hardware import CATALOG, Accelerator, get_accelerator
from course.models import PRESETS, ModelConfig, get_model_config
from course.progress import progress


def test_reference_figures_are_dense():
    h100 = get_accelerator("H100 SXM")
    assert h100.peak("bf16") == 989e12 and h100.bandwidth_bytes_per_s == 3.35e12
    assert get_accelerator("h200").bandwidth_bytes_per_s == 4.8e12
    assert get_accelerator("A100 80GB SXM").bandwidth_bytes_per_s == 2.039e12
    assert get_accelerator("MI300X").peak("bf16") == pytest.approx(1307.4e12)
    # the H100 ridge point the scaling-book quotes
    assert round(h100.peak("bf16") / h100.bandwidth_bytes_per_s) == 295


def test_capacities_are_binary_as_the_cards_have_them():
    gib = 2 ** 30
    assert get_accelerator("A100 80GB SXM").memory_bytes == 80 * gib  # nvidia-smi: 81,920 MiB
    assert get_accelerator("H100 SXM").memory_bytes == 80 * gib
    assert get_accelerator("A100 40GB SXM").memory_bytes == 40 * gib
    assert get_accelerator("H200 SXM").memory_bytes == 140 * gib  # the datasheet's "141GB"
    # Llama-2-7B in bf16 on 80 GiB holds 33 caches of 4,096 tokens (524,288 bytes per token)
    assert (80 * gib - 2 * 6_738_415_616) // (4096 * 524_288) == 33


def test_a100_pcie_is_its_own_entry():
    pcie = get_accelerator("NVIDIA A100 80GB PCIe")
    assert pcie.name == "A100 80GB PCIe" and pcie.bandwidth_bytes_per_s == 1.935e12
    assert get_accelerator("NVIDIA A100-SXM4-80GB").bandwidth_bytes_per_s == 2.039e12


def test_hardware_module_cites_datasheets_not_notes():
    import inspect

    import course.hardware

    source = inspect.getsource(course.hardware)
    assert "reference" not in source and "shared/" not in source


def test_lookup_accepts_device_names_and_aliases():
    assert get_accelerator("NVIDIA H100 80GB HBM3").name == "H100 SXM"
    assert get_accelerator("nvidia_h200").name == "H200 SXM"
    assert get_accelerator(" nvidia  A10 ").name == "A10"


def test_unknown_accelerator_lists_known_names():
    with pytest.raises(ValueError) as err:
        get_accelerator("TPU v9")
    assert "TPU v9" in str(err.value) and "H100 SXM" in str(err.value)


def test_unknown_dtype_is_named():
    with pytest.raises(ValueError, match="int3"):
        get_accelerator("L4").peak("int3")


@pytest.mark.parametrize("field, value", [("bandwidth_bytes_per_s", -1.0), ("bandwidth_bytes_per_s", 0),
                                          ("memory_bytes", float("nan"))])
def test_accelerator_rejects_impossible_figures(field, value):
    kwargs = dict(name="x", peak_flops_per_s={"bf16": 1e12}, bandwidth_bytes_per_s=1e9, memory_bytes=1e9, source="t")
    kwargs[field] = value
    with pytest.raises(ValueError, match=field):
        Accelerator(**kwargs)


def test_every_catalog_entry_has_a_source():
    assert all(a.source for a in CATALOG.values())


def test_model_presets():
    llama = get_model_config("llama-2-7b")
    assert (llama.head_dim, llama.gqa_group_size) == (128, 1)
    assert get_model_config("llama-2-70b").gqa_group_size == 8
    assert {"toy-cpu", "toy-gpu"} <= set(PRESETS)
    with pytest.raises(ValueError, match="llama-2-7b"):
        get_model_config("gpt-5")


@pytest.mark.parametrize("kwargs, names", [
    (dict(n_kv_heads=64), "n_kv_heads"),
    (dict(n_heads=3, n_kv_heads=3), "does not divide d_model"),
    (dict(n_kv_heads=3), "multiple of n_kv_heads"),
    (dict(n_layers=0), "n_layers"),
    (dict(d_ff=-5), "d_ff"),
])
def test_model_config_rejects_impossible_shapes(kwargs, names):
    base = dict(name="t", n_layers=2, d_model=64, n_heads=8, n_kv_heads=8, d_ff=128, vocab_size=100)
    base.update(kwargs)
    with pytest.raises(ValueError, match=names):
        ModelConfig(**base)


def test_check_close_prints_expected_and_returned(capsys):
    checks.check_close("ttft", 0.4000000001, 0.4)
    assert "expected 0.4, returned 0.4" in capsys.readouterr().out
    with pytest.raises(checks.CheckFailed, match="expected 0.4, returned 0.5"):
        checks.check_close("ttft", 0.5, 0.4)
    with pytest.raises(checks.CheckFailed, match="type NoneType"):
        checks.check_close("ttft", None, 0.4)


def test_check_raises_wants_a_value_error_naming_the_argument(capsys):
    def good(bandwidth):
        raise ValueError("bandwidth must be positive")

    checks.check_raises("neg bw", good, -1, names="bandwidth")
    with pytest.raises(checks.CheckFailed, match="naming 'bandwidth'"):
        checks.check_raises("neg bw", lambda b: (_ for _ in ()).throw(ValueError("bad")), -1, names="bandwidth")
    with pytest.raises(checks.CheckFailed, match="returned -1"):
        checks.check_raises("neg bw", lambda b: b, -1)
    with pytest.raises(checks.CheckFailed, match="not written yet"):
        checks.check_raises("stub", lambda b: (_ for _ in ()).throw(NotImplementedError()), 1)


def test_quiz_accepts_only_an_option(capsys):
    quiz.check_choice("q1", " B ", "abcd")
    assert "'b' recorded" in capsys.readouterr().out
    for bad in ("e", None, 2):
        with pytest.raises(ValueError, match="q1"):
            quiz.check_choice("q1", bad, "abcd")


def test_progress_yields_everything_and_writes_to_stdout(capsys):
    assert list(progress(range(4), label="sweep")) == [0, 1, 2, 3]
    captured = capsys.readouterr()
    assert "4/4" in captured.out and captured.err == ""
