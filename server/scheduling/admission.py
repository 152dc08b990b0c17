"""Admission: whether a request's sentences may join the queue (server/scheduling/scheduler.py).

- a client past its own queue bound or rate limit gets 429 (server/scheduling/
  fair_share.py), with Retry-After when its queued work will have run at its share;
- a deadline the client chose (`judged`) that cannot be met behind the queued work is
  refused at once (504 `deadline_unreachable` + Retry-After), judged by the engine's
  measured throughput (budget tokens per second, a moving average over well-filled
  batches; before one was measured, the best rate any batch reached, once others wait or
  run). The server's own deadline, grown with the size, is never judged: such work waits,
  and its deadline grows further when the measured rate says the work needs longer
  (`grown_deadline`, at most `max_timeout_s`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

from server.core.errors import DeadlineUnreachable
from server.core.settings import SchedulerSettings
from server.decoding.search import SearchOptions
from server.engine.engine import SentenceJob
from server.scheduling.batching import Lane, Pending, job_cost
from server.scheduling.fair_share import ClientRates, check_client_queue, drain_s, queued_cost

ADMISSION_MARGIN = 1.5  # a request is admitted when 1.5x its estimated finish fits


class Admission:
    """The admission half of the scheduler: its queue state is the scheduler's."""

    settings: SchedulerSettings
    _lanes: dict[int, Lane]
    _running: list[Pending]

    def __init__(self, settings: SchedulerSettings) -> None:
        # budget tokens per second, a moving average over well-filled batches (the rate
        # large requests get; small batches run less efficiently)
        self._throughput: float | None = None
        # the best rate of any batch, well filled or not: a lower bound of the above
        self._throughput_floor: float | None = None
        # every batch's rate, a moving average, well filled or not (what grown deadlines
        # trust when it is the slower: small batches run less efficiently)
        self._recent_rate: float | None = None
        self._rates = ClientRates(settings.client_sentences_per_minute)

    def _check_client(self, client: str, sentences: int, now: float) -> None:
        """429 for a client past its own queue bound or rate limit (fair_share.py), with
        Retry-After when its queued work will have run at its share."""
        waiting = sum(len(lane.pending) for lane in self._lanes.values()
                      if lane.client == client)
        clients = len({lane.client for lane in self._lanes.values()} | {client})
        queue_s = drain_s(queued_cost(self._lanes.values(), client), clients,
                          self._throughput or self._throughput_floor,
                          self.settings.retry_after_s)
        check_client_queue(waiting, sentences, self.settings.max_queue, queue_s)
        self._rates.take(client, sentences, now, queue_s=queue_s)

    def grown_deadline(self, jobs: Sequence[SentenceJob], options: SearchOptions,
                       deadline: float) -> float:
        """The server's own deadline of work about to be submitted, grown to what the
        measured rate says it needs behind the queued work (with admission's margin), at
        most `max_timeout_s` from now: on a slow or loaded host the per-character budget
        would otherwise run out while the work is still waiting its turn."""
        rates = [r for r in (self._throughput, self._recent_rate) if r is not None]
        if not rates or not jobs:
            return deadline
        rate = min(rates)  # the slower: a deadline too short fails work that would finish
        now = time.monotonic()
        needed = ADMISSION_MARGIN * self._work_ahead(
            sum(job_cost(job, options) for job in jobs)) / rate
        return max(deadline, now + min(needed, self.settings.max_timeout_s))

    def _admit(self, cost: int, remaining_s: float) -> None:
        """Refuse (504) a request that cannot finish before its deadline under round-robin:
        it waits for the running batch and, from each waiting request, for as much work as
        its own (processor sharing), then for its own work. The margin covers what the
        average hides (a request's share is capped while others wait, the load drifts)."""
        throughput = self._throughput
        if throughput is None:
            # nothing well filled measured yet: alone, a request runs in full batches and
            # is how the rate gets measured; beside others, the floor is the safe guess
            if self._throughput_floor is None or not (self._lanes or self._running):
                return
            throughput = self._throughput_floor
        estimate = self._work_ahead(cost) / throughput
        if estimate * ADMISSION_MARGIN > remaining_s:
            queued = sum(lane.cost for lane in self._lanes.values())
            drain = math.ceil(queued / throughput)
            raise DeadlineUnreachable(
                f"this request would take about {estimate:.1f} s here (the work queued "
                f"before it included), too close to or past its deadline ({remaining_s:.1f}"
                f" s), which it asked for; retry after the queue drains (Retry-After), ask "
                f"for longer, send less at once, or a batch with \"async\": true",
                retry_after=max(self.settings.retry_after_s, drain))

    def _work_ahead(self, cost: int) -> int:
        """Budget tokens computed before a new request of `cost` finishes: the running
        batch, as much of each waiting request as its own (processor sharing), its own."""
        return sum(item.cost for item in self._running) + cost + sum(
            min(lane.cost, cost) for lane in self._lanes.values())

    def _measure(self, cost: int, seconds: float) -> None:
        """Moving average of the engine's throughput in budget tokens per second, over
        well-filled batches: at least half the budget, or a request's share (what a large
        request's batches hold while others wait)."""
        settings = self.settings
        if seconds <= 0:
            return
        observed = cost / seconds
        self._throughput_floor = max(observed, self._throughput_floor or 0.0)
        recent = self._recent_rate
        self._recent_rate = observed if recent is None else 0.7 * recent + 0.3 * observed
        if cost < min(settings.max_batch_tokens / 2, settings.max_request_batch_tokens):
            return
        previous = self._throughput
        self._throughput = observed if previous is None else 0.7 * previous + 0.3 * observed
