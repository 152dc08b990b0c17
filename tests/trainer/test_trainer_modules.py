"""`train_module` in-process on a tiny backbone: the loss goes down, only the module's
tensors change, and the backbone (whose projections weight-override families copy) stays
bit-identical."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from converters.marian import convert_marian
from server.engine.artifacts import backbone_parts
from server.engine.engine import load_backbone
from server.engine.families import get_family
from tests.converters.marian_fixture import marian_model, save_marian
from tests.tiny import tiny_backbone_files
from tests.trainer.sidecar_store import new_domain_pairs
from trainer.training.data import Specials, encode_for_backbone, encode_pairs, iterate_batches
from trainer.training.loop import TrainSettings
from trainer.training.modules import train_module

SETTINGS = TrainSettings(lr=3e-3, warmup_steps=4, max_tokens=400, max_epochs=4, bf16=False,
                         log_every=1, eval_every=1000, checkpoint_every_s=1e9,
                         label_smoothing=0.0)


@pytest.mark.parametrize(("family", "options"), [("sf", {}), ("pa", {"ffn_matrix": True})])
def test_factorized_module_trains_against_the_frozen_backbone(
        tmp_path: Path, family: str, options: dict[str, Any]) -> None:
    parts = backbone_parts(tiny_backbone_files())
    backbone = load_backbone(parts.config, parts.tensors)
    before = {k: v.clone() for k, v in backbone.state_dict().items()}
    pairs = new_domain_pairs(count=32)
    data = encode_pairs(pairs, parts.source_tokenizer.processor, max_len=64)
    losses: list[float] = []
    result = train_module(
        backbone, {"family": family, **options}, data, pairs[:4],
        source=parts.source_tokenizer, target=parts.target_tokenizer, settings=SETTINGS,
        run_dir=tmp_path / "run", on_progress=lambda p: losses.append(p.loss))
    assert result.progress.finished and losses[-1] < 0.9 * losses[0]
    for name, tensor in backbone.state_dict().items():
        assert torch.equal(tensor, before[name]), name
    chosen = get_family(family)
    fresh = chosen.initial(parts.config, result.config, torch.Generator(), weights=before)
    assert sorted(result.params) == sorted(fresh)
    unchanged = {k for k in fresh if torch.equal(result.params[k], fresh[k])}
    # A key bias shifts every score of a query equally: softmax gives it no gradient.
    assert unchanged <= {k for k in fresh if k.endswith(".k.bias")}


def test_a_module_trains_on_an_imported_marian_backbone(tmp_path: Path) -> None:
    """OPUS-MT vocabularies have their own special ids (eos 0, pad = decoder start = the
    last id): batches, loss and masks use the backbone's, not this project's."""
    files = convert_marian(save_marian(marian_model(), tmp_path / "opus-mt"))
    parts = backbone_parts(files)
    config = parts.config
    specials = Specials.of(config)
    assert specials != Specials() and specials.start == specials.pad
    backbone = load_backbone(config, parts.tensors)
    pairs = new_domain_pairs(count=32)
    data = encode_for_backbone(pairs, parts.source_tokenizer, parts.target_tokenizer, config,
                               max_len=64)
    assert data.specials == specials and len(data) == len(pairs)

    _, batch = next(iterate_batches(data, [[0, 1, 2, 3]]))
    assert (batch.tgt_in[:, 0] == config.decoder_start_id).all()
    lengths = [len(data.target[i]) for i in range(4)]
    for row, length in enumerate(lengths):
        assert batch.tgt_out[row, length] == config.eos_id
        assert (batch.tgt_out[row, length + 1:] == config.pad_id).all()
        assert (batch.src[row, len(data.source[row]):] == config.pad_id).all()
    assert batch.target_tokens == sum(lengths) + 4

    losses: list[float] = []
    result = train_module(
        backbone, {"family": "adapter", "bottleneck": 8}, data, pairs[:4],
        source=parts.source_tokenizer, target=parts.target_tokenizer, settings=SETTINGS,
        run_dir=tmp_path / "run", on_progress=lambda p: losses.append(p.loss))
    assert result.progress.finished and losses[-1] < 0.9 * losses[0]
