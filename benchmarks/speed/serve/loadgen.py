"""A closed-loop HTTP load generator: `concurrency` clients, each sending its next request
as soon as the previous one answered, until `max_requests` were sent or `max_seconds`
passed (requests already sent are awaited, never cancelled). Loopback only.

The clients are aiohttp's: the generator shares the server's cores, and every CPU second
it takes is one the server's engine loses. httpx spent 1.4 ms of CPU per request here,
aiohttp 0.08 ms (`GET /health/live` over keep-alive connections, 16 clients, this 2-core
VM).

Requests are drawn once, deterministically (`build_requests`), and every concurrency
level sends the same list from its start, so levels and the offline comparison see the
same texts, domains and request shapes.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import aiohttp
import httpx

SINGLE, BATCH = "/translate", "/translate/batch"


@dataclass(frozen=True)
class LoadRequest:
    path: str  # SINGLE or BATCH
    body: dict[str, Any]

    @property
    def texts(self) -> list[str]:
        if self.path == SINGLE:
            return [str(self.body["text"])]
        return [str(item["text"]) for item in self.body["items"]]


@dataclass(frozen=True)
class Outcome:
    """One answered (or failed) request."""

    index: int  # into the request list
    status: int  # 0: no HTTP answer (connection error, client timeout)
    latency_s: float
    error: str | None = None  # the error code of a 4xx/5xx answer, or the exception name
    results: list[dict[str, Any]] = field(default_factory=list)  # one per text, when 200
    answered_s: float = 0.0  # when the answer came, in seconds from the level's start


@dataclass(frozen=True)
class LevelRun:
    concurrency: int
    wall_s: float  # first send to last answer
    outcomes: list[Outcome]
    last_send_s: float | None = None  # when the level's last request was sent


def _domain(set_name: str, served: Sequence[str], rng: random.Random) -> str:
    """Explicit (the text's own domain when served), automatic, or generic."""
    draw = rng.random()
    if served and draw < 0.5:
        return set_name if set_name in served else rng.choice(list(served))
    return "auto" if draw < (0.8 if served else 0.6) else "generic"


def build_requests(sets: Mapping[str, Sequence[str]], served: Sequence[str], *, count: int,
                   seed: int = 0, batch_share: float = 0.3,
                   max_items: int = 8) -> list[LoadRequest]:
    """`count` requests: single texts and batches of 2..max_items, domains mixed."""
    pool = [(name, text) for name, texts in sorted(sets.items()) for text in texts]
    if not pool:
        raise ValueError("no texts to send")
    rng = random.Random(seed)
    rng.shuffle(pool)
    cursor = itertools.cycle(pool)
    requests: list[LoadRequest] = []
    for _ in range(count):
        if rng.random() < batch_share:
            chosen = [next(cursor) for _ in range(rng.randint(2, max_items))]
            items = [{"text": text, "domain": _domain(name, served, rng)} for name, text in chosen]
            requests.append(LoadRequest(BATCH, {"items": items}))
        else:
            name, text = next(cursor)
            requests.append(LoadRequest(SINGLE, {"text": text,
                                                 "domain": _domain(name, served, rng)}))
    return requests


def _error_code(status: int, data: Any) -> str:
    try:
        return str(data["error"]["code"])
    except (KeyError, TypeError):
        return f"http_{status}"


async def _send(session: aiohttp.ClientSession, index: int, request: LoadRequest) -> Outcome:
    start = time.perf_counter()
    try:
        async with session.post(request.path, json=request.body) as answer:
            status = answer.status
            try:
                data = await answer.json(content_type=None)
            except ValueError:
                data = None
    except (aiohttp.ClientError, TimeoutError) as error:
        return Outcome(index, 0, time.perf_counter() - start, type(error).__name__)
    latency = time.perf_counter() - start
    if status != 200 or not isinstance(data, dict):
        return Outcome(index, status, latency, _error_code(status, data))
    results = [data] if request.path == SINGLE else list(data["results"])
    return Outcome(index, 200, latency, None, results)


async def run_level(base_url: str, requests: Sequence[LoadRequest], *, concurrency: int,
                    max_requests: int, max_seconds: float,
                    timeout_s: float = 600.0, groups: int = 1) -> LevelRun:
    """Send up to `max_requests` requests (cycling through `requests`) with `concurrency`
    clients for at most `max_seconds` of sending. `groups` > 1: client k sends only the
    requests whose index is k modulo `groups` (a client keeps to one kind of request, as
    a user keeps to one language pair); `len(requests)` must then be a multiple of it."""
    if concurrency < 1 or max_requests < 1 or not requests:
        raise ValueError("need concurrency >= 1, max_requests >= 1 and some requests")
    if groups < 1 or len(requests) % groups:
        raise ValueError(f"groups must be >= 1 and divide the {len(requests)} requests")
    counters = [itertools.count(group, groups) for group in range(groups)]
    sent = itertools.count()
    outcomes: list[Outcome] = []
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(base_url, connector=connector,
                                     timeout=aiohttp.ClientTimeout(total=timeout_s)) as client:
        start = time.perf_counter()
        stop_at = start + max_seconds
        last_send = 0.0

        async def client_loop(number: int) -> None:
            nonlocal last_send
            own = counters[number % groups]
            while time.perf_counter() < stop_at:
                if next(sent) >= max_requests:
                    return
                index = next(own)
                last_send = time.perf_counter() - start
                outcome = await _send(client, index, requests[index % len(requests)])
                outcomes.append(replace(outcome, answered_s=time.perf_counter() - start))

        await asyncio.gather(*(client_loop(number) for number in range(concurrency)))
        wall = time.perf_counter() - start
    outcomes.sort(key=lambda outcome: outcome.index)
    return LevelRun(concurrency, wall, outcomes, last_send)


def warm_up(base_url: str, requests: Sequence[LoadRequest], *, count: int = 4,
            timeout_s: float = 600.0) -> list[int]:
    """Send the first `count` requests one by one (not measured); their statuses."""
    with httpx.Client(base_url=base_url, timeout=timeout_s, trust_env=False) as client:
        return [client.post(r.path, json=r.body).status_code for r in requests[:count]]


def served_domains(base_url: str) -> list[str]:
    with httpx.Client(base_url=base_url, timeout=30.0, trust_env=False) as client:
        answer = client.get("/domains")
        answer.raise_for_status()
        return [str(entry["name"]) for entry in answer.json()["domains"]]
