"""The plain backbone is trained from scratch by the same loop (the default model's recipe,
trainer/recipes/default_en_fr.py): loss goes down, and a run stopped on request resumes
to exactly the weights of an uninterrupted run."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
import sentencepiece as spm
import torch

from server.engine.backbone import Backbone
from tests.tiny import ENGLISH, FRENCH, spm_bytes, tiny_config
from trainer.recipes.default_en_fr import backbone_trainable, cooldown
from trainer.training.data import encode_pairs
from trainer.training.loop import TrainSettings, bf16_autocast, lr_at, native_bf16, stop_on_signals
from trainer.training.run import train
from trainer.training.sampling import CorpusSizes

SETTINGS = TrainSettings(lr=3e-3, warmup_steps=5, max_tokens=400, max_epochs=12, bf16=False,
                         log_every=1, eval_every=1000, checkpoint_every_s=1e9,
                         label_smoothing=0.0)


def fresh_backbone() -> Backbone:
    torch.manual_seed(0)
    return Backbone(tiny_config(dropout=0.1))


@pytest.mark.parametrize("temperature", [1.0, 3.0])
def test_backbone_trains_from_scratch_and_resumes_exactly(tmp_path: Path,
                                                          temperature: float) -> None:
    processor = spm.SentencePieceProcessor(model_proto=spm_bytes())
    data = encode_pairs(list(zip(ENGLISH, FRENCH, strict=True)) * 2, processor, max_len=64)
    data.corpora = CorpusSizes(("small", "large"), (3, len(data) - 3))
    settings = TrainSettings(**{**SETTINGS.__dict__, "temperature": temperature})
    losses: list[float] = []
    reference = fresh_backbone()
    done = train(backbone_trainable(reference), data, settings, tmp_path / "whole",
                 on_progress=lambda p: losses.append(p.loss))
    assert done.finished and done.stop_reason == "max_epochs"
    assert losses[-1] < 0.8 * losses[0]
    # the same budget again does nothing; a larger one trains on from where it stopped
    same = train(backbone_trainable(fresh_backbone()), data, settings, tmp_path / "whole")
    assert same.step == done.step
    more = TrainSettings(**{**settings.__dict__, "max_epochs": settings.max_epochs + 1})
    longer = train(backbone_trainable(fresh_backbone()), data, more, tmp_path / "whole")
    assert longer.finished and longer.stop_reason == "max_epochs"
    assert longer.epoch == done.epoch + 1 and longer.step > done.step

    resumed = fresh_backbone()
    steps = iter(range(1000))
    first = train(backbone_trainable(resumed), data, settings, tmp_path / "parts",
                  should_stop=lambda: next(steps) >= 6)
    assert not first.finished and first.stop_reason == "interrupted" and first.step == 7
    again = fresh_backbone()  # a new process: only the checkpoint survives
    second = train(backbone_trainable(again), data, settings, tmp_path / "parts")
    assert second.finished and second.step == done.step
    for name, tensor in reference.state_dict().items():
        assert torch.equal(tensor, again.state_dict()[name]), name


def test_bf16_autocast_only_where_the_cpu_has_native_bf16() -> None:
    # Emulated bf16 (an AVX2 CPU) trains several times slower than float32: not used there.
    x = torch.randn(8, 8)
    with bf16_autocast(True):
        wanted = x @ x
    with bf16_autocast(False):
        unwanted = x @ x
    assert wanted.dtype == (torch.bfloat16 if native_bf16() else torch.float32)
    assert unwanted.dtype == torch.float32


def test_a_termination_signal_asks_the_run_to_stop() -> None:
    previous = {number: signal.getsignal(number) for number in (signal.SIGTERM, signal.SIGINT)}
    try:
        for number in previous:
            stop = stop_on_signals()
            assert not stop.is_set()
            os.kill(os.getpid(), number)
            assert stop.wait(timeout=5.0)
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def test_a_cooldown_takes_the_rate_linearly_to_zero_and_ends_the_run(tmp_path: Path) -> None:
    plain = TrainSettings(lr=1e-3, warmup_steps=100)
    cooled = TrainSettings(lr=1e-3, warmup_steps=100, cooldown_from=400, cooldown_steps=200)
    assert lr_at(400, cooled) == lr_at(400, plain) == pytest.approx(5e-4)
    assert lr_at(500, cooled) == pytest.approx(2.5e-4)  # half-way down
    assert lr_at(600, cooled) == 0.0 and lr_at(700, cooled) == 0.0
    assert lr_at(50, cooled) == lr_at(50, plain)  # warm-up untouched

    with pytest.raises(SystemExit, match="needs a checkpoint"):
        cooldown(tmp_path, None, 500)
    (tmp_path / "backbone").mkdir()
    (tmp_path / "backbone" / "progress.json").write_text('{"step": 1234}')
    assert cooldown(tmp_path, None, 500) == {"cooldown_from": 1234, "cooldown_steps": 500,
                                             "max_steps": 1734}
    assert cooldown(tmp_path, 1000, 500)["max_steps"] == 1500
    assert cooldown(tmp_path, None, 0) == {}
