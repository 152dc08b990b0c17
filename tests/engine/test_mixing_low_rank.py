"""Word-level mixing with low-rank differences (option `rank`): the fast form (the backbone's
projection once + two matmuls over all domains) against the k full projections it stands
for, a fresh module is exactly the backbone, and the differences train."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F

from server.decoding.search import SearchOptions
from server.engine.backbone import Backbone
from server.engine.engine import Engine, Member, SentenceJob
from server.engine.families import Params
from server.engine.families.mixing import WordMixing, mix, mix_low_rank
from server.engine.single import SingleModuleHooks

SOURCES = [[5, 6, 7, 8, 3], [9, 10, 3], [11, 12, 13, 14, 15, 16, 3], [20, 21, 22, 3]]
DOMAINS = ["medical", "law", "it"]
RANK = 2
FAMILY = WordMixing()


def low_rank_mixture(model: Backbone, seed: int, *, trained: bool = True,
                     **options: Any) -> tuple[dict[str, Any], Params]:
    """A low-rank mixture; `trained`: every difference and proportion layer non-zero."""
    config = FAMILY.normalise({"family": "mixing", "domains": DOMAINS, "rank": RANK, **options})
    generator = torch.Generator().manual_seed(seed)
    params = FAMILY.initial(model.config, config, generator)
    if trained:
        for name, tensor in params.items():
            if name != "epsilon":
                tensor.copy_(torch.randn(tensor.shape, generator=generator) * 0.3)
    return config, params


def expanded(model: Backbone, config: dict[str, Any],
             params: Params) -> tuple[dict[str, Any], Params]:
    """The same mixture as k full copies: W_d = W + U_d V_d, b_d = b + c_d (the old path)."""
    full_config = {**config, "rank": None}
    weights = model.state_dict()
    full = FAMILY.initial(model.config, full_config, torch.Generator(), weights=weights)
    k = len(DOMAINS)
    for name in list(full):
        if name.endswith((".r", ".rb")) or name == "epsilon":
            full[name] = params[name].clone()
        elif name.endswith(".w"):
            key = name[: -len(".w")]
            down, up = params[f"{key}.dv"], params[f"{key}.du"]  # [L, k*r, in], [L, out, k*r]
            for d in range(k):
                block = slice(d * RANK, (d + 1) * RANK)
                full[name][:, d] += up[:, :, block] @ down[:, block]
        elif name.endswith(".b"):
            full[name] += params[f"{name[: -len('.b')]}.db"]
    return full_config, full


def run(engine: Engine, module: str | None, options: SearchOptions) -> list[list[Any]]:
    jobs = [SentenceJob(s, (Member(module),), 10) for s in SOURCES]
    return engine.translate(jobs, options)


def test_mix_low_rank_equals_the_reference_loop() -> None:
    generator = torch.Generator().manual_seed(0)
    k, r, d_in, d_out = 4, 3, 5, 6
    weight, base_bias = torch.randn(d_out, d_in, generator=generator), torch.randn(d_out)
    down, up = torch.randn(k * r, d_in, generator=generator), torch.randn(d_out, k * r)
    bias = torch.randn(k, d_out, generator=generator)
    x = torch.randn(2, 3, d_in, generator=generator)
    p = torch.softmax(torch.randn(2, 3, k, generator=generator), -1)

    def linear(t: torch.Tensor) -> torch.Tensor:
        return F.linear(t, weight, base_bias)

    want = sum(p[..., d, None] * (linear(x) + x @ (up[:, d * r:(d + 1) * r]
                                                   @ down[d * r:(d + 1) * r]).T + bias[d])
               for d in range(k))
    got = mix_low_rank(x, linear, down, up, bias, p)
    assert got.shape == (2, 3, d_out)
    assert torch.allclose(got, want, atol=1e-5)
    full = torch.stack([weight + up[:, d * r:(d + 1) * r] @ down[d * r:(d + 1) * r]
                        for d in range(k)])
    assert torch.allclose(got, mix(x, full, base_bias + bias, p), atol=1e-5)


@pytest.mark.parametrize("options", [SearchOptions(beam_size=1),
                                     SearchOptions(beam_size=3, n_best=2)])
def test_low_rank_module_equals_its_full_copies(engine: Engine, options: SearchOptions) -> None:
    config, params = low_rank_mixture(engine.model, seed=3, sides="both")
    engine.register_module("low", config, params)
    engine.register_module("full", *expanded(engine.model, config, params))
    low, full = run(engine, "low", options), run(engine, "full", options)
    assert [[h.tokens for h in r] for r in low] == [[h.tokens for h in r] for r in full]
    for a, b in zip(low, full, strict=True):
        assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-4)
    plain = run(engine, None, options)
    assert [r[0].tokens for r in low] != [r[0].tokens for r in plain]  # it is not a no-op


def test_low_rank_hidden_states_equal_the_full_copies(engine: Engine) -> None:
    config, params = low_rank_mixture(engine.model, seed=4, sides="both")
    _, full = expanded(engine.model, config, params)
    source = torch.tensor([SOURCES[0], SOURCES[3] + [0]])
    target = torch.tensor([[2, 7, 8, 9], [2, 10, 11, 0]])
    with torch.inference_mode():
        low_out = engine.model(source, target, SingleModuleHooks(FAMILY, params))
        full_out = engine.model(source, target, SingleModuleHooks(FAMILY, full))
    assert torch.allclose(low_out, full_out, atol=1e-4, rtol=1e-4)


def test_fresh_low_rank_module_is_exactly_the_backbone(engine: Engine) -> None:
    config, params = low_rank_mixture(engine.model, seed=5, trained=False, sides="both")
    assert not params["dec.ffn.fc1.du"].any() and params["dec.ffn.fc1.dv"].any()
    engine.register_module("fresh", config, params)
    options = SearchOptions(beam_size=3, n_best=2)
    plain, fresh = run(engine, None, options), run(engine, "fresh", options)
    assert [[(h.tokens, h.score) for h in r] for r in fresh] == \
        [[(h.tokens, h.score) for h in r] for r in plain]


def test_low_rank_is_smaller_and_its_differences_train(engine: Engine) -> None:
    config, params = low_rank_mixture(engine.model, seed=6)
    full_config = {**config, "rank": None}
    assert FAMILY.parameter_count(engine.config, config) < FAMILY.parameter_count(
        engine.config, full_config)
    for tensor in params.values():
        tensor.requires_grad_(True)
    out = engine.model(torch.tensor([SOURCES[2]]), torch.tensor([[2, 7, 8]]),
                       SingleModuleHooks(FAMILY, params))
    out.float().pow(2).mean().backward()
    for name, tensor in params.items():
        if name.endswith((".du", ".dv", ".db")):
            assert tensor.grad is not None and tensor.grad.abs().sum() > 0, name
