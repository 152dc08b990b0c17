"""Fairness and backpressure over all queued work: round-robin batches across clients
(server/scheduling/fair_share.py: tests/server/test_server_fair_share.py), admission by
deadline (scheduler), and the preparation stage's character budget and deadline."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from test_server_scheduler import GREEDY, FakeEngine, job, later, run

from server.core.errors import Busy, DeadlineExceeded
from server.scheduling.clients import CLIENT
from server.scheduling.preparation import SMALL_CHARS, PreparationGate, check_deadline
from server.scheduling.scheduler import Scheduler


def test_a_large_request_shares_every_batch_with_a_later_small_one_of_another_client(
        ) -> None:
    gate = threading.Event()
    engine = FakeEngine(gate=gate)

    async def body(scheduler: Scheduler) -> None:
        blocker = scheduler.submit([job(1, "blocker")], GREEDY, deadline=later())
        await asyncio.to_thread(engine.started.wait, 5)  # the engine is busy from here on
        CLIENT.set("bulk")
        large = scheduler.submit([job(4, "large") for _ in range(40)], GREEDY,
                                 deadline=later())
        CLIENT.set("polite")
        small = scheduler.submit([job(4, "small"), job(4, "small")], GREEDY, deadline=later())
        gate.set()
        await asyncio.gather(*blocker, *large, *small)

    run(engine, body, max_batch_tokens=16, max_queue=100)
    batches = [[m.module_id for j in b for m in j.members] for b in engine.batches[1:]]
    # round-robin: the first batch after the blocker alternates large, small, large, small
    assert batches[0] == ["large", "small", "large", "small"]
    assert all(set(ids) == {"large"} for ids in batches[1:])
    assert sum(len(ids) for ids in batches[1:]) == 38


def test_round_robin_keeps_each_requests_order() -> None:
    gate = threading.Event()
    engine = FakeEngine(gate=gate)

    async def body(scheduler: Scheduler) -> None:
        blocker = scheduler.submit([job(1, "blocker")], GREEDY, deadline=later())
        await asyncio.to_thread(engine.started.wait, 5)
        CLIENT.set("a")
        first = scheduler.submit([job(n, "a") for n in (1, 2, 3)], GREEDY, deadline=later())
        CLIENT.set("b")
        second = scheduler.submit([job(n, "b") for n in (4, 5)], GREEDY, deadline=later())
        gate.set()
        await asyncio.gather(*blocker, *first, *second)

    run(engine, body)
    assert [len(j.source_ids) for j in engine.batches[1]] == [1, 4, 2, 5, 3]


def test_a_request_that_cannot_meet_its_deadline_is_refused_at_once() -> None:
    gate = threading.Event()
    engine = FakeEngine(gate=gate)

    async def body(scheduler: Scheduler) -> tuple[Busy, int]:
        scheduler._throughput = 10.0  # budget tokens per second, as if measured
        blocker = scheduler.submit([job(1, "blocker")], GREEDY, deadline=later())
        await asyncio.to_thread(engine.started.wait, 5)
        waiting = scheduler.submit([job(4) for _ in range(10)], GREEDY, deadline=later())
        # 40 tokens queued: a 100-token request needs about 1 + 40 + 100 tokens = 14 s
        with pytest.raises(Busy) as refused:
            scheduler.submit([job(10) for _ in range(10)], GREEDY, deadline=later(10.0))
        # a small request needs 1 + 4 + 4 tokens under round-robin: about 1 s; accepted
        small = scheduler.submit([job(4)], GREEDY, deadline=later(10.0))
        gate.set()
        await asyncio.gather(*blocker, *waiting, *small)
        return refused.value, scheduler.depth

    error, depth = run(engine, body, max_queue=100, retry_after_s=1)
    assert "past its deadline (10.0 s)" in error.message
    assert error.retry_after == 4  # the 40 queued tokens drain in 4 s
    assert depth == 0


def test_throughput_is_measured_from_well_filled_batches() -> None:
    engine = FakeEngine()

    async def body(scheduler: Scheduler) -> tuple[float | None, float | None]:
        assert scheduler._throughput is None  # nothing measured: nothing refused by estimate
        await asyncio.gather(*scheduler.submit([job(4)], GREEDY, deadline=later()))
        small = scheduler._throughput  # 4 of 64 tokens: a small batch runs less efficiently
        await asyncio.gather(*scheduler.submit([job(8) for _ in range(4)], GREEDY,
                                               deadline=later()))
        return small, scheduler._throughput

    small, half_full = run(engine, body)
    assert small is None
    assert half_full is not None and half_full > 0


def test_before_a_well_filled_batch_the_best_small_batch_rate_judges_a_busy_server() -> None:
    """The first bulk request of a server that has only run small batches: alone it is
    admitted (its full batches measure the rate); while others wait it is judged by the
    best rate seen, a lower bound, instead of being admitted blind."""
    gate = threading.Event()
    engine = FakeEngine(gate=gate)

    async def body(scheduler: Scheduler) -> tuple[float | None, Busy]:
        scheduler._throughput_floor = 10.0  # budget tokens per second, as if measured
        blocker = scheduler.submit([job(1, "blocker")], GREEDY, deadline=later())
        await asyncio.to_thread(engine.started.wait, 5)
        with pytest.raises(Busy) as refused:  # 1 + 200 tokens at >= 10/s: about 20 s
            scheduler.submit([job(10) for _ in range(20)], GREEDY, deadline=later(10.0))
        gate.set()
        await asyncio.gather(*blocker)
        return scheduler._throughput, refused.value

    throughput, error = run(engine, body, max_queue=100)
    assert throughput is None  # only the one-token blocker ran: no well-filled batch
    assert "about 20.1 s" in error.message


def test_more_work_of_an_admitted_request_is_never_refused() -> None:
    """A request's sentences translated again (lost markers) belong to a request already
    admitted: neither admission nor the queue bound refuses them (a refusal would throw
    away its first pass), where a new request of the same size gets 429."""
    gate = threading.Event()
    engine = FakeEngine(gate=gate)

    async def body(scheduler: Scheduler) -> int:
        scheduler._throughput_floor = 10.0  # budget tokens per second, as if measured
        blocker = scheduler.submit([job(1, "blocker")], GREEDY, deadline=later())
        await asyncio.to_thread(engine.started.wait, 5)
        work = [job(10) for _ in range(20)]  # about 20 s at 10 tokens/s; 20 > max_queue
        with pytest.raises(Busy):
            scheduler.submit(work, GREEDY, deadline=later(10.0))
        again = scheduler.submit(work, GREEDY, deadline=later(10.0), admitted=True)
        gate.set()
        return len(await asyncio.gather(*blocker, *again))

    assert run(engine, body, max_queue=5) == 21


def test_alone_the_first_bulk_request_is_admitted_to_measure_the_rate() -> None:
    engine = FakeEngine()

    async def body(scheduler: Scheduler) -> float | None:
        scheduler._throughput_floor = 10.0  # as if small batches had run before
        await asyncio.gather(*scheduler.submit([job(10) for _ in range(20)], GREEDY,
                                               deadline=later(10.0)))
        return scheduler._throughput

    assert run(engine, body, max_queue=100) is not None


def test_batches_holding_a_requests_share_are_measured_too() -> None:
    """While others wait, a large request's batches hold its share (below half the
    budget): they are what it gets, so they count."""
    engine = FakeEngine()

    async def body(scheduler: Scheduler) -> float | None:
        await asyncio.gather(*scheduler.submit([job(4) for _ in range(3)], GREEDY,
                                               deadline=later()))
        return scheduler._throughput

    assert run(engine, body, max_request_batch_tokens=12) is not None


def test_a_request_too_large_for_its_deadline_is_refused_even_alone() -> None:
    engine = FakeEngine()

    async def body(scheduler: Scheduler) -> tuple[Busy, int]:
        scheduler._throughput = 10.0  # budget tokens per second, as if measured
        with pytest.raises(Busy) as refused:  # 200 tokens: about 20 s, the deadline is 10 s
            scheduler.submit([job(10) for _ in range(20)], GREEDY, deadline=later(10.0))
        fits = scheduler.submit([job(10) for _ in range(5)], GREEDY, deadline=later(10.0))
        await asyncio.gather(*fits)
        return refused.value, len(engine.batches)

    error, batches = run(engine, body, max_queue=100)
    assert "about 20.0 s" in error.message and "send less at once" in error.message
    assert batches >= 1  # the request that fits ran; the refused one left nothing queued


def test_preparation_over_its_character_budget_waits_its_turn() -> None:
    """A large request beyond the budget waits until the work before it is prepared (never
    refused); a small one is prepared at once beside it; past its deadline it is 504."""
    async def main() -> None:
        big = SMALL_CHARS + 80  # a large request's lane
        gate = PreparationGate(max_chars=big + 20, retry_after_s=2)
        release = threading.Event()
        try:
            first = asyncio.ensure_future(gate.run(big, later(), release.wait, 10))
            await asyncio.sleep(0)
            assert gate.chars == big
            second = asyncio.ensure_future(gate.run(big, later(), len, "abcd"))
            with pytest.raises(DeadlineExceeded, match="preparation stage"):
                await gate.run(big, time.monotonic() + 0.05, len, "x")
            assert await gate.run(30, later(), len, "abc") == 3  # small: never waits
            assert not second.done()  # it waits for the first to be prepared
            release.set()
            assert await first is True
            assert await asyncio.wait_for(second, 5) == 4
            await asyncio.sleep(0.05)
            assert gate.chars == 0
            assert await gate.run(5 * big, later(), len, "ab") == 2  # alone, any size fits
        finally:
            release.set()
            gate.close()

    asyncio.run(main())


def test_a_small_request_is_prepared_while_large_ones_hold_every_thread() -> None:
    async def main() -> None:
        gate = PreparationGate(max_chars=1_000_000, retry_after_s=1, threads=2)
        release = threading.Event()
        try:
            large = [asyncio.ensure_future(gate.run(SMALL_CHARS + 1, later(), release.wait,
                                                    10)) for _ in range(3)]
            await asyncio.sleep(0.05)  # two run, the third waits for a thread
            small = await asyncio.wait_for(gate.run(SMALL_CHARS, later(), len, "abc"), 5)
            assert small == 3
            assert not any(task.done() for task in large)
            release.set()
            assert await asyncio.gather(*large) == [True, True, True]
        finally:
            release.set()
            gate.close()

    asyncio.run(main())


def test_a_small_request_is_prepared_on_the_event_loop_a_large_one_on_a_thread() -> None:
    async def main() -> None:
        gate = PreparationGate(max_chars=1_000_000, retry_after_s=1)
        try:
            loop_thread = threading.get_ident()
            assert await gate.run(SMALL_CHARS, later(), threading.get_ident) == loop_thread
            assert await gate.run(SMALL_CHARS + 1, later(), threading.get_ident) != loop_thread
            assert gate.chars == 0
            with pytest.raises(ValueError, match="bad text"):  # its budget comes back
                await gate.run(10, later(), _fail, "bad text")
            assert gate.chars == 0
        finally:
            gate.close()

    asyncio.run(main())


def _fail(message: str) -> None:
    raise ValueError(message)


def test_preparation_past_the_deadline_is_504_and_frees_its_budget() -> None:
    async def main() -> None:
        gate = PreparationGate(max_chars=100, retry_after_s=1)
        release = threading.Event()
        try:
            with pytest.raises(DeadlineExceeded, match="split and tokenized"):
                await gate.run(SMALL_CHARS + 1, time.monotonic() + 0.05, release.wait, 10)
            assert gate.chars == SMALL_CHARS + 1  # the thread still runs: they still count
            release.set()
            for _ in range(100):
                if gate.chars == 0:
                    break
                await asyncio.sleep(0.01)
            assert gate.chars == 0
        finally:
            release.set()
            gate.close()

    asyncio.run(main())


def test_preparation_work_stops_between_texts_after_the_deadline() -> None:
    check_deadline(later())
    with pytest.raises(DeadlineExceeded):
        check_deadline(time.monotonic() - 1)
