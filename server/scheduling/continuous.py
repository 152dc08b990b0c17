"""The scheduler with continuous batching (`NMT_SCHEDULER__CONTINUOUS`): instead of cutting
a batch and waiting for its longest sentence, the engine thread steps the live rows back to
back (server/engine/live_batches.py: `LiveBatches.run`); after each step the finished
sentences are answered at once, and the event loop posts who joins next (up to the token
budget) and who leaves into an inbox the engine thread reads before its next step. The
engine never waits for the event loop between steps.

What it keeps from `Scheduler`: the queue and its bound, admission by deadline, the fair
selection of who joins (`form_batch` over the waiting clients' lanes, fair_share.py: round
robin across clients, smallest work first within one, a client's share while others wait,
module groups; the budget is what the live rows leave
free), reloading evicted modules, the first batch's `max_wait_ms` to gather companions.

Per row: a sentence whose client went away (its future cancelled) or whose deadline
passed leaves at the next step; a request with nothing live always gets its first waiting
sentence in even when the live rows fill the budget (one sentence of overshoot, while
the live rows cost under 1.5x the budget), so a short request never waits for a bulk request's
sentences to finish. While clients contend (and for CONTENDED_S after), one client's
live rows cost at most `live_request_tokens` (or one sentence): on a CPU a step's time
grows with its rows, and a short request's answer takes as many steps as its length, so
this bound is what keeps it within a few times its time alone beside a bulk request. A
request that would miss its deadline under that bound (what is left of it, at the
measured rate, with admission's margin) but can still make it takes the free budget
again: admission promised it its deadline. While a light client's sentence is live (a
client under its share, server/scheduling/light_clients.py), the others' sentences beyond
`light_step_tokens` are parked and do not join.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence

from server.core.errors import DeadlineExceeded
from server.core.metrics import Metrics
from server.core.settings import SchedulerSettings
from server.decoding.search import Hypothesis, SearchOptions
from server.engine.engine import SentenceJob
from server.engine.live_batches import LiveBatches, LiveInbox, StepReport
from server.execution.engine_thread import EngineThread
from server.scheduling.admission import ADMISSION_MARGIN
from server.scheduling.batching import BatchLimits, Lane, Pending, form_batch
from server.scheduling.fair_share import client_lanes, served_turns
from server.scheduling.light_clients import ClientLoads, LiveSentence, parked_tickets
from server.scheduling.module_reads import Residency
from server.scheduling.scheduler import Scheduler

log = logging.getLogger(__name__)
RUN_S = 0.5  # one engine call steps at most this long (then the loop beats and re-enters)
PUBLISH_S = 0.1  # steps that neither joined nor finished a sentence are reported this often
# After two requests shared the engine, a request's live rows stay within its share for
# this long: a one-sentence client's next request arrives a round trip after its answer,
# and would otherwise find the bulk rows grown back to the whole budget.
CONTENDED_S = 1.0
# While rows are live, sentences join once this share of the budget is free: one encoder
# pass per step over the one or two sentences that just made room took over a third of
# the engine's time under overload (a pass costs a fixed part whatever its rows, and on a
# busy 2-core host every small parallel op waits for both threads).
JOIN_FREE = 0.25
# ... except a few requests with nothing live (a short request beside bulk work): they
# join at the next step whatever is free (up to the overshoot)
NEWCOMERS = 2
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
        self._posted: list[Pending] = []  # joiners in the inbox, not yet given tickets
        self._inbox: LiveInbox[list[Pending]] = LiveInbox()
        self._stepping = False  # the engine thread is stepping the live rows
        self._feed_soon = False
        self._contended_until = 0.0  # monotonic: clients shared the engine until then
        self._window_start = time.monotonic()
        self._window_cost = 0
        self._window_opens_run = True  # the window began when rows went live after idle
        self._loads = ClientLoads()
        self._light: set[str] = set()  # clients with work in the server that are light
        self._hold: frozenset[int] = frozenset()  # tickets parked (light_clients.py)

    def _fail_waiting(self, error: Exception) -> None:
        for item in [*self._tickets.values(), *self._posted]:
            if not item.future.done():
                item.future.set_exception(error)
        self._tickets, self._posted, self._hold = {}, [], frozenset()
        self._inbox.take()
        super()._fail_waiting(error)

    async def _loop(self) -> None:
        while True:
            self.heartbeat = time.monotonic()
            if not self._tickets and not self._posted:
                await self._wait_for_work()
                self.heartbeat = time.monotonic()
                # idle time is no engine time: the rate's window opens with the run
                self._window_start, self._window_cost = self.heartbeat, 0
                self._window_opens_run = True
            self._feed()
            if self._tickets or self._posted:
                await self._run_engine()
            else:
                await self._idle()

    async def _run_engine(self) -> None:
        """The engine thread steps until no row is live (or RUN_S passed); joins and
        cancellations reach it through the inbox, each step's report comes back through
        `_on_report` while it goes on."""
        loop = asyncio.get_running_loop()

        quiet: list[StepReport] = []  # steps with nothing to tell, not handed over yet
        flushed = time.monotonic()

        def publish(report: StepReport, joined: list[list[Pending]]) -> None:
            """On the engine thread: hand over a step that joined or finished sentences at
            once (with the quiet steps before it, for the metrics), quiet steps at most
            every PUBLISH_S (a wake-up of the event loop per step competed with the
            engine's own threads for the 2 cores: 1.4x slower single sentences)."""
            nonlocal quiet, flushed
            quiet.append(report)
            eventful = report.joined or report.finished or report.failed or report.first_steps
            if eventful or time.monotonic() - flushed >= PUBLISH_S:
                loop.call_soon_threadsafe(self._on_reports, quiet, joined)
                quiet, flushed = [], time.monotonic()

        self._stepping = True
        try:
            await self.engine_thread.run(self.live.run, self._inbox, publish, RUN_S)
        except Exception as error:  # the engine thread itself failed: so do its rows
            log.exception("live batches failed")
            for item in [*self._tickets.values(), *self._posted]:
                if not item.future.done():
                    item.future.set_exception(error)
            self._tickets, self._posted, self._hold = {}, [], frozenset()
            self._inbox.take()
        finally:
            self._stepping = False
            self._engine_free_at = time.monotonic()
            if quiet:  # the engine thread is done with it
                self._on_reports(quiet, [])

    def submit(self, jobs: Sequence[SentenceJob], options: SearchOptions, *,
               deadline: float, admitted: bool = False,
               judged: bool = True) -> list[asyncio.Future[list[Hypothesis]]]:
        futures = super().submit(jobs, options, deadline=deadline, admitted=admitted,
                                 judged=judged)
        if self._stepping and not self._feed_soon:
            # rows are live: the new sentences join at the next step, no batch to gather
            self._feed_soon = True
            asyncio.get_running_loop().call_soon(self._feed)
        return futures

    def _feed(self) -> None:
        """Post who joins and who leaves next to the engine thread's inbox."""
        self._feed_soon = False
        self.heartbeat = now = time.monotonic()
        levels: dict[str, float] = {}  # each client's work in the server
        for lane in self._lanes.values():
            levels[lane.client] = levels.get(lane.client, 0.0) + lane.cost
        for item in [*self._tickets.values(), *self._posted]:
            levels[item.client] = levels.get(item.client, 0.0) + item.cost
        self._loads.update(levels, now)
        self._light = self._loads.light(levels.keys(), now)
        joiners = [item for item in self._take_joiners() if not item.future.done()]
        cancels = [t for t, item in self._tickets.items() if item.future.done()]
        for ticket in cancels:
            del self._tickets[ticket]
        groups: dict[SearchOptions, list[Pending]] = {}
        for item in joiners:
            groups.setdefault(item.options, []).append(item)
        hold = self._parking(joiners)
        if groups or cancels or hold != self._hold:
            self._posted += joiners
            self._inbox.post([(([i.job for i in items], options), items)
                              for options, items in groups.items()], cancels,
                             hold if hold != self._hold else None)
            if self.metrics is not None:
                self.metrics.live_parks.inc(len(hold - self._hold))
            self._hold = hold
        self._running = [*self._tickets.values(), *self._posted]

    def _on_reports(self, reports: list[StepReport], joined: list[list[Pending]]) -> None:
        """On the event loop, after steps (the last one's joins are `joined`): the joins
        get their tickets, the finished sentences their answers; then who joins next."""
        self.heartbeat = time.monotonic()
        for report in reports[:-1]:
            self._resolve(report)
        report = reports[-1]
        for items, tickets in zip(joined, report.joined, strict=True):
            posted = set(map(id, items))
            self._posted = [item for item in self._posted if id(item) not in posted]
            if isinstance(tickets, Exception):
                for item in items:
                    if not item.future.done():
                        item.future.set_exception(tickets)
                continue
            self._tickets.update(zip(tickets, items, strict=True))
        self._resolve(report)
        self._feed()

    def _take_joiners(self) -> list[Pending]:
        """Who joins before the next step: the fair selection over the budget the live
        rows leave free; requests with nothing live may overshoot it by one sentence.
        While clients contend, a client's live rows cost at most its share."""
        now = time.monotonic()
        self._expire(now)
        self._expire_live(now)
        if not self._queue:
            return []
        settings = self.settings
        held: dict[str, int] = {}  # client -> cost of its live and posted sentences
        live: set[int] = set()  # requests with live or posted sentences
        for item in [*self._tickets.values(), *self._posted]:
            held[item.client] = held.get(item.client, 0) + item.cost
            live.add(item.request)

        def newcomer(lane: Lane) -> bool:
            """Nothing live of its client, or of its client's next (smallest) request."""
            return lane.client not in held or next(iter(lane.pending.values())).request not in live

        waiting = {lane.client for lane in self._lanes.values()}
        free = settings.max_batch_tokens - sum(held.values())
        gated = bool(held) and free < JOIN_FREE * settings.max_batch_tokens
        if gated and len(self._lanes.keys() - live) > NEWCOMERS:
            return []  # overloaded: joiners gather until their encoder pass is worth it
        floor = -OVERSHOOT * settings.max_batch_tokens  # how far `free` may go below 0
        live_modules = frozenset().union(*(i.modules for i in self._tickets.values()),
                                         *(i.modules for i in self._posted))
        if len(waiting | held.keys()) > 1:  # clients: one client's requests share freely
            self._contended_until = now + CONTENDED_S
        contended = now < self._contended_until
        urgent = self._urgent(now) if contended else set()
        # a light client's sentence is live or waiting: the others' join within its budget
        light_budget = settings.light_step_tokens
        lightened = light_budget > 0 and bool(self._light & (held.keys() | waiting))
        stepping = sum(item.cost for ticket, item in self._tickets.items()
                       if ticket not in self._hold) + sum(i.cost for i in self._posted)
        others = any(item.client not in self._light for ticket, item in self._tickets.items()
                     if ticket not in self._hold)  # at least one of them always steps
        joiners: list[Pending] = []
        for options in dict.fromkeys(item.options for item in self._queue.values()):
            lanes = [lane for lane in client_lanes(self._lanes.values(), self._served)
                     if lane.options == options
                     and (newcomer(lane) if gated else True)
                     and (free > 0 or newcomer(lane) and free > floor)]
            budget = max(free, 1)
            share = settings.max_request_batch_tokens if contended else budget
            limits = BatchLimits(budget, self.max_modules, share, settings.lookahead_batches)
            for key, item in form_batch(lanes, limits, held_back=self._needs_reload):
                if len(live_modules | item.modules) > self.max_modules:
                    continue  # its module slots are taken by live rows: a later step
                mine = held.get(item.client, 0) if item.request in live else 0
                if free <= 0 and (mine or free <= floor):
                    continue
                if (contended and mine and mine + item.cost > settings.live_request_tokens
                        and item.request not in urgent):
                    continue  # its live rows hold their share: the step stays short
                if lightened and item.client not in self._light:
                    if self._hold or others and stepping + item.cost > light_budget:
                        continue  # parked sentences resume first; light steps stay short
                    others = True
                stepping += item.cost
                live_modules |= item.modules
                held[item.client] = held.get(item.client, 0) + item.cost
                live.add(item.request)
                free -= item.cost
                self._remove(key)
                joiners.append(item)
        self._turn = served_turns(self._served, [item.client for item in joiners], self._turn)
        self._report_depth()
        return joiners

    def _parking(self, joiners: list[Pending]) -> frozenset[int]:
        """The live sentences to park while a light client's sentence is live."""
        budget = self.settings.light_step_tokens
        if not budget or not self._light:
            return frozenset()
        now = time.monotonic()
        live = [LiveSentence(ticket, item.client, item.request, item.cost)
                for ticket, item in self._tickets.items()]
        joining = [LiveSentence(-1, item.client, item.request, item.cost)
                   for item in [*self._posted, *joiners]]
        urgent = self._urgent(now) if now < self._contended_until else set()
        return parked_tickets(live, joining, self._light, budget=budget, urgent=urgent)

    def _urgent(self, now: float) -> set[int]:
        """Requests whose share would make them miss their deadline: what is left of them,
        at the measured rate, with the admission's margin, no longer fits before it, but
        still fits without the margin. They take the free budget again (a short request's
        steps grow longer, but a request admitted because it fits its deadline meets it)."""
        rate = self._throughput or self._throughput_floor
        if rate is None:
            return set()
        left: dict[int, int] = {}
        deadlines: dict[int, float] = {}
        for item in [*self._tickets.values(), *self._posted]:
            left[item.request] = left.get(item.request, 0) + item.cost
        for item in [*self._tickets.values(), *self._posted, *self._queue.values()]:
            deadlines[item.request] = item.deadline
        for request, lane in self._lanes.items():
            left[request] = left.get(request, 0) + lane.cost
        urgent: set[int] = set()
        for request, cost in left.items():
            needed, remaining = cost / rate, deadlines.get(request, now) - now
            # between "fits with the margin" and "cannot fit even with the whole engine"
            # (a lost cause keeps its share: taking the budget would only slow the others)
            if needed < remaining <= needed * ADMISSION_MARGIN:
                urgent.add(request)
        return urgent

    def _work_ahead(self, cost: int) -> int:
        """Processor sharing over every request, live ones included: a new request joins
        the live rows at the next step instead of waiting for them to finish."""
        held: dict[int, int] = {}
        for item in [*self._tickets.values(), *self._posted]:
            held[item.request] = held.get(item.request, 0) + item.cost
        for request, lane in self._lanes.items():
            held[request] = held.get(request, 0) + lane.cost
        return cost + sum(min(mine, cost) for mine in held.values())

    def _expire_live(self, now: float) -> None:
        for item in self._tickets.values():
            if not item.future.done() and item.deadline <= now:
                item.future.set_exception(DeadlineExceeded(
                    "the request's deadline passed while it was being translated"))

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
        of at least MEASURE_S while rows were live. A run shorter than that is one window
        (it still sets the rate floor); the short tail of a longer run is left out: one
        step's finishes over a moment would read as an engine many times faster."""
        self._window_cost += cost
        now = time.monotonic()
        if not self._window_cost or now <= self._window_start:
            return  # nothing finished yet: the window stays open (long sentences)
        long_enough = now - self._window_start >= MEASURE_S
        if long_enough or not self._tickets:
            if long_enough or self._window_opens_run:
                self._measure(self._window_cost, now - self._window_start)
            self._window_start, self._window_cost = now, 0
            self._window_opens_run = False


def _no_batches(jobs: Sequence[SentenceJob],
                options: SearchOptions) -> list[list[Hypothesis]]:
    raise RuntimeError("a continuous scheduler decodes in steps, never in whole batches")
