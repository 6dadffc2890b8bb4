"""The fakes that grade lesson 3's timing exercises (course/fakes.py) behave like a GPU and a model."""

from __future__ import annotations

import pytest
import torch

from course.checks import CheckFailed
from course.fakes import FakeDevice, RecordingModel, check_clock_reads
from course.models import ModelConfig
from course.toy_model import build_model


def test_fake_device_moves_its_clock_only_when_synchronised():
    dev = FakeDevice(start_s=10.0)
    fn = dev.work([0.5, 0.25])
    fn()
    assert dev.clock() == 10.0  # launched, not waited for
    dev.synchronize()
    assert dev.clock() == 10.5
    fn()
    dev.synchronize()
    assert dev.clock() == 10.75
    assert dev.events == ["call", "clock", "sync", "clock", "call", "sync", "clock"]
    with pytest.raises(RuntimeError, match="more than the 2 times"):
        fn()


@pytest.mark.parametrize("events, waited", [
    ([], True),
    (["clock", "call", "sync", "clock", "clock"], True),
    (["call", "clock"], False),
    (["call", "sync", "call", "clock"], False),
    (["call", "sync", "clock", "call", "sync", "sync", "clock"], True),
])
def test_clock_reads_waited(events, waited):
    dev = FakeDevice()
    dev.events = list(events)
    assert dev.clock_reads_waited() is waited


def test_recording_model_records_calls_and_predicts_tokens():
    dev = FakeDevice()
    model = RecordingModel(dev, prefill_s=0.4, decode_s=0.03, vocab_size=50)
    cache = model.new_cache(2, 6)
    logits = model.prefill(torch.tensor([[1, 2, 3], [4, 5, 6]]), cache)
    assert logits.shape == (2, 50)
    assert logits.argmax(-1).tolist() == [model.next_token(3), model.next_token(6)]
    model.decode(logits.argmax(-1, keepdim=True), cache)
    assert [c.kind for c in model.calls] == ["prefill", "decode"]
    assert model.calls[1].tokens == [[24], [45]] and model.calls[1].cache is cache
    assert cache.length == 4
    dev.synchronize()
    assert dev.clock() == pytest.approx(0.05 + 0.43)  # new_cache queues work too
    with pytest.raises(ValueError, match="holds 6 positions"):
        model.prefill(torch.tensor([[1, 2, 3], [4, 5, 6]]), cache)


def test_no_cache_calls_cost_per_token():
    dev = FakeDevice()
    model = RecordingModel(dev, no_cache_s_per_token=0.01)
    model.logits_no_cache(torch.tensor([[1, 2, 3, 4]]))
    dev.synchronize()
    assert dev.clock() == pytest.approx(0.04)
    assert model.calls[0].cache is None


def test_recording_model_has_the_toy_models_interface():
    tiny = build_model(ModelConfig("tiny", n_layers=1, d_model=32, n_heads=2, n_kv_heads=1, d_ff=48, vocab_size=50))
    fake = RecordingModel(FakeDevice())
    for name in ("new_cache", "prefill", "decode", "logits_no_cache"):
        assert callable(getattr(tiny, name)) and callable(getattr(fake, name))
    for model in (tiny, fake):
        cache = model.new_cache(batch_size=1, max_seq_len=4)
        out = model.prefill(torch.tensor([[1, 2]]), cache)
        out = model.decode(out.argmax(dim=-1, keepdim=True), cache)
        assert out.shape == (1, 50) and cache.length == 3
        assert model.logits_no_cache(torch.tensor([[1, 2, 3]])).shape == (1, 50)


def test_new_cache_queues_work_that_only_sync_completes():
    dev = FakeDevice()
    model = RecordingModel(dev, new_cache_s=0.25)
    model.new_cache(1, 4)
    assert dev.clock() == 0.0 and dev.first_unwaited_read() == (1, ["new_cache"])
    dev.synchronize()
    assert dev.clock() == 0.25


def _timed(order):
    """Run a request's calls and clock reads in `order` on a fresh fake; return the device."""
    dev = FakeDevice()
    model = RecordingModel(dev, new_cache_s=0.25)
    cache = None
    for step in order:
        if step == "new_cache":
            cache = model.new_cache(1, 8)
        elif step == "prefill":
            model.prefill(torch.tensor([[1, 2]]), cache)
        elif step == "sync":
            dev.synchronize()
        else:
            dev.clock()
    return dev


def test_check_clock_reads_names_the_mistake_and_the_fix(capsys):
    check_clock_reads(_timed(["new_cache", "sync", "clock", "prefill", "sync", "clock"]), start_after="new_cache")
    assert capsys.readouterr().out.startswith("ok")
    with pytest.raises(CheckFailed, match=r"1st clock read came while the work of new_cache was still queued.*sync\(\)"):
        check_clock_reads(_timed(["new_cache", "clock", "prefill", "sync", "clock"]), start_after="new_cache")
    with pytest.raises(CheckFailed, match=r"2nd clock read came while the work of prefill"):
        check_clock_reads(_timed(["new_cache", "sync", "clock", "prefill", "clock"]))
    with pytest.raises(CheckFailed, match=r"start clock was read before new_cache\(\).*then sync\(\)"):
        check_clock_reads(_timed(["sync", "clock", "new_cache", "prefill", "sync", "clock"]), start_after="new_cache")
    # without start_after, reading the start before new_cache is not this check's business
    check_clock_reads(_timed(["sync", "clock", "new_cache", "prefill", "sync", "clock"]))


def test_check_clock_reads_judges_nothing_while_autograding(monkeypatch, capsys):
    """While nbgrader autogrades, a graded cell is judged on the times a timer returns (a wrong
    order gives a wrong time on the fake device), never on a predicate over the event log."""
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    check_clock_reads(_timed(["new_cache", "clock", "prefill", "clock"]), start_after="new_cache")
    assert capsys.readouterr().out == ""


def test_clock_hints_explain_a_wrong_time_and_let_right_times_pass():
    from course.checks import check_close
    from course.fakes import clock_hints

    dev = _timed(["new_cache", "sync", "clock", "prefill", "clock", "sync", "clock"])  # an extra, harmless read
    with clock_hints(dev, start_after="new_cache"):
        check_close("ttft_s", 0.4, 0.4)
    dev = _timed(["new_cache", "clock", "prefill", "sync", "clock"])
    with pytest.raises(CheckFailed, match=r"expected .*\ncheck: ttft_s\nthe likely cause: the 1st clock read came while"):
        with clock_hints(dev):
            check_close("ttft_s", 0.45, 0.4)
