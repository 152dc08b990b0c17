"""The source-reliance diagnostic: a backbone that learned to translate its tiny corpus
scores references far better with their own sources; one whose decoder cannot see the
source at all shows no gap."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import sentencepiece as spm
import torch

from benchmarks.quality.data import EvalSet
from benchmarks.quality.evaluation.reliance import reference_nll, source_reliance
from server.engine.artifacts import backbone_files
from server.engine.backbone import Backbone
from tests.tiny import ENGLISH, FRENCH, spm_bytes, tiny_config
from tests.trainer.test_trainer_backbone import SETTINGS
from trainer.recipes.default_en_fr import backbone_trainable
from trainer.training.data import Specials, collate, encode_pairs
from trainer.training.loop import translation_loss
from trainer.training.run import train

PAIRS = list(zip(ENGLISH, FRENCH, strict=True))
EVAL_SET = EvalSet("tiny", "domain", "test", ENGLISH, FRENCH)


def files_of(model: Backbone) -> dict[str, bytes]:
    data = spm_bytes()
    return backbone_files(model.config, model.state_dict(), source_spm=data, target_spm=data)


def trained_backbone(run_dir: Path) -> Backbone:
    processor = spm.SentencePieceProcessor(model_proto=spm_bytes())
    data = encode_pairs(PAIRS * 2, processor, max_len=64)
    torch.manual_seed(0)
    model = Backbone(tiny_config())
    train(backbone_trainable(model), data, replace(SETTINGS, max_epochs=40), run_dir)
    return model.eval()


def test_a_trained_backbone_relies_on_its_source(tmp_path: Path) -> None:
    trained = source_reliance(files_of(trained_backbone(tmp_path / "run")), [EVAL_SET])["tiny"]
    assert trained["sentences"] == len(PAIRS)
    assert trained["gap"] > 1.0, trained

    deaf = Backbone(tiny_config())  # cross-attention outputs zero: the source is invisible
    with torch.no_grad():
        for layer in deaf.decoder_layers():
            layer.cross_attn.o_proj.weight.zero_()
            layer.cross_attn.o_proj.bias.zero_()
    untrained = source_reliance(files_of(deaf), [EVAL_SET])["tiny"]
    assert abs(untrained["gap"]) < 1e-4, untrained


def test_reference_nll_is_the_unsmoothed_training_loss() -> None:
    torch.manual_seed(1)
    model = Backbone(tiny_config()).eval()
    processor = spm.SentencePieceProcessor(model_proto=spm_bytes())
    data = encode_pairs(PAIRS, processor, max_len=64)
    batch = collate(data.source, data.target)
    with torch.no_grad():
        expected = float(translation_loss(model(batch.src, batch.tgt_in), batch, 0.0))
    got = reference_nll(model, data.source, data.target, Specials(), batch_size=5)
    assert abs(got - expected) < 1e-4
