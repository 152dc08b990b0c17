"""Micro-batching policy (server/scheduling/scheduler.py) with a fake engine."""

from __future__ import annotations

import asyncio
import re
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

import pytest

from server.core.errors import Busy, DeadlineExceeded
from server.core.metrics import Metrics
from server.core.settings import SchedulerSettings
from server.decoding.search import Hypothesis, SearchOptions
from server.engine.engine import Member, SentenceJob
from server.execution.engine_thread import EngineThread
from server.scheduling.batching import job_cost
from server.scheduling.scheduler import Scheduler

T = TypeVar("T")
GREEDY = SearchOptions()
BEAM = SearchOptions(beam_size=2)


class FakeEngine:
    """Records every batch; answers each job with its own source ids."""

    def __init__(self, *, gate: threading.Event | None = None, fail: bool = False,
                 compute_s: float = 0.0) -> None:
        self.batches: list[list[SentenceJob]] = []
        self.gate = gate
        self.fail = fail
        self.compute_s = compute_s  # each batch's time on the engine thread
        self.started = threading.Event()

    def __call__(self, jobs: Sequence[SentenceJob],
                 options: SearchOptions) -> list[list[Hypothesis]]:
        self.started.set()
        if self.gate is not None:
            self.gate.wait(10)
        time.sleep(self.compute_s)
        self.batches.append(list(jobs))
        if self.fail:
            raise RuntimeError("engine exploded")
        return [[Hypothesis(list(job.source_ids), -1.0)] for job in jobs]


def job(length: int = 4, module: str | None = None, members: int = 1) -> SentenceJob:
    chosen = tuple(Member(module if i == 0 else f"{module}-{i}") for i in range(members))
    return SentenceJob(list(range(length)), chosen, 10)


def run(engine: FakeEngine, body: Callable[[Scheduler], Awaitable[T]], *,
        max_modules: int = 4, **settings: object) -> T:
    async def main() -> T:
        values = {"max_wait_ms": 20.0, "max_batch_tokens": 64, "max_queue": 16, **settings}
        scheduler = Scheduler(engine, EngineThread(), SchedulerSettings.model_validate(values),
                              max_modules=max_modules, metrics=Metrics())
        scheduler.start()
        try:
            return await body(scheduler)
        finally:
            await scheduler.stop()
            scheduler.engine_thread.shutdown()

    return asyncio.run(main())


def later(seconds: float = 30.0) -> float:
    return time.monotonic() + seconds


def test_sentences_of_different_modules_share_a_batch() -> None:
    engine = FakeEngine()

    async def body(scheduler: Scheduler) -> list[list[Hypothesis]]:
        futures = scheduler.submit([job(3, "medical@1"), job(5, "law@2"), job(2)], GREEDY,
                                   deadline=later())
        return list(await asyncio.gather(*futures))

    results = run(engine, body)
    assert [r[0].tokens for r in results] == [[0, 1, 2], [0, 1, 2, 3, 4], [0, 1]]
    assert len(engine.batches) == 1 and len(engine.batches[0]) == 3


def test_batches_hold_identical_search_options_only() -> None:
    engine = FakeEngine()

    async def body(scheduler: Scheduler) -> None:
        futures = scheduler.submit([job(), job()], GREEDY, deadline=later())
        futures += scheduler.submit([job()], BEAM, deadline=later())
        await asyncio.gather(*futures)

    run(engine, body)
    assert sorted(len(b) for b in engine.batches) == [1, 2]


def test_token_budget_splits_batches() -> None:
    engine = FakeEngine()

    async def body(scheduler: Scheduler) -> None:
        await asyncio.gather(*scheduler.submit([job(10) for _ in range(5)], GREEDY,
                                               deadline=later()))

    run(engine, body, max_batch_tokens=25)
    assert [len(b) for b in engine.batches] == [2, 2, 1]


def test_a_sentence_above_the_budget_runs_alone() -> None:
    engine = FakeEngine()

    async def body(scheduler: Scheduler) -> None:
        await asyncio.gather(*scheduler.submit([job(100), job(2)], GREEDY, deadline=later()))

    run(engine, body, max_batch_tokens=25)
    assert [len(b) for b in engine.batches] == [1, 1]


def test_cost_counts_beam_and_ensemble_members() -> None:
    assert job_cost(job(4), GREEDY) == 4
    assert job_cost(job(4), BEAM) == 8
    assert job_cost(job(4, "a@1", members=3), BEAM) == 24


def test_distinct_modules_per_batch_are_limited_to_the_slots() -> None:
    engine = FakeEngine()

    async def body(scheduler: Scheduler) -> None:
        jobs = [job(2, f"d{i}@1") for i in range(5)] + [job(2, "d0@1")]
        await asyncio.gather(*scheduler.submit(jobs, GREEDY, deadline=later()))

    run(engine, body, max_modules=2)
    for batch in engine.batches:
        assert len({m.module_id for j in batch for m in j.members}) <= 2
    assert sum(len(b) for b in engine.batches) == 6
    assert len(engine.batches[0]) == 3  # d0, d1 and the second d0 sentence


def test_a_lone_sentence_waits_at_most_max_wait() -> None:
    engine = FakeEngine()

    async def body(scheduler: Scheduler) -> float:
        started = time.monotonic()
        await asyncio.gather(*scheduler.submit([job()], GREEDY, deadline=later()))
        return time.monotonic() - started

    elapsed = run(engine, body, max_wait_ms=50.0)
    assert 0.04 <= elapsed < 2.0


def test_a_full_budget_runs_without_waiting() -> None:
    engine = FakeEngine()

    async def body(scheduler: Scheduler) -> float:
        started = time.monotonic()
        await asyncio.gather(*scheduler.submit([job(32), job(32)], GREEDY, deadline=later()))
        return time.monotonic() - started

    assert run(engine, body, max_wait_ms=5000.0, max_batch_tokens=64) < 2.0


def test_full_queue_raises_busy_with_retry_after() -> None:
    gate = threading.Event()
    engine = FakeEngine(gate=gate)

    async def body(scheduler: Scheduler) -> Busy:
        first = scheduler.submit([job()], GREEDY, deadline=later())
        await asyncio.to_thread(engine.started.wait, 5)  # the engine holds the first batch
        queued = scheduler.submit([job(), job()], GREEDY, deadline=later())
        with pytest.raises(Busy) as caught:
            scheduler.submit([job()], GREEDY, deadline=later())
        gate.set()
        await asyncio.gather(*first, *queued)
        return caught.value

    error = run(engine, body, max_queue=2, retry_after_s=3)
    assert error.retry_after == 3 and "queue is full" in error.message


def test_a_request_larger_than_the_queue_is_accepted_when_it_is_empty() -> None:
    engine = FakeEngine()

    async def body(scheduler: Scheduler) -> int:
        return len(await asyncio.gather(*scheduler.submit([job() for _ in range(5)], GREEDY,
                                                          deadline=later())))

    assert run(engine, body, max_queue=2) == 5


def test_cancelled_sentences_free_their_slot_and_are_never_computed() -> None:
    gate = threading.Event()
    engine = FakeEngine(gate=gate)

    async def body(scheduler: Scheduler) -> tuple[int, int]:
        first = scheduler.submit([job(1)], GREEDY, deadline=later())
        await asyncio.to_thread(engine.started.wait, 5)
        gone = scheduler.submit([job(7), job(8)], GREEDY, deadline=later())
        kept = scheduler.submit([job(9)], GREEDY, deadline=later())
        depth_before = scheduler.depth
        for future in gone:
            future.cancel()  # what a disconnected client's request does
        await asyncio.sleep(0)
        depth_after = scheduler.depth
        gate.set()
        await asyncio.gather(*first, *kept)
        return depth_before, depth_after

    assert run(engine, body, max_queue=3) == (3, 1)
    computed = [len(j.source_ids) for batch in engine.batches for j in batch]
    assert 7 not in computed and 8 not in computed and 9 in computed


def test_expired_sentences_fail_with_a_deadline_error_before_compute() -> None:
    gate = threading.Event()
    engine = FakeEngine(gate=gate)

    async def body(scheduler: Scheduler) -> BaseException | None:
        first = scheduler.submit([job(1)], GREEDY, deadline=later())
        await asyncio.to_thread(engine.started.wait, 5)
        late = scheduler.submit([job(6)], GREEDY, deadline=time.monotonic() + 0.05)
        await asyncio.sleep(0.1)
        gate.set()
        await asyncio.gather(*first)
        done, _ = await asyncio.wait(late, timeout=5)
        return next(iter(done)).exception()

    error = run(engine, body)
    assert isinstance(error, DeadlineExceeded)
    assert 6 not in [len(j.source_ids) for batch in engine.batches for j in batch]


def test_an_engine_failure_fails_each_sentence_of_the_batch() -> None:
    engine = FakeEngine(fail=True)

    async def body(scheduler: Scheduler) -> list[BaseException | None]:
        futures = scheduler.submit([job(), job()], GREEDY, deadline=later())
        await asyncio.wait(futures, timeout=5)
        return [f.exception() for f in futures]

    errors = run(engine, body)
    assert all(isinstance(e, RuntimeError) for e in errors)


def test_batch_metrics_are_recorded() -> None:
    engine = FakeEngine(compute_s=0.05)
    metrics = Metrics()

    async def main() -> None:
        scheduler = Scheduler(engine, EngineThread(), SchedulerSettings(max_wait_ms=1.0),
                              max_modules=4, metrics=metrics)
        scheduler.start()
        await asyncio.gather(*scheduler.submit([job(3), job(4)], GREEDY, deadline=later()))
        await scheduler.stop()
        scheduler.engine_thread.shutdown()

    asyncio.run(main())
    text = metrics.render().decode()
    assert "nmt_scheduler_batch_sentences_sum 2.0" in text
    assert "nmt_scheduler_batch_tokens_sum 7.0" in text
    assert "nmt_scheduler_batch_length_spread_sum 1.1428" in text  # 4 / mean(3, 4)
    assert "nmt_engine_target_tokens_total 7.0" in text
    assert "nmt_scheduler_queue_depth 0.0" in text
    busy = re.search(r"^nmt_engine_busy_seconds_total (\S+)$", text, re.MULTILINE)
    assert busy and 0.05 <= float(busy.group(1)) < 10  # the one batch's time on the engine
