"""Parked live sentences (server/engine/live_parking.py): sentences parked at random steps
for random spans and resumed come out with the hypotheses they get unparked (and a static
batch gives them), eager and graph steps, greedy and beam, ensembles and mixtures
included; a parked sentence holds its modules, a cancelled one frees them, and parked
rows never wait on an empty batch."""

from __future__ import annotations

import random

import pytest

from server.decoding.search import Hypothesis, SearchOptions
from server.engine.engine import Engine, EngineOptions, SentenceJob
from server.engine.live import LiveDecoder
from tests.engine.test_device_agreement import MEMBERS, SOURCES, engine_with, modules
from tests.engine.test_live import SEARCH_IDS, SEARCHES, assert_same, decode_live, jobs_of


@pytest.fixture(scope="module")
def made() -> dict[str, tuple[dict[str, object], dict]]:
    return modules()


def decode_parking(engine: Engine, jobs: list[SentenceJob], search: SearchOptions,
                   join_steps: list[int], seed: int) -> tuple[list[list[Hypothesis]],
                                                              LiveDecoder, int]:
    """As `decode_live`, and before every step each live sentence is parked with
    probability 0.3, each parked one resumed with probability 0.4; returns the results,
    the decoder and how many steps a sentence sat out in all."""
    chooser = random.Random(seed)
    decoder = LiveDecoder(engine, search)
    results: dict[int, list[Hypothesis]] = {}
    ticket_of: dict[int, int] = {}
    step = sat_out = 0
    while len(results) < len(jobs):
        joining = [i for i, at in enumerate(join_steps) if at == step]
        for i, ticket in zip(joining, decoder.join([jobs[i] for i in joining]), strict=True):
            ticket_of[ticket] = i
        decoder.resume([t for t in decoder.parked if chooser.random() < 0.4])
        decoder.park([t for t in decoder.entries if chooser.random() < 0.3])
        sat_out += len(decoder.parked)
        for ticket, hypotheses in decoder.step():
            results[ticket_of[ticket]] = hypotheses
        step += 1
        assert step < 400, "the live batch never drained"
    return [results[i] for i in range(len(jobs))], decoder, sat_out


@pytest.mark.parametrize("options", [EngineOptions(), EngineOptions(fixed_steps=True)],
                         ids=["eager", "graph-steps"])
@pytest.mark.parametrize("search", SEARCHES, ids=SEARCH_IDS)
def test_parked_sentences_resume_to_the_output_they_get_unparked(
        made: dict, search: SearchOptions, options: EngineOptions) -> None:
    engine = engine_with(options, made)
    jobs = jobs_of(2 * len(MEMBERS), seed=5)
    chooser = random.Random(17)
    join_steps = [chooser.randint(0, 10) for _ in jobs]
    unparked, _ = decode_live(engine_with(options, made), jobs, search, join_steps)
    parked, decoder, sat_out = decode_parking(engine, jobs, search, join_steps, seed=23)
    assert sat_out > len(jobs)  # sentences really sat out steps
    for mine, theirs in zip(parked, unparked, strict=True):
        assert [h.tokens for h in mine] == [h.tokens for h in theirs]
    assert_same(parked, engine_with(EngineOptions(), made).translate(jobs, search))
    assert decoder.live == 0 and decoder.row_count == 0 and not decoder.parked
    assert not engine.modules.in_use


def test_a_parked_sentence_keeps_its_modules_until_cancelled(made: dict) -> None:
    engine = engine_with(EngineOptions(), made)
    decoder = LiveDecoder(engine, SearchOptions(beam_size=2))
    kept, parked = decoder.join([SentenceJob(SOURCES[0], MEMBERS[0], 30),
                                 SentenceJob(SOURCES[2], MEMBERS[-1], 30)])
    decoder.step()
    decoder.park([parked])
    decoder.step()
    assert decoder.row_count == 2 and decoder.parked_row_count == 3 * 2
    assert decoder.live == 2 and list(decoder.entries) == [kept]
    assert engine.modules.busy("ldr0") == 1  # parked: its modules stay leased
    decoder.cancel(parked)
    assert engine.modules.busy("ldr0") == 0 and decoder.stats.cancelled == 1
    assert decoder.live == 1 and not decoder.parked


def test_parked_rows_resume_when_nothing_else_steps(made: dict) -> None:
    engine = engine_with(EngineOptions(), made)
    decoder = LiveDecoder(engine, SearchOptions(beam_size=2))
    job = SentenceJob(SOURCES[1], MEMBERS[0], 8)
    (ticket,) = decoder.join([job])
    decoder.step()
    decoder.park([ticket])
    finished: list[tuple[int, list[Hypothesis]]] = []
    for _ in range(20):
        finished += decoder.step()
    assert [t for t, _ in finished] == [ticket]
    assert_same([finished[0][1]], engine.translate([job], SearchOptions(beam_size=2)))
