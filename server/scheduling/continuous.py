"""The scheduler with continuous batching (`NMT_SCHEDULER__CONTINUOUS`): instead of cutting
a batch and waiting for its longest sentence, the engine thread decodes one step of every
live row per call (server/engine/live_batches.py); between steps finished sentences are
answered at once and waiting sentences join, up to the token budget.

What it keeps from `Scheduler`: the queue and its bound, admission by deadline, the fair
selection of who joins (`form_batch` over the waiting requests' lanes: round-robin, a
request's share while others wait, module groups; the budget is what the live rows leave
free), reloading evicted modules, the first batch's `max_wait_ms` to gather companions.

Per row: a sentence whose client went away (its future cancelled) or whose deadline
passed leaves at the next step; a request with nothing live always gets its first waiting
sentence in even when the live rows fill the budget (one sentence of overshoot, while
the live rows cost under 1.5x the budget), so a short request never waits for a bulk request's
sentences to finish.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence

from server.decoding.search import Hypothesis, SearchOptions
from server.engine.engine import SentenceJob
from server.engine.live_batches import LiveBatches, StepReport
from server.errors import DeadlineExceeded
from server.metrics import Metrics
from server.scheduling.batching import BatchLimits, Pending, form_batch
from server.scheduling.scheduler import HEARTBEAT_S, EngineThread, Residency, Scheduler
from server.settings import SchedulerSettings

MEASURE_S = 0.5  # throughput is measured over windows at least this long
# A request with nothing live may join beyond the budget, but only while the live rows
# cost less than (1 + OVERSHOOT) x the budget: with many one-sentence clients queued, one
# newcomer per step would otherwise grow the live set without bound (every step slower,
# every answer later).
OVERSHOOT = 0.5


class ContinuousScheduler(Scheduler):
    def __init__(self, live: LiveBatches, engine_thread: EngineThread,
                 settings: SchedulerSettings, *, max_modules: int,
                 metrics: Metrics | None = None, residency: Residency | None = None) -> None:
        super().__init__(_no_batches, engine_thread, settings, max_modules=max_modules,
                         metrics=metrics, residency=residency)
        self.live = live
        self._tickets: dict[int, Pending] = {}  # live sentences by ticket
        self._window_start = time.monotonic()
        self._window_cost = 0

    def _fail_waiting(self, error: Exception) -> None:
        for item in self._tickets.values():
            if not item.future.done():
                item.future.set_exception(error)
        self._tickets = {}
        super()._fail_waiting(error)

    async def _loop(self) -> None:
        while True:
            self.heartbeat = time.monotonic()
            if not self._tickets:
                await self._wait_for_work()
                self.heartbeat = time.monotonic()
            joiners = self._take_joiners()
            if joiners or self._tickets:
                await self._step(joiners)
            elif self._reloads:  # what waits, waits for a module: the reload wakes us
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), HEARTBEAT_S)
            else:
                await asyncio.sleep(0)  # let cancellation callbacks run

    def _take_joiners(self) -> list[Pending]:
        """Who joins before the next step: the fair selection over the budget the live
        rows leave free; requests with nothing live may overshoot it by one sentence."""
        now = time.monotonic()
        self._expire(now)
        self._expire_live(now)
        if not self._queue:
            return []
        settings = self.settings
        free = settings.max_batch_tokens - sum(i.cost for i in self._tickets.values())
        floor = -OVERSHOOT * settings.max_batch_tokens  # how far `free` may go below 0
        running = {item.request for item in self._tickets.values()}
        live_modules = frozenset().union(*(i.modules for i in self._tickets.values()))
        contended = len(self._lanes) + len(running - self._lanes.keys()) > 1
        joiners: list[Pending] = []
        for options in dict.fromkeys(item.options for item in self._queue.values()):
            lanes = [lane for request, lane in self._lanes.items()
                     if lane.options == options
                     and (free > 0 or request not in running and free > floor)]
            budget = max(free, 1)
            share = settings.max_request_batch_tokens if contended else budget
            limits = BatchLimits(budget, self.max_modules, share, settings.lookahead_batches)
            for key, item in form_batch(lanes, limits, held_back=self._needs_reload):
                if len(live_modules | item.modules) > self.max_modules:
                    continue  # its module slots are taken by live rows: a later step
                if free <= 0 and (item.request in running or free <= floor):
                    continue
                live_modules |= item.modules
                running.add(item.request)
                free -= item.cost
                self._remove(key)
                joiners.append(item)
        self._report_depth()
        return joiners

    def _expire_live(self, now: float) -> None:
        for item in self._tickets.values():
            if not item.future.done() and item.deadline <= now:
                item.future.set_exception(DeadlineExceeded(
                    "the request's deadline passed while it was being translated"))

    async def _step(self, joiners: list[Pending]) -> None:
        joiners = [item for item in joiners if not item.future.done()]
        groups: dict[SearchOptions, list[Pending]] = {}
        for item in joiners:
            groups.setdefault(item.options, []).append(item)
        joins = [([item.job for item in items], options) for options, items in groups.items()]
        cancels = [t for t, item in self._tickets.items() if item.future.done()]
        for ticket in cancels:
            del self._tickets[ticket]
        self._running = list(self._tickets.values()) + joiners
        try:
            report = await self.engine_thread.run(self.live.advance, joins, cancels)
        finally:
            self._engine_free_at = time.monotonic()
        for items, tickets in zip(groups.values(), report.joined, strict=True):
            if isinstance(tickets, Exception):
                for item in items:
                    if not item.future.done():
                        item.future.set_exception(tickets)
                continue
            self._tickets.update(zip(tickets, items, strict=True))
        self._resolve(report)
        self._running = list(self._tickets.values())

    def _resolve(self, report: StepReport) -> None:
        if self.metrics is not None:
            now = time.monotonic()
            for ticket in report.first_steps:
                item = self._tickets.get(ticket)
                if item is not None:
                    self.metrics.live_first_step_seconds.observe(now - item.enqueued)
        produced = finished_cost = 0
        for ticket, hypotheses in report.finished:
            item = self._tickets.pop(ticket, None)
            if item is None:
                continue
            finished_cost += item.cost
            produced += len(hypotheses[0].tokens) if hypotheses else 0
            if not item.future.done():
                item.future.set_result(hypotheses)
        for ticket, error in report.failed:
            item = self._tickets.pop(ticket, None)
            if item is not None and not item.future.done():
                item.future.set_exception(error)
        self._measure_window(finished_cost)
        metrics = self.metrics
        if metrics is None:
            return
        metrics.engine_busy.inc(report.seconds)
        metrics.target_tokens.inc(produced)
        if report.rows:
            metrics.live_rows.observe(report.rows)
            metrics.live_step_seconds.observe(report.seconds)
        metrics.live_joins.inc(sum(len(t) for t in report.joined if isinstance(t, list)))
        metrics.live_leaves.inc(len(report.finished))

    def _measure_window(self, cost: int) -> None:
        """Throughput for admission: the finished sentences' cost per second of windows
        of at least MEASURE_S while rows were live."""
        self._window_cost += cost
        now = time.monotonic()
        if now - self._window_start >= MEASURE_S:
            if self._window_cost:
                self._measure(self._window_cost, now - self._window_start)
            self._window_start, self._window_cost = now, 0
        if not self._tickets:
            self._window_start, self._window_cost = now, 0


def _no_batches(jobs: Sequence[SentenceJob],
                options: SearchOptions) -> list[list[Hypothesis]]:
    raise RuntimeError("a continuous scheduler decodes in steps, never in whole batches")
