"""Continuous batching in the scheduler (server/scheduling/continuous.py) over a real tiny
engine: a short request joins a running batch and is answered long before the long
sentences beside it end, with the hypotheses a static batch gives; a cancelled or expired
sentence leaves at the next step; admission, the queue bound and the engine's errors
behave as in static batching."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import SimpleNamespace
from typing import TypeVar

import pytest

from server.core.errors import DeadlineExceeded
from server.core.metrics import Metrics
from server.core.settings import SchedulerSettings
from server.decoding.search import Hypothesis, SearchOptions
from server.engine.artifacts import build_engine
from server.engine.engine import Engine, EngineOptions, Member, SentenceJob
from server.engine.live_batches import LiveBatches, LiveInbox, StepReport
from server.execution.engine_thread import EngineThread
from server.scheduling import continuous as continuous_module
from server.scheduling.batching import Pending
from server.scheduling.clients import CLIENT
from server.scheduling.continuous import ContinuousScheduler
from tests.server.conftest import build_store, make_client
from tests.tiny import tiny_backbone_files

T = TypeVar("T")
BEAM = SearchOptions(beam_size=2)
LONG = [SentenceJob([5, 6, 7, 8, 9, 10, 3], (Member(None),), 60) for _ in range(3)]
SHORT = SentenceJob([11, 12, 3], (Member(None),), 2)


@pytest.fixture(scope="module")
def engine() -> Engine:
    return build_engine(tiny_backbone_files(), EngineOptions())


def run(engine: Engine, body: Callable[[ContinuousScheduler], Awaitable[T]],
        **settings: object) -> T:
    async def main() -> T:
        values = {"max_wait_ms": 1.0, "max_batch_tokens": 256, "continuous": True,
                  **settings}
        scheduler = ContinuousScheduler(
            LiveBatches(lambda: engine), EngineThread(),
            SchedulerSettings.model_validate(values), max_modules=4, metrics=Metrics())
        scheduler.start()
        try:
            return await body(scheduler)
        finally:
            await scheduler.stop()
            scheduler.engine_thread.shutdown()

    return asyncio.run(main())


async def until_live(scheduler: ContinuousScheduler, count: int = 1) -> None:
    while len(scheduler._tickets) < count:  # noqa: SLF001 - the live rows, read by the test
        await asyncio.sleep(0.001)


async def until_rows_left(scheduler: ContinuousScheduler, within_s: float = 10.0) -> None:
    deadline = time.monotonic() + within_s
    while scheduler.live.stats() != [(BEAM, 0, 0)] and time.monotonic() < deadline:
        await asyncio.sleep(0.005)


def later(seconds: float = 60.0) -> float:
    return time.monotonic() + seconds


def test_a_short_request_joins_a_running_batch_and_leaves_first(engine: Engine) -> None:
    static_long = engine.translate(LONG, BEAM)
    static_short = engine.translate([SHORT], BEAM)[0]

    async def body(scheduler: ContinuousScheduler) -> None:
        long_futures = scheduler.submit(LONG, BEAM, deadline=later())
        await until_live(scheduler)
        (short,) = scheduler.submit([SHORT], BEAM, deadline=later())
        got = await short
        assert not any(f.done() for f in long_futures)  # answered while they decode
        assert [h.tokens for h in got] == [h.tokens for h in static_short]
        results = await asyncio.gather(*long_futures)
        for mine, static in zip(results, static_long, strict=True):
            assert [h.tokens for h in mine] == [h.tokens for h in static]
        assert scheduler.live.stats() == [(BEAM, 0, 0)]
        metrics = scheduler.metrics
        assert metrics is not None
        assert metrics.live_joins._value.get() == 4  # noqa: SLF001
        assert metrics.live_leaves._value.get() == 4  # noqa: SLF001

    run(engine, body)


def test_cancelled_and_expired_sentences_leave_at_the_next_step(engine: Engine) -> None:
    async def body(scheduler: ContinuousScheduler) -> None:
        longer = SentenceJob(LONG[0].source_ids, (Member(None),), 120)
        kept, cancelled = scheduler.submit([LONG[0], longer], BEAM, deadline=later())
        (expiring,) = scheduler.submit([longer], BEAM, deadline=later())
        await until_live(scheduler, 3)
        cancelled.cancel()
        for item in scheduler._tickets.values():  # noqa: SLF001
            if item.future is expiring:
                item.deadline = time.monotonic()  # its deadline passes while it decodes
        with pytest.raises(DeadlineExceeded, match="while it was being translated"):
            await expiring
        await kept
        # the longer sentences' rows did not stay behind the shorter one: they leave at the
        # engine thread's next step (the loop's news of them reaches it through its inbox)
        await until_rows_left(scheduler)
        assert scheduler.live.stats() == [(BEAM, 0, 0)]
        assert not engine.modules.in_use

    run(engine, body)


def test_the_measured_rate_is_the_runs_not_a_moment_at_its_tail(
        engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    """Admission's rate floor comes from windows of at least MEASURE_S, or from a whole
    run shorter than that; the last rows finishing just after a window closed are no
    window of their own (their cost over a moment read as a many times faster engine
    and let a deadline through that the queue could not meet)."""
    clock = [0.0]
    monkeypatch.setattr(continuous_module, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    settings = SchedulerSettings.model_validate({"continuous": True})
    scheduler = ContinuousScheduler(LiveBatches(lambda: engine), EngineThread(), settings,
                                    max_modules=4)
    scheduler.engine_thread.shutdown()  # never started: the window is driven by hand
    loop = asyncio.new_event_loop()
    live = Pending(0, SHORT, BEAM, 10, 0.0, 60.0, loop.create_future())
    loop.close()
    scheduler._tickets = {0: live}  # noqa: SLF001 - rows live since the run opened at 0 s
    scheduler._window_start, scheduler._window_opens_run = 0.0, True  # noqa: SLF001
    clock[0] = 0.7
    scheduler._measure_window(0)  # long sentences: nothing finished, the window waits
    clock[0] = 1.0
    scheduler._measure_window(1000)  # one window: 1,000 tokens a second
    clock[0] = 1.01
    scheduler._tickets = {}  # noqa: SLF001 - the last rows finish at the next step
    scheduler._measure_window(300)
    assert scheduler._throughput_floor == pytest.approx(1000.0)  # noqa: SLF001
    scheduler._window_start, scheduler._window_opens_run = 5.0, True  # noqa: SLF001
    clock[0] = 5.2
    scheduler._measure_window(100)  # a whole run shorter than MEASURE_S still counts
    assert scheduler._recent_rate == pytest.approx(0.7 * 1000 + 0.3 * 500)  # noqa: SLF001


def test_a_sentence_the_engine_refuses_fails_alone(engine: Engine) -> None:
    too_long = SentenceJob([5, 3], (Member(None),), engine.config.max_positions + 5)

    async def body(scheduler: ContinuousScheduler) -> list[Hypothesis]:
        (good,) = scheduler.submit(LONG[:1], BEAM, deadline=later())
        await until_live(scheduler)
        (bad,) = scheduler.submit([too_long], SearchOptions(), deadline=later())
        with pytest.raises(ValueError, match="exceeds the backbone's"):
            await bad
        return await good

    assert run(engine, body)[0].tokens == engine.translate(LONG[:1], BEAM)[0][0].tokens


def test_the_budget_holds_but_a_new_request_always_gets_a_sentence_in(
        engine: Engine) -> None:
    """Live rows fill the budget: the same request's next sentences wait for it, another
    request's first sentence joins at once."""
    async def body(scheduler: ContinuousScheduler) -> None:
        bulk = scheduler.submit(LONG * 4, BEAM, deadline=later())  # 12 x 14 tokens
        await until_live(scheduler)
        live = list(scheduler._tickets.values())  # noqa: SLF001
        assert sum(item.cost for item in live) <= 3 * 14  # the budget below
        (short,) = scheduler.submit([SHORT], BEAM, deadline=later())
        await short
        assert sum(f.done() for f in bulk) < len(bulk)
        await asyncio.gather(*bulk)

    run(engine, body, max_batch_tokens=3 * 14, max_request_batch_tokens=3 * 14)


def test_newcomers_overshoot_the_budget_by_half_at_most(engine: Engine) -> None:
    """Many one-sentence requests: the live rows never cost more than 1.5x the budget
    (plus the last newcomer), and all are answered."""
    async def body(scheduler: ContinuousScheduler) -> None:
        peak = 0

        async def watch() -> None:
            nonlocal peak
            while True:
                live = list(scheduler._tickets.values())  # noqa: SLF001
                peak = max(peak, sum(item.cost for item in live))
                await asyncio.sleep(0)

        watcher = asyncio.create_task(watch())
        requests = [scheduler.submit([LONG[0]], BEAM, deadline=later()) for _ in range(12)]
        await asyncio.gather(*(f for futures in requests for f in futures))
        watcher.cancel()
        # the budget (2 x 14) fills, never beyond 1.5x + one: many newcomers at once
        # gather for a larger encoder pass rather than each overshoot it
        assert 2 * 14 <= peak <= 3 * 14 + 14

    run(engine, body, max_batch_tokens=2 * 14, max_request_batch_tokens=2 * 14)


def test_the_app_answers_as_with_static_batches(store_root: Path) -> None:
    """Through HTTP with `NMT_SCHEDULER__CONTINUOUS`: a batch of domains and ensembles
    (the fallback) gets the translations static batching gives, and the live metrics
    count its sentences."""
    build_store(store_root)
    body = {"items": [{"text": text, "domain": domain} for text, domain in
                      [("the patient", "auto"), ("a contract was signed today", "generic"),
                       ("hello", "auto"), ("the court and the doctor", "generic")]],
            "options": {"beam_size": 2}}
    answers = []
    for continuous in (False, True):
        with make_client(store_root, scheduler={"continuous": continuous}) as client:
            answer = client.post("/translate/batch", json=body)
            assert answer.status_code == 200, answer.text
            answers.append([r["translation"] for r in answer.json()["results"]])
            metrics = client.get("/metrics").text
    assert answers[1] == answers[0]
    assert "nmt_engine_live_leaves_total 4.0" in metrics


def test_the_engine_steps_back_to_back_taking_joins_from_its_inbox(engine: Engine) -> None:
    """`LiveBatches.run`: joins posted before and between steps decode to the static
    hypotheses, every step's report is published, and the call returns once nothing is
    live (or after `max_s`: one step here)."""
    live = LiveBatches(lambda: engine)
    inbox: LiveInbox[str] = LiveInbox()
    reports: list[tuple[StepReport, list[str]]] = []

    def publish(report: StepReport, tags: list[str]) -> None:
        reports.append((report, tags))
        if len(reports) == 3:  # joins between steps, as the event loop posts them
            inbox.post([(([SHORT], BEAM), "short")])

    inbox.post([((LONG, BEAM), "long")])
    live.run(inbox, publish, max_s=0.0)
    assert len(reports) == 1 and live.row_count == len(LONG) * BEAM.beam_size
    live.run(inbox, publish, max_s=60.0)
    assert live.row_count == 0 and not inbox
    tags = [tag for _, joined in reports for tag in joined]
    assert tags == ["long", "short"]
    tickets = {tag: report.joined[i] for report, joined in reports
               for i, tag in enumerate(joined)}
    finished = {ticket: hyps for report, _ in reports for ticket, hyps in report.finished}
    static = engine.translate([*LONG, SHORT], BEAM)
    long_tickets, short_tickets = tickets["long"], tickets["short"]
    assert isinstance(long_tickets, list) and isinstance(short_tickets, list)
    order = [*long_tickets, *short_tickets]
    assert [[h.tokens for h in finished[t]] for t in order] == [
        [h.tokens for h in hyps] for hyps in static]


@pytest.mark.parametrize(("seconds_needed", "urgent", "one_client"),
                         [(None, False, False), (50.0, True, False), (70.0, False, False),
                          (None, True, True)])
def test_while_clients_contend_a_bulk_requests_live_rows_hold_their_share(
        engine: Engine, seconds_needed: float | None, urgent: bool, one_client: bool) -> None:
    """Beside another client's request, a bulk request's live rows cost at most
    `live_request_tokens` (the budget would take them all), unless the rate measured says
    it would then miss its deadline and can still make it; two requests of one client
    share freely. Either way it gets every answer, the static batch's."""
    bulk_jobs = LONG * 8  # 24 sentences of 14 budget tokens
    static = engine.translate(bulk_jobs, BEAM)

    async def body(scheduler: ContinuousScheduler) -> None:
        longer = SentenceJob(LONG[0].source_ids, (Member(None),), 120)
        CLIENT.set("other")
        (other,) = scheduler.submit([longer], BEAM, deadline=later())
        await until_live(scheduler)
        CLIENT.set("other" if one_client else "bulk")
        bulk = scheduler.submit(bulk_jobs, BEAM, deadline=later())
        if seconds_needed:  # the rate measured (once admitted): 336 tokens take this long
            # of the 60 s left; 50 s fits without admission's margin, 70 s not at all
            scheduler._throughput = 336 / seconds_needed  # noqa: SLF001
            scheduler._measure = lambda cost, seconds: None  # type: ignore[method-assign]
        peak = 0
        while not other.done():
            live = [i for i in scheduler._tickets.values()  # noqa: SLF001
                    if i.future in bulk]
            peak = max(peak, sum(item.cost for item in live))
            await asyncio.sleep(0)
        assert (peak > 2 * 14) if urgent else (0 < peak <= 2 * 14)
        results = await asyncio.gather(*bulk)
        assert [[h.tokens for h in r] for r in results] == [
            [h.tokens for h in r] for r in static]

    run(engine, body, max_batch_tokens=512, live_request_tokens=2 * 14)


def test_under_overload_joiners_gather_until_a_quarter_of_the_budget_is_free(
        engine: Engine) -> None:
    """Rows live and more than two requests with nothing live waiting: nobody joins while
    less than a quarter of the budget is free (one encoder pass for many, not one per
    step); every request is still answered with the static hypotheses."""
    jobs = [SentenceJob(LONG[0].source_ids, (Member(None),), 4 + 3 * i) for i in range(20)]
    static = engine.translate(jobs, BEAM)  # they leave at different steps

    async def body(scheduler: ContinuousScheduler) -> None:
        joins: list[tuple[int, int]] = []  # (cost live before, requests waiting) per join
        original = scheduler._take_joiners  # noqa: SLF001

        def watched() -> list[Pending]:
            before = sum(i.cost for i in [*scheduler._tickets.values(),  # noqa: SLF001
                                          *scheduler._posted])  # noqa: SLF001
            waiting = len(scheduler._lanes)  # noqa: SLF001 - one sentence each: newcomers
            taken = original()
            if taken:
                joins.append((before, waiting))
            return taken

        scheduler._take_joiners = watched  # type: ignore[method-assign]
        requests = [scheduler.submit([job], BEAM, deadline=later()) for job in jobs]
        results = await asyncio.gather(*(f for futures in requests for f in futures))
        assert [[h.tokens for h in r] for r in results] == [
            [h.tokens for h in r] for r in static]
        budget = 8 * 14
        gathered = [before for before, waiting in joins if before and waiting > 2]
        assert gathered  # joins while rows were live, under overload ...
        assert all(budget - before >= budget / 4 for before in gathered)  # ... gathered

    run(engine, body, max_batch_tokens=8 * 14)
