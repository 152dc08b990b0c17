"""Light clients and the latency budget of their sentences (continuous batching).

A client sending back to back always has work in the server: under round robin it gets
its share of the engine, and its every step is as long as everybody's. A client that
asks for less than the others (a person at a form, a polite script, or a client sending
one sentence at a time beside a bulk batch) still waits out those long steps: on a CPU,
where a step's time grows with its rows, its one sentence took 7x its time alone beside
16 busy clients.

- load: per client, its work in the server (the cost of its queued and live sentences:
  source tokens x beam x members), an exponential average over LOAD_S. A client with
  work is *light* while its load is below LIGHT_SHARE of the mean load of the clients
  with work (a new client has none yet: light; clients that all send alike are none
  light; a client alone is never light: nobody's steps are longer than its own);
- the budget: while a light client's sentence is live, the live rows cost at most
  `light_step_tokens` (SchedulerSettings). The light sentences come first; then the
  other clients' live sentences in the order they joined, as long as they fit; at least
  one of them always steps, and so does a request that would otherwise miss its deadline.
  The rest are parked (server/engine/live_parking.py: their state kept, skipped by the
  steps), and sentences of the other clients do not join; as the stepping ones finish,
  the parked ones resume first, oldest first, so nobody starves. When no light sentence
  is live every parked sentence resumes.

Why the load and not the time a client has work: a client that sends one sentence after
another beside a bulk batch has work all the time, yet asks for a sliver of the engine.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

LOAD_S = 5.0  # the time constant of a client's load
LIGHT_SHARE = 0.5  # light: a load below this share of the mean of the clients with work
MAX_TRACKED = 10_000  # clients remembered; an idle one past it is forgotten (= new)


@dataclass
class _Load:
    value: float  # the average at `since`
    since: float
    level: float  # the client's work in the server from `since` on


class ClientLoads:
    """Each client's load: updated when a client's work in the server changes, read at
    any time."""

    def __init__(self, time_constant_s: float = LOAD_S) -> None:
        self.time_constant_s = time_constant_s
        self._clients: dict[str, _Load] = {}
        self._working: set[str] = set()

    def update(self, levels: Mapping[str, float], now: float) -> None:
        """The clients' work in the server from `now` on (a client not named has none)."""
        working = {client for client, level in levels.items() if level > 0}
        for client in working | self._working:
            level = levels.get(client, 0.0)
            state = self._clients.get(client)
            if state is None or state.level != level:
                self._clients[client] = _Load(self.load(client, now), now, level)
        self._working = working
        if len(self._clients) > MAX_TRACKED:
            for client in [c for c in self._clients
                           if c not in working and self.load(c, now) < 1e-3]:
                del self._clients[client]

    def load(self, client: str, now: float) -> float:
        """`client`'s recent work in the server (0 for a new one)."""
        state = self._clients.get(client)
        if state is None:
            return 0.0
        kept = math.exp(-max(0.0, now - state.since) / self.time_constant_s)
        return state.value * kept + state.level * (1.0 - kept)

    def light(self, clients: Collection[str], now: float) -> set[str]:
        """The `clients` (those with work) whose load is below LIGHT_SHARE of their mean."""
        if len(clients) < 2:
            return set()
        loads = {client: self.load(client, now) for client in clients}
        mean = sum(loads.values()) / len(loads)
        return {client for client, load in loads.items() if load < LIGHT_SHARE * mean}


@dataclass(frozen=True)
class LiveSentence:
    """A live sentence as the budget sees it."""

    ticket: int  # join order
    client: str
    request: int
    cost: int


def parked_tickets(live: Iterable[LiveSentence], joining: Iterable[LiveSentence],
                   light: Collection[str], *, budget: int,
                   urgent: Collection[int] = ()) -> frozenset[int]:
    """The live sentences to park: none unless a sentence of a `light` client is live or
    `joining` (about to join: counted, never parked); then the other clients' beyond
    `budget`, keeping at least one of them and every `urgent` request's."""
    sentences = sorted(live, key=lambda sentence: sentence.ticket)
    joining = list(joining)
    if not any(sentence.client in light for sentence in [*sentences, *joining]):
        return frozenset()
    spent = sum(s.cost for s in joining) + sum(s.cost for s in sentences if s.client in light)
    kept, parked = 0, []
    for sentence in sentences:
        if sentence.client in light:
            continue
        if not kept or spent + sentence.cost <= budget or sentence.request in urgent:
            kept += 1
            spent += sentence.cost
        else:
            parked.append(sentence.ticket)
    return frozenset(parked)
