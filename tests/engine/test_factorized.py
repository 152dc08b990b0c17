"""Factorized Transformer families ("sf", "pa"): options, shapes, identity of fresh modules,
mixed batches, int8 and half precision, merging into plain weights, artifacts."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import Tensor

from contract.backbone import BackboneConfig
from server.decoding.search import SearchOptions
from server.engine.artifacts import build_engine, module_files, module_params
from server.engine.backbone import Backbone
from server.engine.engine import Engine, EngineOptions, Member, SentenceJob, load_backbone
from server.engine.families import ModuleConfigError, Params, get_family
from server.engine.single import SingleModuleHooks
from server.engine.slots import build_bank
from tests.tiny import random_module, tiny_backbone_files, tiny_config

SOURCES = [[5, 6, 7, 8, 3], [9, 10, 3], [11, 12, 13, 14, 15, 16, 3], [20, 21, 22, 3]]
GREEDY = SearchOptions(beam_size=1)
BEAM = SearchOptions(beam_size=3, n_best=2)
FACTORIZED = [("sf", {}), ("sf", {"ffn_matrix": False}), ("pa", {}), ("pa", {"ffn_matrix": True})]


def weights_of(engine: Engine) -> Params:
    return engine.model.state_dict()


def fresh(engine: Engine, family: str, **options: Any) -> tuple[dict[str, Any], Params]:
    chosen = get_family(family)
    config = chosen.normalise({"family": family, **options})
    return config, chosen.initial(engine.config, config, torch.Generator().manual_seed(0),
                                  weights=weights_of(engine))


def run(engine: Engine, members: list[tuple[Member, ...]], options: SearchOptions,
        sources: list[list[int]] | None = None, max_length: int = 10) -> list[list[Any]]:
    sources = sources if sources is not None else SOURCES
    jobs = [SentenceJob(s, m, max_length) for s, m in zip(sources, members, strict=True)]
    return engine.translate(jobs, options)


def results(hyps: list[list[Any]]) -> list[list[tuple[list[int], float]]]:
    return [[(h.tokens, h.score) for h in row] for row in hyps]


# options, shapes, counts -------------------------------------------------------------------

@pytest.mark.parametrize(("family", "options", "expected"), [
    ("sf", {}, {"family": "sf", "ffn_matrix": True}),
    ("pa", {}, {"family": "pa", "ffn_matrix": False}),
    ("pa", {"ffn_matrix": True}, {"family": "pa", "ffn_matrix": True}),
])
def test_options_have_defaults(family: str, options: dict[str, Any],
                               expected: dict[str, Any]) -> None:
    assert get_family(family).normalise({"family": family, **options}) == expected


def test_bad_options_are_all_refused_at_once() -> None:
    with pytest.raises(ModuleConfigError) as error:
        get_family("sf").normalise({"family": "sf", "ffn_matrix": 1, "rank": 4})
    message = str(error.value)
    assert "unknown option 'rank' for family 'sf'; allowed: ['ffn_matrix']" in message
    assert "ffn_matrix must be true or false (got 1)" in message


# The paper's "#P" column: attentions = encoder layers + 2 x decoder layers; each owned
# projection is d*d + d; sf owns k, v and one d x d matrix per layer, pa owns q, k, v, o.
@pytest.mark.parametrize(("d", "enc", "dec", "sf", "pa"), [
    (256, 6, 3, 2_168_832, 3_158_016),  # the default backbone (FFN 1024)
    (512, 6, 6, 12_601_344, 18_911_232),  # Transformer-base
])
def test_parameter_counts(d: int, enc: int, dec: int, sf: int, pa: int) -> None:
    backbone = BackboneConfig(src_vocab_size=8000, tgt_vocab_size=8000, d_model=d,
                              n_heads=4, d_ff=4 * d, encoder_layers=enc, decoder_layers=dec)
    attentions, layers = enc + 2 * dec, enc + dec
    assert sf == attentions * 2 * (d * d + d) + layers * d * d
    assert pa == attentions * 4 * (d * d + d)
    counts = {name: get_family(name).parameter_count(
        backbone, get_family(name).normalise({"family": name})) for name in ("sf", "pa")}
    assert counts == {"sf": sf, "pa": pa}


def test_parameter_names() -> None:
    config = tiny_config(encoder_layers=1, decoder_layers=1)
    sf = get_family("sf").shapes(config, {"ffn_matrix": True})
    assert sorted(sf) == sorted(
        [f"encoder.0.self_attn.{p}.{k}" for p in "kv" for k in ("weight", "bias")]
        + [f"decoder.0.{a}.{p}.{k}" for a in ("self_attn", "cross_attn") for p in "kv"
           for k in ("weight", "bias")]
        + ["encoder.0.ffn.matrix", "decoder.0.ffn.matrix"])
    pa = get_family("pa").shapes(config, {"ffn_matrix": False})
    assert len(pa) == 3 * 4 * 2 and pa["decoder.0.cross_attn.q.weight"] == (32, 32)
    assert pa["encoder.0.self_attn.o.bias"] == (32,)


# initial ------------------------------------------------------------------------------------

@pytest.mark.parametrize("family", ["sf", "pa"])
def test_initial_needs_the_backbone_weights(family: str) -> None:
    chosen = get_family(family)
    config = chosen.normalise({"family": family})
    with pytest.raises(ModuleConfigError, match=r"needs the backbone's tensors"):
        chosen.initial(tiny_config(), config, torch.Generator())
    weights = Backbone(tiny_config()).state_dict()
    del weights["encoder.layers.1.self_attn.k_proj.bias"]
    del weights["decoder.layers.0.cross_attn.v_proj.weight"]
    weights["decoder.layers.1.self_attn.k_proj.weight"] = torch.zeros(3, 3)
    with pytest.raises(ModuleConfigError) as error:
        chosen.initial(tiny_config(), config, torch.Generator(), weights=weights)
    message = str(error.value)
    assert "missing backbone tensor 'encoder.layers.1.self_attn.k_proj.bias'" in message
    assert "missing backbone tensor 'decoder.layers.0.cross_attn.v_proj.weight'" in message
    assert ("backbone tensor 'decoder.layers.1.self_attn.k_proj.weight' has shape [3, 3], "
            "expected [32, 32]") in message


@pytest.mark.parametrize(("family", "options"), FACTORIZED)
def test_initial_copies_never_aliases(family: str, options: dict[str, Any]) -> None:
    model = Backbone(tiny_config())
    before = {k: v.clone() for k, v in model.state_dict().items()}
    chosen = get_family(family)
    config = chosen.normalise({"family": family, **options})
    params = chosen.initial(model.config, config, torch.Generator(),
                            weights=model.state_dict())
    assert torch.equal(params["decoder.1.cross_attn.k.weight"],
                       before["decoder.layers.1.cross_attn.k_proj.weight"])
    if options.get("ffn_matrix", family == "sf"):
        assert torch.equal(params["encoder.0.ffn.matrix"], torch.eye(32))
    with torch.no_grad():
        for tensor in params.values():
            tensor.add_(1.0)
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())


# the hook site --------------------------------------------------------------------------

def test_project_is_one_matmul_and_keeps_the_given_linear_for_the_ffn_matrix() -> None:
    config = tiny_config()
    model = Backbone(config)
    _, params = random_module(config, "sf", seed=1, weights=model.state_dict())
    calls: list[str] = []

    def linear(x: Tensor) -> Tensor:  # stands for an int8 projection
        calls.append("backbone")
        return x * 2.0

    family, x = get_family("sf"), torch.randn(3, 5, 32)
    key = family.project(params, "decoder", 1, "cross_attn.k", x, linear)
    assert key is not None and calls == []
    assert torch.allclose(key, x @ params["decoder.1.cross_attn.k.weight"].t()
                          + params["decoder.1.cross_attn.k.bias"], atol=1e-6)
    assert family.project(params, "decoder", 1, "cross_attn.q", x, linear) is None
    assert family.project(params, "encoder", 0, "ffn.fc1", x, linear) is None
    out = family.project(params, "encoder", 0, "ffn.fc2", x, linear)
    assert out is not None and calls == ["backbone"]
    assert torch.allclose(out, (x * 2.0) @ params["encoder.0.ffn.matrix"].t(), atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_project_follows_the_bank_dtype(dtype: torch.dtype) -> None:
    config = tiny_config()
    module_config, params = random_module(config, "pa", seed=2, weights=Backbone(
        config).state_dict(), ffn_matrix=True)
    bank = build_bank(module_config, config, n_slots=2, device=torch.device("cpu"), dtype=dtype)
    bank.write(1, params)
    view = bank.view(1)
    x = torch.randn(2, 3, 32).to(dtype)
    out = get_family("pa").project(view, "encoder", 1, "self_attn.o", x, lambda h: h)
    assert out is not None and out.dtype == dtype
    fc2 = get_family("pa").project(view, "decoder", 0, "ffn.fc2", x, lambda h: h)
    assert fc2 is not None and fc2.dtype == dtype
    bank.write(1, {k: torch.zeros_like(v) for k, v in params.items()})
    assert not view["encoder.1.self_attn.o.weight"].any()  # a hot swap shows through views


# identity, mixed batches ------------------------------------------------------------------

@pytest.mark.parametrize(("family", "options"), FACTORIZED)
@pytest.mark.parametrize("search", [GREEDY, BEAM])
def test_fresh_module_is_exactly_the_backbone(engine: Engine, family: str,
                                              options: dict[str, Any],
                                              search: SearchOptions) -> None:
    config, params = fresh(engine, family, **options)
    engine.register_module("fresh", config, params)
    plain = run(engine, [(Member(None),)] * 4, search)
    assert results(run(engine, [(Member("fresh"),)] * 4, search)) == results(plain)


@pytest.mark.parametrize(("family", "options"), FACTORIZED)
def test_fresh_module_teacher_forcing_logits(engine: Engine, family: str,
                                             options: dict[str, Any]) -> None:
    config, params = fresh(engine, family, **options)
    hooks = SingleModuleHooks(get_family(family), params)
    src = torch.tensor([SOURCES[0], SOURCES[2][:5]])
    tgt = torch.tensor([[2, 7, 8, 9], [2, 10, 11, 12]])
    with torch.no_grad():
        want = engine.model(src, tgt)
        got = engine.model(src, tgt, hooks)
    assert (got - want).abs().max().item() <= 1e-6


MIXED: list[tuple[Member, ...]] = [
    (Member("sf0"),), (Member("pa0"),), (Member(None),), (Member("adapter0"),),
    (Member("sf0", 0.5), Member("pa1", 0.5)), (Member("sf1"),), (Member("pa0"),),
    (Member("ldr0", 0.3), Member("sf1", 0.7)),
]


@pytest.mark.parametrize("search", [GREEDY, BEAM])
def test_mixed_batch_with_factorized_rows_equals_rows_alone(engine: Engine,
                                                            search: SearchOptions) -> None:
    sources = [SOURCES[i % len(SOURCES)] for i in range(len(MIXED))]
    mixed = run(engine, MIXED, search, sources)
    for source, members, got in zip(sources, MIXED, mixed, strict=True):
        alone = run(engine, [members], search, [source])[0]
        assert [h.tokens for h in got] == [h.tokens for h in alone]
        assert [h.score for h in got] == pytest.approx([h.score for h in alone], abs=1e-4)


def test_int8_engine_runs_factorized_modules() -> None:
    files = tiny_backbone_files()
    engines = [build_engine(files, EngineOptions(int8=int8)) for int8 in (False, True)]
    weights = weights_of(engines[0])
    outputs = []
    for engine in engines:
        for name in ("sf", "pa"):
            config, params = random_module(engine.config, name, seed=5, std=0.05,
                                           weights=weights, ffn_matrix=True)
            engine.register_module(name, config, params)
        members = [(Member(m),) for m in ("sf", "pa", None, "sf")]
        batch = run(engine, members, GREEDY)
        if not engine.options.int8:
            # Dynamic int8 scales activations per batch tensor, so only float32 promises
            # that a row decodes the same alone and inside a mixed batch.
            alone = [run(engine, [m], GREEDY, [s])[0] for m, s in zip(members, SOURCES,
                                                                         strict=True)]
            assert [r[0].tokens for r in batch] == [r[0].tokens for r in alone]
        outputs.append([r[0].tokens for r in batch])
    agree = sum(a == b for a, b in zip(*outputs, strict=True))
    assert agree >= len(outputs[0]) // 2  # int8 may flip near-ties of a random model


# merging, artifacts ---------------------------------------------------------------------

@pytest.mark.parametrize(("family", "options"), FACTORIZED)
def test_merged_backbone_equals_backbone_with_module(engine: Engine, family: str,
                                                     options: dict[str, Any]) -> None:
    chosen = get_family(family)
    config, params = random_module(engine.config, family, seed=3, weights=weights_of(engine),
                                   **options)
    before = {k: v.clone() for k, v in weights_of(engine).items()}
    merged, merged_config = chosen.merge(weights_of(engine), params, engine.config)
    assert merged_config == engine.config
    assert all(torch.equal(v, before[k]) for k, v in weights_of(engine).items())
    plain = load_backbone(merged_config, merged)
    src = torch.tensor([SOURCES[0], SOURCES[2][:5]])
    tgt = torch.tensor([[2, 7, 8, 9], [2, 10, 11, 12]])
    with torch.no_grad():
        want = engine.model(src, tgt, SingleModuleHooks(chosen, params))
        got = plain(src, tgt)
        assert (want - engine.model(src, tgt)).abs().max().item() > 0.1  # the module matters
    assert (got - want).abs().max().item() <= 1e-5


@pytest.mark.parametrize("family", ["sf", "pa"])
def test_module_artifact_round_trips(engine: Engine, family: str) -> None:
    config, params = random_module(engine.config, family, seed=4, weights=weights_of(engine))
    loaded = module_params(module_files(params))
    assert sorted(loaded) == sorted(params)
    assert all(torch.equal(loaded[k], params[k]) for k in params)
    engine.register_module("original", config, params)
    engine.register_module("loaded", config, loaded)
    original = run(engine, [(Member("original"),)] * 4, BEAM)
    assert results(run(engine, [(Member("loaded"),)] * 4, BEAM)) == results(original)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_cuda_half_precision_factorized(dtype: str) -> None:
    files = tiny_backbone_files()
    outputs = []
    for options in (EngineOptions(), EngineOptions(device="cuda", dtype=dtype)):
        engine = build_engine(files, options)
        weights = {k: v.float().cpu() for k, v in weights_of(engine).items()}
        for name in ("sf", "pa"):
            config, params = random_module(tiny_config(), name, seed=6, std=0.05,
                                           weights=weights)
            engine.register_module(name, config, params)
        members = [(Member(m),) for m in ("sf", "pa", None, "sf")]
        outputs.append([r[0].tokens for r in run(engine, members, SearchOptions(beam_size=2))])
    agree = sum(a == b for a, b in zip(*outputs, strict=True))
    assert agree >= len(outputs[0]) - 1  # half precision may flip one near-tie
