"""Async micro-batching of sentences from many requests into engine batches.

Policy lives here and in server/scheduling/batching.py (which sentences form a batch:
round-robin over clients, a client's share while other clients wait, length buckets, module
groups, the token budget and the module slots), mechanism in the engine:
- a batch holds sentences with identical `SearchOptions` (any mix of domains/modules);
- the oldest waiting sentence decides when a batch runs: as soon as compatible work fills
  the budget, or `max_wait_ms` after both its arrival and the end of the last batch,
  whichever comes first;
- shares between clients (server/scheduling/fair_share.py): smallest work first within a
  client, round robin across clients; the queue is bounded per client (`max_queue`
  sentences: beyond it that client gets 429), never for all together;
- admission by deadline, for a deadline the client chose (`judged`): once the engine's
  throughput (budget tokens per second, a moving average over well-filled batches) is
  known, a request whose estimated finish under round-robin (the running batch, plus
  min(its cost, each waiting request's cost), plus its own; the processor-sharing
  completion time), with a safety margin, lies past its deadline is refused with
  `DeadlineUnreachable` (504 + Retry-After) at once instead of timing out later; the
  server's own deadline, grown with the size, is never judged: such a request waits;
  before any well-filled batch was measured, a request that arrives while others wait or
  run is judged by the best rate any batch reached (a lower bound: small batches run less
  efficiently), so the first bulk request of a busy server cannot be admitted blind;
- every sentence has a deadline; expired or cancelled sentences (a client that gave up or
  disconnected) leave the queue at once and are never computed;
- a sentence whose module was evicted from memory waits while it is read back off the
  engine thread (module_reads.py; the read starts when the sentence is queued).

The engine runs in one dedicated thread (server/execution/engine_thread.py); the event loop
only waits on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
import time
from collections.abc import Callable, Sequence

from server.core.errors import DeadlineExceeded, NotReady
from server.core.metrics import Metrics
from server.core.settings import SchedulerSettings
from server.decoding.search import Hypothesis, SearchOptions
from server.engine.engine import SentenceJob
from server.execution.engine_thread import EngineThread
from server.scheduling.admission import Admission
from server.scheduling.batching import (
    BatchLimits,
    Lane,
    Pending,
    form_batch,
    job_cost,
    length_spread,
)
from server.scheduling.clients import CLIENT
from server.scheduling.fair_share import client_lanes, served_turns
from server.scheduling.module_reads import READ_WAIT_S, ModuleReads, Residency

BatchRunner = Callable[[Sequence[SentenceJob], SearchOptions], list[list[Hypothesis]]]


HEARTBEAT_S = 1.0  # the idle batching loop still beats this often
log = logging.getLogger(__name__)


class Scheduler(Admission):
    def __init__(self, runner: BatchRunner, engine_thread: EngineThread,
                 settings: SchedulerSettings, *, max_modules: int,
                 metrics: Metrics | None = None, residency: Residency | None = None) -> None:
        self.runner = runner
        self.residency = residency
        # reads of evicted modules; `_needs_reload`: must a sentence wait for one?
        self.reads = ModuleReads(residency, done=self._wake_up, failed=self._fail_module)
        self._needs_reload = self.reads.held_back
        self.engine_thread = engine_thread
        self.settings = settings
        self.max_modules = max_modules
        self.metrics = metrics
        self._queue: dict[int, Pending] = {}  # insertion order = arrival order
        self._lanes: dict[int, Lane] = {}  # request -> its waiting sentences (arrival order)
        Admission.__init__(self, settings)
        self._ids = itertools.count()
        self._requests = itertools.count()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._running: list[Pending] = []  # the batch in the engine now
        self._last_clients = 0  # distinct clients in the last batch
        self._served: dict[str, int] = {}  # client -> the turn of its last batched sentence
        self._turn = 0  # sentences batched
        self._engine_free_at = 0.0  # monotonic time the last batch ended
        self.heartbeat = time.monotonic()  # the batching loop's last sign of life
        self.failure: str | None = None  # why the batching loop ended, if it crashed

    # -- lifecycle ---------------------------------------------------------------------
    def start(self) -> None:
        self.heartbeat = time.monotonic()
        self._task = asyncio.create_task(self._loop(), name="nmt-scheduler")
        self._task.add_done_callback(self._on_loop_end)

    def _on_loop_end(self, task: asyncio.Task[None]) -> None:
        """The batching loop ended on its own (a bug): fail what waits at once (503) rather
        than at its deadline; liveness reports it (see server/operations/watchdog.py)."""
        if task.cancelled():
            return
        error = task.exception()
        self.failure = f"the batching loop crashed: {error!r}"
        log.critical("scheduler: %s", self.failure, exc_info=error)
        self._fail_waiting(NotReady(f"the scheduler stopped ({self.failure}); retry later"))

    @property
    def alive(self) -> bool:
        """Started and its loop still runs (a health check of the replica)."""
        return self._task is not None and not self._task.done()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        self._fail_waiting(NotReady("the server is shutting down"))

    def refuse_waiting(self, error: Exception) -> None:
        """Fail every sentence that waits or runs with `error` (the drain bound passed:
        their requests are answered now rather than cut off)."""
        self._fail_waiting(error)

    def _fail_waiting(self, error: Exception) -> None:
        for item in [*self._queue.values(), *self._running]:
            if not item.future.done():
                item.future.set_exception(error)
        self._queue.clear()
        self._lanes.clear()
        self._running = []
        self._report_depth()

    @property
    def depth(self) -> int:
        return len(self._queue)

    @property
    def idle(self) -> bool:
        """Nothing waits, runs or is being read back: the engine may be unloaded."""
        return not self._queue and not self._running and not self.reads.running

    # -- submission --------------------------------------------------------------------
    def submit(self, jobs: Sequence[SentenceJob], options: SearchOptions, *,
               deadline: float, admitted: bool = False,
               judged: bool = True) -> list[asyncio.Future[list[Hypothesis]]]:
        """Queue sentences; one future per job (cancel it to withdraw the sentence).
        `admitted`: more work of a request admitted before (its sentences translated
        again): neither the queue bound nor admission refuses it, since refusing would
        throw away the work already done for it; its deadline still holds. `judged`
        False: the server's own deadline (grown with the size): it waits, never refused."""
        if self.failure is not None:
            raise NotReady(f"the scheduler stopped ({self.failure}); retry later")
        client, now = CLIENT.get(), time.monotonic()
        if not admitted:
            self._check_client(client, len(jobs), now)
            if judged:
                self._admit(sum(job_cost(job, options) for job in jobs), deadline - now)
        loop = asyncio.get_running_loop()
        request = next(self._requests)
        items: list[tuple[int, Pending]] = []
        for job in jobs:
            future: asyncio.Future[list[Hypothesis]] = loop.create_future()
            items.append((next(self._ids), Pending(request, job, options,
                                                   job_cost(job, options), now, deadline,
                                                   future, client)))
        if items:
            self._lanes[request] = lane = Lane(options, client=client)
            lane.add(items)
        for key, item in items:
            self._queue[key] = item
            item.future.add_done_callback(functools.partial(self._discard, key))
            # a cold module's read starts now, while the running batch decodes: by the
            # time the sentence could join a batch its module is usually resident
            self._needs_reload(item)
        self._report_depth()
        self._wake.set()
        return [item.future for _, item in items]

    def _discard(self, key: int, _future: asyncio.Future[list[Hypothesis]]) -> None:
        """A sentence finished, was cancelled or expired: it no longer holds a queue slot."""
        if self._remove(key) is not None:
            self._report_depth()

    def _remove(self, key: int) -> Pending | None:
        item = self._queue.pop(key, None)
        if item is not None:
            lane = self._lanes[item.request]
            del lane.pending[key]
            lane.cost -= item.cost
            if not lane.pending:
                del self._lanes[item.request]
        return item

    # -- the batching loop -------------------------------------------------------------
    async def _loop(self) -> None:
        while True:
            self.heartbeat = time.monotonic()
            await self._wait_for_work()
            await self._wait_for_reads()
            self.heartbeat = time.monotonic()
            batch = self._take_batch()
            if batch:
                await self._execute(batch)
            else:
                await self._idle()

    async def _idle(self) -> None:
        """Nothing to run now: wait for a reload if what waits, waits for a module (the
        reload wakes the loop, or a heartbeat passes); else let cancellation callbacks
        run."""
        if self.reads.running:
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), HEARTBEAT_S)
        else:
            await asyncio.sleep(0)

    async def _wait_for_work(self) -> None:
        """Return when the oldest sentence should run: budget full, or `max_wait_ms` past
        both its arrival and the end of the last batch. The second bound lets the clients
        whose answers the last batch just produced send their next request into this one
        (at saturation, closed-loop clients would otherwise find the batch already gone,
        and batches would alternate between full and half full)."""
        while True:
            self.heartbeat = time.monotonic()
            self._expire(self.heartbeat)
            if not self._queue:
                self._wake.clear()
                with contextlib.suppress(TimeoutError):  # beat while idle too
                    await asyncio.wait_for(self._wake.wait(), HEARTBEAT_S)
                continue
            oldest = next(iter(self._queue.values()))
            since = max(oldest.enqueued, self._engine_free_at)
            remaining = since + self.settings.max_wait_ms / 1000 - time.monotonic()
            full = self._waiting_cost(oldest.options) >= self.settings.max_batch_tokens
            if remaining <= 0 or full:
                return
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), remaining)
            except TimeoutError:
                return

    async def _wait_for_reads(self) -> None:
        """Give the reads of queued sentences' modules up to `READ_WAIT_S` to finish, so
        that those sentences join this batch (module_reads.py says why)."""
        until = time.monotonic() + READ_WAIT_S
        while self.reads.awaited(self._queue.values()):
            remaining = until - time.monotonic()
            if remaining <= 0:
                return
            self._wake.clear()  # a finished read sets it
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), remaining)

    def _expire(self, now: float) -> None:
        """Fail expired sentences and drop finished (cancelled) ones from the queue."""
        for key, item in list(self._queue.items()):
            if not item.future.done() and item.deadline <= now:
                item.future.set_exception(DeadlineExceeded(
                    "the request's deadline passed while it waited for the engine"))
            if item.future.done():
                self._remove(key)
        self._report_depth()

    def _waiting_cost(self, options: SearchOptions) -> int:
        return sum(lane.cost for lane in self._lanes.values() if lane.options == options)

    def _take_batch(self) -> list[Pending]:
        """The next batch of the oldest sentence's search options (see batching.py).
        A client's share is capped while other clients wait or shared the last batch
        (one client's many requests alone fill whole batches)."""
        self._expire(time.monotonic())
        if not self._queue:
            return []
        options = next(iter(self._queue.values())).options
        settings = self.settings
        lanes = client_lanes([lane for lane in self._lanes.values() if lane.options == options],
                             self._served)
        waiting = {lane.client for lane in self._lanes.values()}  # any search options
        contended = len(waiting) > 1 or self._last_clients > 1
        limits = BatchLimits(settings.max_batch_tokens, self.max_modules,
                             settings.max_request_batch_tokens if contended
                             else settings.max_batch_tokens, settings.lookahead_batches)
        batch = form_batch(lanes, limits, held_back=self._needs_reload)
        for key, _ in batch:
            self._remove(key)
        self._last_clients = len({item.client for _, item in batch})
        self._turn = served_turns(self._served, [item.client for _, item in batch], self._turn)
        self._report_depth()
        return [item for _, item in batch]

    def _wake_up(self) -> None:
        self._wake.set()

    def _fail_module(self, module_id: str, error: Exception) -> None:
        for item in self._queue.values():
            if module_id in item.modules and not item.future.done():
                item.future.set_exception(NotReady(
                    f"module {module_id} could not be read back into memory: {error}"))

    async def _execute(self, batch: list[Pending]) -> None:
        live = [item for item in batch if not item.future.done()]
        if not live:
            return
        options = live[0].options
        if self.metrics is not None:
            self.metrics.batch_sentences.observe(len(live))
            self.metrics.batch_tokens.observe(sum(item.cost for item in live))
            self.metrics.batch_length_spread.observe(
                length_spread([len(item.job.source_ids) for item in live]))
        self._running = live
        started = time.monotonic()
        try:
            results, busy_s = await self.engine_thread.run(self._run_timed,
                                                           [i.job for i in live], options)
        except Exception as error:  # an engine failure fails exactly this batch's sentences
            log.exception("engine batch of %d sentences failed", len(live))
            for item in live:
                if not item.future.done():
                    item.future.set_exception(error)
            return
        finally:
            self._running = []
            self._engine_free_at = time.monotonic()
        self._measure(sum(item.cost for item in live), time.monotonic() - started)
        if self.metrics is not None:
            self.metrics.engine_busy.inc(busy_s)
        produced = 0
        for item, hypotheses in zip(live, results, strict=True):
            produced += len(hypotheses[0].tokens) if hypotheses else 0
            if not item.future.done():
                item.future.set_result(hypotheses)
        if self.metrics is not None:
            self.metrics.target_tokens.inc(produced)

    def _run_timed(self, jobs: Sequence[SentenceJob],
                   options: SearchOptions) -> tuple[list[list[Hypothesis]], float]:
        """Runs on the engine thread: the batch's results and its compute time alone (what
        the event loop measures adds the hand-offs between the threads)."""
        started = time.perf_counter()
        results = self.runner(jobs, options)
        return results, time.perf_counter() - started

    def _report_depth(self) -> None:
        if self.metrics is not None:
            self.metrics.queue_depth.set(len(self._queue))
