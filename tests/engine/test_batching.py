"""Per-row modules: identity of fresh modules, mixed batches, ensembles vs the reference."""

from __future__ import annotations

import pytest
import torch

from server.decoding.search import SearchOptions
from server.engine.engine import Engine, Member, SentenceJob
from server.engine.families import get_family
from server.engine.single import SingleModuleHooks
from tests.decoding.reference import reference_greedy, reference_search
from tests.engine.conftest import FAMILY_NAMES

SOURCES = [[5, 6, 7, 8, 3], [9, 10, 3], [11, 12, 13, 14, 15, 16, 3], [20, 21, 22, 3]]
GREEDY = SearchOptions(beam_size=1)
BEAM = SearchOptions(beam_size=3, n_best=2)


def run(engine: Engine, members: list[tuple[Member, ...]], options: SearchOptions,
        sources: list[list[int]] = SOURCES, max_length: int = 10) -> list[list]:
    jobs = [SentenceJob(s, m, max_length) for s, m in zip(sources, members, strict=True)]
    return engine.translate(jobs, options)


def tokens(results: list[list]) -> list[list[list[int]]]:
    return [[h.tokens for h in r] for r in results]


@pytest.mark.parametrize("family", FAMILY_NAMES)
@pytest.mark.parametrize("options", [GREEDY, BEAM])
def test_fresh_module_reproduces_the_backbone(engine: Engine, family: str,
                                              options: SearchOptions) -> None:
    chosen = get_family(family)
    config = chosen.normalise({"family": family})
    fresh = chosen.initial(engine.config, config, torch.Generator().manual_seed(3),
                           weights=engine.model.state_dict())
    engine.register_module("fresh", config, fresh)
    plain = run(engine, [(Member(None),)] * 4, options)
    with_module = run(engine, [(Member("fresh"),)] * 4, options)
    assert tokens(with_module) == tokens(plain)
    for a, b in zip(plain, with_module, strict=True):
        assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-5)


def test_modules_change_the_output(engine: Engine) -> None:
    plain = tokens(run(engine, [(Member(None),)] * 4, GREEDY))
    changed = [tokens(run(engine, [(Member(f"{f}0"),)] * 4, GREEDY)) != plain
               for f in FAMILY_NAMES]
    assert all(changed)


@pytest.mark.parametrize("options", [GREEDY, BEAM])
def test_mixed_batch_equals_rows_alone(engine: Engine, options: SearchOptions) -> None:
    names: list[str | None] = [f"{f}{c}" for f in FAMILY_NAMES for c in range(2)] + [None]
    members = [(Member(name),) for name in names]
    sources = [SOURCES[i % len(SOURCES)] for i in range(len(names))]
    mixed = run(engine, members, options, sources)
    for source, member, got in zip(sources, members, mixed, strict=True):
        alone = run(engine, [member], options, [source])[0]
        assert [h.tokens for h in got] == [h.tokens for h in alone]
        assert [h.score for h in got] == pytest.approx([h.score for h in alone], abs=1e-4)


def test_single_member_ensemble_equals_the_member(engine: Engine) -> None:
    alone = run(engine, [(Member("adapter0"),)] * 4, BEAM)
    weighted = run(engine, [(Member("adapter0", 3.0),)] * 4, BEAM)
    assert tokens(weighted) == tokens(alone)
    tiny_other = run(engine, [(Member("adapter0", 1.0), Member("ldr1", 1e-12))] * 4, BEAM)
    assert tokens(tiny_other) == tokens(alone)


def _hooks(engine: Engine, module_id: str | None) -> SingleModuleHooks | None:
    if module_id is None:
        return None
    entry = engine.modules.host[module_id]
    return SingleModuleHooks(get_family(entry.config["family"]), entry.params)


ENSEMBLES = [
    (Member("adapter0", 0.5), Member("ldr1", 0.5)),
    (Member(None, 0.3), Member("highway1", 0.7)),
    (Member("gated0", 0.2), Member("adapter1", 0.3), Member(None, 0.5)),
    (Member("ldr0"),),
    (Member("sf0", 0.6), Member("pa1", 0.4)),
]


@pytest.mark.parametrize("beam", [1, 3])
def test_ensembles_in_a_mixed_batch_match_the_reference(engine: Engine, beam: int) -> None:
    options = SearchOptions(beam_size=beam, n_best=1)
    sources = [SOURCES[i % len(SOURCES)] for i in range(len(ENSEMBLES))]
    results = run(engine, ENSEMBLES, options, sources)
    model = engine.model
    for source, members, got in zip(sources, ENSEMBLES, results, strict=True):
        reference_members = [(_hooks(engine, m.module_id), m.weight) for m in members]
        with torch.inference_mode():
            if beam == 1:
                want = [reference_greedy(model, source, reference_members, max_length=10)]
            else:
                want = reference_search(model, source, reference_members, beam=beam,
                                        max_length=10)
        assert got[0].tokens == want[0].tokens
        assert got[0].score == pytest.approx(want[0].score, abs=1e-4)


def test_translate_keeps_input_order_and_handles_empty(engine: Engine) -> None:
    assert engine.translate([], GREEDY) == []
    members = [(Member("ldr1"),), (Member(None),), (Member("adapter0"),), (Member("ldr1"),)]
    batch = run(engine, members, GREEDY)
    for index, member in enumerate(members):
        assert tokens(run(engine, [member], GREEDY, [SOURCES[index]]))[0] == tokens(batch)[index]
