"""Continuous batching (server/engine/live.py) against the static search as the reference:
sentences of every family, word-level mixtures and ensembles join a running batch at
random steps and must come out with the hypotheses a static batch gives them, greedy and
beam, float32 and int8; finished sentences leave the step they finish, cancelled ones free
their rows and their modules."""

from __future__ import annotations

import random
import statistics

import pytest

from server.decoding.search import Hypothesis, SearchOptions
from server.engine.engine import Engine, EngineOptions, SentenceJob
from server.engine.live import LiveDecoder
from tests.engine.test_device_agreement import MEMBERS, SOURCES, engine_with, modules

SEARCHES = [SearchOptions(beam_size=1), SearchOptions(beam_size=3, n_best=3),
            SearchOptions(beam_size=4, min_length=2)]
SEARCH_IDS = ["greedy", "beam3-nbest3", "beam4-min2"]


def jobs_of(count: int, seed: int) -> list[SentenceJob]:
    """`count` jobs cycling through every member set (families, mixtures, ensembles),
    sources and length limits."""
    chooser = random.Random(seed)
    return [SentenceJob(chooser.choice(SOURCES) + [], MEMBERS[row % len(MEMBERS)],
                        chooser.randint(3, 12)) for row in range(count)]


def decode_live(engine: Engine, jobs: list[SentenceJob], search: SearchOptions,
                join_steps: list[int]) -> tuple[list[list[Hypothesis]], LiveDecoder]:
    """Job i joins before step join_steps[i] (several may join together); steps until
    every job has finished."""
    decoder = LiveDecoder(engine, search)
    results: dict[int, list[Hypothesis]] = {}
    ticket_of: dict[int, int] = {}
    step = 0
    while len(results) < len(jobs):
        joining = [i for i, at in enumerate(join_steps) if at == step]
        for i, ticket in zip(joining, decoder.join([jobs[i] for i in joining]), strict=True):
            ticket_of[ticket] = i
        for ticket, hypotheses in decoder.step():
            results[ticket_of[ticket]] = hypotheses
        step += 1
        assert step < 200, "the live batch never drained"
    return [results[i] for i in range(len(jobs))], decoder


def assert_same(got: list[list[Hypothesis]], want: list[list[Hypothesis]]) -> None:
    """Same tokens; scores summed in another order."""
    for row, (mine, theirs) in enumerate(zip(got, want, strict=True)):
        assert [h.tokens for h in mine] == [h.tokens for h in theirs], f"sentence {row}"
        assert [h.score for h in mine] == pytest.approx([h.score for h in theirs], abs=1e-4)


def differing(got: list[list[Hypothesis]], want: list[list[Hypothesis]]) -> int:
    """Sentences whose best hypothesis' tokens differ."""
    return sum(a[0].tokens != b[0].tokens for a, b in zip(got, want, strict=True))


@pytest.fixture(scope="module")
def made() -> dict[str, tuple[dict[str, object], dict]]:
    return modules()


@pytest.mark.parametrize("search", SEARCHES, ids=SEARCH_IDS)
def test_rows_joining_at_random_steps_decode_as_a_static_batch(
        made: dict, search: SearchOptions) -> None:
    engine = engine_with(EngineOptions(), made)
    jobs = jobs_of(2 * len(MEMBERS), seed=3)
    static = engine.translate(jobs, search)
    chooser = random.Random(11)
    join_steps = [chooser.randint(0, 14) for _ in jobs]
    live, decoder = decode_live(engine, jobs, search, join_steps)
    assert_same(live, static)
    assert decoder.live == 0 and decoder.row_count == 0
    assert decoder.stats.joins == decoder.stats.leaves == len(jobs)
    assert decoder.stats.steps > max(join_steps)
    assert not engine.modules.in_use  # every sentence gave its modules back


@pytest.mark.parametrize("search", SEARCHES[:2], ids=SEARCH_IDS[:2])
def test_int8_rows_keep_the_static_tokens_within_int8s_own_batch_dependence(
        made: dict, search: SearchOptions) -> None:
    """Dynamic int8 quantizes a step's activations with one scale over the whole batch,
    so a row's arithmetic depends on its neighbours in any batch: a static batch already
    changes near-tie sentences of this tiny random model against the same sentences
    decoded alone. Live rows (other neighbours at every step) keep most sentences' tokens
    and move the others' scores by about a quantization step per token: most scores a
    little, a sentence with many near-ties more (the largest move is host-dependent: 0.09
    on one AVX-512 host, 0.27 on another)."""
    engine = engine_with(EngineOptions(int8=True), made)
    jobs = jobs_of(2 * len(MEMBERS), seed=3)
    static = engine.translate(jobs, search)
    chooser = random.Random(11)
    live, _ = decode_live(engine, jobs, search, [chooser.randint(0, 14) for _ in jobs])
    assert differing(live, static) <= len(jobs) // 3
    close = [abs(a[0].score - b[0].score) for a, b in zip(live, static, strict=True)
             if a[0].tokens == b[0].tokens]
    assert statistics.median(close) < 0.1 and max(close) < 0.5


def test_a_sentence_alone_and_one_joining_a_long_batch_agree(made: dict) -> None:
    """A short sentence joining late beside long ones finishes in its own steps: it
    leaves long before them, with the hypotheses it gets alone."""
    engine = engine_with(EngineOptions(), made)
    search = SearchOptions(beam_size=2, n_best=2)
    long_jobs = [SentenceJob(SOURCES[2], MEMBERS[i], 40) for i in range(4)]
    short = SentenceJob(SOURCES[1], MEMBERS[-1], 3)  # a three-member ensemble
    decoder = LiveDecoder(engine, search)
    decoder.join(long_jobs)
    for _ in range(5):
        assert decoder.step() == []
    (ticket,) = decoder.join([short])
    finished: list[tuple[int, list[Hypothesis]]] = []
    steps = 0
    while not finished:
        finished = decoder.step()
        steps += 1
    assert steps <= 3 and [t for t, _ in finished] == [ticket]
    assert_same([finished[0][1]], engine.translate([short], search))
    assert decoder.live == len(long_jobs)


def test_a_cancelled_sentence_frees_its_rows_and_modules(made: dict) -> None:
    engine = engine_with(EngineOptions(), made)
    decoder = LiveDecoder(engine, SearchOptions(beam_size=2))
    kept, gone = decoder.join([SentenceJob(SOURCES[0], MEMBERS[0], 30),
                               SentenceJob(SOURCES[2], MEMBERS[-1], 30)])
    decoder.step()
    assert decoder.row_count == (1 + 3) * 2
    assert engine.modules.busy("ldr0") == 1
    decoder.cancel(gone)
    decoder.step()
    assert decoder.row_count == 2 and list(decoder.entries) == [kept]
    assert engine.modules.busy("ldr0") == 0 and decoder.stats.cancelled == 1


def test_bad_jobs_are_refused_without_joining(made: dict) -> None:
    engine = engine_with(EngineOptions(), made)
    decoder = LiveDecoder(engine, SearchOptions())
    too_long = SentenceJob(SOURCES[0], MEMBERS[0], engine.config.max_positions + 1)
    with pytest.raises(ValueError, match="exceeds the backbone's"):
        decoder.join([too_long])
    assert decoder.live == 0 and not engine.modules.in_use
    with pytest.raises(ValueError, match="n_best"):
        LiveDecoder(engine, SearchOptions(beam_size=2, n_best=3))
