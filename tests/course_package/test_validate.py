"""course/validate.py: the argument checks that lesson 3's stubs call in given lines, so that an
exercise is about its idea while bad input still gets an error naming the argument."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from course.validate import integers, non_negative, positive, token_ids


def test_good_arguments_pass():
    integers(at_least=0, warmup=0)
    integers(at_least=1, repeats=3, n_out=np.int64(2))
    non_negative(weight_bytes=0, kv_bytes=2.5e8, flops=np.float64(1e12))
    positive(tpot_s=0.014, peak=torch.tensor(2e12))
    token_ids(prompt=torch.tensor([[1, 2, 3]]))


@pytest.mark.parametrize("check, kwargs, error, name", [
    (lambda **kw: integers(at_least=0, **kw), {"warmup": -1}, ValueError, "warmup"),
    (lambda **kw: integers(at_least=1, **kw), {"repeats": 0}, ValueError, "repeats"),
    (lambda **kw: integers(at_least=1, **kw), {"repeats": 2.0}, TypeError, "repeats"),
    (lambda **kw: integers(at_least=1, **kw), {"n_out": True}, TypeError, "n_out"),
    (non_negative, {"weight_bytes": -1.0}, ValueError, "weight_bytes"),
    (non_negative, {"kv_bytes": float("nan")}, ValueError, "kv_bytes"),
    (non_negative, {"flops": "1e12"}, TypeError, "flops"),
    (positive, {"tpot_s": 0.0}, ValueError, "tpot_s"),
    (positive, {"prefill_s": float("nan")}, ValueError, "prefill_s"),
    (positive, {"peak_bytes_per_s": float("inf")}, ValueError, "peak_bytes_per_s"),
    (positive, {"peak_flops_per_s": -2e12}, ValueError, "peak_flops_per_s"),
    (token_ids, {"prompt": torch.zeros((1, 0), dtype=torch.long)}, ValueError, "prompt"),
    (token_ids, {"prompt": torch.tensor([1, 2])}, ValueError, "prompt"),
    (token_ids, {"prompt": torch.zeros((1, 3))}, ValueError, "prompt"),
    (token_ids, {"prompt": [[1, 2]]}, TypeError, "prompt"),
])
def test_bad_arguments_are_named(check, kwargs, error, name):
    with pytest.raises(error, match=name):
        check(**kwargs)


def test_every_argument_is_checked_not_only_the_first():
    with pytest.raises(ValueError, match="peak_bytes_per_s"):
        positive(tpot_s=0.01, peak_bytes_per_s=0)
