"""Light clients and the latency budget of their sentences (continuous batching).

A client sending back to back always has work in the server: under round robin it gets
its share of the engine, and its every step is as long as everybody's. A client that
sends a sentence now and then (a person at a form, a polite script) uses less than its
share; on a CPU, where a step's time grows with its rows, its one sentence still took as
many of those long steps as its length: 7x its time alone beside 16 busy clients.

- presence: per client, the share of recent time it had work in the server (queued or
  live), an exponential average over PRESENCE_S. A client is *light* below
  LIGHT_PRESENCE (a new client is light until it has been present for about
  PRESENCE_S x ln 5; a client sending back to back stays near 1);
- the budget: while a light client's sentence is live, the live rows cost at most
  `light_step_tokens` (SchedulerSettings). The light sentences come first; then the
  other clients' live sentences in the order they joined, as long as they fit; at least
  one of them always steps, and so does a request that would otherwise miss its deadline.
  The rest are parked (server/engine/live_parking.py: their state kept, skipped by the
  steps), and sentences of the other clients do not join; as the stepping ones finish,
  the parked ones resume first, oldest first, so nobody starves. When no light sentence
  is live every parked sentence resumes.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable
from dataclasses import dataclass

PRESENCE_S = 5.0  # the time constant of a client's presence
# Below it (the share of recent time with work in the server): light. Not 1/2: the time
# present includes the client's own answers' latency, so a polite client slowed by a
# loaded host (2.7 s answers, 1 s pauses: 0.73) would stay at its share, and slow.
LIGHT_PRESENCE = 0.8
MAX_TRACKED = 10_000  # clients remembered; an absent one past it is forgotten (= new)


@dataclass
class _Presence:
    value: float  # the average at `since`
    since: float
    present: bool


class ClientPresence:
    """Each client's presence: updated on the transitions only (work arrives for a client
    with none, a client's last work leaves), read at any time."""

    def __init__(self, time_constant_s: float = PRESENCE_S) -> None:
        self.time_constant_s = time_constant_s
        self._clients: dict[str, _Presence] = {}
        self._present: set[str] = set()

    def update(self, present: set[str], now: float) -> None:
        """The clients with work in the server from `now` on."""
        for client in present - self._present:
            self._set(client, now, True)
        for client in self._present - present:
            self._set(client, now, False)
        self._present = set(present)
        if len(self._clients) > MAX_TRACKED:
            for client in [c for c, p in self._clients.items() if c not in present
                           and self.presence(c, now) < 0.01]:
                del self._clients[client]

    def presence(self, client: str, now: float) -> float:
        """The share of recent time `client` had work in the server (0 for a new one)."""
        state = self._clients.get(client)
        if state is None:
            return 0.0
        kept = math.exp(-max(0.0, now - state.since) / self.time_constant_s)
        return state.value * kept + (1.0 - kept if state.present else 0.0)

    def light(self, client: str, now: float) -> bool:
        return self.presence(client, now) < LIGHT_PRESENCE

    def _set(self, client: str, now: float, present: bool) -> None:
        self._clients[client] = _Presence(self.presence(client, now), now, present)


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
