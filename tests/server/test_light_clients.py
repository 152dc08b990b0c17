"""Light clients (server/scheduling/light_clients.py): a client's load, the sentences
parked while a light client's sentence is live, and the continuous scheduler over a real
tiny engine: a light client's sentence runs beside busy clients whose extra rows sit out
its steps, everybody's output is the static batch's, nobody starves."""

from __future__ import annotations

import asyncio
import contextvars
import time

import pytest

from server.decoding.search import SearchOptions
from server.engine.engine import Engine, Member, SentenceJob
from server.scheduling.clients import CLIENT
from server.scheduling.continuous import ContinuousScheduler
from server.scheduling.light_clients import (
    ClientLoads,
    LiveSentence,
    parked_tickets,
)
from tests.server.test_continuous_scheduler import engine, later, run  # noqa: F401

BEAM = SearchOptions(beam_size=2)
BUSY = [SentenceJob([5 + i, 6, 7, 8, 9, 3], (Member(None),), 24) for i in range(6)]
POLITE = SentenceJob([11, 12, 3], (Member(None),), 6)
LINGERING = SentenceJob([11, 12, 3], (Member(None),), 24)  # light, but many steps


async def until_stepped(scheduler: ContinuousScheduler, steps: int) -> None:
    """Until the live batch took `steps` more steps (or has none left to take)."""
    def taken() -> int:
        return sum(d.stats.steps for d in scheduler.live.decoders.values())

    start = taken()
    while taken() < start + steps and scheduler.live.live:
        await asyncio.sleep(0.0005)


def test_a_client_asking_for_less_than_the_others_is_light() -> None:
    loads = ClientLoads(time_constant_s=1.0)
    assert loads.load("new", 0.0) == 0.0
    now = 0.0
    for _ in range(40):  # "busy" has one sentence in all the time, "polite" a quarter
        loads.update({"busy": 100, "polite": 100}, now)
        loads.update({"busy": 100}, now + 0.25)
        now += 1.0
    assert loads.load("busy", now) == pytest.approx(100.0)
    assert 10 < loads.load("polite", now) < 50
    assert loads.light({"busy", "polite"}, now) == {"polite"}
    # one sentence at a time, back to back, beside a bulk batch: there all the time, light
    for _ in range(40):
        loads.update({"bulk": 5000, "sequential": 60}, now)
        now += 1.0
    assert loads.light({"bulk", "sequential"}, now) == {"sequential"}
    # clients that send alike are none light; a client alone is never light
    assert loads.light({"bulk"}, now) == set()
    loads.update({"a": 100, "b": 100}, now)
    assert loads.light({"a", "b"}, now + 5.0) == set()
    assert loads.light({"new", "a"}, now + 5.0) == {"new"}  # no load yet: light
    loads.update({}, now + 5.0)  # everybody leaves: loads decay
    assert loads.load("bulk", now + 8.0) < 0.06 * 5000


def sentence(ticket: int, client: str, cost: int = 100) -> LiveSentence:
    return LiveSentence(ticket, client, request=ticket, cost=cost)


def test_the_others_beyond_the_budget_park_while_a_light_sentence_is_live() -> None:
    busy = [sentence(t, f"busy{t}") for t in range(6)]
    assert parked_tickets(busy, [], {"polite"}, budget=300) == frozenset()  # none live
    live = [*busy, sentence(9, "polite")]
    # polite (100) first, then the earliest joined of the others while they fit
    assert parked_tickets(live, [], {"polite"}, budget=300) == {2, 3, 4, 5}
    # joining sentences count (and a light one joining is enough to park)
    assert parked_tickets(busy, [sentence(-1, "polite", 150)], {"polite"},
                          budget=300) == {1, 2, 3, 4, 5}
    # at least one of the others always steps; an urgent request's never parks
    assert parked_tickets(live, [], {"polite"}, budget=1, urgent={4}) == {1, 2, 3, 5}


def test_a_light_sentence_steps_beside_busy_clients_with_their_rows_parked(
        engine: Engine) -> None:  # noqa: F811
    static_busy = engine.translate(BUSY, BEAM)
    static_polite = engine.translate([POLITE], BEAM)[0]

    async def body(scheduler: ContinuousScheduler) -> None:
        scheduler._loads = ClientLoads(time_constant_s=0.05)  # noqa: SLF001
        stop = asyncio.Event()
        rounds: dict[str, int] = {}

        async def busy(index: int) -> None:
            """Back to back, checking every answer against the static batch's."""
            CLIENT.set(f"busy{index}")
            while not stop.is_set():
                (future,) = scheduler.submit([BUSY[index]], BEAM, deadline=later())
                got = await future
                assert [h.tokens for h in got] == [h.tokens for h in static_busy[index]]
                rounds[CLIENT.get()] = rounds.get(CLIENT.get(), 0) + 1

        tasks = [asyncio.create_task(busy(i), context=contextvars.Context())
                 for i in range(len(BUSY))]
        while len(rounds) < len(BUSY) or min(rounds.values()) < 3:  # all at their share
            await asyncio.sleep(0.01)
        CLIENT.set("polite")
        for _ in range(3):
            (future,) = scheduler.submit([POLITE], BEAM, deadline=later())
            got = await future
            assert [h.tokens for h in got] == [h.tokens for h in static_polite]
            await asyncio.sleep(0.05)
        before = dict(rounds)
        while any(rounds[client] < before[client] + 2 for client in before):
            await asyncio.sleep(0.01)  # everybody goes on once the light sentences left
        stop.set()
        await asyncio.gather(*tasks)
        (decoder,) = scheduler.live.decoders.values()
        assert decoder.stats.parks > 0  # busy sentences sat out the light ones' steps
        metrics = scheduler.metrics
        assert metrics is not None
        assert metrics.live_parks._value.get() > 0  # noqa: SLF001  (what /metrics shows)
        assert not decoder.parked and decoder.live == 0

    run(engine, body, max_batch_tokens=4096, light_step_tokens=40)


def test_busy_clients_progress_while_light_sentences_are_always_live(
        engine: Engine) -> None:  # noqa: F811
    """Light sentences, each from a new client, are topped up to two live at every step,
    and the budget leaves no room for a busy sentence beside them: the busy clients'
    sentences still all finish (one at least always steps, the parked ones resume oldest
    first)."""
    static_busy = engine.translate(BUSY, BEAM)

    async def body(scheduler: ContinuousScheduler) -> None:
        loads = scheduler._loads = ClientLoads(time_constant_s=0.5)  # noqa: SLF001
        # the busy clients have been at work for a while: at their share from the start
        loads.update({f"busy{i}": 100 for i in range(len(BUSY))}, time.monotonic() - 10)
        stop = asyncio.Event()

        light: list[asyncio.Future] = []

        async def top_up() -> None:
            """Two live at a time, a few steps apart (never both leaving at once)."""
            while not stop.is_set():
                if sum(not future.done() for future in light) < 2:
                    CLIENT.set(f"light{len(light)}")  # a new client: light
                    light.extend(scheduler.submit([LINGERING], BEAM, deadline=later()))
                    await until_stepped(scheduler, 6)
                await asyncio.sleep(0.0005)

        async def busy(index: int) -> list[list[int]]:
            CLIENT.set(f"busy{index}")
            answers = []
            for _ in range(4):
                (future,) = scheduler.submit([BUSY[index]], BEAM, deadline=later())
                answers.append((await future)[0].tokens)
            return answers

        topping = asyncio.create_task(top_up(), context=contextvars.Context())
        results = await asyncio.wait_for(asyncio.gather(
            *[asyncio.create_task(busy(i), context=contextvars.Context())
              for i in range(len(BUSY))]), timeout=60)
        stop.set()
        await topping
        await asyncio.gather(*light)
        assert len(light) > 4  # light sentences ran all along
        for index, answers in enumerate(results):
            assert answers == [static_busy[index][0].tokens] * 4
        (decoder,) = scheduler.live.decoders.values()
        assert decoder.stats.parks > 0

    run(engine, body, max_batch_tokens=4096, light_step_tokens=8)
