"""Shares between clients (who a client is: server/scheduling/clients.py).

- within a client, smallest work first: its waiting requests are served in order of the
  work they have left (source tokens x beam x members), so a client's one-sentence request
  never waits behind its own bulk batch; a request's sentences go shortest first;
- across clients, round robin: every batch (or, with continuous batching, every step's
  joiners) takes one sentence of each waiting client in turn, the client served least
  recently first, and while clients contend one client adds at most its share
  (`max_request_batch_tokens`; continuous: `live_request_tokens` live) beyond its first
  sentence. Work over a client's share is never refused: it waits its turn;
- the only memory guard is a bound per client: at most `max_queue` of a client's sentences
  wait (a request that fits its client's empty queue is always taken, whatever its size).
  A client past its own bound gets 429 `queue_full` with `Retry-After` the time its own
  queued work needs at its share of the measured rate; other clients are not affected;
- a rate limit per client (`client_sentences_per_minute`, off by default): a client past
  it gets 429 `rate_limited`, `Retry-After` when its allowance and its queued work allow.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from server.core.errors import Busy, RateLimited
from server.scheduling.batching import Lane


def client_lanes(lanes: Iterable[Lane], served: dict[str, int]) -> list[Lane]:
    """One lane per client (the batching policy's unit): its requests' sentences, the
    request with the least work left first; clients in round-robin order, the one served
    least recently first (`served`: client -> the turn of its last sentence in a batch;
    new clients first, by arrival). The lanes given are not modified."""
    mine: dict[str, list[Lane]] = {}
    for lane in lanes:
        if lane.pending:
            mine.setdefault(lane.client, []).append(lane)
    merged: list[Lane] = []
    for client, own in mine.items():
        lane = Lane(own[0].options, client=client)
        for request in sorted(own, key=lambda each: each.cost):  # stable: arrival order
            lane.pending.update(request.pending)
            lane.cost += request.cost
        merged.append(lane)
    order = {client: index for index, client in enumerate(mine)}
    return sorted(merged, key=lambda lane: (served.get(lane.client, -1), order[lane.client]))


def queued_cost(lanes: Iterable[Lane], client: str) -> int:
    return sum(lane.cost for lane in lanes if lane.client == client)


def drain_s(cost: int, clients: int, throughput: float | None, floor: int) -> int:
    """Seconds until a client's queued `cost` has run at its share of the engine (one of
    `clients`), at least `floor`."""
    if throughput is None or throughput <= 0:
        return floor
    return max(floor, math.ceil(cost * max(1, clients) / throughput))


def check_client_queue(waiting: int, adding: int, limit: int, retry_after: int) -> None:
    """429 for a client whose own waiting sentences would pass its bound."""
    if waiting and waiting + adding > limit:
        raise Busy(f"this client's queue is full ({waiting} of its sentences waiting, "
                   f"limit {limit} per client, NMT_SCHEDULER__MAX_QUEUE); other clients "
                   "are served meanwhile; retry once your queued work is done "
                   "(Retry-After)", retry_after=retry_after)


@dataclass
class Allowance:
    sentences: float
    updated: float


class ClientRates:
    """Sentences per minute per client: a bucket of one minute's allowance that refills
    continuously (a client may burst up to it, then sustains the rate)."""

    def __init__(self, per_minute: int | None) -> None:
        self.per_minute = per_minute
        self._buckets: dict[str, Allowance] = {}

    def take(self, client: str, sentences: int, now: float, *, queue_s: int) -> None:
        """Take `sentences` from the client's allowance or raise `RateLimited` (429),
        `Retry-After` the later of its refill and its queued work's drain (`queue_s`)."""
        limit = self.per_minute
        if limit is None:
            return
        bucket = self._buckets.setdefault(client, Allowance(float(limit), now))
        bucket.sentences = min(float(limit), bucket.sentences + (now - bucket.updated) * limit / 60)
        bucket.updated = now
        wanted = min(sentences, limit)  # one request larger than a minute's allowance is
        if bucket.sentences < wanted:    # taken when the bucket is full, never refused
            wait = math.ceil((wanted - bucket.sentences) * 60 / limit)
            raise RateLimited(f"this client's limit of {limit} sentences per minute "
                              "(NMT_SCHEDULER__CLIENT_SENTENCES_PER_MINUTE) is used up; "
                              "retry after Retry-After seconds",
                              retry_after=max(wait, queue_s))
        bucket.sentences -= wanted
        if len(self._buckets) > MAX_TRACKED:  # forget full buckets: they hold nothing
            for key in [k for k, b in self._buckets.items()
                        if b.sentences >= limit and k != client]:
                del self._buckets[key]


MAX_TRACKED = 10_000


def served_turns(served: dict[str, int], clients: Sequence[str], turn: int) -> int:
    """Record the clients of a batch's sentences in order (one turn each: of two clients
    in one batch, the one with the later sentence was served more recently); returns
    the last turn."""
    for client in clients:
        turn += 1
        served[client] = turn
    if len(served) > MAX_TRACKED:
        for client in sorted(served, key=served.__getitem__)[:len(served) - MAX_TRACKED]:
            del served[client]
    return turn
