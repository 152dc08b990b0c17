"""The fast search against the frozen copy of the previous search (search_reference.py), on
the real engine: float32 and int8, adapters, batches mixing modules, ensembles, length
penalty, n-best, per-sentence max lengths and sentences finishing at different steps.

Both searches drive the same engine, so any difference is the search's. Tokens must be
identical; scores equal up to float rounding (the fast search's first step runs one row
per sentence instead of `beam` identical rows, which may round differently)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cache

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from server.decoding.search import Hypothesis, SearchOptions
from server.engine import engine as engine_module
from server.engine.artifacts import backbone_files, build_engine
from server.engine.engine import Engine, EngineOptions, Member, SentenceJob
from tests.decoding import search_reference
from tests.tiny import random_backbone, random_module, spm_bytes, tiny_config

MODULES = ("adapter0", "adapter1", "ldr0", "sf0")
SearchFn = Callable[..., list[list[Hypothesis]]]


@cache
def tiny_engine(*, int8: bool, std: float) -> Engine:
    """A tiny engine (std: weight scale; small = flat distributions, EOS competes often)
    with a few random modules registered."""
    config = tiny_config()
    model = random_backbone(config, seed=7, std=std)
    files = backbone_files(config, model.state_dict(), source_spm=spm_bytes(),
                           target_spm=spm_bytes())
    engine = build_engine(files, EngineOptions(int8=int8, slots_per_bank=4, host_capacity=8))
    weights = engine.model.state_dict() if not int8 else model.state_dict()
    for seed, module_id in enumerate(MODULES):
        module_config, params = random_module(config, module_id[:-1], seed=seed, weights=weights)
        engine.register_module(module_id, module_config, params)
    return engine


def translate(engine: Engine, jobs: Sequence[SentenceJob], options: SearchOptions,
              search: SearchFn, monkeypatch: pytest.MonkeyPatch) -> list[list[Hypothesis]]:
    with monkeypatch.context() as patch:
        patch.setattr(engine_module, "search", search)
        return engine.translate(jobs, options)


def assert_same(engine: Engine, jobs: Sequence[SentenceJob], options: SearchOptions,
                monkeypatch: pytest.MonkeyPatch) -> None:
    fast = translate(engine, jobs, options, engine_module.search, monkeypatch)
    frozen = translate(engine, jobs, options, search_reference.search, monkeypatch)
    assert [[h.tokens for h in hyps] for hyps in fast] == \
        [[h.tokens for h in hyps] for hyps in frozen]
    for got, want in zip(fast, frozen, strict=True):
        assert [h.score for h in got] == pytest.approx([h.score for h in want], abs=1e-5)


SOURCES = [[5, 6, 7, 8, 3], [9, 10, 3], [11, 12, 13, 14, 15, 16, 3], [20, 3],
           [30, 31, 32, 3], [40, 41, 42, 43, 44, 45, 46, 47, 48, 3]]
PLAIN = (Member(None),)
MIXED = [(Member("adapter0"),), PLAIN, (Member("ldr0"),), (Member("sf0"),),
         (Member("adapter1"),), PLAIN]
ENSEMBLES = [(Member("adapter0", 0.7), Member("adapter1", 0.3)), PLAIN,
             (Member(None, 1.0), Member("sf0", 2.0)), (Member("ldr0"),),
             (Member("adapter1", 0.5), Member("ldr0", 0.5)), (Member("adapter0"),)]
CASES = {  # name -> (members per sentence, beam, n_best, length penalty, min length)
    "plain": ([PLAIN] * len(SOURCES), 4, 1, 1.0, 0),
    "mixed modules, n-best": (MIXED, 4, 3, 1.0, 0),
    "ensembles, penalty 0.6": (ENSEMBLES, 3, 2, 0.6, 0),
    "min length, no penalty": (MIXED, 2, 2, 0.0, 4),
    "beam 5, n-best 5": ([PLAIN] * len(SOURCES), 5, 5, 1.0, 0),
}


@pytest.mark.parametrize("int8", [False, True], ids=["float32", "int8"])
@pytest.mark.parametrize("std", [0.3, 0.08], ids=["peaked", "flat"])
@pytest.mark.parametrize("case", list(CASES))
def test_fast_search_equals_the_frozen_search(int8: bool, std: float, case: str,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    members, beam, n_best, penalty, min_length = CASES[case]
    max_lengths = [3, 12, 7, 1, 20, 9]  # sentences stop at different steps
    jobs = [SentenceJob(source, chosen, limit)
            for source, chosen, limit in zip(SOURCES, members, max_lengths, strict=True)]
    options = SearchOptions(beam_size=beam, n_best=n_best, length_penalty=penalty,
                            min_length=min_length)
    assert_same(tiny_engine(int8=int8, std=std), jobs, options, monkeypatch)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(data=st.data(), beam=st.integers(2, 5), penalty=st.sampled_from([0.0, 0.6, 1.0, 1.3]),
       std=st.sampled_from([0.3, 0.08]))
def test_random_batches_equal_the_frozen_search(data: st.DataObject, beam: int, penalty: float,
                                                std: float,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    # float32 only: dynamic int8 quantizes a linear layer's input with one scale for the
    # whole batch, so a row's int8 scores depend on which rows share its batch, and the two
    # searches batch differently (the first step runs one row per sentence). A drawn
    # ensemble of ldr0 + sf0 beside a plain sentence moved an int8 score by 0.01 with the
    # same tokens. int8 is compared on the fixed batches above, where it is exact.
    vocab = tiny_config().src_vocab_size
    source = st.lists(st.integers(4, vocab - 1), min_size=1, max_size=9).map(lambda s: s + [3])
    member = st.sampled_from([None, *MODULES]).map(Member)
    members = st.lists(member, min_size=1, max_size=2).map(tuple)
    jobs = data.draw(st.lists(st.builds(SentenceJob, source, members, st.integers(1, 16)),
                              min_size=1, max_size=7))
    options = SearchOptions(beam_size=beam, n_best=data.draw(st.integers(1, beam)),
                            length_penalty=penalty, min_length=data.draw(st.integers(0, 3)))
    assert_same(tiny_engine(int8=False, std=std), jobs, options, monkeypatch)


def test_greedy_is_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    jobs = [SentenceJob(source, chosen, 10) for source, chosen in zip(SOURCES, MIXED,
                                                                      strict=True)]
    assert_same(tiny_engine(int8=False, std=0.08), jobs, SearchOptions(), monkeypatch)
