"""`train_module` in-process on a tiny backbone: the loss goes down, only the module's
tensors change, and the backbone (whose projections weight-override families copy) stays
bit-identical."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from server.engine.artifacts import backbone_parts
from server.engine.engine import load_backbone
from server.engine.families import get_family
from tests.tiny import tiny_backbone_files
from tests.trainer.helpers import new_domain_pairs
from trainer.data import encode_pairs
from trainer.loop import TrainSettings
from trainer.modules import train_module

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
