"""The backbone experiments' arms and report (the training itself is the recipe's loop,
tested in tests/trainer)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.quality.backbone.backbone_experiments import ARMS, arm_config, report_arms
from server.engine.backbone import Backbone
from trainer.recipes.default_en_fr import BACKBONE


@pytest.mark.parametrize("name", sorted(ARMS))
def test_every_arm_is_a_valid_backbone(name: str) -> None:
    config = arm_config(ARMS[name])
    assert config.d_model % config.n_heads == 0
    assert (config == BACKBONE) == (not ARMS[name].shape)
    assert config.tgt_vocab_size == BACKBONE.tgt_vocab_size  # same vocabulary: same data


def test_the_wide_arm_is_wider_and_shallower() -> None:
    wide, recipe = Backbone(arm_config(ARMS["wide"])), Backbone(BACKBONE)
    assert arm_config(ARMS["wide"]).encoder_layers < BACKBONE.encoder_layers
    assert sum(p.numel() for p in wide.parameters()) > sum(p.numel() for p in recipe.parameters())


def test_the_report_has_one_row_per_arm(tmp_path: Path) -> None:
    for name, loss in (("t1", 3.0), ("t3", 2.9)):
        (tmp_path / name).mkdir()
        scores = {"law": {"loss": loss, "bleu": 10.0}, "news": {"loss": 3.5, "bleu": 5.0},
                  "captions": {"loss": 2.0}}
        (tmp_path / name / "result.json").write_text(json.dumps({
            "arm": name, "temperature": float(name[1]), "shape": {}, "warm_start": True,
            "warm_start_from": "step-4413.pt", "cpu_seconds": 300.0, "steps": 4500,
            "scores": scores, "summary": {"domain_loss": loss, "domain_bleu": 10.0,
                                          "genre_loss": 2.75}}))
    report_arms(tmp_path, ["t1", "t3"], tmp_path / "report")
    table = (tmp_path / "report.md").read_text()
    assert "| t3 | 3 | recipe | warm | 300 | 4500 | 2.900 / 10.0 |" in table
    assert len(json.loads((tmp_path / "report.json").read_text())["arms"]) == 2
