"""Batch formation (server/scheduling/batching.py): round-robin, a request's share while
others wait, length buckets, module groups and similar-length batches cut from a
lookahead pool; pure functions first, then the scheduler counting the batches it sends
to a fake engine."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_server_scheduler import GREEDY, FakeEngine, job, later, run

from server.engine.engine import SentenceJob
from server.scheduling.batching import (
    BatchLimits,
    Lane,
    Pending,
    anchor_of,
    form_batch,
    job_cost,
    length_window,
)
from server.scheduling.clients import CLIENT
from server.scheduling.scheduler import Scheduler


class Lanes:
    """Requests' lanes built without an event loop (futures are never awaited here)."""

    def __init__(self) -> None:
        self.lanes: list[Lane] = []
        self.loop = asyncio.new_event_loop()
        self.keys = 0

    def request(self, *jobs: SentenceJob) -> Lane:
        lane = Lane(GREEDY)
        items = []
        for sentence in jobs:
            items.append((self.keys, Pending(len(self.lanes), sentence, GREEDY,
                                             job_cost(sentence, GREEDY), 0.0, 1e9,
                                             self.loop.create_future())))
            self.keys += 1
        lane.add(items)
        self.lanes.append(lane)
        return lane

    def batch(self, *, tokens: int = 64, modules: int = 4, share: int | None = None,
              lookahead: int = 1) -> list[tuple[int, str | None]]:
        """(request, module) of every sentence of the next batch, in batch order."""
        return [(item.request, item.job.members[0].module_id)
                for _, item in self.taken(tokens=tokens, modules=modules, share=share,
                                          lookahead=lookahead)]

    def taken(self, *, tokens: int = 64, modules: int = 4, share: int | None = None,
              lookahead: int = 1) -> list[tuple[int, Pending]]:
        limits = BatchLimits(tokens, modules, tokens if share is None else share, lookahead)
        return form_batch(self.lanes, limits, held_back=lambda _: False)


@pytest.fixture
def lanes() -> Iterator[Lanes]:
    built = Lanes()
    yield built
    built.loop.close()


def test_round_robin_takes_one_sentence_of_each_request_per_round(lanes: Lanes) -> None:
    lanes.request(*[job(2, "m") for _ in range(3)])
    lanes.request(*[job(2, "m") for _ in range(2)])
    assert [r for r, _ in lanes.batch()] == [0, 1, 0, 1, 0]


def test_a_requests_share_caps_what_it_adds_beyond_its_first_sentence(lanes: Lanes) -> None:
    lanes.request(*[job(4, "bulk") for _ in range(40)])
    lanes.request(job(4, "polite"))
    # share 8: the bulk request adds its first sentence, then at most 8 more tokens
    assert lanes.batch(tokens=64, share=8) == [(0, "bulk"), (1, "polite"), (0, "bulk"),
                                               (0, "bulk")]
    # uncontended (the share is the budget): the bulk request fills the batch
    assert len(lanes.batch(tokens=64)) == 16


def test_a_sentence_above_the_share_still_runs_as_its_requests_first(lanes: Lanes) -> None:
    lanes.request(job(20, "long"), job(20, "long"))
    lanes.request(job(2, "short"))
    assert lanes.batch(tokens=64, share=8) == [(0, "long"), (1, "short")]


def test_a_requests_sentences_are_taken_shortest_first(lanes: Lanes) -> None:
    lanes.request(job(9), job(2), job(7), job(3), job(2))
    taken = form_batch(lanes.lanes, BatchLimits(14, 4, 14), held_back=lambda _: False)
    # length buckets: the batch holds the short sentences, the long ones run together next
    assert [len(item.job.source_ids) for _, item in taken] == [2, 2, 3, 7]


def test_requests_of_one_module_are_grouped_within_a_round(lanes: Lanes) -> None:
    for module in ("a", "b", "a", "c", "b", "a"):
        lanes.request(job(4, module))
    # the budget ends mid-round: the oldest request's group first, then the next oldest's
    assert lanes.batch(tokens=16) == [(0, "a"), (2, "a"), (5, "a"), (1, "b")]
    assert lanes.batch(tokens=64) == [(0, "a"), (2, "a"), (5, "a"), (1, "b"), (4, "b"),
                                      (3, "c")]


def test_module_groups_keep_one_sentence_per_request_per_round(lanes: Lanes) -> None:
    lanes.request(*[job(2, "a") for _ in range(5)])
    lanes.request(job(2, "b"))
    lanes.request(job(2, "a"))
    # grouping orders a round; it never gives a request a second turn before the others
    assert lanes.batch(tokens=12) == [(0, "a"), (2, "a"), (1, "b"), (0, "a"), (0, "a"),
                                      (0, "a")]


def test_held_back_sentences_are_skipped(lanes: Lanes) -> None:
    lanes.request(job(2, "evicted"), job(2, "resident"))
    taken = form_batch(lanes.lanes, BatchLimits(64, 4, 64),
                       held_back=lambda item: "evicted" in item.modules)
    assert [item.job.members[0].module_id for _, item in taken] == ["resident"]


def test_a_bulk_request_runs_as_short_batches_while_a_small_one_waits() -> None:
    """Counting batches, not time: while another request waits, every batch holds at most
    the bulk request's share; once it is alone (and was alone in the batch before), it
    fills whole batches again."""
    gate = threading.Event()
    engine = FakeEngine(gate=gate)

    async def body(scheduler: Scheduler) -> None:
        CLIENT.set("bulk")
        bulk = scheduler.submit([job(4, "bulk") for _ in range(40)], GREEDY, deadline=later())
        await asyncio.to_thread(engine.started.wait, 5)  # the bulk's first batch runs
        polite = []
        for client in ("polite-1", "polite-2", "polite-3"):
            CLIENT.set(client)
            polite.append(scheduler.submit([job(4, "polite")], GREEDY, deadline=later()))
        gate.set()
        await asyncio.gather(*bulk, *[f for futures in polite for f in futures])

    run(engine, body, max_batch_tokens=32, max_request_batch_tokens=8, max_queue=100)
    shapes = [[m.module_id for j in b for m in j.members] for b in engine.batches]
    assert shapes[0] == ["bulk"] * 8  # alone: a whole batch
    # three polite clients wait: they were served less recently than the bulk client, and
    # every batch gives the bulk client 1 + 2 sentences
    assert shapes[1] == ["polite", "polite", "polite", "bulk", "bulk", "bulk"]
    assert shapes[2] == ["bulk"] * 3  # the last batch was shared: still capped
    assert all(len(shape) == 8 for shape in shapes[3:-1])  # alone again: whole batches
    assert sum(len(shape) for shape in shapes) == 43


def test_one_clients_many_requests_alone_fill_whole_batches() -> None:
    """Shares are between clients: many concurrent requests of one client (64 users
    behind one address or key) are not held to a share while no other client waits."""
    gate = threading.Event()
    engine = FakeEngine(gate=gate)

    async def body(scheduler: Scheduler) -> None:
        CLIENT.set("one")
        first = scheduler.submit([job(4, "first")], GREEDY, deadline=later())
        await asyncio.to_thread(engine.started.wait, 5)  # queued behind a running batch
        many = [scheduler.submit([job(4, "many")], GREEDY, deadline=later())
                for _ in range(24)]
        gate.set()
        await asyncio.gather(*first, *[f for futures in many for f in futures])

    run(engine, body, max_batch_tokens=32, max_request_batch_tokens=8, max_queue=100)
    assert [len(batch) for batch in engine.batches] == [1, 8, 8, 8]


def test_the_batch_after_a_busy_engine_waits_for_the_answered_clients_to_return() -> None:
    """At saturation: the sentence that waited behind a batch does not leave alone the
    moment that batch ends; the client the batch answered sends its next request into
    the same next batch (within `max_wait_ms` of the batch's end)."""
    gate = threading.Event()
    engine = FakeEngine(gate=gate)

    async def body(scheduler: Scheduler) -> None:
        first = scheduler.submit([job(8)], GREEDY, deadline=later())  # a full batch: runs
        await asyncio.to_thread(engine.started.wait, 5)
        waiting = scheduler.submit([job(4)], GREEDY, deadline=later())
        for item in scheduler._queue.values():
            item.enqueued -= 60.0  # it has waited far longer than max_wait_ms already
        gate.set()
        await asyncio.gather(*first)
        again = scheduler.submit([job(4)], GREEDY, deadline=later())  # the answered client
        await asyncio.gather(*waiting, *again)

    run(engine, body, max_batch_tokens=8, max_wait_ms=30_000.0)
    assert [len(batch) for batch in engine.batches] == [1, 2]


def test_a_length_window_takes_the_oldest_and_its_nearest_lengths() -> None:
    lengths = [5, 1, 9, 5, 6, 2]
    assert length_window(lengths, [1] * 6, 3) == [0, 3, 4]  # 5, then 5 and 6 (not 2)
    assert length_window(lengths, [1] * 6, 100) == [0, 1, 2, 3, 4, 5]
    # a neighbour above the budget is passed over for the other side
    assert length_window([5, 6, 4], [2, 9, 2], 4) == [0, 2]
    # the oldest runs even when it alone is above the budget
    assert length_window([5, 6], [9, 1], 4) == [0]
    # around another anchor
    assert length_window(lengths, [1] * 6, 3, anchor=1) == [0, 1, 5]  # 1, then 2 and 5


def test_the_anchor_is_the_sentence_left_out_most_often() -> None:
    assert anchor_of([0, 0, 0]) == 0  # none left out: the oldest
    assert anchor_of([0, 1, 2, 2]) == 2  # the first of those left out most


@given(st.lists(st.tuples(st.integers(1, 60), st.integers(1, 40)), min_size=1, max_size=40),
       st.integers(1, 200), st.integers(0, 39))
def test_a_length_window_is_a_full_run_of_the_length_order(
        pool: list[tuple[int, int]], budget: int, anchor: int) -> None:
    lengths = [length for length, _ in pool]
    costs = [cost for _, cost in pool]
    anchor %= len(pool)
    chosen = length_window(lengths, costs, budget, anchor=anchor)
    assert anchor in chosen and chosen == sorted(set(chosen))
    assert sum(costs[i] for i in chosen) <= max(budget, costs[anchor])
    # a contiguous run of the (stable) length order, which neither neighbour would fit
    order = sorted(range(len(pool)), key=lambda i: (lengths[i], i))
    positions = sorted(order.index(i) for i in chosen)
    assert positions == list(range(positions[0], positions[-1] + 1))
    spent = sum(costs[i] for i in chosen)
    for edge in (positions[0] - 1, positions[-1] + 1):
        if 0 <= edge < len(order):
            assert spent + costs[order[edge]] > budget


def test_a_lookahead_batch_holds_sentences_of_similar_lengths(lanes: Lanes) -> None:
    lanes.request(job(8), job(2))
    lanes.request(job(3))
    lanes.request(job(9))
    lanes.request(job(2))
    # without lookahead: the fair order's first 24 tokens, lengths 2, 3, 9, 2, 8
    assert [len(i.job.source_ids) for _, i in lanes.taken(tokens=24)] == [2, 3, 9, 2, 8]
    # from a pool of two budgets: the oldest (2) and the nearest lengths, the long ones
    # left to run together
    taken = lanes.taken(tokens=8, lookahead=2)
    assert [(i.request, len(i.job.source_ids)) for _, i in taken] == [(0, 2), (1, 3),
                                                                      (3, 2)]


def test_a_sentence_of_another_length_is_left_out_at_most_twice(lanes: Lanes) -> None:
    """A long request, oldest, would anchor every batch on its own lengths; the short
    sentence left out anchors the third batch (left out twice, more than any other)."""
    lanes.request(*[job(9) for _ in range(10)])
    lanes.request(job(2))
    batches: list[list[int]] = []
    while any(lane.pending for lane in lanes.lanes):
        taken = lanes.taken(tokens=18, lookahead=2)
        for key, item in taken:
            del lanes.lanes[item.request].pending[key]
        batches.append([len(item.job.source_ids) for _, item in taken])
    assert batches[:3] == [[9, 9], [9, 9], [9, 2]]
    assert sum(map(len, batches)) == 11


def test_a_lookahead_pool_keeps_a_requests_share(lanes: Lanes) -> None:
    lanes.request(*[job(4, "bulk") for _ in range(40)])
    lanes.request(job(4, "polite"))
    # the pool of two budgets holds the bulk request's first sentence and its share once
    assert lanes.batch(tokens=64, share=8, lookahead=2) == [
        (0, "bulk"), (1, "polite"), (0, "bulk"), (0, "bulk")]
    # alone (share = budget): the pool and the batch are the bulk's, a whole budget
    assert len(lanes.batch(tokens=64, lookahead=2)) == 16


def test_the_scheduler_cuts_batches_of_similar_lengths_from_its_queue() -> None:
    """With the engine busy, short and long sentences queue in turn; the batches that
    follow hold the short ones together, where one batch's worth would mix them."""

    def batches(lookahead: int) -> list[list[int]]:
        gate = threading.Event()
        engine = FakeEngine(gate=gate)

        async def body(scheduler: Scheduler) -> None:
            first = scheduler.submit([job(16)], GREEDY, deadline=later())  # a full batch
            await asyncio.to_thread(engine.started.wait, 5)
            waiting = []
            for index, length in enumerate((2, 9, 2, 9, 2, 9, 2, 9)):
                CLIENT.set(f"client-{index}")  # one client each: round robin, then lengths
                waiting.append(scheduler.submit([job(length)], GREEDY, deadline=later()))
            gate.set()
            await asyncio.gather(*first, *[f for futures in waiting for f in futures])

        run(engine, body, max_batch_tokens=16, max_wait_ms=0.0, lookahead_batches=lookahead)
        return [[len(j.source_ids) for j in batch] for batch in engine.batches]

    assert batches(1) == [[16], [2, 9, 2, 2], [9, 2], [9], [9]]
    assert batches(2) == [[16], [2, 2, 2, 2], [9], [9], [9], [9]]
