"""Word-level domain mixing (family "mixing"): identity at start, smoothed proportions,
the stacked-matmul mix against its reference loop, stop-gradient, mixed batches, and the
engine's debug proportions."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from contract.backbone import BackboneConfig
from server.decoding.search import SearchOptions
from server.engine.backbone import Backbone
from server.engine.engine import Engine, Member, SentenceJob
from server.engine.families import ModuleConfigError, Params, get_family
from server.engine.families.mixing import WordMixing, mix, site_names
from server.engine.mixture import MixtureHooks
from server.engine.single import SingleModuleHooks
from server.engine.slots import build_bank
from tests.engine.conftest import FAMILY_NAMES
from tests.tiny import tiny_config

SOURCES = [[5, 6, 7, 8, 3], [9, 10, 3], [11, 12, 13, 14, 15, 16, 3], [20, 21, 22, 3]]
GREEDY = SearchOptions(beam_size=1)
BEAM = SearchOptions(beam_size=3, n_best=2)
DOMAINS = ["medical", "law", "it"]
FAMILY = WordMixing()


def mixing_config(**options: Any) -> dict[str, Any]:
    return FAMILY.normalise({"family": "mixing", "domains": DOMAINS, **options})


def fresh_mixture(model: Backbone, **options: Any) -> tuple[dict[str, Any], Params]:
    config = mixing_config(**options)
    params = FAMILY.initial(model.config, config, torch.Generator().manual_seed(1),
                            weights=model.state_dict())
    return config, params


def random_mixture(model: Backbone, seed: int, **options: Any) -> tuple[dict[str, Any], Params]:
    """Per-domain weights pulled apart and non-uniform proportion layers."""
    config, params = fresh_mixture(model, **options)
    generator = torch.Generator().manual_seed(seed)
    for name, tensor in params.items():
        if name.endswith((".w", ".b")):
            tensor.add_(torch.randn(tensor.shape, generator=generator) * 0.1)
        elif name.endswith((".r", ".rb")):
            tensor.copy_(torch.randn(tensor.shape, generator=generator))
    return config, params


def run(engine: Engine, members: list[tuple[Member, ...]], options: SearchOptions,
        sources: list[list[int]] = SOURCES) -> list[list[Any]]:
    jobs = [SentenceJob(s, m, 10) for s, m in zip(sources, members, strict=True)]
    return engine.translate(jobs, options)


def tokens(results: list[list[Any]]) -> list[list[list[int]]]:
    return [[h.tokens for h in r] for r in results]


@pytest.mark.parametrize(("options", "problem"), [
    ({}, "domains must be a list"),
    ({"domains": ["medical"]}, "at least 2 distinct"),
    ({"domains": ["law", "law"]}, "at least 2 distinct"),
    ({"domains": DOMAINS, "epsilon": 1.0}, "epsilon must be a number in [0, 1)"),
    ({"domains": DOMAINS, "epsilon": True}, "epsilon must be a number"),
    ({"domains": DOMAINS, "sides": "decoder"}, "sides must be one of"),
    ({"domains": DOMAINS, "projections": ["q", "w"]}, "projections must be"),
    ({"domains": DOMAINS, "projections": []}, "projections must be"),
    ({"domains": DOMAINS, "bottleneck": 4}, "unknown option 'bottleneck'"),
    ({"domains": DOMAINS, "rank": 0}, "rank must be an integer in [1, 1024] (got 0) or null"),
    ({"domains": DOMAINS, "rank": "8"}, "rank must be an integer"),
    ({"domains": DOMAINS, "rank": True}, "rank must be an integer"),
])
def test_bad_configs_are_refused(options: dict[str, Any], problem: str) -> None:
    with pytest.raises(ModuleConfigError) as caught:
        FAMILY.normalise({"family": "mixing", **options})
    assert problem in str(caught.value)


def test_initial_needs_the_backbone_weights() -> None:
    with pytest.raises(ValueError, match="copies of the backbone"):
        FAMILY.initial(tiny_config(), mixing_config(), torch.Generator())


def test_fresh_module_copies_the_backbone(engine: Engine) -> None:
    _, params = fresh_mixture(engine.model, sides="both")
    weight = engine.model.state_dict()["decoder.layers.1.cross_attn.v_proj.weight"]
    stacked = params["dec.cross_attn.v.w"][1]  # [k, d_out, d_in]
    assert stacked.shape == (3, *weight.shape)
    assert all(torch.equal(stacked[d], weight) for d in range(3))
    assert stacked.data_ptr() != weight.data_ptr()  # a copy, never an alias
    assert not params["enc.ffn.fc2.r"].any() and not params["enc.ffn.fc2.rb"].any()


@pytest.mark.parametrize("sides", ["encoder", "both"])
@pytest.mark.parametrize("options", [GREEDY, BEAM])
def test_fresh_module_reproduces_the_backbone(engine: Engine, sides: str,
                                              options: SearchOptions) -> None:
    config, params = fresh_mixture(engine.model, sides=sides)
    engine.register_module("fresh", config, params)
    plain = run(engine, [(Member(None),)] * 4, options)
    mixed = run(engine, [(Member("fresh"),)] * 4, options)
    assert tokens(mixed) == tokens(plain)
    for a, b in zip(plain, mixed, strict=True):
        assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-5)


@pytest.mark.parametrize("epsilon", [0.0, 0.1, 0.5])
def test_proportions_are_smoothed_distributions(engine: Engine, epsilon: float) -> None:
    config, params = random_mixture(engine.model, seed=4, epsilon=epsilon)
    params["enc.self_attn.q.r"].mul_(50.0)  # very sharp logits: the bounds must still hold
    x = torch.randn(2, 5, engine.config.d_model)
    k = len(DOMAINS)
    for name in ("self_attn.q", "ffn.fc1"):
        p = FAMILY.proportions(params, "encoder", 0, name, x)
        assert p is not None and p.shape == (2, 5, k)
        assert p.sum(-1) == pytest.approx(torch.ones(2, 5), abs=1e-6)
        assert float(p.min()) >= epsilon / k - 1e-6
        assert float(p.max()) <= 1 - epsilon + epsilon / k + 1e-6
    assert FAMILY.proportions(params, "decoder", 0, "self_attn.q", x) is None  # encoder only


def test_mix_equals_the_reference_loop() -> None:
    generator = torch.Generator().manual_seed(0)
    weight, bias = torch.randn(4, 6, 5, generator=generator), torch.randn(4, 6, generator=generator)
    x = torch.randn(2, 3, 5, generator=generator)
    p = torch.softmax(torch.randn(2, 3, 4, generator=generator), -1)
    want = sum(p[..., d, None] * (x @ weight[d].T + bias[d]) for d in range(4))
    assert torch.allclose(mix(x, weight, bias, p), want, atol=1e-5)


def test_only_the_configured_sites_are_mixed(engine: Engine) -> None:
    config, params = fresh_mixture(engine.model, sides="both", projections=["v", "fc2"])
    assert site_names("decoder", ["v", "fc2"]) == ["self_attn.v", "cross_attn.v", "ffn.fc2"]
    assert {n.rsplit(".", 1)[0] for n in params if n != "epsilon"} == {
        "enc.self_attn.v", "enc.ffn.fc2", "dec.self_attn.v", "dec.cross_attn.v", "dec.ffn.fc2"}
    assert set(params) == set(FAMILY.shapes(engine.config, config))
    x = torch.randn(1, 2, engine.config.d_model)
    assert FAMILY.project(params, "encoder", 0, "self_attn.q", x, lambda t: t) is None


def test_recording_hooks_do_not_change_the_output(engine: Engine) -> None:
    _, params = random_mixture(engine.model, seed=5, sides="both")
    source = torch.tensor([SOURCES[0], SOURCES[3] + [0]])
    target = torch.tensor([[2, 7, 8, 9], [2, 10, 11, 0]])
    with torch.inference_mode():
        plain = engine.model(source, target, SingleModuleHooks(FAMILY, params))
        hooks = MixtureHooks(FAMILY, params)
        recorded = engine.model(source, target, hooks)
    assert torch.equal(plain, recorded)
    sites = hooks.take()
    config = engine.config
    expected = (config.encoder_layers * 6 + config.decoder_layers * 10)
    assert len(sites) == expected and hooks.recorded == []
    cross = [s for s in sites if s.name == "cross_attn.k"]
    assert all(s.on_source and s.proportions.shape == (2, 5, 3) for s in cross)
    assert all(s.proportions.shape == (2, 4, 3) for s in sites if s.name == "ffn.fc2"
               and s.side == "decoder")


@pytest.mark.parametrize("options", [GREEDY, BEAM])
def test_mixed_batch_equals_rows_alone(engine: Engine, options: SearchOptions) -> None:
    for copy, sides in enumerate(("encoder", "both")):
        config, params = random_mixture(engine.model, seed=20 + copy, sides=sides)
        engine.register_module(f"mixing{copy}", config, params)
    names: list[str | None] = ["mixing0", "mixing1", *[f"{f}0" for f in FAMILY_NAMES], None,
                               "mixing1"]
    members = [(Member(name),) for name in names]
    sources = [SOURCES[i % len(SOURCES)] for i in range(len(names))]
    mixed = run(engine, members, options, sources)
    for source, member, got in zip(sources, members, mixed, strict=True):
        alone = run(engine, [member], options, [source])[0]
        assert [h.tokens for h in got] == [h.tokens for h in alone]
        assert [h.score for h in got] == pytest.approx([h.score for h in alone], abs=1e-4)
    plain = tokens(run(engine, [(Member(None),)], GREEDY, [SOURCES[2]]))
    assert tokens(run(engine, [(Member("mixing1"),)], GREEDY, [SOURCES[2]])) != plain


def test_ensemble_of_a_mixture_and_an_adapter_runs(engine: Engine) -> None:
    config, params = random_mixture(engine.model, seed=7)
    engine.register_module("mixing0", config, params)
    results = run(engine, [(Member("mixing0", 0.6), Member("adapter0", 0.4))], BEAM,
                  [SOURCES[0]])
    assert results[0] and results[0][0].tokens


def test_stop_gradient(engine: Engine) -> None:
    """The domain loss reaches the proportion layers only: no gradient to the hidden
    states, nor to the per-domain weights that produced them."""
    model = engine.model
    _, params = random_mixture(model, seed=6, sides="both")
    for tensor in params.values():
        tensor.requires_grad_(True)
    x = torch.randn(2, 3, engine.config.d_model, requires_grad=True)
    p = FAMILY.proportions(params, "encoder", 1, "self_attn.k", x)
    assert p is not None
    (-p[..., 0].log().mean()).backward()
    assert x.grad is None  # the proportion layer reads x.detach()
    hooks = MixtureHooks(FAMILY, params)
    model(torch.tensor([SOURCES[1]]), torch.tensor([[2, 7, 8]]), hooks)
    domain_loss = sum(-s.proportions[..., 1].log().mean() for s in hooks.take())
    assert isinstance(domain_loss, torch.Tensor)
    for tensor in params.values():
        tensor.grad = None
    domain_loss.backward()
    for name, tensor in params.items():
        if name.endswith((".w", ".b")) or name == "epsilon":
            assert tensor.grad is None or not tensor.grad.any(), name
        else:
            assert tensor.grad is not None and tensor.grad.abs().sum() > 0, name


def test_engine_proportions(engine: Engine) -> None:
    config, params = random_mixture(engine.model, seed=8)
    engine.register_module("mixing0", config, params)
    report = engine.proportions("mixing0", [SOURCES[2], SOURCES[1]])
    assert report.domains == DOMAINS
    long, short = report.sentences
    assert long.shape == (engine.config.encoder_layers, len(SOURCES[2]), 3)
    assert short.shape == (engine.config.encoder_layers, len(SOURCES[1]), 3)
    assert long.sum(-1) == pytest.approx(torch.ones(long.shape[:2]), abs=1e-5)
    alone = engine.proportions("mixing0", [SOURCES[1]]).sentences[0]
    assert torch.allclose(alone, short, atol=1e-5)  # padding never leaks into a row
    assert engine.proportions("mixing0", []).sentences == []
    assert engine.modules.snapshot()["in_use"] == {}
    with pytest.raises(ValueError, match="not a word-level mixture"):
        engine.proportions("adapter0", [SOURCES[0]])


def test_banks_of_mixtures_have_few_slots(engine: Engine) -> None:
    config, _ = fresh_mixture(engine.model)
    bank = build_bank(config, engine.config, n_slots=16, device=torch.device("cpu"),
                      dtype=torch.float32)
    assert bank.n_slots == 2
    adapter = get_family("adapter").normalise({"family": "adapter"})
    assert build_bank(adapter, engine.config, n_slots=16, device=torch.device("cpu"),
                      dtype=torch.float32).n_slots == 16


def test_parameter_count_of_the_default_model_size() -> None:
    backbone = BackboneConfig(src_vocab_size=8000, tgt_vocab_size=8000, d_model=256, n_heads=4,
                              d_ff=1024, encoder_layers=6, decoder_layers=3)
    k, d, ff = 7, 256, 1024
    attention = 4 * (k * (d * d + d) + k * (d + 1))
    ffn = k * (d * ff + ff) + k * (d + 1) + k * (ff * d + d) + k * (ff + 1)
    domains = [f"d{i}" for i in range(k)]
    encoder = FAMILY.parameter_count(backbone, FAMILY.normalise(
        {"family": "mixing", "domains": domains}))
    both = FAMILY.parameter_count(backbone, FAMILY.normalise(
        {"family": "mixing", "domains": domains, "sides": "both"}))
    assert encoder == 6 * (attention + ffn) + 1
    assert both == encoder + 3 * (2 * attention + ffn)
    assert FAMILY.joint and not FAMILY.mergeable
