"""The live batches of a serving process: one `LiveDecoder` per set of search options of
whichever engine serves now (a backbone swap lets the old engine's rows finish while new
sentences join the new engine). Runs on the engine thread only.

`advance` is one step: sentences join, cancelled ones leave, and every live batch decodes
one position. `run` is what the scheduler hands the engine thread: steps back to back for
as long as rows are live (up to `max_s`), taking joins and cancellations from a `LiveInbox`
between steps and publishing each step's report at once. The engine thread never waits for
the event loop between steps: handing every step over as its own call cost two thread
wake-ups per step, which on a loaded 2-core host took longer than the step itself (a
one-sentence step measured 35-45 ms in the server against 5 ms in the engine).
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from server.decoding.search import Hypothesis, SearchOptions
from server.engine.engine import Engine, SentenceJob
from server.engine.live import LiveDecoder

log = logging.getLogger(__name__)
T = TypeVar("T")
Join = tuple[Sequence[SentenceJob], SearchOptions]


@dataclass
class StepReport:
    """What one `advance` did."""

    joined: list[list[int] | Exception] = field(default_factory=list)  # per join group
    finished: list[tuple[int, list[Hypothesis]]] = field(default_factory=list)
    failed: list[tuple[int, Exception]] = field(default_factory=list)  # an engine failure
    rows: int = 0  # rows decoded by this step
    seconds: float = 0.0  # its compute time on the engine thread
    first_steps: list[int] = field(default_factory=list)  # tickets that took their 1st step


class LiveInbox(Generic[T]):
    """Joins, cancellations and the tickets to keep parked, posted by the event loop, taken
    by the engine thread before its next step. A join carries the poster's own tag (`T`),
    returned with its tickets. `hold` is the whole set of tickets parked from then on (the
    latest posted wins; None: unchanged)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._joins: list[tuple[Join, T]] = []
        self._cancels: list[int] = []
        self._hold: frozenset[int] | None = None

    def post(self, joins: Sequence[tuple[Join, T]], cancels: Sequence[int] = (),
             hold: frozenset[int] | None = None) -> None:
        with self._lock:
            self._joins += joins
            self._cancels += cancels
            self._hold = self._hold if hold is None else hold

    def take(self) -> tuple[list[tuple[Join, T]], list[int], frozenset[int] | None]:
        with self._lock:
            joins, cancels, hold = self._joins, self._cancels, self._hold
            self._joins, self._cancels, self._hold = [], [], None
        return joins, cancels, hold

    def __bool__(self) -> bool:
        with self._lock:
            return bool(self._joins or self._cancels or self._hold is not None)


class LiveBatches:
    def __init__(self, engine_of: Callable[[], Engine]) -> None:
        self.engine_of = engine_of
        self.decoders: dict[tuple[int, SearchOptions], LiveDecoder] = {}
        self.owner: dict[int, tuple[tuple[int, SearchOptions], int]] = {}  # ticket ->
        self._tickets = itertools.count()

    def advance(self, joins: Sequence[tuple[Sequence[SentenceJob], SearchOptions]],
                cancels: Sequence[int], hold: frozenset[int] | None = None) -> StepReport:
        started = time.perf_counter()
        report = StepReport()
        for ticket in cancels:
            where = self.owner.pop(ticket, None)
            if where is not None and where[0] in self.decoders:
                self.decoders[where[0]].cancel(where[1])
        if hold is not None:
            self._hold(hold)
        for jobs, options in joins:
            report.joined.append(self._join(jobs, options))
        for key, decoder in list(self.decoders.items()):
            before = {t: e.search.step for t, e in decoder.entries.items()}
            report.rows += decoder.row_count
            try:
                finished = decoder.step()
            except Exception as error:  # an engine failure fails this batch's sentences
                log.exception("live batch of %d sentences failed", decoder.live)
                del self.decoders[key]
                report.failed += [(t, error) for t, (k, _) in list(self.owner.items())
                                  if k == key]
                continue
            local = {local: ticket for ticket, (k, local) in self.owner.items() if k == key}
            report.first_steps += [local[t] for t, step in before.items()
                                   if step == 0 and t in local]
            for local_ticket, hypotheses in finished:
                ticket = local[local_ticket]
                del self.owner[ticket]
                report.finished.append((ticket, hypotheses))
            if decoder.live == 0 and key[0] != id(self.engine_of()):
                del self.decoders[key]  # a replaced engine's last rows have left
        report.seconds = time.perf_counter() - started
        return report

    def run(self, inbox: LiveInbox[T],
            publish: Callable[[StepReport, list[T]], None], max_s: float) -> None:
        """Steps back to back: before each, what `inbox` holds joins or leaves; after each,
        `publish(report, tags of the joins it took)`. Returns when no row is live and the
        inbox is empty, or after `max_s` (the scheduler's heartbeat and the watchdog's
        bound on one engine call; other work on the engine thread runs in between)."""
        started = time.perf_counter()
        while True:
            taken, cancels, hold = inbox.take()
            if not taken and not cancels and not self.live:
                return
            report = self.advance([join for join, _ in taken], cancels, hold)
            publish(report, [tag for _, tag in taken])
            if time.perf_counter() - started >= max_s:
                return

    @property
    def row_count(self) -> int:
        """Rows the next step decodes (parked rows not included)."""
        return sum(decoder.row_count for decoder in self.decoders.values())

    @property
    def live(self) -> int:
        """Live sentences, parked ones included."""
        return sum(decoder.live for decoder in self.decoders.values())

    def _hold(self, hold: frozenset[int]) -> None:
        """Park the live sentences of `hold` (the scheduler's tickets), resume the parked
        ones not in it."""
        park: dict[tuple[int, SearchOptions], list[int]] = {}
        for ticket, (key, local) in self.owner.items():
            if ticket in hold:
                park.setdefault(key, []).append(local)
        for key, decoder in self.decoders.items():
            mine = set(park.get(key, []))
            decoder.resume([local for local in decoder.parked if local not in mine])
            decoder.park([local for local in park.get(key, []) if local in decoder.entries])

    def _join(self, jobs: Sequence[SentenceJob], options: SearchOptions) -> list[int] | Exception:
        try:
            engine = self.engine_of()
            key = (id(engine), options)
            decoder = self.decoders.get(key)
            if decoder is None:
                decoder = self.decoders[key] = LiveDecoder(engine, options)
            local = decoder.join(jobs)
        except Exception as error:  # these sentences fail; the live rows go on
            return error
        tickets = [next(self._tickets) for _ in local]
        for ticket, mine in zip(tickets, local, strict=True):
            self.owner[ticket] = (key, mine)
        return tickets

    def forget(self) -> None:
        """Drop every live batch (and with them the engine they decode with): its backbone
        is being unloaded, and nothing of it is live any more."""
        self.decoders.clear()
        self.owner.clear()

    def stats(self) -> list[tuple[SearchOptions, int, int]]:
        """(options, live sentences, rows) of every live batch."""
        return [(options, d.live, d.row_count) for (_, options), d in self.decoders.items()]
