"""Self-attention's fused q/k/v projection (one matmul instead of three, built by the
engine): it gives what the three projections give (int8: the same int8 weights and scales,
so the same numbers), stays off the state dict, and steps aside when a module overrides a
projection of the layer."""

from __future__ import annotations

import pytest
import torch

from server.decoding.search import SearchOptions
from server.engine.artifacts import build_engine
from server.engine.backbone import Backbone
from server.engine.engine import Engine, EngineOptions, Member, SentenceJob
from server.engine.layers import Attention
from tests.tiny import random_module, tiny_backbone_files, tiny_config


def self_attentions(model: torch.nn.Module) -> list[Attention]:
    return [m for m in model.modules() if isinstance(m, Attention) and m.name == "self_attn"]


def unfused(engine: Engine) -> None:
    for attention in self_attentions(engine.model):
        attention.__dict__.pop("_fused_qkv")


@pytest.mark.parametrize("options", [EngineOptions(), EngineOptions(packed=False),
                                     EngineOptions(int8=True)])
def test_the_fused_projection_equals_the_three(options: EngineOptions) -> None:
    engine = build_engine(tiny_backbone_files(), options)
    attentions = self_attentions(engine.model)
    assert len(attentions) == 4 and all("_fused_qkv" in a.__dict__ for a in attentions)
    keys = set(engine.model.state_dict())
    assert not any("fused" in key for key in keys)
    if not options.int8:  # int8 modules have state of their own (scales, packed params)
        assert keys == set(Backbone(tiny_config()).state_dict())
    x = torch.randn(5, 3, tiny_config().d_model)
    with torch.inference_mode():
        for attention in attentions:
            fused = attention.project_qkv(x)
            three = (attention.split_heads(attention.q_proj(x)),
                     *attention.project_kv(x))
            for got, want in zip(fused, three, strict=True):
                torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("int8", [False, True])
def test_translations_are_those_of_the_three_projections(int8: bool) -> None:
    jobs = [SentenceJob([5 + i, 6, 7, 8, 3], (Member(None),), 10) for i in range(4)]
    options = SearchOptions(beam_size=3, n_best=2)
    engine = build_engine(tiny_backbone_files(), EngineOptions(int8=int8))
    fused = engine.translate(jobs, options)
    unfused(engine)
    three = engine.translate(jobs, options)
    assert [[h.tokens for h in hyps] for hyps in fused] == \
        [[h.tokens for h in hyps] for hyps in three]
    for got, want in zip(fused, three, strict=True):
        assert [h.score for h in got] == pytest.approx([h.score for h in want], abs=1e-5)


def test_a_module_that_overrides_projections_uses_its_own() -> None:
    """A factorized module's rows run its own q/k/v; the fused copy is the backbone's."""
    config = tiny_config()
    engine = build_engine(tiny_backbone_files(), EngineOptions())
    module_config, params = random_module(config, "pa", seed=2,
                                          weights=engine.model.state_dict())
    engine.register_module("pa", module_config, params)
    job = SentenceJob([5, 6, 7, 8, 3], (Member("pa"),), 10)
    options = SearchOptions(beam_size=2)
    with_fused = engine.translate([job], options)
    unfused(engine)
    assert engine.translate([job], options) == with_fused
